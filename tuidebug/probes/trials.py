"""Replays of the steps that led to a failure, with one thing changed: the NaN probes' experiments.

A trial starts from a saved state (the agent's rolling checkpoint a few steps before the failure
when it has one, else the state at the break), feeds the recent batches in order through the
pipeline, and goes on past the failing step for at least MIN_STEPS steps, so that a trial shows
not only that the NaN is gone but whether the loss then falls. The thresholds:

- a trial "blew up" when a value went non-finite, or its loss climbed over GROWTH times its lowest
  and stayed there (the median of its last quarter): the NaN on its way. One batch whose own loss is
  huge (a glitched target that the cycled batches end on) is a property of that batch, not a climb;
- it "learns" when its loss ends below LEARNS of where it started (medians of the first and last
  quarters, so that one noisy batch decides nothing), and "holds" when it ends no higher: a run that
  had converged before its failure only holds, and that is what a fix must give back.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from tuidebug.batches import holds_nonfinite, tensors_in
from tuidebug.probe_api import Adjust, LoopGone, NeedsLoop, NoPipeline, ProbeContext

GROWTH = 100.0
LEARNS = 0.9
MIN_STEPS = 20
# A loss over DIVERGENCE times the run's usual (median) level is in a climb: the NaN checks call such a run
# diverging, and a checkpoint taken there is no start for trials (the weights are already wrecked: from
# it neither a lower rate nor a clip learns, and each trial ends where the climb left the loss).
DIVERGENCE = 10.0
# The farthest a calm checkpoint may lie before the failure: twice the steps a trial replays anyway
# (MIN_STEPS). The rate check's base replay and each of its lower rates replay that many steps, lent by the
# script's loop: further back, the search ran a demo's loop dry under load (its 230 steps left).
CALM_REPLAY_STEPS = 2 * MIN_STEPS


# A replay reproduces the run when its first step's loss is within FAITHFUL of the one the run recorded
# (replays restore the RNG: on the same batch and state the loss is the same up to summation order; a
# copy that draws no batch-sampling numbers can shift dropout masks by a few percent, not more).
FAITHFUL = 0.1


@dataclass
class Start:
    """Where trials begin: a saved state and how many steps before the failure it was taken."""

    snapshot: Any
    steps_before: int
    label: str


@dataclass
class Trial:
    adjust: Adjust
    losses: list[float] = field(default_factory=list)
    grad_norms: list[float] = field(default_factory=list)
    first_nonfinite: int | None = None
    left_out: int = 0  # steps on the failing step's batch, which holds NaN/Inf, not replayed

    @property
    def finite(self) -> bool:
        return self.first_nonfinite is None

    @property
    def blew_up(self) -> bool:
        """Non-finite, or a loss whose last quarter climbed over GROWTH times its lowest value: the NaN on its way.
        A loss that reaches 0 or below (a likelihood of densities) has no such ratio: there the climb is
        measured against the size of its values (GROWTH - 1 times the larger of the first and lowest)."""
        if not self.finite:
            return True
        if not self.losses:
            return False
        last = statistics.median(self.losses[-max(2, len(self.losses) // 4):])
        lowest = min(self.losses)
        if lowest > 0:
            return last > GROWTH * lowest
        return last - lowest > (GROWTH - 1) * max(abs(lowest), abs(self.losses[0]), 1e-12)

    @property
    def learns(self) -> bool:
        """Finite, and the loss falls: the median of its last quarter is below LEARNS of its first."""
        return self._quarters(LEARNS)

    @property
    def holds(self) -> bool:
        """Finite, and the loss does not rise (a run that had converged before a spike holds its level):
        what a change that fixes a NaN must at least give."""
        return self._quarters(1.0)

    def _quarters(self, ratio: float) -> bool:
        values = finite(self.losses)
        if self.blew_up or len(values) < 4:
            return False
        quarter = max(2, len(values) // 4)
        return statistics.median(values[-quarter:]) <= fallen_to(statistics.median(values[:quarter]), ratio)

    @property
    def final(self) -> float | None:
        """The median loss of the trial's last quarter: how far its change let the loss go."""
        values = finite(self.losses)
        if not self.holds:
            return None
        return statistics.median(values[-max(2, len(values) // 4):])

    def describe(self) -> str:
        left_out = (f" ({self.left_out} step(s) on the failing batch, which holds NaN/Inf, left out)"
                    if self.left_out else "")
        if not self.finite:
            return f"non-finite at replayed step {self.first_nonfinite}{left_out}"
        if not self.losses:
            return "no loss"
        trend = "diverging" if self.blew_up else "falling" if self.learns else "holding" if self.holds else "rising"
        return (f"finite for {len(self.losses)} steps, loss {self.losses[0]:.4g} -> {self.losses[-1]:.4g} ({trend})"
                + left_out)


def start_point(ctx: ProbeContext) -> Start:
    """The latest rolling checkpoint at least a few steps before the failure (the replay must cover the
    climb to it), else the state at the break. Where the run's loss was already climbing at that checkpoint,
    the latest checkpoint before the climb, if a replay from it as written fails as the run did (else the
    climb needs what the run had and the replays have not, e.g. its rare batch, and the rolling one stays).
    The probes compare their trials' losses, so they all start from the one chosen here."""
    failure = ctx.run.failure
    chosen = failure.trials.get(_START) if failure is not None else None
    if chosen is not None:
        return chosen
    checkpoint = ctx.run.checkpoint_before_failure()
    if checkpoint is None:
        return Start(ctx.break_state, 1, "the state at the break")
    start = _start_of(checkpoint)
    calm = ctx.run.calm_checkpoint_before_failure() if _climbing_at(ctx, checkpoint[0]) else None
    if calm is not None:
        before = _start_of(calm, " (before the loss climbed)")
        try:
            replayed = run_trial(ctx, before, Adjust())
        except (LoopGone, NeedsLoop, NoPipeline):
            return start  # the loop is gone or out of reach: the trials that follow from the rolling one say so
        if replayed.blew_up:
            start = before
        else:
            start.label += (f" (a replay from the checkpoint of step {calm[0]}, before the loss climbed, does not "
                            f"fail: {replayed.describe()})")
    if failure is not None and not ctx.cancelled():
        failure.trials[_START] = start
    return start


_START = ("start",)  # the key of the chosen start among a failure's trials


def _start_of(checkpoint: tuple[int, Any, int], note: str = "") -> Start:
    step, snapshot, steps_before = checkpoint
    return Start(snapshot, steps_before, f"the checkpoint of step {step}{note}")


def _climbing_at(ctx: ProbeContext, step: int) -> bool:
    """The run's loss of the step after ``step`` (the first a replay from its checkpoint computes) is over
    DIVERGENCE times the median of the run's losses before it."""
    losses = [(s.step, s.loss) for s in ctx.history if s.loss is not None and math.isfinite(s.loss)]
    first = next((loss for at, loss in losses if at == step + 1), None)
    usual = median([loss for at, loss in losses if at <= step])
    return first is not None and usual is not None and usual > 0 and first > DIVERGENCE * usual


def unfaithful(ctx: ProbeContext, start: Start, as_written: Trial) -> str | None:
    """Why the replay as written is not the run (its first step's loss differs from the one the run
    recorded for that step by more than FAITHFUL), or None. A replay that does not reproduce the run
    cannot rule a cause out (a character RNN whose copy replays one call of its many)."""
    failure = ctx.run.failure
    if failure is None or not as_written.losses:
        return None
    first = failure.step - start.steps_before + 1  # a checkpoint of step k is the state after k steps
    recorded = next((s.loss for s in ctx.history if s.step == first and s.loss is not None), None)
    replayed = as_written.losses[0]
    if recorded is None or not math.isfinite(recorded):
        return None
    if math.isfinite(replayed) and abs(replayed - recorded) <= FAITHFUL * max(abs(recorded), 1e-8):
        return None
    return (f"the replay does not reproduce the run: its first step's loss is {replayed:.4g}, the run's own at step "
            f"{first} was {recorded:.4g}; its outcome cannot rule this cause out")


def run_trial(ctx: ProbeContext, start: Start, adjust: Adjust, steps: int | None = None) -> Trial:
    """Replay from ``start`` on the recent batches (cycled) with ``adjust``, past the failing step to
    ``steps`` (at least MIN_STEPS). The same replay is run once per failure: the probes share it."""
    steps = steps or max(start.steps_before, MIN_STEPS)
    failure = ctx.run.failure
    key = (id(start.snapshot), start.steps_before, steps, adjust.key())
    if failure is not None and key in failure.trials:
        return failure.trials[key]
    trial = _replay(ctx, start, adjust, steps)
    if failure is not None and not ctx.cancelled():
        failure.trials[key] = trial
    return trial


def _replay(ctx: ProbeContext, start: Start, adjust: Adjust, steps: int) -> Trial:
    trainer = ctx.trainer
    batches = trainer.recent_batches() or [trainer.prepare()]
    trainer.reset(start.snapshot)
    trial = Trial(adjust)
    failing = len(batches) - 1 if _holds_nonfinite(batches[-1], getattr(trainer, "carried", ())) else None
    for index in range(steps):
        if ctx.cancelled() or ctx.time_left() <= 0:
            break
        at = (len(batches) - start.steps_before + index) % len(batches)
        if at == failing and len(batches) > 1:
            trial.left_out += 1
            continue
        result = trainer.step(batches[at], adjust)
        loss = result.loss if result.loss is not None else math.nan
        trial.losses.append(loss)
        if result.grad_norm is not None:
            trial.grad_norms.append(result.grad_norm)
        if not math.isfinite(loss) or not result.grads_finite:
            trial.first_nonfinite = index + 1
            break
    return trial


def _holds_nonfinite(batch: Any, carried: Any) -> bool:
    """Whether the failing step's batch (the last kept) holds NaN/Inf outside ``carried`` (paths of state the model
    feeds back, not data). No rate or clip makes a step on it finite, so a replay leaves it out and the trials
    compare what the steps before it do: where its values are the data's, the run as written then stays finite and
    the replays clear the rate and the clip (the inputs check names the rows); where the model made them (targets
    built from its own overflowing output), the climb before them is what the trials change. The batches before it
    trained with a finite loss in the run (NaN a loss masks, padding's -inf) and are replayed as they are."""
    return any(path not in carried and holds_nonfinite(tensor) for path, tensor in tensors_in(batch))


RUN_STEPS = 12


def fallen_to(start: float, ratio: float) -> float:
    """Where a loss that started at ``start`` has fallen by (1 - ratio) of its size: ``ratio * start`` for a
    loss above 0, and as far below a start under 0 (an objective with no floor: -0.035 to -0.036 is no fall)."""
    return start - (1.0 - ratio) * abs(start)


def run_losses(ctx: ProbeContext) -> list[float]:
    """The run's finite losses, oldest first; a second run of the script, which has seen only its first
    steps, is handed the first run's (``params["run_losses"]``)."""
    given = ctx.params.get("run_losses")
    return [float(v) for v in given] if given else finite([s.loss for s in ctx.history])


def run_trend(ctx: ProbeContext) -> tuple[float, float, int] | None:
    """(the median loss of the run's first quarter, of its last quarter, steps); a second run of the
    script, which has seen only its first steps, is handed the first run's (``params["run_trend"]``)."""
    given = ctx.params.get("run_trend")
    if given:
        return float(given[0]), float(given[1]), int(given[2])
    losses = finite([s.loss for s in ctx.history])
    if len(losses) < RUN_STEPS:
        return None
    quarter = max(3, len(losses) // 4)
    return statistics.median(losses[:quarter]), statistics.median(losses[-quarter:]), len(losses)


def run_found(ctx: ProbeContext, code: str) -> bool:
    """The run reported the finding ``code`` (a second run of the script is handed the first run's)."""
    return code in ctx.params.get("run_findings", ()) or code in ctx.run.facts.reported


def run_learns(ctx: ProbeContext, falls: float) -> bool:
    """The run's own loss ends below ``falls`` of where it started, over enough steps to tell."""
    trend = run_trend(ctx)
    return trend is not None and trend[2] >= RUN_STEPS and 0 < trend[0] and trend[1] < falls * trend[0]


# A slow fall is real when the first fifth's median is above the last's by more than NOISE standard
# errors of a fifth's mean: step-to-step noise around a flat loss does not get there.
NOISE = 3.0


def steadily_falling(losses: list[float], stretches: int = 5) -> bool:
    """A slow but real fall: the loss's median falls from each fifth of the run to the next (at most one
    exception), and from the first fifth to the last by more than NOISE standard errors of a fifth's
    mean (the step-to-step scatter of the losses): noise around a flat loss gives neither."""
    size = len(losses) // stretches
    if size < 3:
        return False
    parts = [losses[i * size:(i + 1) * size] for i in range(stretches)]
    medians = [statistics.median(part) for part in parts]
    falls = sum(b < a for a, b in zip(medians, medians[1:]))
    scatter = statistics.pstdev([v - m for part, m in zip(parts, medians) for v in part])
    return falls >= stretches - 2 and medians[0] - medians[-1] > NOISE * scatter / math.sqrt(size)


def finite(values: list[float | None]) -> list[float]:
    return [v for v in values if v is not None and math.isfinite(v)]


def median(values: list[float]) -> float | None:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else None
