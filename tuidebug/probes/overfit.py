"""The protocol's first check: can the pipeline fit a single batch of about ten examples?

If it cannot drive the loss down on ten examples, the pipeline is broken (no gradient reaches the
weights, wrong labels, a loss that ignores the output, ...), and full runs are not worth
debugging. The check tells three things apart:

- **fits**: the best of the last few losses is below RATIO of the first (or under ABSOLUTE), the
  relative mark meaning the same for cross-entropy and for a regression loss in any units; or the
  loss fell below FLOOR of its start and then levelled off at the same value at the script's rate
  and at ten times it: the floor the batch allows (identical inputs with different targets, the
  first token of every name) rather than a broken pipeline;
- **slow**: it is still falling when the steps run out, and at ten times the script's rate it
  fits: the pipeline works, the rate is small (its own finding, not a failure);
- **cannot_fit** / **frozen**: neither, or the loss does not move at all.

The best of a few losses forgives the noise that Dropout and BatchNorm add on ten examples.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Any

from tuidebug.batches import batch_size_of
from tuidebug.probe_api import FAIL, INCONCLUSIVE, PASS, Adjust, ProbeContext, ProbeOutcome, probe
from tuidebug.probes.trials import run_found, run_learns, run_losses, run_trend, steadily_falling

RATIO = 0.05
ABSOLUTE = 0.01
FLOOR = 0.2
LEVEL = 0.02  # levelled off: the last fifth within 2% of the fifth before
WINDOW = 5
STEPS = 300
FASTER = 10.0
FIRST_SHARE = 0.6  # of the probe's time for the fit at the script's rate; the rest for the second look
# A loss still within FLAT_DROP of its start after FLAT_STEPS steps on ten examples is not on its way
# to RATIO in STEPS: one batch drops fastest at first, so the fit stops there (a rate of 1e-7, a frozen
# net) and leaves the time to the second look, instead of spending the whole budget on a flat line.
FLAT_STEPS = 30
FLAT_DROP = 0.01
# The run's own loss "clearly falls" when the median of its last quarter is below RUN_FALLS of its first
# quarter's: a drop no broken pipeline makes.
RUN_FALLS = 0.8
# A run's loss falls at all below RUN_FALLS_AT_ALL of its start (triage's NOT_FALLING): what makes a
# single batch's loss that rises (its median over the last RISE_STEPS steps above its first) a property
# of the objective rather than of a broken pipeline.
RUN_FALLS_AT_ALL = 0.95
RISE_STEPS = 5
FIX = (
    "debug this single batch before any full run: check that the loss is computed from the model's "
    "output (no .detach(), .item() or .data on the way), that every parameter is in the optimizer and "
    "receives a gradient, that zero_grad(), backward() and step() are all called, that the learning "
    "rate is not zero, and that the labels match the inputs"
)


@probe("overfit", prefers_copy=True)
def run(ctx: ProbeContext) -> ProbeOutcome:
    examples = int(ctx.params.get("examples", 10))
    max_steps = int(ctx.params.get("steps", STEPS))
    trainer = ctx.trainer
    batch = trainer.prepare(examples)
    curve, no_grad = fit(ctx, batch, max_steps, Adjust(freeze_schedule=True), ctx.break_state, share=FIRST_SHARE)
    if curve is None:
        return ProbeOutcome(INCONCLUSIVE, "cancelled", data={"outcome": "inconclusive"})
    if not curve:
        return ProbeOutcome(INCONCLUSIVE, "no loss went backward while training on the batch",
                            data={"outcome": "inconclusive"})
    outcome = verdict(curve, batch_size_of(batch) or examples)
    if outcome.data["outcome"] in ("still_improving", "cannot_fit") and not ctx.cancelled():
        faster, _ = fit(ctx, batch, max_steps, Adjust(lr_scale=FASTER, freeze_schedule=True), ctx.break_state)
        outcome = second_look(outcome, curve, faster or [], examples)
    if no_grad and outcome.status == FAIL:
        shown = ", ".join(no_grad[:8]) + (f" and {len(no_grad) - 8} more" if len(no_grad) > 8 else "")
        outcome.evidence.append(f"no gradient reached {len(no_grad)} trainable parameter(s): {shown}")
    return weighed_against_the_run(ctx, outcome)


def weighed_against_the_run(ctx: ProbeContext, outcome: ProbeOutcome) -> ProbeOutcome:
    """A batch that did not fit in the steps (and time) the test had, while the run's own loss clearly
    falls, is not a broken pipeline: the run itself shows the gradients reach the weights and the
    optimizer moves them (a warm-up, a small rate). Frozen or non-finite curves stand as they are."""
    if outcome.data.get("outcome") not in ("cannot_fit", "still_improving") or run_found(ctx, "loss_at_chance"):
        return outcome  # a run that came down to chance level has not learned, whatever its fall
    if len(ctx.run.optimizers) >= 2:
        return ProbeOutcome(INCONCLUSIVE, outcome.summary.split(";")[0] + f": the run steps {len(ctx.run.optimizers)} "
                            "optimizers in turns (a GAN's generator and discriminator, an actor and a critic): their "
                            "losses play against each other, so the batch's summed loss has no floor to fit down to",
                            outcome.evidence, curve=outcome.curve, data={"outcome": "still_improving"})
    if rises_while_the_run_falls(ctx, outcome.curve or []):
        first, last, steps = run_trend(ctx)
        return ProbeOutcome(INCONCLUSIVE, outcome.summary.split(";")[0] + f": the batch's loss rose under the run's own "
                            f"optimizer, while the run's fell ({first:.4g} -> {last:.4g} over {steps:.0f} steps): the "
                            "objective is not a fixed function of the batch (a clipped or sampled objective, as in "
                            "reinforcement learning), so one batch cannot be fitted down", outcome.evidence,
                            curve=outcome.curve, data={"outcome": "not_fixed"})
    if not run_learns(ctx, RUN_FALLS) and not steadily_falling(run_losses(ctx)):
        return outcome
    first, last, steps = run_trend(ctx)
    return ProbeOutcome(INCONCLUSIVE, outcome.summary.split(";")[0] + f"; but the run itself learns (loss {first:.4g} "
                        f"-> {last:.4g} over {steps:.0f} steps): the batch needs more steps at this rate, the "
                        "pipeline is not broken", outcome.evidence, curve=outcome.curve,
                        data={"outcome": "still_improving"})


def rises_while_the_run_falls(ctx: ProbeContext, curve: list[float]) -> bool:
    """Gradient steps on one fixed batch lower its loss at first, whatever the bug (a frozen model stays
    flat, a wrong target still gets memorised): a batch loss that ends above its start, while the run's
    own loss falls, comes from an objective the batch alone does not fix (PPO's clipped ratio, sampled
    actions)."""
    trend = run_trend(ctx)
    rose = len(curve) >= RISE_STEPS and all(math.isfinite(v) for v in curve) and \
        statistics.median(curve[-RISE_STEPS:]) > curve[0] > 0
    return rose and trend is not None and trend[0] > 0 and trend[1] < RUN_FALLS_AT_ALL * trend[0]


def fit(ctx: ProbeContext, batch: Any, steps: int, adjust: Adjust, start: Any,
        share: float = 1.0) -> tuple[list[float] | None, list[str]]:
    """Train on ``batch`` from ``start`` until it fits, goes non-finite, or the steps (or ``share`` of
    the probe's time left) run out. The schedulers stay where they are: the test is at today's rate."""
    trainer = ctx.trainer
    trainer.reset(start)
    curve: list[float] = []
    no_grad: list[str] = []
    stop = time.monotonic() + share * ctx.time_left()
    for index in range(steps):
        if ctx.cancelled():
            return None, no_grad
        if time.monotonic() > stop:
            break
        loss = trainer.step(batch, adjust).loss
        if loss is None:
            return curve, no_grad
        curve.append(loss)
        if index == 0:
            no_grad = parameters_without_gradient(trainer.named_parameters())
        ctx.progress((index + 1) / steps, f"step {index + 1}/{steps}: loss {loss:.4g}")
        if not math.isfinite(loss) or near_zero(curve) or flat(curve):
            break
    return curve, no_grad


def flat(curve: list[float]) -> bool:
    """FLAT_STEPS steps in, the best recent loss is still within FLAT_DROP of the first; a loss below 0 is
    looked at for FLAT_STEPS steps only (whether it moves at all: its fit has no target to reach)."""
    if len(curve) < FLAT_STEPS:
        return False
    return signed(curve) or (curve[0] > 0 and min(curve[-WINDOW:]) >= (1 - FLAT_DROP) * curve[0])


def parameters_without_gradient(named: list[tuple[str, Any]]) -> list[str]:
    """Trainable parameters whose gradient is missing or all zero after an iteration."""
    return [name for name, p in named
            if p.requires_grad and (p.grad is None or not bool(p.grad.detach().abs().sum()))]


def near_zero(curve: list[float]) -> bool:
    best = min(curve[-WINDOW:])
    return not signed(curve) and (best <= ABSOLUTE or (curve[0] > 0 and best <= RATIO * curve[0]))


def signed(curve: list[float]) -> bool:
    """The loss went below 0 (a negative log-likelihood of a density, a -dice score, a policy gradient's
    objective): it has no floor at 0, so "near zero" and a share of the start say nothing about a fit."""
    return min(curve) < 0


def still_improving(curve: list[float]) -> bool:
    """The best loss of the last fifth of the steps is over 10% below the best of the fifth before."""
    fifth = max(1, len(curve) // 5)
    if len(curve) < 5 * fifth:
        return False
    return min(curve[-fifth:]) < 0.9 * min(curve[-2 * fifth:-fifth])


def levelled(curve: list[float]) -> bool:
    fifth = max(1, len(curve) // 5)
    if len(curve) < 5 * fifth:
        return False
    last, before = min(curve[-fifth:]), min(curve[-2 * fifth:-fifth])
    return before > 0 and (before - last) <= LEVEL * before


def verdict(curve: list[float], examples: int) -> ProbeOutcome:
    first, best = curve[0], min(curve[-WINDOW:])
    evidence = [
        f"{len(curve)} steps on {examples} example(s) of one batch",
        f"loss {first:.4g} at the first step, best of the last {min(WINDOW, len(curve))}: {best:.4g}",
        f"passes below {RATIO:.0%} of the first loss or under {ABSOLUTE}",
    ]
    if flat(curve) and not signed(curve):
        evidence.append(f"stopped after {len(curve)} steps: the loss was still within {FLAT_DROP:.0%} of its start")
    if not math.isfinite(curve[-1]):
        return ProbeOutcome(FAIL, f"the loss became {curve[-1]} after {len(curve)} steps on a single batch",
                            evidence, FIX, curve, {"outcome": "nonfinite"})
    if near_zero(curve):
        return ProbeOutcome(PASS, f"fits one batch: loss {first:.4g} -> {best:.4g} in {len(curve)} steps",
                            evidence, curve=curve, data={"outcome": "fits"})
    if max(curve) - min(curve) <= 1e-6 * max(1.0, abs(first)):
        evidence.append("the loss did not change at all: the weights are not being updated")
        return ProbeOutcome(FAIL, f"cannot fit one batch: the loss stays at {first:.4g}", evidence, FIX, curve,
                            {"outcome": "frozen"})
    if signed(curve):
        return ProbeOutcome(INCONCLUSIVE, f"not judged: the loss goes below 0 ({first:.4g} -> {best:.4g} in {len(curve)} "
                            "steps on one batch), so it has no floor to fit down to; it moves, so the weights are "
                            "updated", evidence, curve=curve, data={"outcome": "signed"})
    ratio = best / first if first else float("nan")
    if still_improving(curve) or len(curve) < 20:
        return ProbeOutcome(INCONCLUSIVE, f"still improving after {len(curve)} steps (loss {first:.4g} -> {best:.4g}, "
                            f"{ratio:.0%} of the start)", evidence, curve=curve, data={"outcome": "still_improving"})
    return ProbeOutcome(FAIL, f"cannot fit one batch: loss {first:.4g} -> {best:.4g} ({ratio:.0%} of the start) "
                        f"in {len(curve)} steps", evidence, FIX, curve, {"outcome": "cannot_fit"})


def second_look(first: ProbeOutcome, curve: list[float], faster: list[float], examples: int) -> ProbeOutcome:
    """The batch did not fit at the script's rate: at ten times it, does it fit (slow, not broken), or
    level off where it did before (the floor of the batch)?"""
    start, best = curve[0], min(curve[-WINDOW:])
    evidence = first.evidence + [
        f"at {FASTER:g}x the script's learning rate: loss {faster[0]:.4g} -> {min(faster[-WINDOW:]):.4g} in "
        f"{len(faster)} steps" if faster else f"at {FASTER:g}x the script's learning rate: no loss"]
    if faster and math.isfinite(faster[-1]) and near_zero(faster):
        return ProbeOutcome(PASS, f"learns slowly: the batch fits at {FASTER:g}x the learning rate ({len(faster)} steps), "
                            f"not at the script's own ({start:.4g} -> {best:.4g} in {len(curve)} steps)", evidence,
                            curve=curve, data={"outcome": "slow"})
    if faster and math.isfinite(faster[-1]) and signed(faster):
        return ProbeOutcome(INCONCLUSIVE, first.summary + f"; at {FASTER:g}x the rate the loss goes below 0 ({faster[0]:.4g} "
                            f"-> {min(faster[-WINDOW:]):.4g}): it has no floor to fit down to, so the fit is not judged",
                            evidence, curve=curve, data={"outcome": "signed"})
    faster_best = min(faster[-WINDOW:]) if faster and math.isfinite(faster[-1]) else math.inf
    same_floor = abs(faster_best - best) <= 0.1 * best
    if start > 0 and best <= FLOOR * start and same_floor and (levelled(curve) or levelled(faster)):
        return ProbeOutcome(PASS, f"fits one batch down to its floor: loss {start:.4g} -> {best:.4g} "
                            f"({best / start:.0%} of the start), the same at {FASTER:g}x the rate: what is left is what "
                            "this batch cannot determine", evidence, curve=curve, data={"outcome": "fits"})
    if first.data["outcome"] == "still_improving":
        return ProbeOutcome(INCONCLUSIVE, first.summary + f"; at {FASTER:g}x the rate it does not fit either",
                            evidence, curve=curve, data={"outcome": "still_improving"})
    return ProbeOutcome(FAIL, first.summary + f"; nor at {FASTER:g}x the learning rate", evidence, FIX, curve,
                        {"outcome": "cannot_fit"})
