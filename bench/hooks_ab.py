"""The agent's hooks alone, in one process: the workload's loop with the hooks installed and removed
again between interleaved segments, so that both halves see the same process, memory placement and
machine load. No socket, no writer thread, no TUI: what the training thread itself pays.

    python bench/hooks_ab.py MODEL [--segment-steps N] [--rounds R] [--off] [--inactive] [--split]

Prints one JSON line: the median over rounds of (agent segment's median step / the bare segment's
before it), and both median step times; ``mean_ratio`` the same of the segments' mean steps, which also
counts the sampled steps' checks (one step in 25 or fewer: the median step never sees them). ``make
bench`` runs it for its section 8. ``--inactive`` installs the hooks with the agent switched off: what the
wrappers alone cost, the floor under any work the agent does. ``--split`` also times each of the agent's entry
points from the hooks (microseconds a step, nested ones included in their callers; timing adds about half a
microsecond a call).
"""

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
    parser.add_argument("--inactive", action="store_true", help="the hooks installed, the agent switched off")
    parser.add_argument("--split", action="store_true", help="also time each of the agent's entry points")
    args = parser.parse_args()
    torch.set_num_threads(1)
    spent = _time_entry_points() if args.split else None
    agent = Agent(AgentConfig(break_on_nan=not args.off), None)
    if args.inactive:
        agent.active = lambda: False
    core.CURRENT = agent
    run = training(args.model)

    def segment(steps: int) -> tuple[float, float]:
        times = run(steps)
        return statistics.median(times), statistics.fmean(times)

    def with_hooks(steps: int) -> tuple[float, float]:
        undo = hooks.install(agent)
        if agent.observed.model is not None:  # the model's own hooks went with the last segment's: the agent
            agent.on_new_model(agent.observed.model)  # knows the model already and would not hook it again
        try:
            return segment(steps)
        finally:
            for remove in undo:
                remove()

    with_hooks(args.segment_steps)  # warm-up of both: the agent's first steps do one-off work
    segment(args.segment_steps)
    bare, hooked = [], []
    if spent is not None:
        spent.clear()
    for _ in range(args.rounds):
        bare.append(segment(args.segment_steps))
        hooked.append(with_hooks(args.segment_steps))
    split = {name: round(seconds * 1e6 / (args.rounds * args.segment_steps), 1) for name, seconds in spent.items()} \
        if spent is not None else None
    figures = {"split_us_per_step": split} if split is not None else {}  # under --split, the ratios count the timing
    print(json.dumps({**figures, "ratio": statistics.median(h[0] / b[0] for h, b in zip(hooked, bare)),
                      "mean_ratio": statistics.median(h[1] / b[1] for h, b in zip(hooked, bare)),
                      "bare_ms": statistics.median(b[0] for b in bare) * 1e3,
                      "agent_ms": statistics.median(h[0] for h in hooked) * 1e3,
                      "norm_every": agent.norm_sampler.every, "check_every": agent.checks.every}))


# The agent's entry points from the hooks, and the parts of a step's end that cost most.
ENTRY_POINTS = ("on_batch", "on_top_level_call", "on_model_call", "on_model_output", "on_module_output", "on_loss_call",
                "on_backward", "after_backward", "on_zero_grad", "before_step", "after_step", "active",
                "_capture", "_take_norms", "_finish_step", "_maybe_checkpoint", "_report_findings")


def _time_entry_points() -> dict[str, float]:
    """Wrap the agent's entry points to add up the seconds each takes ("on_batch" holds the loader's own work)."""
    spent: dict[str, float] = {}

    def timed(name: str, method: Callable) -> Callable:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                spent[name] = spent.get(name, 0.0) + time.perf_counter() - started
        return wrapper

    for name in ENTRY_POINTS:
        setattr(Agent, name, timed(name, getattr(Agent, name)))
    return spent


if __name__ == "__main__":
    main()
