"""The protocol's first check: can the pipeline fit a single batch of about ten examples?

If it cannot drive the loss near zero on ten examples, the pipeline is broken (no gradient reaches
the weights, wrong labels, a loss that ignores the output, ...), and full runs are not worth
debugging. "Near zero" is relative, so that it means the same for cross-entropy and for a
regression loss in any units: the best of the last few losses below 5% of the first one, or an
absolute loss under 0.01. The best of a few forgives the noise that Dropout and BatchNorm add on
ten examples.
"""

from __future__ import annotations

import math
from typing import Any

from tuidebug.probes import FAIL, INCONCLUSIVE, PASS, ProbeContext, ProbeOutcome

RATIO = 0.05
ABSOLUTE = 0.01
WINDOW = 5
FIX = (
    "debug this single batch before any full run: check that the loss is computed from the model's "
    "output (no .detach(), .item() or .data on the way), that every parameter is in the optimizer and "
    "receives a gradient, that zero_grad(), backward() and step() are all called, that the learning "
    "rate is not zero, and that the labels match the inputs"
)


def run(ctx: ProbeContext) -> ProbeOutcome:
    examples = int(ctx.params.get("examples", 10))
    max_steps = int(ctx.params.get("steps", 300))
    trainer = ctx.trainer
    batch = trainer.prepare(examples)
    curve: list[float] = []
    no_grad: list[str] = []
    for index in range(max_steps):
        if ctx.cancelled():
            return ProbeOutcome(INCONCLUSIVE, f"cancelled after {index} steps", curve=curve,
                                data={"outcome": "inconclusive"})
        loss = trainer.step(batch).loss
        if loss is None:
            return ProbeOutcome(INCONCLUSIVE, "no loss went backward while training on the batch", curve=curve,
                                data={"outcome": "inconclusive"})
        curve.append(loss)
        if index == 0:
            no_grad = parameters_without_gradient(trainer.named_parameters())
        ctx.progress((index + 1) / max_steps, f"step {index + 1}/{max_steps}: loss {loss:.4g}")
        if not math.isfinite(loss) or near_zero(curve):
            break
    outcome = verdict(curve, examples)
    if no_grad and outcome.status == FAIL:
        shown = ", ".join(no_grad[:8]) + (f" and {len(no_grad) - 8} more" if len(no_grad) > 8 else "")
        outcome.evidence.append(f"no gradient reached {len(no_grad)} trainable parameter(s): {shown}")
    return outcome


def parameters_without_gradient(named: list[tuple[str, Any]]) -> list[str]:
    """Trainable parameters whose gradient is missing or all zero after an iteration."""
    return [name for name, p in named
            if p.requires_grad and (p.grad is None or not bool(p.grad.detach().abs().sum()))]


def near_zero(curve: list[float]) -> bool:
    best = min(curve[-WINDOW:])
    return best <= ABSOLUTE or (curve[0] > 0 and best <= RATIO * curve[0])


def still_improving(curve: list[float]) -> bool:
    """The best loss of the last fifth of the steps is over 10% below the best of the fifth before."""
    fifth = max(1, len(curve) // 5)
    if len(curve) < 5 * fifth:
        return False
    return min(curve[-fifth:]) < 0.9 * min(curve[-2 * fifth:-fifth])


def verdict(curve: list[float], examples: int) -> ProbeOutcome:
    first, best = curve[0], min(curve[-WINDOW:])
    evidence = [
        f"{len(curve)} steps on {examples} examples of one batch",
        f"loss {first:.4g} at the first step, best of the last {min(WINDOW, len(curve))}: {best:.4g}",
        f"passes below {RATIO:.0%} of the first loss or under {ABSOLUTE}",
    ]
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
    ratio = best / first if first else float("nan")
    if still_improving(curve):
        return ProbeOutcome(INCONCLUSIVE, f"still improving after {len(curve)} steps (loss {first:.4g} -> {best:.4g}, "
                            f"{ratio:.0%} of the start): the batch is being fitted, slowly at this learning rate",
                            evidence, curve=curve, data={"outcome": "still_improving"})
    return ProbeOutcome(FAIL, f"cannot fit one batch: loss {first:.4g} -> {best:.4g} ({ratio:.0%} of the start) "
                        f"in {len(curve)} steps; the pipeline is broken", evidence, FIX, curve,
                        {"outcome": "cannot_fit"})
