"""Three of the protocol's four NaN checks: learning rate, NaN inputs, exploding gradients.

(The fourth, unsafe math, is ``unsafe_math``.) Each reads the run's recent history (losses and
gradient norms per step, per-layer norms every few steps), then runs a causal experiment: the
steps before the failure replayed with one thing changed (a lower rate, clipping, cleaned inputs).
Each passes when its cause is ruled out, so that the four together single out the cause.

The thresholds, and why:
- diverging loss: the median of the last 5 finite losses is over 10x the healthy median (the
  first half of the recent history) and rose in at least 3 of the last 4 steps: a run that climbs,
  as a too-high rate makes it, not a single bad batch;
- update/weight ratio: lr * |grad| / |w| per parameter with healthy gradients; about 1e-3 is
  usual, over 0.1 means one step moves a weight by a tenth of its size;
- gradient spike: a norm at least 100x the healthy median in the last 3 steps while the loss
  before it stayed within 10x of healthy: the gradient blew up, not the whole run.
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch

from tuidebug.agent.trainers import Adjust, map_tensors
from tuidebug.probes import FAIL, INCONCLUSIVE, PASS, ProbeContext, ProbeOutcome
from tuidebug.probes.batch import tensors_in
from tuidebug.probes.trials import Start, finite, median, run_trial, start_point

DIVERGENCE = 10.0
RATIO_LIMIT = 0.1
SPIKE = 100.0
LOWER_RATES = (0.1, 0.01)
SCAN_SAMPLES = 5000
SCAN_SECONDS = 20.0


# --- history --------------------------------------------------------------------------------

def healthy_half(values: list[float]) -> list[float]:
    return values[: max(1, len(values) // 2)]


def loss_diverging(losses: list[float]) -> bool:
    if len(losses) < 6:
        return False
    recent, healthy = losses[-5:], median(healthy_half(losses))
    rises = sum(b > a for a, b in zip(recent[-5:-1], recent[-4:]))
    return healthy is not None and median(recent) > DIVERGENCE * abs(healthy) and rises >= 3


def history(ctx: ProbeContext) -> tuple[list[float], list[float]]:
    steps = list(ctx.agent.history)
    return finite([s.loss for s in steps]), [s.grad_norm for s in steps if s.grad_norm is not None]


def learning_rates(ctx: ProbeContext) -> list[float]:
    return [float(g["lr"]) for opt in ctx.agent.optimizers for g in opt.param_groups]


def update_ratios(ctx: ProbeContext) -> dict[str, float]:
    """lr * |grad| / |w| per parameter, with the last healthy per-layer gradient norms."""
    layers = next((s.layer_norms for s in reversed(ctx.agent.history)
                   if s.layer_norms and all(math.isfinite(v) for v in s.layer_norms.values())), None)
    if not layers or ctx.agent.model is None:
        return {}
    lr_of = {id(p): float(g["lr"]) for opt in ctx.agent.optimizers for g in opt.param_groups for p in g["params"]}
    ratios = {}
    for name, param in ctx.agent.model.named_parameters():
        weight = float(param.detach().norm())
        if name in layers and id(param) in lr_of and weight > 0:
            ratios[name] = lr_of[id(param)] * layers[name] / weight
    return ratios


# --- learning rate --------------------------------------------------------------------------

def learning_rate(ctx: ProbeContext) -> ProbeOutcome:
    rates = learning_rates(ctx)
    if not rates:
        return ProbeOutcome(INCONCLUSIVE, "no optimizer step seen yet: nothing to say about the learning rate")
    losses, _ = history(ctx)
    diverging = loss_diverging(losses)
    ratios = update_ratios(ctx)
    large = {n: r for n, r in ratios.items() if r > RATIO_LIMIT}
    evidence = [f"learning rates: {', '.join(f'{r:.3g}' for r in rates)}"]
    if ratios:
        worst = max(ratios, key=ratios.get)
        evidence.append(f"update/weight ratio lr*|g|/|w|: largest {ratios[worst]:.2g} ({worst}); "
                        f"{len(large)} of {len(ratios)} over {RATIO_LIMIT}")
    if losses:
        evidence.append(f"loss before the failure: healthy median {median(healthy_half(losses)):.4g}, "
                        f"last {losses[-1]:.4g}: {'diverging' if diverging else 'not diverging'}")
    start = start_point(ctx)
    base = run_trial(ctx, start, Adjust())
    evidence.append(f"replay of {start.steps_before} step(s) from {start.label} at the same rate: {base.describe()}")
    stable = None
    for scale in LOWER_RATES:
        trial = run_trial(ctx, start, Adjust(lr_scale=scale))
        evidence.append(f"... at lr x{scale:g}: {trial.describe()}")
        if not trial.blew_up:
            stable = scale
            break
    data = {"rates": rates, "stable_scale": stable, "reproduced": base.blew_up,
            "validated": base.blew_up and stable is not None}
    if base.blew_up and stable is not None and (diverging or large):
        new = ", ".join(f"{r * stable:.3g}" for r in rates)
        return ProbeOutcome(
            FAIL, f"learning rate too high: the NaN vanishes at lr x{stable:g} ({new})", evidence,
            f"lower the learning rate to {new} (x{stable:g}); with a warm-up or schedule, cap its peak "
            "there; re-run the failing case to confirm", data=data)
    if large and max(large.values()) > 1.0:
        return ProbeOutcome(FAIL, "learning rate too high: single steps move weights by more than their size",
                            evidence, "lower the learning rate by 10x or more", data=data)
    return ProbeOutcome(PASS, "the learning rate is not the cause" + (
        "" if not base.blew_up else ": lower rates do not remove the NaN" if stable is None else
        ": a lower rate avoids it, but the loss was not diverging and updates were of normal size"),
        evidence, data=data)


# --- exploding gradients --------------------------------------------------------------------

def current_grad_norm(ctx: ProbeContext) -> float | None:
    grads = [p.grad for opt in ctx.agent.optimizers for g in opt.param_groups for p in g["params"]
             if p.grad is not None]
    if not grads:
        return None
    return float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g.float()) for g in grads])))


def suggested_clip(norms: list[float]) -> float | None:
    healthy = sorted(finite(healthy_half(norms)))
    if not healthy:
        return None
    value = healthy[min(len(healthy) - 1, int(0.9 * len(healthy)))]
    return float(f"{value:.2g}")


def fastest_growing_layer(ctx: ProbeContext) -> str | None:
    """The layer whose gradient norm grew most from its first recorded value to its last."""
    records = [s.layer_norms for s in ctx.agent.history if s.layer_norms]
    if len(records) < 2:
        return None
    first, last = records[0], records[-1]
    growth = {n: (last.get(n, math.inf) / v) for n, v in first.items() if v > 0}
    return max(growth, key=lambda n: growth[n] if not math.isnan(growth[n]) else math.inf) if growth else None


def gradient_explosion(ctx: ProbeContext) -> ProbeOutcome:
    losses, norms = history(ctx)
    current = current_grad_norm(ctx)
    recent = norms[-3:] + ([current] if current is not None else [])
    healthy = median(finite(healthy_half(norms)))
    if healthy is None or not recent:
        return ProbeOutcome(INCONCLUSIVE, "not enough gradient history before the failure")
    peak = max(recent, key=lambda v: math.inf if not math.isfinite(v) else v)
    spike = math.inf if not math.isfinite(peak) else peak / max(healthy, 1e-30)
    before = losses[-8:-1]
    stable = bool(before) and median(before) <= DIVERGENCE * abs(median(healthy_half(losses)) or 1.0)
    clip = suggested_clip(norms)
    evidence = [f"gradient norm: healthy median {healthy:.4g}, peak in the last steps {peak:.4g} "
                f"({spike:.3g}x)", f"loss before the peak {'stable' if stable else 'already rising'}"]
    layer = fastest_growing_layer(ctx)
    if layer:
        evidence.append(f"layer whose gradient grew most: {layer}")
    data: dict[str, Any] = {"clip": clip, "spike": spike if math.isfinite(spike) else None}
    if clip is not None:
        start = start_point(ctx)
        base = run_trial(ctx, start, Adjust())
        clipped = run_trial(ctx, start, Adjust(clip=clip))
        evidence += [f"replay of {start.steps_before} step(s) from {start.label}: {base.describe()}",
                     f"... with clip_grad_norm_ at {clip:g}: {clipped.describe()}"]
        data["validated"] = base.blew_up and not clipped.blew_up
    if spike >= SPIKE and stable:
        fix = (f"clip the gradient norm between backward() and step(): "
               f"torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm={clip:g})")
        return ProbeOutcome(FAIL, f"exploding gradients: the norm jumped {spike:.3g}x over its healthy median "
                            "while the loss was stable", evidence, fix, data=data)
    return ProbeOutcome(PASS, "no gradient explosion ahead of the failure" + (
        "" if spike < SPIKE else ": the gradient grew with a loss that was already diverging"), evidence, data=data)


# --- NaN / Inf in the inputs ---------------------------------------------------------------

def nonfinite_tensors(batch: Any) -> list[str]:
    found = []
    for path, tensor in tensors_in(batch):
        if not tensor.is_floating_point() and not tensor.is_complex():
            continue
        bad = ~torch.isfinite(tensor.detach())
        count = int(bad.sum())
        if count:
            rows = sorted({int(i[0]) for i in bad.nonzero()[:64].tolist()}) if tensor.dim() else []
            found.append(f"{path}: {count} NaN/Inf value(s)" + (f" in rows {rows[:8]}" if rows else ""))
    return found


def scan_dataset(ctx: ProbeContext) -> tuple[list[str], int, str]:
    """Map-style datasets: the samples holding NaN/Inf among the first SCAN_SAMPLES (bounded in time)."""
    loader_ref = ctx.agent.loaders.get(ctx.agent.batches[-1].source) if ctx.agent.batches else None
    dataset = getattr(loader_ref() if loader_ref else None, "dataset", None)
    if dataset is None or isinstance(dataset, torch.utils.data.IterableDataset) or not hasattr(dataset, "__len__"):
        return [], 0, "no map-style dataset to scan"
    total = min(len(dataset), int(ctx.params.get("scan", SCAN_SAMPLES)))
    found, deadline = [], time.monotonic() + SCAN_SECONDS
    for index in range(total):
        if ctx.cancelled() or time.monotonic() > deadline:
            return found, index, f"scanned {index} of {len(dataset)} samples (stopped early)"
        for line in nonfinite_tensors(dataset[index]):
            found.append(f"sample {index}: {line.replace('batch', 'sample', 1)}")
        ctx.progress((index + 1) / total, f"scanning sample {index + 1}/{total}")
    return found, total, f"scanned {total} of {len(dataset)} samples"


def clean(batch: Any) -> Any:
    return map_tensors(batch, lambda t: torch.nan_to_num(t, nan=0.0, posinf=0.0, neginf=0.0)
                       if t.is_floating_point() else t)


def nan_inputs(ctx: ProbeContext) -> ProbeOutcome:
    trainer = ctx.trainer
    batch = trainer.prepare()
    in_batch = nonfinite_tensors(batch)
    in_dataset, scanned, scan_note = scan_dataset(ctx)
    evidence = in_batch + in_dataset[:12] + [scan_note]
    data: dict[str, Any] = {"samples": [line.split(":")[0] for line in in_dataset]}
    if not in_batch and not in_dataset:
        return ProbeOutcome(PASS, f"no NaN/Inf in the failing batch nor in {scanned} dataset samples",
                            evidence, data=data)
    if in_batch:
        start = Start(ctx.runtime.snapshot, 1, "the state at the break")
        trainer.reset(start.snapshot)
        result = trainer.step(clean(batch), Adjust())
        cleaned_ok = result.loss is not None and math.isfinite(result.loss) and result.grads_finite
        evidence.append(f"the failing batch with NaN/Inf replaced by 0: loss {result.loss}, "
                        f"{'finite' if cleaned_ok else 'still not finite'}")
        data["validated"] = cleaned_ok
    found = [f"{len(in_batch)} tensor(s) of the failing batch"] if in_batch else []
    found += [f"{len(in_dataset)} dataset sample(s)"] if in_dataset else []
    return ProbeOutcome(
        FAIL, f"NaN/Inf in the inputs: {' and '.join(found)}", evidence,
        "clean the data at its source: drop or impute those samples, or assert torch.isfinite(x).all() in "
        "the Dataset's __getitem__ so bad rows fail loudly", data=data)
