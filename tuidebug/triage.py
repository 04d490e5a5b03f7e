"""Which branch of the decision tree the live run points to, and why.

Read from the session: the agent's events (a non-finite value, the exception and its analysis, the
findings the hooks made), how the process ended (an exit code, a signal), a stall, and the loss
curve's trend. The most specific evidence wins: a failure the run itself showed, then a finding,
then the trend.
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass

from tuidebug.protocol import Event
from tuidebug.session import Session, describe_exit
from tuidebug.tree import Walk, load_tree

# Findings the agent reports (event kind "finding", message "code: ..."), by the branch they open.
FINDING_BRANCHES = {
    "stale_grads": "learning", "zero_grad_wipes": "learning", "not_in_optimizer": "learning", "head_untrained": "learning",
    "unregistered_modules": "learning", "layers_in_forward": "learning", "part_not_in_optimizer": "learning",
    "weights_unchanged": "learning", "idle_optimizer": "learning",
    "frozen": "learning", "no_grad_params": "learning", "graph_cut": "learning", "eval_mode": "learning", "loss_input": "learning",
    "backward_without_graph": "learning", "no_optimizer_step": "learning", "loss_without_backward": "learning",
    "loss_at_chance": "learning", "lr_schedule": "learning", "lr_collapsed": "learning",
    "warmup_unfinished": "learning", "evaluated_in_train_mode": "learning", "evaluation_renumbered": "learning",
    "loss_broadcast": "shape", "one_hot_width": "shape", "relabelled_view": "shape",
    "target_range": "shape", "batch_as_sequence": "shape", "ignored_class": "shape", "classes_last": "shape",
    "softmax_over_one": "shape", "transforms_drawn_apart": "learning", "labels_shifted": "learning",
    "graphs_kept": "oom", "memory_growth": "oom", "container_growth": "oom",  # graphs or tensors kept across steps
}
# Which finding wins when there are several: what holds memory across steps (graphs, a growing
# container) first, then a wrong shape, then weights (all or some of them) that provably do not change (an
# optimizer that never steps while its parameters get gradients), then memory that only grows (RSS also grows while the
# allocator keeps freed blocks: a loop making a new MiB-sized intermediate every step looks like that
# for a while, and a run that changes models mid-way grows once), then the other learning findings.
WEIGHTS_NOT_UPDATED = ("idle_optimizer", "weights_unchanged", "not_in_optimizer", "part_not_in_optimizer",
                       "no_optimizer_step")
FINDING_ORDER = (("oom", ("graphs_kept", "container_growth")),
                 ("shape", ("loss_broadcast", "one_hot_width", "relabelled_view", "target_range", "batch_as_sequence",
                            "ignored_class", "classes_last", "softmax_over_one")),
                 ("learning", WEIGHTS_NOT_UPDATED), ("oom", ("memory_growth",)), ("learning", None))
# The trend of the run's own loss, judged on the medians of its first and last fifths (at least
# TREND_STEPS steps): a loss that ends over DIVERGING times its start diverges (the NaN branch's
# checks apply: the rate, the gradients); one that ends above NOT_FALLING times its start has not
# learned in the window. Chosen on the corpus: healthy runs fall well below 0.9 of their start within
# their first hundreds of steps (the slowest, SGD at 1e-3, ends near 0.8); a plateau-then-drop run
# still falls below it once the drop is in the window. A ratio says nothing about a loss that goes below
# 0 (REINFORCE's policy loss, a critic's score) or about adversarial losses (two optimizers, a GAN: the
# Wasserstein estimate rises while both learn): neither is judged by it.
TREND_STEPS = 12
DIVERGING = 10.0
NOT_FALLING = 0.95
OVERFLOW_ERRORS = ("OverflowError", "math range error")
# A stall before any step on a line that waits for other processes (``p.join()``, ``mp.spawn(...)``,
# ``pool.map(...)``): the training runs in processes the script started, which the agent is not in.
WAITS_ON_PROCESSES = re.compile(r"`[^`]*(\.join\(|\bspawn\(|start_processes\(|\.map\(|\.starmap\()[^`]*`")


@dataclass
class Trend:
    first: float
    last: float
    steps: int
    signed: bool = False  # some loss was below 0: an objective (a policy gradient, a critic), not an error


    @property
    def ratio(self) -> float:
        return self.last / self.first if self.first > 0 else math.inf

    def text(self) -> str:
        return f"the loss went from {self.first:.4g} to {self.last:.4g} over {self.steps} steps"


def loss_trend(session: Session) -> Trend | None:
    losses = [y for _, y in session.loss.recent if math.isfinite(y)]
    if len(losses) < TREND_STEPS:
        return None
    fifth = max(3, len(losses) // 5)
    return Trend(statistics.median(losses[:fifth]), statistics.median(losses[-fifth:]), len(losses),
                 signed=min(losses) < 0)


def preselect(session: Session) -> tuple[str, str]:
    """The branch the live run points to, and why."""
    with session.lock:
        events = list(session.events)
        first_nonfinite = session.counters.first_nonfinite_step
        steps, exit_code, optimizers = session.step, session.exit_code, _optimizers(events)
    nonfinite = next((e for e in events if e.kind in ("nonfinite_loss", "nonfinite_grad")), None)
    if nonfinite is not None or first_nonfinite is not None:
        step = nonfinite.step if nonfinite is not None else first_nonfinite
        return "nan", f"non-finite value at step {step}" + (f": {nonfinite.message}" if nonfinite else "")
    crash = next((e for e in reversed(events) if e.kind == "crash"), None)
    exception = next((e for e in reversed(events) if e.kind == "exception"), None)
    trend = loss_trend(session)
    if exception is not None:
        return _classify(exception, crash, trend)
    stall = next((e for e in reversed(events) if e.kind == "stall"), None)
    if stall is not None and steps == 0 and WAITS_ON_PROCESSES.search(stall.message):
        return "no_step", (f"{stall.message}: the script's own process trains nothing and waits for processes it "
                           "started (hogwild workers, a pool); tuidebug watches the process it runs, not those")
    if stall is not None:
        return "stall", stall.message
    end = next((e for e in reversed(events) if e.kind == "script_end"), None)
    if end is not None and not end.message.endswith(" 0"):
        return "crash", end.message
    if exit_code not in (None, 0) and end is None:
        return "crash", f"{describe_exit(exit_code)} after step {steps}, without a Python exception"
    findings = _findings(events)
    if steps == 0:
        stepless = next((e for e in events if e.kind == "stepless_training"), None)
        if stepless is not None and not findings:
            return "healthy", stepless.message
        if any(e.kind == "finding" and e.message.startswith("no_optimizer_step") for e in events):
            return "learning", "backward passes but no optimizer step"
        if any(e.kind == "finding" and e.message.startswith("loss_without_backward") for e in events):
            return "learning", "losses computed but no backward pass and no optimizer step"
        return "no_step", "the script ran no optimizer step" + (" before it ended" if end else " in the window")
    for branch, codes in FINDING_ORDER:
        reasons = [reason for code, reason in findings.get(branch, []) if codes is None or code in codes]
        if reasons:
            return branch, reasons[0]
    if trend is not None and trend.ratio > DIVERGING and not trend.signed and optimizers < 2:
        return "nan", f"the loss diverges without going non-finite: {trend.text()}"
    if trend is not None and trend.ratio > NOT_FALLING and not trend.signed and optimizers < 2:
        return "learning", f"the run does not learn: {trend.text()}"
    return "healthy", "no non-finite value, no exception, no finding" + (f"; {trend.text()}" if trend else "")


def _classify(exception: Event, crash: Event | None, trend: Trend | None) -> tuple[str, str]:
    kind = crash.message.split()[0] if crash is not None else "other"
    if kind == "oom":
        return "oom", f"the script ran out of memory: {exception.message}"
    if kind == "shape":
        return "shape", f"shape error: {exception.message}"
    if kind == "no_graph":
        return "learning", f"backward on a loss without a graph: {exception.message}"
    if any(text in exception.message for text in OVERFLOW_ERRORS) and trend is not None and trend.ratio > DIVERGING:
        return "nan", f"the loss diverged until the script's own arithmetic overflowed: {exception.message}"
    return "crash", f"the script raised {exception.message}"


def _findings(events: list[Event]) -> dict[str, list[tuple[str, str]]]:
    """The findings of each branch, in the order they came: (code, reason)."""
    found: dict[str, list[tuple[str, str]]] = {}
    for event in events:
        if event.kind != "finding":
            continue
        code = event.message.split(":", 1)[0]
        branch = FINDING_BRANCHES.get(code)
        if branch is not None:
            found.setdefault(branch, []).append((code, event.message.split(":", 1)[-1].strip()))
    return found


def _optimizers(events: list[Event]) -> int:
    return sum(e.kind == "optimizer" for e in events)


def start_walk(session: Session) -> Walk:
    """A fresh walk of the decision tree on the branch the run points to now, kept in the session."""
    branch, reason = preselect(session)
    walk = Walk(load_tree(), branch=branch, reason=reason)
    with session.lock:
        session.walk = walk
        session.version += 1
    return walk
