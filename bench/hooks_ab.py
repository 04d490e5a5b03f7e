"""The agent's hooks alone, in one process: the workload's loop with the hooks installed and removed
again between interleaved segments, so that both halves see the same process, memory placement and
machine load. No socket, no writer thread, no TUI: what the training thread itself pays.

    python bench/hooks_ab.py MODEL [--segment-steps N] [--rounds R] [--off]

Prints one JSON line: the median over rounds of (agent segment's median step / the bare segment's
before it), and both median step times; ``mean_ratio`` the same of the segments' mean steps, which also
counts the sampled steps' checks (one step in 25 or fewer: the median step never sees them). ``make
bench`` runs it for its section 8.
"""

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from workload import training  # noqa: E402

from tuidebug.agent import core, hooks  # noqa: E402
from tuidebug.agent.core import Agent, AgentConfig  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("--segment-steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--off", action="store_true", help="break-on-NaN off (the gradient norms may be sampled)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    agent = Agent(AgentConfig(break_on_nan=not args.off), None)
    core.CURRENT = agent
    run = training(args.model)

    def segment(steps: int) -> tuple[float, float]:
        times = run(steps)
        return statistics.median(times), statistics.fmean(times)

    def with_hooks(steps: int) -> tuple[float, float]:
        undo = hooks.install(agent)
        try:
            return segment(steps)
        finally:
            for remove in undo:
                remove()

    with_hooks(args.segment_steps)  # warm-up of both: the agent's first steps do one-off work
    segment(args.segment_steps)
    bare, hooked = [], []
    for _ in range(args.rounds):
        bare.append(segment(args.segment_steps))
        hooked.append(with_hooks(args.segment_steps))
    print(json.dumps({"ratio": statistics.median(h[0] / b[0] for h, b in zip(hooked, bare)),
                      "mean_ratio": statistics.median(h[1] / b[1] for h, b in zip(hooked, bare)),
                      "bare_ms": statistics.median(b[0] for b in bare) * 1e3,
                      "agent_ms": statistics.median(h[0] for h in hooked) * 1e3,
                      "norm_every": agent.norm_sampler.every, "check_every": agent.checks.every}))


if __name__ == "__main__":
    main()
