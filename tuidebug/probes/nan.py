"""NaN checks on the optimisation: the learning rate, exploding gradients, float16 overflow.

(Bad inputs are ``inputs``, unsafe ops ``unsafe_math``.) Each reads the run's recent history, then
proves its cause with a trial: the steps before the failure replayed with one change (lower rates,
clipping, float32), past the failing step, to see whether the NaN is gone *and* the loss falls.
A check fails when its cause is present; the decide node ranks the failures. The thresholds:

- the learning rate is searched downward by decades, to LR_DECADES below the script's rate: the
  largest rate whose replay stays finite and learns is the fix;
- update/weight ratio lr*|g|/|w|: about 1e-3 is usual; over RATIO_LIMIT one step moves a weight by
  that share of its size, over 1 by more than its size;
- a gradient spike is a norm SPIKE times the healthy median with the loss stable before it; with
  no history (a failure in the first steps), a gradient norm GRAD_PER_LOSS times the loss itself:
  a healthy gradient is of the loss's own order (a big loss, as with unscaled targets, gives a big
  gradient, and there the rate is the lever), a recurrence that explodes gives a huge gradient from
  a moderate loss;
- float16's largest value is 65504: an op whose float16 output overflows from finite inputs; bfloat16
  reaches float32's range but keeps 8 bits of mantissa (1 - 1e-6 rounds to 1): an op whose bfloat16
  output is not finite from finite inputs is the rounding's doing. Either is proven by the same step
  computed in float32.
"""

from __future__ import annotations

import ast
import collections.abc
import dataclasses
import inspect
import math
import os
import re
from typing import Any

import torch

from tuidebug.batches import tensors_in
from tuidebug.probe_api import (FAIL, INCONCLUSIVE, PASS, Adjust, LoopGone, NeedsLoop, NoPipeline, ProbeContext,
                                ProbeOutcome, optimizer_params, probe)
from tuidebug.probes.failing_loss import failing_loss
from tuidebug.probes.holders import user_object
from tuidebug.probes.inputs import data_tensors
from tuidebug.probes.source import (assignments, attribute_chain, calls_named, clip_arguments, frame_value, in_files,
                                    keyword_values, rate_argument_sites, switched_off_clips, written_sites)
from tuidebug.probes.trials import (CALM_REPLAY_STEPS, DIVERGENCE, Start, Trial, finite, median, run_trial,
                                    start_point, unfaithful)
from tuidebug.probes.unsafe_math import display_name
from tuidebug.probes.watch import OpWatch, op_tensors
from tuidebug.protocol import Step
from tuidebug.sites import Site, frame_locals

RATIO_LIMIT = 0.1
SPIKE = 100.0
GRAD_PER_LOSS = 1e3
# A spike under a calm loss counts toward the failure only this close to it: as far as a trial may replay
# from a calm checkpoint. One stray batch long before, that the run recovered from, is not what broke it
# (r48a's spikes came 5 to 29 steps before its NaN).
SPIKE_WINDOW = CALM_REPLAY_STEPS
LR_DECADES = 6
FLOAT16_MAX = 65504.0
LOW_PRECISION = (torch.float16, torch.bfloat16)
OUTLIER = 1000.0  # a batch value this many times the recent batches' typical largest is a glitch


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
    steps = ctx.history
    return finite([s.loss for s in steps]), [s.grad_norm for s in steps if s.grad_norm is not None]


def rate_sites(ctx: ProbeContext) -> list[str]:
    """Where the optimizer (and so its rate) was made, and where the rate it is given is set: the lines to
    change."""
    lines = []
    for kind, made in ctx.run.facts.optimizer_sites[-2:]:
        lines.append(f"the {kind} optimizer is created at {made}")
        site = _site_of(ctx, made)
        lines += [f"its rate is set at {origin}" for origin in (rate_argument_sites(site.path, site.line) if site else [])]
    return lines


def _site_of(ctx: ProbeContext, made: str) -> Site | None:
    """The site ``file.py:LINE `text``` written in the facts, in one of the run's source files."""
    sites = written_sites(ctx.run.facts.source_files, made)
    return sites[0] if sites else None


def learning_rates(ctx: ProbeContext) -> list[float]:
    return [float(g["lr"]) for opt in ctx.run.optimizers for g in opt.param_groups]


def update_ratios(ctx: ProbeContext) -> dict[str, float]:
    """lr * |grad| / |w| per parameter, with the current gradients (at the break, before the step)."""
    model = ctx.run.model
    if model is None:
        return {}
    lr_of = {id(p): float(g["lr"]) for opt in ctx.run.optimizers for g in opt.param_groups for p in g["params"]}
    ratios = {}
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.grad is None or id(param) not in lr_of:
                continue
            weight = float(param.detach().float().norm())
            grad = float(param.grad.detach().float().norm())
            if weight > 0 and math.isfinite(grad):
                ratios[name] = lr_of[id(param)] * grad / weight
    return ratios


def current_grad_norm(ctx: ProbeContext) -> float | None:
    grads = [p.grad for p in optimizer_params(*ctx.run.optimizers) if p.grad is not None]
    if not grads:
        return None
    return float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g.float()) for g in grads])))


def _last_finite_step(ctx: ProbeContext, current: float | None) -> tuple[float | None, float | None]:
    """The gradient norm and loss of the last step where both were finite (the failing step's own
    gradient may already be infinite), else the gradients at the break."""
    for step in reversed(ctx.history):
        if step.grad_norm is not None and step.loss is not None and math.isfinite(step.grad_norm) \
                and math.isfinite(step.loss):
            return step.grad_norm, step.loss
    losses = finite([s.loss for s in ctx.history])
    usable = current is not None and math.isfinite(current)
    return (current if usable else None), (losses[-1] if losses else None)


# --- learning rate --------------------------------------------------------------------------

@probe("nan.lr")
def learning_rate(ctx: ProbeContext) -> ProbeOutcome:
    rates = learning_rates(ctx)
    if not rates:
        return ProbeOutcome(INCONCLUSIVE, "no optimizer step seen yet: nothing to say about the learning rate")
    losses, _ = history(ctx)
    diverging = loss_diverging(losses)
    ratios = update_ratios(ctx)
    large = {n: r for n, r in ratios.items() if r > RATIO_LIMIT}
    shown = ", ".join(f"{r:.3g}" for r in rates)
    evidence = [f"learning rates: {shown}"]
    if ratios:
        worst = max(ratios, key=ratios.get)
        evidence.append(f"update/weight ratio lr*|g|/|w| at the failing step: largest {ratios[worst]:.2g} ({worst}); "
                        f"{len(large)} of {len(ratios)} over {RATIO_LIMIT}")
    if losses:
        evidence.append(f"loss before the failure: healthy median {median(healthy_half(losses)):.4g}, "
                        f"last {losses[-1]:.4g}: {'diverging' if diverging else 'not diverging'}")
    start = start_point(ctx)
    base = run_trial(ctx, start, Adjust())
    evidence.append(f"replay from {start.label} at lr {shown}: {base.describe()}")
    stable, finite_only = None, None
    for exponent in range(1, LR_DECADES + 1):
        scale = 10.0 ** -exponent
        trial = run_trial(ctx, start, Adjust(lr_scale=scale))
        evidence.append(f"... at lr x{scale:g} ({', '.join(f'{r * scale:.3g}' for r in rates)}): {trial.describe()}")
        if trial.learns:
            stable = scale
            break
        if stable is not None:
            break  # the decade below the first rate that held level does not make the loss fall either
        if trial.holds:
            stable = scale  # finite, the loss level: one decade lower may also make it fall, the fix proven
            continue
        if not trial.blew_up and finite_only is None:
            finite_only = scale
        if ctx.cancelled() or ctx.time_left() <= 0:
            evidence.append("the search stopped here: the check's time ran out")
            break
    evidence += schedule_lines(ctx)
    data = {"rates": rates, "stable_scale": stable, "reproduced": base.blew_up,
            "confirmed": base.blew_up and stable is not None}
    if base.blew_up and stable is not None:
        new = ", ".join(f"{r * stable:.3g}" for r in rates)
        fixed = run_trial(ctx, start, Adjust(lr_scale=stable))
        # A rate searched down decade by decade until the loss stops rising may only hold it level: a weaker
        # proof than one change that lets it fall (the tree ranks it below such a change).
        data.update(fixed_loss=fixed.final, fixed_learns=fixed.learns, holds_only=not fixed.learns)
        evidence += rate_sites(ctx)
        return ProbeOutcome(
            FAIL, f"learning rate too high: lr {shown} {base.describe().split(',')[0]}; {new} keeps the loss "
            f"{'falling' if fixed.learns else 'level'} over {len(fixed.losses)} steps", evidence,
            f"lower the learning rate to {new} (x{stable:g}); with a warm-up or schedule, cap its peak there",
            data=data)
    if large and max(large.values()) > 1.0:
        evidence += rate_sites(ctx)
        return ProbeOutcome(FAIL, "learning rate too high: single steps move weights by more than their size",
                            evidence, "lower the learning rate by 10x or more", data=data)
    data["confirmed"] = False
    unlike = unfaithful(ctx, start, base)
    if unlike is not None:
        evidence.append(unlike)
        return ProbeOutcome(INCONCLUSIVE, "could not tell: the replay at the script's own rate does not reproduce "
                            "the run, so the lower rates' replays say nothing", evidence, data=data)
    if base.blew_up and finite_only is not None:
        evidence.append(f"at lr x{finite_only:g} the run stays finite but the loss does not fall in the replay")
    why = ": no lower rate both stays finite and learns" if base.blew_up else \
        ": the replay at the script's own rate does not fail"
    return ProbeOutcome(PASS, "the learning rate is not the cause" + why, evidence, data=data)


def schedule_lines(ctx: ProbeContext) -> list[str]:
    """The schedules that set the rate, and how far they took it over the run (a warm-up's peak)."""
    rates = [(s.step, s.lrs[0]) for s in ctx.history if s.lrs]
    lines = [f"the {kind} schedule is created at {site}" for kind, site in ctx.run.facts.scheduler_sites[-2:]]
    for calls in ctx.run.facts.schedulers.values():
        line = f"{calls.kind} stepped {calls.calls} times, at {calls.site}"
        if rates:
            low, high = min(r for _, r in rates), max(r for _, r in rates)
            line += f": the rate went from {rates[0][1]:.3g} to {rates[-1][1]:.3g} (peak {high:.3g}, lowest {low:.3g})"
        lines.append(line)
    return lines


# --- exploding gradients --------------------------------------------------------------------

def outlier_batch(ctx: ProbeContext) -> list[str]:
    """A batch of the steps before the failure whose values are far outside the others' (a glitched
    target, a corrupt record): the rare batch a gradient spike comes from."""
    batches = ctx.run.recent_batches()
    if len(batches) < 3:
        return []
    peaks: dict[str, list[tuple[float, int]]] = {}
    for captured in batches:
        for path, tensor in tensors_in(captured.batch):
            if tensor.is_floating_point() or tensor.dtype in (torch.int32, torch.int64):
                values = tensor.detach().float()
                finite_values = values[torch.isfinite(values)]
                if finite_values.numel():
                    peaks.setdefault(path, []).append((float(finite_values.abs().max()), captured.step))
    lines = []
    for path, found in peaks.items():
        typical = median([value for value, _ in found])
        value, step = max(found)
        if typical and value > OUTLIER * typical:
            lines.append(f"the batch of step {step} holds an outlier: {path} reaches {value:.4g}, where the other "
                         f"batches stay near {typical:.3g} (a corrupt record or a glitched label)"
                         + _in_dataset(ctx, value))
    return lines


def _in_dataset(ctx: ProbeContext, value: float) -> str:
    """Which of the dataset's tensors, and which samples, hold the outlier value."""
    for label, data in data_tensors(ctx.run.dataset()):
        values = torch.as_tensor(data).detach().float()
        if values.dim() == 0 or not values.numel():
            continue
        rows = (values.abs() >= 0.99 * value).reshape(values.shape[0], -1).any(dim=1).nonzero().flatten().tolist()
        if rows:
            return f"; in the data set: {label}, sample(s) {rows[:8]}"
    return ""


def suggested_clip(norms: list[float]) -> float | None:
    healthy = sorted(finite(healthy_half(norms)))
    if not healthy:
        return None
    value = healthy[min(len(healthy) - 1, int(0.9 * len(healthy)))]
    return float(f"{value:.2g}")


def fastest_growing_layer(ctx: ProbeContext) -> str | None:
    """The layer whose gradient norm grew most from its first recorded value to its last."""
    records = [s.layer_norms for s in ctx.history if s.layer_norms]
    if len(records) < 2:
        return None
    first, last = records[0], records[-1]
    growth = {n: (last.get(n, math.inf) / v) for n, v in first.items() if v > 0}
    return max(growth, key=lambda n: growth[n] if not math.isnan(growth[n]) else math.inf) if growth else None


def largest_gradient_layer(ctx: ProbeContext) -> str | None:
    """The parameter with the largest gradient (now, or at the last step that recorded them), with the
    type of the layer that holds it."""
    model = ctx.run.model
    if model is None:
        return None
    norms = {n: float(p.grad.detach().float().norm()) for n, p in model.named_parameters() if p.grad is not None}
    if not norms:
        norms = next((dict(s.layer_norms) for s in reversed(ctx.history) if s.layer_norms), {})
    if not norms:
        return None
    name = max(norms, key=lambda n: norms[n] if math.isfinite(norms[n]) else math.inf)
    try:
        owner = model.get_submodule(name.rpartition(".")[0]) if "." in name else model
    except AttributeError:
        return name
    return f"{name} ({type(owner).__name__})"


def calm_start(losses: list[float], trial: Trial) -> bool:
    """The trial began at the run's usual loss, within DIVERGENCE of the median of its losses: from weights a
    climb already wrecked, any clip far above the healthy norms lets a loss of 1e16 fall. An objective with no
    positive median (a log-likelihood) has no such ratio: no start is calm enough for a clip to prove alone."""
    usual = median(losses)
    return bool(trial.losses) and usual is not None and usual > 0 and trial.losses[0] <= DIVERGENCE * usual


def spikes_under_calm_loss(history: list[Step], healthy: float) -> list[tuple[int, float, float]]:
    """(step, gradient norm, loss) of the steps after the healthy half of the run whose gradient norm was
    SPIKE times the healthy median or more while their loss stayed within DIVERGENCE of its healthy
    median, within SPIKE_WINDOW steps of the last: the rare batches whose gradients kicked the weights
    before the loss showed anything (a rate too high raises the loss with the norm)."""
    steps = [s for s in history if s.loss is not None and s.grad_norm is not None
             and math.isfinite(s.loss) and math.isfinite(s.grad_norm)]
    usual = median(healthy_half([s.loss for s in steps]))
    if usual is None or usual <= 0 or healthy <= 0 or not steps:
        return []
    recent = steps[-1].step - SPIKE_WINDOW
    return [(s.step, s.grad_norm, s.loss) for s in steps[len(steps) // 2:]
            if s.step > recent and s.grad_norm >= SPIKE * healthy and s.loss <= DIVERGENCE * usual]


@probe("nan.grad_explosion")
def gradient_explosion(ctx: ProbeContext) -> ProbeOutcome:
    losses, norms = history(ctx)
    current = current_grad_norm(ctx)
    healthy = median(finite(healthy_half(norms))) if len(finite(norms)) >= 4 else None
    evidence, data = [], {}
    if healthy is not None:
        recent = norms[-3:] + ([current] if current is not None else [])
        peak = max(recent, key=lambda v: math.inf if not math.isfinite(v) else v)
        spike = math.inf if not math.isfinite(peak) else peak / max(healthy, 1e-30)
        before = losses[-8:-1]
        stable = bool(before) and median(before) <= DIVERGENCE * abs(median(healthy_half(losses)) or 1.0)
        exploding = spike >= SPIKE and stable
        why = f"the norm jumped {spike:.3g}x over its healthy median while the loss was stable"
        clip = suggested_clip(norms)
        evidence += [f"gradient norm: healthy median {healthy:.4g}, peak in the last steps {peak:.4g} ({spike:.3g}x)",
                     f"loss before the peak {'stable' if stable else 'already rising'}"]
        calm_spikes = [] if exploding else spikes_under_calm_loss(list(ctx.history), healthy)
        if calm_spikes:
            exploding = True
            step, norm, _ = max(calm_spikes, key=lambda found: found[1])
            why = (f"the norm spiked to {norm / healthy:.3g}x its healthy median at step {step} while the loss was at "
                   "its usual level")
            shown = ", ".join(f"step {step}: {norm:.4g} ({norm / healthy:.3g}x) at loss {loss:.4g}"
                              for step, norm, loss in calm_spikes[:4])
            evidence.append(f"the gradient norm spiked while the loss was at its usual level before the climb: {shown}")
        data["spike"] = spike if math.isfinite(spike) else None
        layer = fastest_growing_layer(ctx)
    else:
        norm, loss = _last_finite_step(ctx, current)
        if norm is None or loss is None:
            return ProbeOutcome(INCONCLUSIVE, "no finite gradient and loss to judge before the failure", evidence)
        per_loss = norm / max(abs(loss), 1e-8)
        exploding = per_loss >= GRAD_PER_LOSS
        why = "the gradient is huge from the first steps"
        clip = 1.0
        evidence.append(f"the failure comes at step {len(losses) + 1}, before a gradient history: gradient norm "
                        f"{norm:.4g} for a loss of {loss:.4g} ({per_loss:.3g}x the loss)")
        layer = largest_gradient_layer(ctx)
    if layer:
        evidence.append(f"layer with the {'fastest-growing' if healthy is not None else 'largest'} gradient: {layer}")
    evidence += outlier_batch(ctx)
    data["clip"] = clip
    if clip is not None:
        try:
            start = start_point(ctx)
            base = run_trial(ctx, start, Adjust())
            clipped = run_trial(ctx, start, Adjust(clip=clip))
        except (NeedsLoop, LoopGone):
            finite_peak = max(finite(norms[-4:]) or [0.0])
            if not exploding or healthy is None or finite_peak < SPIKE * healthy:
                raise  # without a replay, only a rise the finite norms show counts (an inf alone is the symptom)
            evidence.append(f"finite norms before the failure reached {finite_peak:.4g} ({finite_peak / healthy:.3g}x "
                            "the healthy median)")
            evidence.append("not replayed: the script's loop has ended, so the clipping could not be tried; the "
                            "explosion is the run's own, in its gradient history")
            return _exploding(ctx, evidence, data, clip, layer, healthy, why)
        evidence += [f"replay from {start.label}: {base.describe()}",
                     f"... with clip_grad_norm_ at {clip:g}: {clipped.describe()}"]
        unlike = unfaithful(ctx, start, base)
        switched_off = _clip_never_ran(ctx) if base.blew_up and unlike is None else None
        if switched_off is not None and not clipped.holds and healthy is not None:
            clip, clipped = _tighter_clip(ctx, start, healthy, evidence)
        data.update(clip=clip, confirmed=base.blew_up and clipped.holds)
        # Clipping proves a fix only when the replay without it failed: a replay that stays finite
        # either way shows nothing, and must not outrank a check whose replay did fail and was fixed.
        data["fixed_loss"] = clipped.final if base.blew_up and clipped.holds else None
        data["fixed_learns"] = base.blew_up and clipped.learns
        spent = _clip_of_spent_iterator(ctx) if base.blew_up else None
        if spent is not None:
            own = spent.limit or clip
            trial = clipped if own == clip else run_trial(ctx, start, Adjust(clip=own))
            if own != clip:
                evidence.append(f"... with clip_grad_norm_ at {own:g}, the script's own limit: {trial.describe()}")
            if trial.holds:
                data.update(clip=own, confirmed=True, fixed_loss=trial.final, fixed_learns=trial.learns)
                return _spent_clip(evidence, data, own, spent)
        if unlike is not None:
            evidence.append(unlike)
        elif switched_off is not None and clipped.holds:
            return _switched_off_clip(evidence, data, clip, switched_off)
        elif ctx.run.facts.clip_after_step is not None and base.blew_up and clipped.holds:
            return _clip_after_step(evidence, data, clip, ctx.run.facts.clip_after_step, replayed=True)
        elif exploding and base.blew_up and not clipped.holds:
            exploding = False
            evidence.append("clipping does not keep the replay finite and learning: the gradients are not what "
                            "breaks the run")
        elif not exploding and data["fixed_learns"] and calm_start(losses, clipped):
            # Proven by the trial alone, as the rate check's cause is: the tree ranks the two by their trials.
            exploding = True
            why = f"clipping at {clip:g} alone keeps the replay finite and the loss falling at the script's rate"
    if exploding:
        return _exploding(ctx, evidence, data, clip, layer, healthy, why)
    return ProbeOutcome(PASS, "no gradient explosion ahead of the failure", evidence, data=data)


def _clip_never_ran(ctx: ProbeContext) -> tuple[Site, Site | None] | None:
    """The script's own gradient clip that did not run in the recent steps: under an ``if`` that never
    held, or commented out."""
    if any(step.clip_at is not None for step in ctx.history):
        return None
    clips = in_files(ctx.run.facts.source_files, switched_off_clips)
    return clips[0] if clips else None


@dataclasses.dataclass
class SpentClip:
    call: Site  # the script's clip
    name: str  # the variable it is given
    kind: str  # what that variable holds: a generator, a filter...
    bound: Site | None  # where the variable was bound
    limit: float | None  # the clip's own max_norm, where it could be read


def _clip_of_spent_iterator(ctx: ProbeContext) -> SpentClip | None:
    """The script's clip given its parameters as an iterator kept in a variable (``filter(...)``, a
    generator, ``model.parameters()``): the iterator is spent by its first pass (an optimizer built from it
    takes every parameter), so the clip is given none and clips nothing, and reports a norm of 0."""
    frames = ctx.run.user_frames()
    for call, name, limit in in_files(ctx.run.facts.source_files, clip_arguments):
        for frame in (f for f in frames if f.f_code.co_filename == call.path):
            value = frame_value(name, frame)
            if not isinstance(value, collections.abc.Iterator):
                continue
            bound = [site for site in assignments(call.path, name) if site.line < call.line]
            number = limit.value if isinstance(limit, ast.Constant) else frame_value(attribute_chain(limit), frame)
            usable = isinstance(number, (int, float)) and not isinstance(number, bool) and 0 < number < math.inf
            return SpentClip(call, name, type(value).__name__, bound[-1] if bound else None,
                             float(number) if usable else None)
    return None


def _spent_clip(evidence: list[str], data: dict, clip: float, spent: SpentClip) -> ProbeOutcome:
    """The script clips, but what it gives the clip is an iterator already spent: the fix is the script's
    own clip given a list. It outranks a lower rate (``definitive``), as a clip switched off does."""
    where = f" (bound at {spent.bound.short}: `{spent.bound.text}`)" if spent.bound else ""
    evidence.append(f"the script's gradient clipping at {spent.call.short} (`{spent.call.text}`) is given `{spent.name}`, "
                    f"a {spent.kind} object{where}: an iterator is spent by its first pass (the optimizer built from "
                    "it took every parameter), so the clip is given no parameters and clips nothing")
    data["definitive"] = True
    fix = (f"make `{spent.name}` a list so that the clip at {spent.call.short} gets the parameters too: "
           + (f"`{spent.name} = list(...)` at {spent.bound.short}" if spent.bound else f"`{spent.name} = list({spent.name})`")
           + " (e.g. `list(filter(lambda p: p.requires_grad, model.parameters()))`)")
    return ProbeOutcome(FAIL, f"exploding gradients: the script's clip at {spent.call.short} is given `{spent.name}`, a "
                        f"spent {spent.kind}, and clips nothing; clipping at {clip:g} keeps the replay finite and "
                        "learning", evidence, fix, data=data)


def _tighter_clip(ctx: ProbeContext, start: Start, healthy: float, evidence: list[str]) -> tuple[float, Trial]:
    """Clip thresholds below the usual one, for a script whose own clipping was switched off: the
    healthy median norm, then a decade under it (the usual threshold, the 90th percentile of the
    healthy norms, is no guard once the norms were already growing in the healthy half). Only here:
    a tight enough clip always acts as a lower rate, and it is the script's own safeguard that
    makes clipping the fix the user meant."""
    for clip in (float(f"{healthy:.2g}"), float(f"{healthy / 10:.2g}")):
        clipped = run_trial(ctx, start, Adjust(clip=clip))
        evidence.append(f"... with clip_grad_norm_ at {clip:g}: {clipped.describe()}")
        if clipped.holds or ctx.cancelled() or ctx.time_left() <= 0:
            break
    return clip, clipped


def _switched_off_clip(evidence: list[str], data: dict, clip: float,
                       switched_off: tuple[Site, Site | None]) -> ProbeOutcome:
    """The script has clipping, the run never clipped, and clipping removes the failure in the replay:
    the fix is the script's own, turned on. It outranks a lower rate that also works (``definitive``):
    the user wrote the safeguard for this, and turning it on keeps the rate they chose."""
    call, condition = switched_off
    why = f"commented out at {call}" if condition is None else f"at {call} runs only under {condition}, " \
        "which never held"
    evidence.append(f"the script's gradient clipping {why}: no clip_grad_norm_ in the recent steps")
    data["definitive"] = True
    fix = (f"turn on the script's clipping at {call.short}" + (f" (its condition at {condition.short} never held)"
           if condition is not None else "") + f": clip the gradient norm at about {clip:g}")
    return ProbeOutcome(FAIL, f"exploding gradients: the script's clipping never ran ({call.short}); clipping at "
                        f"{clip:g} keeps the replay finite and learning", evidence, fix, data=data)


def _clip_after_step(evidence: list[str], data: dict, clip: float, where: str, replayed: bool) -> ProbeOutcome:
    """The script clips, but after optimizer.step(): the step has already applied the unclipped gradients,
    and the clip only trims gradients about to be zeroed. The fix is the script's own clip, moved; it
    outranks a lower rate (``definitive``), as a clip switched off does. Proven by a replay clipped before
    the step where one is faithful; otherwise by the run's own history, a gradient spike under a loss that
    was stable, which the clip the script asked for would have bounded."""
    evidence.append(f"the script's gradient clipping at {where} runs after optimizer.step(): no backward ran "
                    "between the step and the clip, so every step applied the unclipped gradients")
    data["definitive"] = True
    line = where.split(" ", 1)[0]
    shown = (f"clipping at {clip:g} before the step keeps the replay finite and learning" if replayed else
             "the gradient norm spiked while the loss was stable, and the clip never bounded it")
    return ProbeOutcome(
        FAIL, f"exploding gradients: the script clips after optimizer.step() ({line}), so its steps apply the "
        f"unclipped gradients; {shown}", evidence,
        f"move the clip at {line} before optimizer.step(): backward, clip, then step", data=data)


def _exploding(ctx: ProbeContext, evidence: list[str], data: dict, clip: float, layer: str | None,
               healthy: float | None, why: str) -> ProbeOutcome:
    if ctx.run.facts.clip_after_step is not None and healthy is not None:
        return _clip_after_step(evidence, data, clip, ctx.run.facts.clip_after_step, replayed=False)
    after = ctx.run.facts.backward_site
    fix = ("clip the gradient norm between backward() and step()" + (f" (after {after})" if after else "")
           + f": torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm={clip:g})")
    trainers = in_files(ctx.run.facts.source_files, calls_named, {"Trainer"}) \
        if ctx.run.lightning_module() is not None else []
    if trainers:  # Lightning runs backward and step itself: its Trainer clips
        fix = f"clip in the Trainer at {trainers[0].short} (`{trainers[0].text}`): pass gradient_clip_val={clip:g}"
    where = f" ({layer})" if layer else ""
    return ProbeOutcome(FAIL, f"exploding gradients{where}: {why}", evidence, fix, data=data)


# --- float16 overflow -----------------------------------------------------------------------

def _update_overflow(ctx: ProbeContext) -> str | None:
    """Replay the steps before the failure: the first whose optimizer step left non-finite weights
    although its gradients were finite (float16 arithmetic inside the update)."""
    start = start_point(ctx)
    trainer = ctx.trainer
    batches = trainer.recent_batches() or [trainer.prepare()]
    trainer.reset(start.snapshot)
    for index in range(start.steps_before + 1):
        result = trainer.step(batches[(len(batches) - start.steps_before + index) % len(batches)], Adjust())
        if result.grads_finite and not result.weights_finite:
            return (f"replayed from {start.label}: at replayed step {index + 1} the gradients were finite (norm "
                    f"{result.grad_norm:.3g}) and the weights were not, after the optimizer's update")
        if not result.grads_finite or ctx.time_left() <= 0:
            return None
    return None


class Overflow(OpWatch):
    """The first half-precision op whose output is not finite while its inputs are."""

    def __init__(self) -> None:
        super().__init__()
        self.first: tuple[str, Site, str, torch.dtype] | None = None
        self.half = False
        # A float16 operand already inf or NaN that no op of the step made: computed before the step (a
        # normalisation's statistics summed in float16), with the op that first reads it.
        self.entered: tuple[str, Site, torch.Tensor] | None = None
        self._made: set[int] = set()

    def visit(self, name: str, args: tuple, kwargs: dict, result: Any, site: Site) -> None:
        outputs = op_tensors([result])
        if any(t.dtype in LOW_PRECISION for t in outputs):
            self.half = True
        if self.entered is None:
            stale = [t for t in op_tensors(args) + op_tensors(kwargs.values()) if t.dtype == torch.float16
                     and id(t) not in self._made and not bool(torch.isfinite(t).all())]
            if stale:
                self.entered = (name, site, stale[0])
        self._made.update(id(t) for t in outputs)
        if self.first is not None:
            return
        bad = [t for t in outputs if t.dtype in LOW_PRECISION and not bool(torch.isfinite(t).all())]
        inputs = [t for t in op_tensors(args) + op_tensors(kwargs.values()) if t.is_floating_point()]
        if bad and all(bool(torch.isfinite(t).all()) for t in inputs):
            largest = max((float(t.float().abs().max()) for t in inputs if t.numel()), default=0.0)
            self.first = (name, site, f"largest input {largest:.3g}", bad[0].dtype)

    def done(self) -> bool:
        return self.first is not None


class Float32(torch.overrides.TorchFunctionMode):
    """Every float16 or bfloat16 operand computed in float32 instead: the trial of a run without half
    precision (autocast still casts the ops it lists; what overflows or rounds is mostly outside them)."""

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        def up(value: Any) -> Any:
            if isinstance(value, torch.Tensor) and value.dtype in LOW_PRECISION:
                return value.float()
            if isinstance(value, (list, tuple)):
                return type(value)(up(v) for v in value)
            return value

        return func(*up(args), **{k: up(v) for k, v in (kwargs or {}).items()})


class WeightsInFloat32:
    """The float32 trial's weights (an ``Adjust.before_forward``): the model's float16 and bfloat16 parameters
    and buffers, with their gradients and optimizer state, held in float32 from the trial's first forward, as in
    a run without ``model.half()`` (float16 weights would round every update of a float32 computation back).
    ``put_back`` returns them to their dtypes before anything restores a state: a restore loads values only."""

    def __init__(self, optimizers: list[Any]) -> None:
        self.optimizers = [o for o in optimizers if o is not None]
        self.cast: list[tuple[torch.Tensor, torch.dtype]] = []

    def __call__(self, model: torch.nn.Module) -> None:
        low = [t for t in [*model.parameters(), *model.buffers()] if t.dtype in LOW_PRECISION]
        self.cast += [(t, t.dtype) for t in low]
        self._cast(low, [torch.float32] * len(low))

    def put_back(self) -> None:
        cast, self.cast = self.cast, []
        self._cast([t for t, _ in cast], [dtype for _, dtype in cast])

    def _cast(self, tensors: list[torch.Tensor], dtypes: list[torch.dtype]) -> None:
        if not tensors:
            return
        with torch.no_grad():
            for tensor, dtype in zip(tensors, dtypes):
                tensor.data = tensor.data.to(dtype)
                if tensor.grad is not None:
                    tensor.grad = tensor.grad.to(dtype)
        ids = {id(t) for t in tensors}
        for optimizer in self.optimizers:  # its load_state_dict casts the state to each parameter's dtype
            if any(id(p) in ids for p in optimizer_params(optimizer)):
                optimizer.load_state_dict(optimizer.state_dict())


@probe("nan.precision")
def precision(ctx: ProbeContext) -> ProbeOutcome:
    # Taken before any replay moves the weights: where no replay can be run (a loop without a DataLoader lends
    # its own iterations, and may run out), the failing step's own loss statement, on its own values, proves an
    # overflow as well as a replayed step does.
    model = ctx.run.model
    on_values = _overflow_on_values(ctx) if model is not None and any(
        p.dtype == torch.float16 for p in model.parameters()) else None
    try:
        return _replayed_precision(ctx, ctx.trainer)
    except (NeedsLoop, NoPipeline, LoopGone):
        outcome = on_values or _half_loss(ctx)
        if outcome is None:
            raise
        return outcome


def _replayed_precision(ctx: ProbeContext, trainer: Any) -> ProbeOutcome:
    model = ctx.run.model
    half_params = [n for n, p in model.named_parameters() if p.dtype == torch.float16] if model is not None else []
    watch = Overflow()
    trainer.reset(ctx.break_state)
    trainer.step(trainer.prepare(), Adjust(mode=lambda: watch))
    evidence = [f"{len(half_params)} float16 parameter tensor(s)" + (f" (e.g. {half_params[0]})" if half_params else "")]
    origin = _half_origin(ctx)
    if origin is not None:
        evidence.append(origin.evidence)
    if not watch.half and not half_params:
        return ProbeOutcome(PASS, "no half-precision tensor in the failing step", evidence)
    scaler = ctx.run.uses_grad_scaler()
    evidence.append("a GradScaler is in use" if scaler else "no GradScaler")
    if watch.first is None and half_params:
        overflow = _update_overflow(ctx)
        if overflow is not None:
            evidence.append(overflow)
            # Finite gradients in, inf weights out: float16 arithmetic inside the update (a momentum or
            # Adam buffer past 65504). Unless the loss was already climbing (weights running away at too
            # high a rate), that is the cause itself, as bad data is: no trial is needed to prove it.
            climbing = loss_diverging(history(ctx)[0])
            evidence.append("the loss was climbing before the failure: the rate may drive the weights there"
                            if climbing else "the loss was not climbing before the failure: the weights overflowed "
                            "in float16, not from a runaway rate")
            return ProbeOutcome(
                FAIL, "float16 overflow in the optimizer's update: float16 weights became inf from finite gradients",
                evidence, (origin.fix if origin is not None else "keep the model and the optimizer in float32 (drop "
                           "model.half()) and train under torch.autocast(device_type, dtype=torch.float16) with a "
                           "torch.amp.GradScaler, or use bfloat16") + " (float16 rounds Adam's eps=1e-8 to 0)",
                data={"confirmed": None, "definitive": not climbing})
    if watch.first is None and watch.entered is not None:
        return _overflowed_before(ctx, watch.entered, evidence)
    if watch.first is None:
        return ProbeOutcome(PASS, "float16 is used, but no float16 op overflowed in the failing step", evidence)
    name, site, detail, dtype = watch.first
    start = start_point(ctx)  # the other checks' start: their trials' losses are compared with this one's
    as_is = run_trial(ctx, start, Adjust())
    weights = WeightsInFloat32([*ctx.run.optimizers, getattr(ctx.trainer, "optimizer", None)])
    try:
        in_float32 = run_trial(ctx, start, Adjust(mode=Float32, before_forward=weights))
    finally:
        weights.put_back()
    # With the loss not climbing before the failure, the run's own history shows that its rate learns: the
    # float32 trial, at that rate, need only remove the blow-up (20 steps at a high rate are too noisy to
    # show a fall). The overflow is then the cause itself, as in the update's case above (a lower rate only
    # slows the values' way to it).
    climbing = loss_diverging(history(ctx)[0])
    past = len(in_float32.losses) >= len(as_is.losses)  # went on past where the replay as written blew up
    removed = in_float32.holds or (not climbing and past and not in_float32.blew_up)
    confirmed = as_is.blew_up and removed
    data = {"confirmed": confirmed, "fixed_loss": in_float32.final if in_float32.holds else None,
            "fixed_learns": as_is.blew_up and in_float32.learns,
            "definitive": confirmed and not climbing}
    if dtype == torch.bfloat16:
        return _bfloat16_rounding(ctx, name, site, detail, evidence + [
            f"replay as written: {as_is.describe()}", f"... computed in float32: {in_float32.describe()}"], data)
    evidence.append(f"first float16 overflow: {name} at {site} ({detail}, float16 tops out at {FLOAT16_MAX:g})")
    evidence += [f"replay as written: {as_is.describe()}", f"... computed in float32: {in_float32.describe()}"]
    if confirmed:
        evidence.append("the loss was climbing before the failure: the rate may drive the values there" if climbing
                        else "the loss was not climbing before the failure: the op overflowed float16 at the run's "
                        "own rate, and float32 weights and ops remove it")
    return ProbeOutcome(
        FAIL, f"float16 overflow: {name} at {site.short} goes past {FLOAT16_MAX:g}", evidence,
        origin.fix if origin is not None else "keep the model in float32 (no model.half()) and train under "
        "torch.autocast(device_type, dtype=torch.float16) with a torch.amp.GradScaler, or use bfloat16", data=data)


def _overflow_on_values(ctx: ProbeContext) -> ProbeOutcome | None:
    """The failing step's loss statement run again on its own values (``failing_loss``): a float16 op that
    overflowed from finite inputs, and the same statement with every float16 operand in float32 finite. None
    when the statement cannot be run again or does not show both."""
    loss, _ = failing_loss(ctx)
    if loss is None:
        return None
    watch = Overflow()
    try:
        as_is = loss.compute(watch)
        in_float32 = loss.compute(Float32())
    except Exception:  # the user's statement, on values a replay never saw
        return None
    loss_as_is, value = _loss_tensor(as_is), _loss_tensor(in_float32)
    if watch.first is None or loss_as_is is None or value is None or bool(torch.isfinite(loss_as_is).all()) \
            or not bool(torch.isfinite(value).all()):
        return None
    name, site, detail, _ = watch.first
    evidence = [f"the failing step's loss computed again on its own values (`{loss.site.text}` at {loss.site.short}): "
                f"not finite, as in the run",
                f"first float16 overflow: {name} at {site} ({detail}, float16 tops out at {FLOAT16_MAX:g})",
                "... the same statement with every float16 operand in float32: "
                + (f"{float(value):.6g}" if value.numel() == 1 else "finite")]
    origin = _half_origin(ctx)
    if origin is not None:
        evidence.append(origin.evidence)
    climbing = loss_diverging(history(ctx)[0])
    evidence.append("the loss was climbing before the failure: the rate may drive the values there" if climbing
                    else "the loss was not climbing before the failure: the op overflowed float16 at the run's own rate")
    return ProbeOutcome(
        FAIL, f"float16 overflow: {name} at {site.short} goes past {FLOAT16_MAX:g}", evidence,
        origin.fix if origin is not None else "compute it in float32 (cast its inputs with .float()), or keep the model "
        "in float32 and train under torch.autocast(device_type, dtype=torch.float16) with a torch.amp.GradScaler",
        data={"confirmed": True, "fixed_loss": None, "definitive": not climbing})


def _loss_tensor(value: Any) -> torch.Tensor | None:
    """The loss in a statement's value: the value, or the first floating tensor of the tuple it returned."""
    return next((t for t in op_tensors([value]) if t.is_floating_point()), None)


def _overflowed_before(ctx: ProbeContext, entered: tuple[str, Site, torch.Tensor], evidence: list[str]) -> ProbeOutcome:
    """The step reads a float16 tensor that is already inf or NaN and that none of its ops made: it was
    computed before the step (statistics summed in float16 past 65504). Named with what holds it."""
    name, site, tensor = entered
    bad = int((~torch.isfinite(tensor)).sum())
    holders = _holders_of(tensor, ctx.run.user_frames())
    held = f" (`{holders[0][0]}`)" if holders else ""
    evidence.append(f"{display_name(name)} at {site} reads a float16 tensor{held} of shape {tuple(tensor.shape)} that is "
                    f"already non-finite in {bad} of {tensor.numel()} values: no op of the step made it")
    made = _assigned_in_class(*holders[0][1:]) if holders and holders[0][1] is not None else []
    evidence += [f"`{holders[0][0]}` is computed at {where}" for where in made[:2]]
    return ProbeOutcome(
        FAIL, f"float16 overflow before the step: {display_name(name)} at {site.short} reads a float16 tensor{held} "
        f"that holds inf/NaN ({bad} of {tensor.numel()} values), computed before the step past float16's "
        f"{FLOAT16_MAX:g}", evidence,
        f"compute{' ' + holders[0][0] if holders else ' it'}" + (f" (at {made[0].short})" if made else "") +
        " in float32: keep the data in float32 (or .float() before summing), float16 sums and squares pass 65504",
        data={"confirmed": None, "definitive": True})


def _holders_of(tensor: torch.Tensor, frames: list[Any]) -> list[tuple[str, Any, str]]:
    """(``owner.attribute`` or a variable, the owner, the attribute) for what holds ``tensor`` in the user's
    frames, one level of attributes deep; the innermost frame that has any."""
    found: list[tuple[str, Any, str]] = []
    for frame in frames:
        for name, value in list(frame_locals(frame).items()) + list(frame.f_globals.items()):
            if value is tensor:
                found.append((name, None, name))
            elif user_object(value):
                found += [(f"{name}.{attr}", value, attr) for attr, held in list(vars(value).items()) if held is tensor]
        if found:
            return found
    return found


def _assigned_in_class(owner: Any, attribute: str) -> list[Site]:
    """The lines of the owner's class file that assign ``self.attribute``."""
    try:
        path = inspect.getsourcefile(type(owner))
    except TypeError:
        return []
    return assignments(path, attribute, attribute=True) if path else []


def _bfloat16_rounding(ctx: ProbeContext, name: str, site: Site, detail: str, evidence: list[str],
                       data: dict) -> ProbeOutcome:
    """A bfloat16 op that is not finite from finite inputs: bfloat16 does not overflow before float32 does,
    so the value was rounded onto the op's boundary (a clamp at 1 - 1e-6 is 1, log1p(-1) is -inf). The fix
    computes that op in float32, inside the autocast region."""
    evidence.insert(0, f"first non-finite bfloat16 value: {name} at {site} ({detail}): bfloat16 keeps 8 bits "
                       "of mantissa, so a bound near 1 or 0 (1 - 1e-6, 1e-8) rounds onto the value that breaks the op")
    regions = in_files(ctx.run.facts.source_files, calls_named, {"autocast"})
    evidence += [f"bfloat16 comes from the autocast at {region}" for region in regions[:1]]
    return ProbeOutcome(
        FAIL, f"bfloat16 rounding: {name} at {site.short} gives a non-finite value from finite bfloat16 inputs",
        evidence, f"compute it in float32 at {site.short}: cast its input with .float() (autocast leaves the "
        "dtype of the ops it does not list as it finds it)", data={**data, "cause": "fp16_overflow"})


@dataclasses.dataclass(frozen=True)
class HalfOrigin:
    """Where the model was put in float16, and the fix that keeps its weights in float32."""

    evidence: str
    fix: str


# Lightning's Trainer precision that holds the weights themselves in float16 (a bare 16 means "16-mixed").
_TRUE_PRECISIONS = ("16-true",)


def _half_origin(ctx: ProbeContext) -> HalfOrigin | None:
    """A Lightning Trainer given a "-true" precision converts the model itself (its .half() runs inside
    trainer.fit, so the user's own line of it is the Trainer's precision argument); else the script's
    own .half() or .to(torch.float16)."""
    if ctx.run.lightning_module() is not None:
        for site, value in in_files(ctx.run.facts.source_files, keyword_values, {"Trainer"}, "precision"):
            if value.strip("'\"") in _TRUE_PRECISIONS:
                return HalfOrigin(
                    f"Lightning's Trainer puts the weights in float16: precision={value} at {site}",
                    f"pass precision='16-mixed' (float32 weights, float16 compute with a gradient scaler) or "
                    f"'bf16-mixed' to the Trainer at {site.short} instead of {value}")
    if ctx.run.facts.half_site:
        return HalfOrigin(f"the model is put in float16 by .half() at {ctx.run.facts.half_site}",
                          f"keep the model and the optimizer in float32 (drop model.half() (.half() at "
                          f"{ctx.run.facts.half_site.split(' ', 1)[0]})) and train under torch.autocast(device_type, "
                          "dtype=torch.float16) with a torch.amp.GradScaler, or use bfloat16")
    return _half_call(ctx)


# A weight's .data, .weight or .bias assigned its own .half() (CLIP's convert_weights:
# ``l.weight.data = l.weight.data.half()``), not an input's ``images.half()`` nor ``attn_weights.half()``.
WEIGHT_HALF = re.compile(r"(\.data|\.weight|\.bias)\s*=.*\.half\(\)")


def _half_call(ctx: ProbeContext) -> HalfOrigin | None:
    """Weights made float16 tensor by tensor (``p.data = p.data.half()`` in a helper: no module's .half() to
    hook): the script's own lines that assign a weight its .half(), where the model does hold float16 weights."""
    model = ctx.run.model
    if model is None or not any(p.dtype == torch.float16 for p in model.parameters()):
        return None
    sites = [site for site in in_files(ctx.run.facts.source_files, calls_named, {"half"})
             if WEIGHT_HALF.search(site.text)]
    if not sites:
        return None
    more = f" (and {len(sites) - 1} more line(s))" if len(sites) > 1 else ""
    return HalfOrigin(f"the weights are made float16 by .half() at {sites[0]}{more}",
                      f"keep the weights and the optimizer in float32 (remove the .half() at {sites[0].short}, or call "
                      "model.float() after it) and train under torch.autocast(device_type, dtype=torch.float16) with a "
                      "torch.amp.GradScaler, or use bfloat16")


def _half_loss(ctx: ProbeContext) -> ProbeOutcome | None:
    """Without a step to replay: the failing loss itself, kept at the break, is float16 and not finite.
    Past 65504 float16 is inf, so that is an overflow; the float16 values of the backward frame say
    which tensors were made half."""
    failure = ctx.run.failure
    loss = getattr(failure, "loss", None)
    if loss is None or loss.dtype != torch.float16 or bool(torch.isfinite(loss).all()):
        return None
    evidence = [f"the failing loss is float16 and {float(loss):g}: float16 tops out at {FLOAT16_MAX:g}, past it a "
                "value overflows to inf"]
    frame = getattr(failure, "held_frame", None)
    if frame is not None:
        halves = [name for name, value in frame.locals.items()
                  if isinstance(value, torch.Tensor) and value.dtype == torch.float16 and name != "loss"]
        if halves:
            evidence.append(f"float16 tensors in {frame.function} at {os.path.basename(frame.path)}:{frame.line}: "
                            + ", ".join(f"`{name}`" for name in halves[:8]))
    origin = _half_origin(ctx)
    if origin is not None:
        evidence.append(origin.evidence)
    evidence.append("not replayed in float32: the script's loop is gone and its loss cannot be rebuilt")
    return ProbeOutcome(
        FAIL, f"float16 overflow: the loss is float16 and went past {FLOAT16_MAX:g}", evidence,
        "compute in float32 (drop .half() / .to(torch.float16)) and use torch.autocast(device_type, "
        "dtype=torch.float16) with a torch.amp.GradScaler where speed matters, or use bfloat16",
        data={"confirmed": None})
