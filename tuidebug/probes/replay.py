"""Re-running a saved failing case against the (edited) script: the protocol's "fix validated by
re-running the previously failing case".

The bundle's state goes into the script's own model and optimizer (keeping the script's current
hyperparameters and schedule), and its batches go through the script's own loop for as many steps
as led to the failure (more while the loss is still climbing). The case still fails if the run blows
up again (a non-finite or exploding loss), if the single batch still cannot be fitted, or if the
saved NaN samples are still NaN.
"""

from __future__ import annotations

import math

from tuidebug.probe_api import FAIL, PASS, ProbeContext, ProbeOutcome, probe
from tuidebug.probes.inputs import nonfinite_tensors
from tuidebug.probes.overfit import near_zero
from tuidebug.probes.trials import Trial

OVERFIT_STEPS = 150
# The bundle keeps the last few batches, not every batch since its checkpoint, so the replayed steps are
# not the run's own: the climb to the failure may take a few more of them. A loss still rising when the
# failing run's count of steps is reached is followed up to this many times that count; a fixed script's
# loss falls or holds there, and stops at the count.
CLIMB_MARGIN = 2


@probe("replay")
def replay_bundle(ctx: ProbeContext) -> ProbeOutcome:
    meta, start, batches = ctx.run.load_case(str(ctx.params["bundle"]))
    check = meta.get("check", "nonfinite")
    if check == "inputs":
        return _inputs(ctx, meta)
    trainer = ctx.trainer
    trainer.reset(start)
    if check == "overfit":
        return _overfit(ctx, trainer, batches[-1])
    trial = Trial(adjust=None)
    steps = int(meta.get("steps", 1))
    for index in range(CLIMB_MARGIN * steps):
        if index >= steps and (trial.losses[-1] <= trial.losses[0] or trial.blew_up):
            break
        batch = batches[(len(batches) - steps + index) % len(batches)]
        result = trainer.step(batch)
        trial.losses.append(result.loss if result.loss is not None else math.nan)
        if not math.isfinite(trial.losses[-1]) or not result.grads_finite:
            trial.first_nonfinite = index + 1
            break
    evidence = [f"replayed {len(trial.losses)} step(s) of the saved case ({meta.get('cause')}; the failing run took "
                f"{steps}): {trial.describe()}"]
    if trial.blew_up:
        return ProbeOutcome(FAIL, "the failing case still fails: " + trial.describe(), evidence)
    return ProbeOutcome(PASS, "the failing case no longer fails: " + trial.describe(), evidence)


def _overfit(ctx: ProbeContext, trainer, batch) -> ProbeOutcome:
    curve = []
    for _ in range(OVERFIT_STEPS):
        loss = trainer.step(batch).loss
        curve.append(loss if loss is not None else math.nan)
        if not math.isfinite(curve[-1]) or near_zero(curve):
            break
    fits = math.isfinite(curve[-1]) and near_zero(curve)
    text = f"single-batch loss {curve[0]:.4g} -> {curve[-1]:.4g} in {len(curve)} steps"
    if fits:
        return ProbeOutcome(PASS, "the failing case no longer fails: the batch fits, " + text, curve=curve)
    return ProbeOutcome(FAIL, "the failing case still fails: the batch still cannot be fitted, " + text, curve=curve)


def _inputs(ctx: ProbeContext, meta: dict) -> ProbeOutcome:
    """The saved NaN samples, read again from the script's (edited) dataset."""
    dataset = ctx.run.dataset()
    indices = [int(s.split()[-1]) for s in meta.get("samples", [])]
    if dataset is None or not indices:
        return ProbeOutcome(FAIL, "the failing case still fails: the saved batch holds NaN/Inf and no "
                            "dataset samples can be re-read", [])
    still = [i for i in indices if i < len(dataset) and nonfinite_tensors(dataset[i])]
    evidence = [f"re-read dataset samples {indices}: {len(still)} still hold NaN/Inf"]
    if still:
        return ProbeOutcome(FAIL, f"the failing case still fails: samples {still} still hold NaN/Inf", evidence)
    return ProbeOutcome(PASS, "the failing case no longer fails: the saved samples are finite now", evidence)
