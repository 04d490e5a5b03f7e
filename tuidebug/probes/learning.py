"""A model that runs but never learns: the checks that name the cause, not the symptom.

Each check reads what the hooks observed over the run (``ctx.run.facts``, the step history) and,
where it can, proves the cause with a trial: the same steps replayed from the paused state with
one change (``zero_grad`` added, training mode on, a higher rate, the labels shuffled) against the
same steps as written. A check fails when its cause is present; its ``data["cause"]`` names the
verdict when the check covers several (the rate check: a schedule that decays it, or a rate too
low). The thresholds, and why:

- a learning rate has "collapsed" when it is below LR_COLLAPSE of its first value: a schedule
  meant to decay over epochs, stepped every batch, gets there within the first epoch;
- an update smaller than TINY_UPDATE of the weights' size moves nothing (healthy steps are about
  1e-3 of the weights); below SMALL_UPDATE the raised-rate trials decide;
- a trial "learns" when its loss ends below LEARNS of where it started, a clear fall over the few
  steps a trial runs; "no better" is within SAME of the other curve;
- a layer is dead when DEAD_SHARE of its units are zero for every example of the batch; a stack of at
  least MIN_SQUASHING sigmoid/tanh layers has vanishing gradients when the first weight's gradient is
  VANISHING times smaller than the last's;
- a run "learns slowly" when its loss falls stretch after stretch (``trials.steadily_falling``).
"""

from __future__ import annotations

import inspect
import math
import os
import re
import statistics
import sys
from typing import Any, Callable

import torch

from tuidebug.batches import map_tensors, tensors_in
from tuidebug.probe_api import (FAIL, INCONCLUSIVE, PASS, Adjust, LoopGone, NeedsLoop, NoPipeline, ProbeContext,
                                ProbeOutcome, optimizer_params, probe)
from tuidebug.probes.source import (
    assigned_name, assignment_before, assignment_target, assignments, backward_target, bias_inits, calls_named,
    call_argument, enclosing_function, forced_requires_grad, freezes, grad_off_block, grad_switched_off,
    guarded_steps, hand_updates, in_files, indexed_attributes, keyword_values, module_site, option_defaults,
    rate_argument_line, rate_assignments, rate_name, returns_nothing, rewrapped, shuffles, unsorted_listings,
    weight_inits, written_sites)
from tuidebug.probes.trials import fallen_to, finite, run_learns, steadily_falling
from tuidebug.probes.watch import OpWatch, op_tensors
from tuidebug.sites import Site, is_user_file

LR_COLLAPSE = 1e-3
# Three factor-0.1 decays (ReduceLROnPlateau's default) are exactly LR_COLLAPSE in decimal, a hair above it
# in binary floating point: the comparison allows for that rounding.
ROUNDING = 1 + 1e-9
# A script that ended with its rate below LR_COLLAPSE of its peak only for the last ANNEALED_SHARE of its steps
# ran an annealing schedule sized to the run, not a decay that left it training at nothing. A cosine sized to
# the run is below 1e-3 of its peak in its last 2.0% of steps, a linear decay to 0 in its last 0.1%; 5% leaves
# room for one sized a little shorter than the run. An ExponentialLR or a StepLR stepped every batch collapses
# early and stays (the corpus's per-batch schedules: half-way or sooner). The final stretch below counts, so
# that warm restarts sized to the run read as annealed too. A run still going (diagnose's window cut it) may
# train on at nothing: not judged so.
ANNEALED_SHARE = 0.05
TINY_UPDATE = 1e-6
# Healthy steps move the weights by about 1e-3 of their size; below SMALL_UPDATE (a decade under the low
# end of that) the rate is a suspect, and the raised-rate trials decide whether it is the cause.
SMALL_UPDATE = 1e-4
LEARNS = 0.8
SAME = 0.05
DEAD_SHARE = 0.9
IDENTICAL = 1e-6  # two trials whose losses agree this closely trained the same function
TRIAL_STEPS = 20
RATE_FACTORS = (10.0, 100.0, 1000.0)
# A rate proven too low while a schedule (or the script's own group["lr"] = ...) holds it under this share
# of the rate the optimizer was built with names the schedule's line as the fix: the user chose the built one.
HELD_BELOW = 0.1
SQUASHING = (torch.nn.Sigmoid, torch.nn.Tanh)
# Vanishing gradients need depth: a sigmoid or two (a gate, a squashed output) is common in
# healthy models and cannot shrink the gradient by decades on its own.
MIN_SQUASHING = 3
# Two decades between the last weight's gradient norm and the first's: healthy stacks stay within one
# (the helpers' deep-sigmoid case measured 1e4; a ReLU MLP of the corpus, about 1-10).
VANISHING = 100.0
VANISHING_STEPS = 40  # from a fresh initialisation: twice a trial's steps, as it starts from scratch
# A LambdaLR's factor: a warm-up starts near 0 and reaches 1 within its first thousands of steps; a
# lambda that returns a rate (0.001 * gamma ** epoch) stays below FACTOR_NEVER_NEAR_ONE over the whole
# horizon. Its replay runs longer than the other trials: the rate it restores is a usual one, and a
# usual rate needs more than TRIAL_STEPS steps to show a fall.
FACTOR_HORIZON = (0, 1, 10, 100, 1000, 10000)
FACTOR_NEVER_NEAR_ONE = 0.01
FACTOR_TRIAL_STEPS = 60
# The labels check trains on a few batches, each seen many times: enough steps at the script's own
# rate for a network to start memorising them, so that "learns nothing for another batch" is measured
# on a model that moved (over a dozen recent batches, each seen once or twice, nothing is memorised).
ALIGNMENT_BATCHES = 3
# The loss the checks rebuild (a torch.nn loss of the model's output and the batch) against the run's latest: for one
# objective they differ by the batch-to-batch spread and the few steps between the run's losses and the weights the
# trial starts from, which a loss that rises steadily (no swings) keeps small; beyond a factor of 2 the run's loss
# holds other terms (a KL, a penalty) than the one rebuilt. In the corpus the rule decides one case, a beta-VAE whose
# capacity target grows (11x apart), and no other run ends at loss_not_decreasing either way.
OTHER_OBJECTIVE = 2.0
ALIGNMENT_STEPS = 60
# A run "levels off" when the median of its last fifth is within LEVELLED of its middle fifth's: it fell
# to something and stays there. Misaligned labels give that shape (down to what the labels share, then
# flat); a run still learning keeps falling well past 5% from the middle of its window to its end.
LEVELLED = 0.05
SCHEDULES_PER_EPOCH = ("StepLR", "MultiStepLR", "ExponentialLR", "ReduceLROnPlateau", "CosineAnnealingLR",
                       "PolynomialLR", "LinearLR", "ConstantLR")
MAX_ACTIVATION_SITES = 2  # a model with one softmax for the loss and one for predictions: both are worth a look


def _trial(ctx: ProbeContext, adjust: Adjust, steps: int = TRIAL_STEPS, batches: list[Any] | None = None) -> list[float]:
    """``steps`` iterations from the paused state on the recent batches (cycled) with ``adjust``."""
    trainer = ctx.trainer
    batches = batches or trainer.recent_batches() or [trainer.prepare()]
    trainer.reset(ctx.break_state)
    losses = []
    for index in range(steps):
        if ctx.cancelled() or ctx.time_left() <= 0:
            break
        loss = trainer.step(batches[index % len(batches)], adjust).loss
        losses.append(loss if loss is not None else math.nan)
        if not math.isfinite(losses[-1]):
            break
    return losses


def _learns(losses: list[float]) -> bool:
    values = finite(losses)
    return len(values) >= 4 and _below(_tail(values), _head(values))


def _beats(trial: list[float], other: list[float]) -> bool:
    """``trial`` ends clearly below ``other`` (below LEARNS of its end): a change that did more than the
    steps as written would have done anyway."""
    values, others = finite(trial), finite(other)
    return not others or (bool(values) and _below(_tail(values), _tail(others)))


def _below(value: float, reference: float) -> bool:
    """``value`` is below ``reference`` by more than (1 - LEARNS) of its size: a clear fall, for a loss of
    either sign (``trials.fallen_to``)."""
    return value < fallen_to(reference, LEARNS)


def _head(values: list[float]) -> float:
    return statistics.median(values[: max(2, len(values) // 4)])


def _tail(values: list[float]) -> float:
    return statistics.median(values[-max(2, len(values) // 4):])


def _curve(losses: list[float]) -> str:
    values = finite(losses)
    if not values:
        return "no finite loss"
    return f"loss {values[0]:.4g} -> {values[-1]:.4g} over {len(losses)} steps"


def _names(names: list[str], limit: int = 6) -> str:
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


# --- the autograd path ---------------------------------------------------------------------

class GraphCut(OpWatch):
    """The first place where a value that carries a graph loses it: .detach(), .data, .item(),
    .numpy(), a torch.tensor(...) rebuilt from it or made a new leaf (requires_grad=True), or an op run under
    torch.no_grad()."""

    CUTS = {"detach", "detach_", ".data", "item", "numpy", "tolist", "tensor", "as_tensor", "from_numpy", "new_tensor"}
    NEW_LEAVES = {"tensor", "as_tensor"}

    def __init__(self) -> None:
        super().__init__()
        self.cut: tuple[str, Site] | None = None
        self.block: tuple[Site, Site] | None = None  # the user's ``with torch.no_grad():`` and the call inside it

    def visit(self, name: str, args: tuple, kwargs: dict, result: Any, site: Site) -> None:
        inputs = op_tensors(args)
        carried = any(t.requires_grad for t in inputs)
        if name in self.CUTS and carried:
            self.cut = (name, site)
        elif name in self.NEW_LEAVES and kwargs.get("requires_grad") and inputs:
            # torch.tensor(x > t, requires_grad=True): a leaf made from values in the step; backward ends at it
            self.cut = (f"torch.{name}(..., requires_grad=True)", site)
        elif carried and not torch.is_grad_enabled() and name not in ("__get__", "size", "dim"):
            self.cut = (f"{name} under torch.no_grad()", site)
            self.block = _grad_off_block()

    def done(self) -> bool:
        return self.cut is not None


class FlatOp(OpWatch):
    """The first op with a zero derivative everywhere (round, floor, ceil, sign, trunc) applied to a value
    that carries the weights' graph: backward goes through it and comes out zero."""

    FLAT = {"round", "floor", "ceil", "sign", "sgn", "trunc", "fix"}

    def __init__(self) -> None:
        super().__init__()
        self.found: tuple[str, Site] | None = None

    def visit(self, name: str, args: tuple, kwargs: dict, result: Any, site: Site) -> None:
        if name.split(".")[-1].rstrip("_") in self.FLAT and any(t.requires_grad for t in op_tensors(args)):
            self.found = (name.split(".")[-1], site)

    def done(self) -> bool:
        return self.found is not None


def _clipped_to_zero(ctx: ProbeContext, evidence: list[str]) -> ProbeOutcome | None:
    """Every gradient is zero and the script clips them with max_norm 0: clip_grad_norm_ scales them by
    max_norm / total_norm, so the clip itself zeroes them (a max_grad_norm of 0 meant as "no clipping")."""
    limits = {step.clip_at for step in ctx.history if step.clip_at is not None}
    if not limits or max(limits) > 0:
        return None
    site = ctx.run.facts.clip_site or "?"
    short = site.split(" ", 1)[0]
    evidence.append(f"the script clips the gradients with max_norm {max(limits):g} at {site}: clip_grad_norm_ "
                    "multiplies them by max_norm / total_norm, 0")
    return ProbeOutcome(FAIL, f"every gradient is scaled to zero: clip_grad_norm_ at {short} is given max_norm "
                        f"{max(limits):g}", evidence,
                        f"give clip_grad_norm_ at {short} a positive max_norm (1.0 is usual), or skip the clip when "
                        "no clipping is meant", data={"cause": "no_gradient_to_weights"})


def _flat_op(ctx: ProbeContext, evidence: list[str]) -> ProbeOutcome | None:
    """Every gradient is zero although the graph reaches the weights: an op of zero derivative on the path
    (fake quantisation by torch.round without a straight-through estimator) is the cut, named with its line."""
    watch = FlatOp()
    try:
        trainer = ctx.trainer
        trainer.reset(ctx.break_state)
        trainer.step(trainer.prepare(), Adjust(mode=lambda: watch, lr_scale=0.0))
    except (NeedsLoop, NoPipeline, LoopGone, RuntimeError, ValueError, TypeError):
        return None
    if watch.found is None:
        return None
    op, site = watch.found
    evidence.append(f"{op} at {site} has a zero derivative everywhere: the gradient that passes through it is 0")
    return ProbeOutcome(
        FAIL, f"no gradient reaches the weights: torch.{op} at {site.short} has a zero derivative, so every gradient "
        "behind it is 0", evidence, f"pass the gradient straight through the {op} at {site.short}: x + (torch.{op}(x) "
        "- x).detach() in place of torch." + f"{op}(x)", data={"cause": "no_gradient_to_weights", "site": str(site)})


def _grad_off_block() -> tuple[Site, Site] | None:
    """The user's ``with torch.no_grad():`` (or decorator) around the op in progress, innermost frame
    first, with that frame's line inside the block."""
    frame = sys._getframe(2)
    while frame is not None:
        path, line = frame.f_code.co_filename, frame.f_lineno
        block = grad_off_block(path, line) if is_user_file(path) else None
        if block is not None:
            return block, Site(path, line, frame.f_code.co_name)
        frame = frame.f_back
    return None


CUTS = re.compile(r"\.detach\(|\.data\b|\.item\(|\.numpy\(|torch\.(tensor|from_numpy)\(")  # a line that cuts the graph


def _graphless_loss_input(facts: Any) -> tuple[Any, str, Site | None] | None:
    """A loss call of the run, with gradients on, whose input has no graph, the variable it passes (``critic_value``
    of ``F.smooth_l1_loss(critic_value, critic_target)``) and the last line that assigns it before the call."""
    for call in facts.loss_calls.values():
        sites = written_sites(facts.source_files, call.site)
        if call.input_producer is not None or not call.grad_enabled or len(sites) != 1:
            continue
        name = call_argument(sites[0].text, 0)
        if name is None or not name.isidentifier():
            continue
        made = assignment_before(sites[0].path, name, sites[0].line)
        return call, name, made[0] if made is not None else None
    return None


@probe("learning.graph", prefers_copy=True)
def graph(ctx: ProbeContext) -> ProbeOutcome:
    facts = ctx.run.facts
    checks = [c for c in facts.grad_checks if c[0] > 1] or facts.grad_checks
    model = ctx.run.model
    trainable = sum(p.requires_grad for p in model.parameters()) if model is not None else facts.trainable
    # A parameter with no gradient at all (None) has no autograd path from the loss; a zero gradient
    # means a path that carries nothing (dead units, a zero_grad in the wrong place): another check's.
    reached = not checks or any(len(c[1]) < trainable for c in checks)
    evidence = [f"gradients at steps {', '.join(str(c[0]) for c in checks[-3:])}: "
                + "; ".join(f"{trainable - len(c[1])} of {trainable} parameters got one ({len(c[2])} of them zero)"
                            for c in checks[-3:])]
    if ctx.run.optimizers and not facts.backward_total:
        return ProbeOutcome(PASS, "no backward() ran at all: there is no graph to follow (see the step check)", evidence)
    if model is not None and not trainable:
        return ProbeOutcome(INCONCLUSIVE, "the model has no parameter that requires grad at the pause (a loop that "
                            "switches requires_grad off between phases): there is no path to weights to follow", evidence)
    missing = facts.partly_reached()
    # Some parameters get no gradient at all and the rest only zeros: nothing trains, and the ones with no
    # path are looked for first (a constraint computed under no_grad), dead units only when no cut is found.
    starved = bool(missing) and any(len(c[1]) + len(c[2]) >= trainable for c in checks)
    zero: ProbeOutcome | None = None  # the graph reaches the weights with zeros only: its outcome, unless a cut is found
    if facts.backward_without_graph:
        evidence.append(f"backward() was called on a loss that does not require grad at {facts.backward_without_graph}")
    elif facts.detached_return is not None and missing:
        return _detached_return(facts.detached_return, missing, evidence)
    elif facts.graph_cuts and missing:
        return _rebuilt_tensor(facts.graph_cuts[0], missing, evidence)
    elif facts.checkpoint_cuts and missing:
        return _checkpoint_without_grad(facts.checkpoint_cuts[0], missing, evidence)
    elif facts.wiped_grads:
        return ProbeOutcome(PASS, "backward reaches the weights, but a zero_grad() wipes the gradients before the step "
                            "(see the step check)", evidence)
    elif reached and not starved:
        outcome = _reached(ctx, checks, trainable, evidence)
        if outcome.status != PASS or not _all_zero(checks, trainable):
            return outcome
        # Every gradient zero and no flat op: the term that should carry them may be cut (a copy of the output made
        # a new leaf), the rest of the loss reaching the weights only through a zero weight. A cut found says so.
        zero = outcome
    watch = GraphCut()
    try:
        trainer = ctx.trainer
        trainer.reset(ctx.break_state)
        trainer.step(trainer.prepare(), Adjust(mode=lambda: watch))
    except NeedsLoop:
        # A loss re-made as a new tensor (torch.tensor(loss.item(), requires_grad=True)) is the cut itself; any
        # other cut is for diagnose's re-run of the script to find by replay.
        if zero is not None:
            return zero
        if not _forced_loss_grad(facts, rewrapped):
            raise
        evidence.append("no replay to find the cut (the script's loop had ended): its source names it")
    except (NoPipeline, LoopGone, RuntimeError, ValueError, TypeError) as exc:  # extra evidence: the verdict
        # stands on the gradients the run's own steps got
        evidence.append(f"could not replay a step to find where the graph breaks: {type(exc).__name__}: {exc}")
    if zero is not None and watch.cut is None:
        return zero
    if starved and watch.cut is None:
        return _reached(ctx, checks, trainable, evidence)
    if watch.cut is not None:
        what, site = watch.cut
        evidence.append(f"the graph is cut by {what} at {site}")
        summary = f"no gradient reaches the weights: the graph is cut by {what} at {site.short}"
        fix = f"remove the {what} at {site.short} (`{site.text}`): compute the loss from the model's output tensor itself"
        if what == "new_tensor":  # a copy made a new leaf: clone() copies and keeps the graph
            fix = f"at {site.short} keep the tensor itself, or copy it with .clone() (it keeps the graph), not .new_tensor(...)"
        if watch.block is not None:
            block, inside = watch.block
            evidence.append(f"`{block.text}` at {block.short} runs {inside} without gradients")
            summary = (f"no gradient reaches the weights: `{inside.text}` ({inside.short}) runs inside "
                       f"`{block.text}` at {block.short}")
            fix = (f"take `{inside.text}` ({inside.short}) out of the `{block.text}` block at {block.short} (to "
                   "freeze a module, set requires_grad=False on its parameters instead: gradients still pass through "
                   "it to the layers before)")
    elif (rebuilt := _loss_input_forced(facts)):
        site = rebuilt[0]
        evidence.append(f"`{site.text}` at {site.short} makes the loss's input require grad by hand: a tensor rebuilt "
                        "from values (a numpy or list round trip) is a new leaf, with no graph back to the model")
        summary = (f"no gradient reaches the weights: the loss's input is a new tensor made to require grad at "
                   f"{site.short} (`{site.text}`), cut from the model's output")
        fix = (f"compute the loss from the model's output tensor itself: drop the rebuild of its values and "
               f"`{site.text}` at {site.short}")
    else:
        summary = "no gradient reaches the weights: the loss does not depend on them through autograd"
        fix = ("compute the loss from the model's output itself: no .detach(), .item(), .data, numpy round trip or "
               "torch.no_grad() between the model and loss.backward()")
        graphless = _graphless_loss_input(facts)
        if graphless is not None:
            call, name, made = graphless
            evidence.append(f"{call.function} at {call.site} gets `{name}` with no graph (a leaf or a detached tensor)"
                            + (f", last assigned before it at {made}" if made else ""))
            summary += f": {call.function} at {call.site.split(' ', 1)[0]} gets `{name}` with no graph" + (
                f" (assigned at {made.short} `{made.text}`)" if made else "")
            if made and CUTS.search(made.text):
                fix = (f"at {made.short} (`{made.text}`) keep `{name}` the model's output tensor: no .detach(), .data, "
                       ".item() or numpy round trip there")
    # Grad mode is per thread: a copy replayed on another thread has it on, so the switch is read from the
    # source where the replay saw no cut at all, or a cut by grad mode with no block around it.
    switches = in_files(facts.source_files, grad_switched_off) \
        if watch.block is None and (watch.cut is None or watch.cut[0].endswith("under torch.no_grad()")) else []
    if switches:
        switch = switches[0]
        evidence.append(f"`{switch.text}` at {switch.short} turns gradients off for everything after it")
        summary = f"no gradient reaches the weights: `{switch.text}` at {switch.short} turns gradients off for the run"
        fix = f"remove `{switch.text}` at {switch.short} (put the code that needs it in a `with torch.no_grad():` block)"
    forced = _forced_loss_grad(facts)
    if forced:
        evidence.append(f"`{forced[0].text}` at {forced[0].short} lets backward() run on a loss without a graph: it "
                        "hides the cut, the weights still get no gradient")
        fix += f"; and drop `{forced[0].text}` at {forced[0].short}"
    return ProbeOutcome(FAIL, summary, evidence, fix, data={"cause": "no_gradient_to_weights",
                                                             "site": str(watch.cut[1]) if watch.cut else None})


def _reached(ctx: ProbeContext, checks: list[tuple], trainable: int, evidence: list[str]) -> ProbeOutcome:
    """The graph reaches the weights; when their gradients are all zero, an op that is flat where it is used."""
    all_zero = _all_zero(checks, trainable)
    flat = (_clipped_to_zero(ctx, evidence) or _flat_op(ctx, evidence)) if all_zero else None
    return flat or ProbeOutcome(PASS, "the loss's graph reaches the weights" + (
        ", but their gradients are zero (see the dead-units check)" if all_zero else ""), evidence)


def _all_zero(checks: list[tuple], trainable: int) -> bool:
    """At some checked step every parameter that got a gradient got a zero one."""
    return bool(checks) and any(len(c[2]) >= trainable - len(c[1]) for c in checks)


def _loss_input_forced(facts: Any) -> list[Site]:
    """The user's lines that make the first loss call's input require grad by hand (``outputs =
    torch.Tensor(values)``, then ``outputs.requires_grad = True``): a rebuilt tensor, cut from the model."""
    call = next(iter(facts.loss_calls.values()), None)
    name = call_argument(call.site.partition("`")[2].rstrip("`"), 0) if call is not None else None
    return in_files(facts.source_files, forced_requires_grad, name) if name and name.isidentifier() else []


def _forced_loss_grad(facts: Any, read: Callable[[str, str], list[Site]] = forced_requires_grad) -> list[Site]:
    """The user's lines that make the loss they call backward on require grad by hand (``read``: those of
    one kind only)."""
    name = backward_target((facts.backward_site or "").partition("`")[2].rstrip("`"))
    return in_files(facts.source_files, read, name) if name else []


# --- parameters without gradients ------------------------------------------------------------

@probe("learning.gradients", on_training_thread=True)
def gradients(ctx: ProbeContext) -> ProbeOutcome:
    facts = ctx.run.facts
    model = ctx.run.model
    if model is None:
        return ProbeOutcome(INCONCLUSIVE, "no model seen")
    checked = {n for n, p in model.named_parameters() if p.requires_grad}  # the model the gradient checks read
    model = ctx.run.trained_module() or model
    params = dict(model.named_parameters())
    frozen = [n for n, p in params.items() if not p.requires_grad]
    trainable = {n for n, p in params.items() if p.requires_grad}
    frozen_share = sum(params[n].numel() for n in frozen) / max(1, sum(p.numel() for p in params.values()))
    last = facts.grad_checks[-1] if facts.grad_checks else None
    evidence = [f"{len(frozen)} of {len(params)} parameter tensors have requires_grad=False "
                f"({frozen_share:.0%} of the weights)" + (f": {_names(frozen)}" if frozen else "")]
    if last is not None:
        evidence.append(f"at step {last[0]}: no gradient for {len(last[1])} ({_names(last[1])}), "
                        f"a zero one for {len(last[2])} ({_names(last[2])})")
    collapsed = ctx.run.facts.lr_collapsed_at
    head = facts.untrained_head()
    # A frozen output layer is also a recipe (LoRA and adapters keep a pretrained head fixed): it is the cause
    # only in a run that does not learn and whose gradients are reset (stale gradients explain it otherwise).
    if head is not None and all(name in frozen for name in head.params) and facts.never_reset() is None \
            and not run_learns(ctx, LEARNS):
        path = head.path
        where = in_files(facts.source_files, freezes)
        evidence.append(f"{head.module} makes the model's output and is frozen: its weights are the same at every "
                        f"check since step {head.step}")
        evidence += [f"requires_grad is turned off at {site}" for site in where]
        return ProbeOutcome(
            FAIL, f"the output layer {head.module} is frozen (requires_grad=False): the model's predictions cannot "
            "adapt to the task", evidence,
            (f"keep {path} out of the freeze at {where[0].short} (e.g. skip names starting with '{path}.'), and give "
             "its parameters to the optimizer" if where else
             f"turn it back on: for p in model.{path}.parameters(): p.requires_grad = True (before building the "
             "optimizer)"), data={"cause": "frozen_parameters", "frozen": frozen})
    if frozen and frozen_share >= 0.5 and run_learns(ctx, LEARNS):
        evidence.append("the run's own loss falls: the frozen part looks intended (a fixed backbone)")
    elif frozen and frozen_share >= 0.5 and collapsed is not None:
        # The trainable rest does not move either: its rate fell to nothing. The freeze may well be
        # intended (a fixed feature extractor); it cannot be what keeps the loss flat, the rate is.
        evidence.append(f"the trainable rest is stepped at a rate that collapsed at step {collapsed}: that, not the "
                        "freeze (a fixed backbone is a common recipe), keeps it from learning: see the rate check")
    elif frozen and frozen_share >= 0.5 and last is not None and checked and checked <= set(last[2]):
        # Gradients reach every trainable weight and are all zero (ReLUs dead for every example, saturated
        # units): unfreezing would give the frozen part zero gradients too. A fixed table (node features, a
        # pretrained embedding) is a common recipe; the dead-units check looks at why the gradients vanish.
        evidence.append(f"the {len(checked)} trainable parameter(s) get gradients, all zero: that, not the freeze, "
                        "keeps them from learning: see the dead-units check")
    elif frozen and frozen_share >= 0.5 and trainable and trainable <= set(facts.not_in_optimizer):
        # LoRA and adapters freeze the base on purpose: with the trainable rest in no optimizer, nothing moves it
        evidence.append(f"the {len(trainable)} trainable parameter(s) are in no optimizer: that, not the freeze (a "
                        "fixed base is a common recipe), keeps them from learning: see the optimizer check")
    elif frozen and frozen_share >= 0.5:
        owners = sorted({n.rsplit(".", 1)[0] for n in frozen})
        where = in_files(facts.source_files, freezes)
        evidence += [f"requires_grad is turned off at {site}" for site in where]
        return ProbeOutcome(
            FAIL, f"{frozen_share:.0%} of the weights are frozen (requires_grad=False): {_names(owners, 4)}", evidence,
            (f"pass freeze=False to from_pretrained at {where[0].short} (it freezes the table by default)"
             if where and "from_pretrained" in where[0].text else
             f"remove the freeze at {where[0].short} (or narrow it to the layers meant to stay fixed)" if where else
             f"turn them back on: for p in model.{owners[0]}.parameters(): p.requires_grad = True "
             "(freeze only the layers meant to stay fixed)" if owners[0] else
             "turn requires_grad back on: for p in model.parameters(): p.requires_grad = True"),
            data={"cause": "frozen_parameters", "frozen": frozen})
    return ProbeOutcome(PASS, "the trainable parameters get gradients" if not frozen else
                        f"a few parameters are frozen ({frozen_share:.0%} of the weights): not what stops learning",
                        evidence)


# --- the optimizer's parameters --------------------------------------------------------------

@probe("learning.optimizer", on_training_thread=True)
def optimizer(ctx: ProbeContext) -> ProbeOutcome:
    facts = ctx.run.facts
    model = ctx.run.model
    if model is None or not ctx.run.optimizers:
        return ProbeOutcome(INCONCLUSIVE, "no model or optimizer seen")
    facts.check_parameters(model, ctx.run.optimizers)
    evidence = [f"optimizer(s) created at: {', '.join(f'{kind} at {site}' for kind, site in facts.optimizer_sites)}"]
    made = facts.layers_in_forward()
    if made:
        evidence += [layer.text() for layer in made]
        where = f" (now at {made[0].site.short})" if made[0].site is not None else ""
        return ProbeOutcome(
            FAIL, f"a layer is built inside forward: {made[0].text()}", evidence,
            f"build the `{made[0].kind}` once in __init__ (self.layer = nn.{made[0].kind}(...)) and call it in "
            f"forward{where}: then model.parameters() and the optimizer hold its weights",
            data={"cause": "parameters_not_in_optimizer"})
    if facts.unregistered:
        attr = facts.unregistered[0].split(" ", 1)[0]
        evidence += [f"unregistered: {line}" for line in facts.unregistered]
        evidence += [f"`self.{attr.rsplit('.', 1)[-1]}` is assigned at {site}" for site in _attribute_sites(model, attr)]
        return ProbeOutcome(
            FAIL, f"layers kept in a plain Python container are never trained: {facts.unregistered[0]}", evidence,
            f"register them: self.{attr.rsplit('.', 1)[-1]} = nn.ModuleList([...]) (nn.ModuleDict for a dict), so that "
            "model.parameters() and the optimizer include them", data={"cause": "parameters_not_in_optimizer"})
    if facts.copied_parameters:
        return _copied_parameter(model, *facts.copied_parameters[0], evidence)
    part = facts.part_outside([step.loss for step in ctx.history]) if "part_not_in_optimizer" in facts.reported else None
    if part is not None:
        made = facts.optimizer_sites[0][1].split(" ", 1)[0] if facts.optimizer_sites else "where it is built"
        evidence.append(part.text())
        return ProbeOutcome(
            FAIL, f"{part.kind} is in no optimizer: the training forward runs it and backward gives its weights "
            "gradients, but nothing ever applies them", evidence,
            f"give the optimizer built at {made} {part.kind}'s parameters too: build it from the module that holds "
            "both parts (its .parameters()), or pass list(a.parameters()) + list(b.parameters())",
            data={"cause": "parameters_not_in_optimizer"})
    missing = facts.not_in_optimizer
    head = facts.untrained_head()
    if head is not None and all(name in missing for name in head.params):
        path = head.path
        evidence.append(f"{len(missing)} of {facts.trainable} trainable parameters are in no optimizer: {_names(missing)}")
        evidence.append(f"{head.module} makes the model's output; its weights are the same at every check since step "
                        f"{head.step}")
        made = facts.optimizer_sites[0][1].split(" ", 1)[0] if facts.optimizer_sites else "where it is built"
        return ProbeOutcome(
            FAIL, f"the output layer {head.module} is in no optimizer: its weights never change", evidence,
            f"give the optimizer built at {made} the parameters of {path} (a parameter group meant for them is "
            f"not passed): optimizer.add_param_group({{'params': model.{path}.parameters()}}), or build it from "
            "model.parameters()", data={"cause": "parameters_not_in_optimizer"})
    if missing:
        evidence.append(f"{len(missing)} of {facts.trainable} trainable parameters of the model are in no optimizer: "
                        f"{_names(missing)}")
        if facts.optimizer_foreign:
            evidence.append(f"the optimizer holds {facts.optimizer_foreign} tensor(s) that the model does not use: "
                            "it was built over another model instance")
        moved = facts.moved_outside_optimizer(model) if len(missing) < facts.trainable else []
        if moved:
            evidence.append(f"they change all the same ({_names(moved)}): updated outside the optimizer (an EMA, "
                            "a hand-written update), as intended")
        elif facts.optimizer_foreign or len(missing) == facts.trainable:
            return ProbeOutcome(
                FAIL, "the optimizer does not hold the parameters of the model being trained"
                + (" (it was built over another instance)" if facts.optimizer_foreign else ""), evidence,
                "build the optimizer from the model you train, after creating it (and after moving it to the device): "
                "optimizer = torch.optim.X(model.parameters(), ...)", data={"cause": "parameters_not_in_optimizer"})
    if facts.weights_still is not None:
        return _weights_unchanged(ctx, model, evidence)
    return ProbeOutcome(PASS, "the optimizer holds the model's trainable parameters", evidence)


def _weights_unchanged(ctx: ProbeContext, model: Any, evidence: list[str]) -> ProbeOutcome:
    """The model's weights stayed the same over steps that had gradients: name the optimizer that steps
    tensors other than the model's (an optimizer restored as a copy, or built over a copy of the model)."""
    facts = ctx.run.facts
    first, last = facts.weights_still
    own = {id(p) for p in model.parameters()}
    evidence.append(f"none of the model's {facts.trainable} trainable parameters changed from step {first} to step "
                    f"{last}, while the optimizer stepped with non-zero gradients")
    foreign = []
    stepped = facts.stepped_after(first)
    for optimizer in ctx.run.optimizers:
        if id(optimizer) not in stepped:  # not one of the steps in question
            continue
        name, site = facts.step_sites.get(id(optimizer), (type(optimizer).__name__, "?"))
        held = optimizer_params(optimizer)
        mine = sum(id(p) in own for p in held)
        evidence.append(f"{name} steps at {site}: it holds {len(held)} tensor(s), {mine} of them the model's")
        if held and not mine:
            foreign.append((name, site))
    if foreign:
        name, site = foreign[0]
        summary = (f"the model's weights never change: {name}, which steps at {site.split(' ', 1)[0]}, updates "
                   "copies of the weights, not the model's parameters")
    else:
        summary = "the model's weights never change although the optimizer steps with non-zero gradients"
    return ProbeOutcome(FAIL, summary, evidence,
                        "make the optimizer that steps hold the model's own parameters: build it from "
                        "model.parameters() after the model is final, and restore a checkpoint into that same "
                        "optimizer with load_state_dict (an optimizer stored inside another's state comes back as a "
                        "copy that steps copies)", data={"cause": "parameters_not_in_optimizer"})


def _copied_parameter(model: torch.nn.Module, attr: str, what: str, evidence: list[str]) -> ProbeOutcome:
    """A module keeps a copy of a Parameter (``nn.Parameter(t).to(dtype)``, ``.cuda()``, ``.double()``) as a plain
    attribute: the copy is used in forward and passes its gradient to the Parameter, which no module registers
    and no optimizer holds."""
    sites = _attribute_sites(model, attr)
    name = attr.rsplit(".", 1)[-1]
    evidence.append(f"`{attr}` is {what}: the Parameter behind it is in no module and no optimizer")
    evidence += [f"`self.{name}` is assigned at {site}" for site in sites]
    where = f" at {sites[0].short}" if sites else ""
    return ProbeOutcome(
        FAIL, f"`{attr}` is a copy of a Parameter, not the Parameter: the optimizer never sees it and its values never "
        "change", evidence,
        f"convert inside the Parameter{where}: self.{name} = nn.Parameter(tensor.to(...)) (not nn.Parameter(tensor)"
        ".to(...)), or move the whole model with model.to(...) after building it",
        data={"cause": "parameters_not_in_optimizer"})


def _attribute_sites(model: torch.nn.Module, attr: str) -> list[Site]:
    """Where the class of the module holding ``attr`` assigns it (``self.layers = [...]``)."""
    owner_path, _, name = attr.rpartition(".")
    owner = model.get_submodule(owner_path) if owner_path else model
    try:
        path = inspect.getsourcefile(type(owner))
    except TypeError:
        return []
    return [Site(path, site.line, "") for site in assignments(path, name)] if path else []


# --- gradients reset ------------------------------------------------------------------------

@probe("learning.zero_grad")
def zero_grad(ctx: ProbeContext) -> ProbeOutcome:
    facts = ctx.run.facts
    checks = facts.stale_grads[-6:]
    if not checks:
        return ProbeOutcome(INCONCLUSIVE, "no step was checked for gradients left from the step before")
    stale = [step for step, was in checks if was]
    evidence = [f"gradients already non-zero at the first backward of steps {stale or 'none'} "
                f"(checked {', '.join(str(s) for s, _ in checks)})"]
    if facts.never_reset() is None:  # an early check may see a zero gradient (LoRA's A while B is 0): the latest decide
        return ProbeOutcome(PASS, "the gradients are reset before each step's backward", evidence)
    try:
        as_written = _trial(ctx, Adjust())
        with_reset = _trial(ctx, Adjust(zero_grad=True))
    except (NeedsLoop, NoPipeline, LoopGone) as gone:
        # What the run's own steps showed stands: their gradients held the previous step's at every check.
        evidence.append(f"no replay to confirm it: {str(gone) or 'the script ended before the check could borrow its loop'}")
        as_written = with_reset = []
    else:
        evidence += [f"replay of {len(as_written)} steps as written: {_curve(as_written)}",
                     f"... with the gradients reset before each backward: {_curve(with_reset)}"]
    confirmed = _learns(with_reset) and (not _learns(as_written) or _tail(finite(with_reset) or [math.inf])
                                         < _tail(finite(as_written) or [math.inf]))
    where = f" before loss.backward() ({facts.backward_site})" if facts.backward_site else " before loss.backward()"
    reset = "optimizer.zero_grad()" if facts.optimizers <= 1 else "each optimizer's zero_grad()"
    fix = f"call {reset}{where} in every iteration"
    if ctx.run.hand_updated_parameters():  # no optimizer: the loop updates its weights itself
        updates = in_files(facts.source_files, hand_updates)
        evidence += [f"the weights are updated by hand at {site}" for site in updates[:2]]
        fix = ("zero each weight's gradient after the update by hand" + (f" at {updates[0].short}" if updates else "")
               + ": `w.grad.zero_()` (or `w.grad = None`) for every weight, in every iteration")
    return ProbeOutcome(FAIL, "gradients are never reset: every step adds to the gradients of all the steps before",
                        evidence, fix, data={"cause": "missing_zero_grad", "confirmed": confirmed})


def _detached_return(cut: tuple[str, Site], missing: list[str], evidence: list[str]) -> ProbeOutcome:
    """Some parameters never get a gradient, and the module that holds them returns its output cut from the
    graph (``.data``, ``.detach()``): the loss computed from that output sends nothing back into the module."""
    module, site = cut
    evidence += [f"{', '.join(missing[:6])} got no gradient at the last checks, while the other parameters did",
                 f"{module}'s forward returns `{site.text}` at {site}"]
    return ProbeOutcome(FAIL, f"no gradient reaches {module} ({', '.join(missing[:3])}): its forward returns its output "
                        f"cut from the graph at {site.short}", evidence,
                        f"at {site.short}, return the tensor itself (drop the `.data` / `.detach()`): the loss computed "
                        f"from {module}'s output then trains it", data={"cause": "no_gradient_to_weights"})


def _rebuilt_tensor(cut: tuple[Site, str], missing: list[str], evidence: list[str]) -> ProbeOutcome:
    """Some parameters never get a gradient, and a line rebuilds a tensor from tensors that require grad:
    the values go on, their graph does not (an RL loop's stored log-probabilities made into one tensor)."""
    site, message = cut
    name = assignment_target(site)
    evidence += [f"{', '.join(missing[:6])} got no gradient at the last checks, while the other parameters did",
                 f"torch warned at {site}: {message}"]
    what = f"`{name}`" if name else "the tensor"
    return ProbeOutcome(FAIL, f"no gradient reaches {', '.join(missing[:3])}: {what} is rebuilt at {site.short} from "
                        "tensors that require grad, which keeps their values and drops their graph", evidence,
                        f"at {site.short}, build {what} from the tensors themselves (torch.stack(...) or torch.cat(...)), "
                        "not torch.tensor(...): a copy has no graph back to the weights",
                        data={"cause": "no_gradient_to_weights"})


def _checkpoint_without_grad(cut: tuple[Site, str], missing: list[str], evidence: list[str]) -> ProbeOutcome:
    """Some parameters never get a gradient, and a reentrant ``checkpoint`` was given inputs none of which
    requires grad (a frozen stem before trainable blocks): its output has no graph back to the weights inside."""
    site, message = cut
    evidence += [f"{', '.join(missing[:6])} got no gradient at the last checks, while the other parameters did",
                 f"torch warned at {site}: {message}"]
    return ProbeOutcome(
        FAIL, f"no gradient reaches {', '.join(missing[:3])}: the checkpoint at {site.short} is reentrant and none of "
        "its inputs requires grad, so the weights inside it get no gradient", evidence,
        f"at {site.short} pass use_reentrant=False to checkpoint (or make its input require grad first: "
        "x.requires_grad_())", data={"cause": "no_gradient_to_weights"})


# --- backward and step ------------------------------------------------------------------------

@probe("learning.step", on_training_thread=True)
def step(ctx: ProbeContext) -> ProbeOutcome:
    facts = ctx.run.facts
    history = ctx.history
    evidence = [f"{facts.backward_total} backward pass(es), {len(history)} recorded step(s), "
                f"{len(ctx.run.optimizers)} optimizer(s) stepping"]
    if facts.optimizer_sites:
        evidence.append("optimizer(s) created: " + ", ".join(f"{k} at {s}" for k, s in facts.optimizer_sites))
    if facts.backward_total and not ctx.run.optimizers and not facts.manual_updates:
        created = f" (the {facts.optimizer_sites[0][0]} created at {facts.optimizer_sites[0][1]} never steps)" \
            if facts.optimizer_sites else ""
        scheduled = [c for c in facts.schedulers.values() if c.calls]
        if scheduled:
            evidence.append(f"{scheduled[0].kind}.step() is called at {scheduled[0].site} ({scheduled[0].calls} times), "
                            "but optimizer.step() never is")
            fix = (f"call optimizer.step() before scheduler.step() ({scheduled[0].site.split(' ')[0]}): the scheduler "
                   "only changes the rate, the optimizer applies the gradients")
        else:
            fix = f"call optimizer.step() after loss.backward() ({facts.backward_site}) in every iteration"
        guarded = in_files(facts.source_files, guarded_steps)
        if guarded and not scheduled:
            call, condition = guarded[0]
            evidence.append(f"the script calls {call} only under {condition}: that condition never held in "
                            f"{facts.backward_total} backward passes")
            fix = (f"fix the condition at {condition} so that it holds every few iterations (for accumulation: "
                   "`if (i + 1) % N == 0:`): the step under it never ran")
        return ProbeOutcome(FAIL, f"backward() runs but no optimizer step follows{created}", evidence, fix,
                            data={"cause": "missing_optimizer_step"})
    if facts.wiped_grads:
        return _wiped_before_step(ctx, evidence)
    if facts.idle_optimizer is not None:
        return _idle_optimizer(facts.idle_optimizer, evidence)
    if not facts.backward_total and not ctx.run.optimizers and facts.unused_loss_sites:
        return _loss_dropped(facts, evidence)
    if ctx.run.optimizers and not facts.backward_total:
        silent = _training_step_without_loss(ctx)
        if silent is not None:
            evidence.append(f"training_step ({silent}) has no `return` with a value: Lightning skips backward and "
                            "the optimizer's update for a step that returns None")
            return ProbeOutcome(FAIL, f"training_step at {silent.short} returns no loss: Lightning skips backward and "
                                "the update at every step", evidence,
                                f"return the loss at the end of training_step ({silent.short}): `return loss`",
                                data={"cause": "missing_optimizer_step"})
        return ProbeOutcome(FAIL, "optimizer.step() runs but no backward() computes gradients", evidence,
                            "call loss.backward() before optimizer.step()", data={"cause": "missing_optimizer_step"})
    return ProbeOutcome(PASS, "backward and the optimizer step both run", evidence)


def _idle_optimizer(idle: Any, evidence: list[str]) -> ProbeOutcome:
    """An optimizer made for parameters that get gradients, never stepped while another steps (``IdleOptimizer``):
    its parameters never change, which the agent measured, so no trial is needed to prove it."""
    evidence.append(idle.text())
    assigned = re.search(r"`\s*([A-Za-z_][\w.]*)\s*=", idle.made)
    call = f"{assigned.group(1)}.step()" if assigned else f"the {idle.kind}'s step()"
    return ProbeOutcome(
        FAIL, f"the {idle.kind} created at {idle.made.split(' ')[0]} never steps: the parameters it holds get gradients "
        "and never change", evidence,
        f"call {call} after the backward that computes its parameters' gradients ({', '.join(idle.names[:2])}); "
        "check each optimizer.step() in the loop steps the optimizer of the loss just backpropagated",
        data={"cause": "missing_optimizer_step", "definitive": True})


def _loss_dropped(facts: Any, evidence: list[str]) -> ProbeOutcome:
    """Losses computed in training mode and dropped: no backward, no step (the update is in code the
    loop never calls)."""
    made, *callers = facts.unused_loss_sites
    called = f", called from {callers[0]}" if callers else ""
    evidence.append(f"the loss was computed {facts.losses_without_backward} times in training mode at {made}{called}: "
                    "no backward() ran on any of them")
    loop = (callers or [made])[0].split(" ")[0]
    return ProbeOutcome(FAIL, "the loop computes the loss but never updates the model: no backward() and no optimizer "
                        "step run", evidence,
                        f"call loss.backward() and optimizer.step() on the loss the loop at {loop} computes, in every "
                        "iteration (or call the code that does)", data={"cause": "missing_optimizer_step"})


def _training_step_without_loss(ctx: ProbeContext) -> Site | None:
    """A LightningModule under automatic optimization whose training_step never returns a value."""
    module = ctx.run.lightning_module()
    method = getattr(type(module), "training_step", None) if module is not None else None
    if method is None or not getattr(module, "automatic_optimization", False):
        return None
    return returns_nothing(method)


def _wiped_before_step(ctx: ProbeContext, evidence: list[str]) -> ProbeOutcome:
    """zero_grad() between backward and step: the step finds no gradient. The replay on a copy runs
    the usual order (zero_grad, backward, step): the loss falls when the order is the cause."""
    facts = ctx.run.facts
    steps = [s for s, _, _ in facts.wiped_grads]
    _, zeroed, stepped = facts.wiped_grads[-1]
    evidence.append(f"zero_grad() at {zeroed} ran after loss.backward() ({facts.backward_site}) and before the "
                    f"optimizer step at {stepped}, at steps {', '.join(map(str, steps[-6:]))}: the step found no gradient")
    reordered = _trial(ctx, Adjust())
    evidence.append(f"replay on a copy with zero_grad() before backward(): {_curve(reordered)}")
    return ProbeOutcome(
        FAIL, f"optimizer.step() applies no gradient: zero_grad() at {zeroed.split(' ')[0]} wipes them after backward()",
        evidence, f"move the zero_grad() at {zeroed.split(' ')[0]} before loss.backward() (or after optimizer.step())",
        data={"cause": "missing_optimizer_step", "confirmed": _learns(reordered)})


# --- the learning rate applied ----------------------------------------------------------------

def _rate_curve(history: list[Any]) -> list[tuple[int, float]]:
    return [(s.step, s.lrs[0]) for s in history if s.lrs]


WARMUP_HORIZON = 1_000_000  # the furthest step at which a schedule's own function is asked for its peak


def _unfinished_warmup(facts: Any, warmup: str, steps: int, evidence: list[str]) -> ProbeOutcome:
    """The run ended with its rate still rising, far below the rate set: where the schedule was made and, from
    its own function (LambdaLR's), the step at which it would have reached its peak."""
    evidence.append(warmup)
    calls = next((c for c in facts.schedulers.values() if c.scheduler is not None and c.scheduler() is not None), None)
    made = next((site for kind, site in facts.scheduler_sites if calls is not None and kind == calls.kind), None)
    peak = _schedule_peak(calls.scheduler(), steps) if calls is not None else None
    if made:
        evidence.append(f"{calls.kind} created at {made}")
    # a schedule made by a helper or a subclass: the user's line is the call of it
    line = made.rpartition("(called from ")[2].split(" ")[0] if made else None
    name = f"{calls.kind} (made at {line})" if line else "the schedule"
    # A schedule sized in batches ends near the run's optimizer steps (within a factor of 2: a run cut short, an
    # epoch's batches rounded), one sized in epochs near its epochs: stepped once an epoch, the first never peaks.
    end = _schedule_end(calls.scheduler(), peak, steps) if peak is not None else None
    if end is not None and 1 <= calls.calls < peak and 2 * calls.calls <= steps and steps / 2 <= end <= 2 * steps:
        evidence.append(f"its own function reaches its peak at its call {peak} and ends at its call {end}, about the "
                        f"run's {steps} optimizer steps; {calls.kind}.step() ran {calls.calls} times, at {calls.site}: "
                        "once an epoch")
        return ProbeOutcome(
            FAIL, f"the learning rate never leaves the warm-up: {name} counts its warm-up in batches (it peaks at its "
            f"call {peak}) and is stepped once an epoch ({calls.calls} calls in {steps} steps)", evidence,
            f"call scheduler.step() after every optimizer.step() (in the batch loop), not once an epoch at "
            f"{calls.site.split(' ')[0]}", data={"cause": "learning_rate_too_low"})
    if peak is not None:
        evidence.append(f"its own function reaches its peak at step {peak}; the run made {steps} steps")
    return ProbeOutcome(
        FAIL, f"the learning rate never leaves the warm-up: the run ended at step {steps} with the rate still rising"
        + (f"; {name} peaks at step {peak}" if peak is not None else f" ({name})"), evidence,
        f"shorten the warm-up of {name} to a few percent of the run's {steps} steps (or train for longer): every step "
        "so far ran at a small share of the rate set", data={"cause": "learning_rate_too_low"})


def _schedule_function(scheduler: Any) -> Callable[[int], Any] | None:
    """The function a LambdaLR / MultiplicativeLR applies to the first param group (its factor at a step), else None."""
    functions = getattr(scheduler, "lr_lambdas", None)
    return functions[0] if functions and callable(functions[0]) else None


def _schedule_horizon(steps: int) -> int:
    """How far a schedule's function is searched: a hundred times the run's length, at most WARMUP_HORIZON."""
    return min(WARMUP_HORIZON, 100 * max(1, steps))


def _schedule_end(scheduler: Any, peak: int, steps: int) -> int | None:
    """The first call from its ``peak`` on at which a LambdaLR's function reaches 0 (a linear decay's end, which
    ``get_linear_schedule_with_warmup`` puts at the training steps it is given), searched as far as the peak is;
    None when it never does."""
    function = _schedule_function(scheduler)
    if function is None:
        return None
    try:
        return next((step for step in range(peak, _schedule_horizon(steps)) if float(function(step)) <= 0), None)
    except Exception:  # the user's function, asked for steps it was never meant to see
        return None


def _schedule_peak(scheduler: Any, steps: int) -> int | None:
    """The first step at which a LambdaLR's function reaches its largest value, searched to a hundred times the
    run's length (or WARMUP_HORIZON); None for other schedules, or a function that raises."""
    function = _schedule_function(scheduler)
    if function is None:
        return None
    try:  # max gives the first step of the largest value
        return max(range(_schedule_horizon(steps)), key=lambda step: float(function(step)))
    except Exception:  # the user's function, asked for steps it was never meant to see
        return None


@probe("learning.rate", prefers_copy=True)
def rate(ctx: ProbeContext) -> ProbeOutcome:
    facts = ctx.run.facts
    curve = _rate_curve(ctx.history)
    if not curve and ctx.run.hand_updated_parameters():
        return _hand_update_rate(ctx)
    if not curve:
        return ProbeOutcome(INCONCLUSIVE, "no learning rate seen (no optimizer step)")
    first, last = curve[0][1], curve[-1][1]
    evidence = [f"learning rate: {first:.3g} at step {curve[0][0]}, {last:.3g} at step {curve[-1][0]}"]
    warmup = facts.unfinished_warmup()
    if warmup is not None:
        return _unfinished_warmup(facts, warmup, curve[-1][0], evidence)
    peak_at = max(range(len(curve)), key=lambda i: curve[i][1])
    peak_step, peak = curve[peak_at]
    if first == 0 and peak > 0:  # a warm-up from 0: the rate's start is where it peaked
        first, curve = peak, curve[peak_at:]
        evidence.append(f"it warmed up from 0 to {first:.3g} at step {curve[0][0]}")
    steps = max(1, curve[-1][0])
    schedules = [f"{c.kind} stepped {c.calls} times in {steps} steps at {c.site}" for c in facts.schedulers.values()]
    evidence += schedules
    projected = [(c, c.collapse_step()) for c in facts.schedulers.values() if c.calls >= 0.8 * steps]
    projected = [(c, at) for c, at in projected if at is not None and at <= (facts.epoch_length or 1000)]
    if projected and not (first > 0 and last < LR_COLLAPSE * ROUNDING * first):
        calls, at = projected[0]
        evidence.append(f"{calls.kind}'s own settings put the rate below {LR_COLLAPSE:g} of its start at step {at}"
                        + (f", inside the first epoch of {facts.epoch_length} batches" if facts.epoch_length else ""))
        return ProbeOutcome(
            FAIL, f"the learning rate decays to nothing: {calls.kind} is stepped every batch ({calls.site.split(' ')[0]})"
            f" and falls below {LR_COLLAPSE:g} of its start by step {at}", evidence,
            f"step {calls.kind} once per epoch, not every batch: move scheduler.step() ({calls.site}) out of the batch "
            "loop", data={"cause": "lr_schedule_decay", "collapsed_at": at})
    peak_scale: float | None = None  # the replays' rates over the base rates: the peak's, where it annealed with the run
    last_step = curve[-1][0]
    tail = _final_stretch_below(curve, LR_COLLAPSE * ROUNDING * peak) if peak > 0 else None
    if tail is not None and facts.script_ended and steps - tail <= ANNEALED_SHARE * steps:
        annealed = (f"the schedule anneals the rate to {last:.3g} with the run's end (below {LR_COLLAPSE:g} of its peak "
                    f"{peak:.3g}, at step {peak_step}, from step {tail} of {steps})")
        base = _base_rate(ctx)
        if not base:
            return ProbeOutcome(INCONCLUSIVE, f"{annealed}, and no scheduler's base rate is known: the peak cannot be "
                                "replayed", evidence)
        evidence.append(f"{annealed}: the rate is judged at its peak")
        peak_scale, last, last_step = peak / base, peak, peak_step

    def at_rate(factor: float = 1.0, measure_update: bool = False) -> Adjust:
        """A replay at ``factor`` times the run's rate: its last one, or its peak where it annealed."""
        return Adjust(lr_scale=(peak_scale or 1.0) * factor, from_base_rates=peak_scale is not None,
                      measure_update=measure_update)

    if first > 0 and last < LR_COLLAPSE * ROUNDING * first:
        collapsed = next(s for s, lr in curve if lr < LR_COLLAPSE * ROUNDING * first)
        per_step = [c for c in facts.schedulers.values() if c.calls >= 0.5 * steps]
        evidence.append(f"the rate fell below {LR_COLLAPSE:g} of its start at step {collapsed}")
        zeroed = next((c for c in facts.schedulers.values() if c.gamma() == 0), None)
        if zeroed is not None:
            made = next((site for kind, site in facts.scheduler_sites if kind == zeroed.kind), zeroed.site)
            evidence.append(f"{zeroed.kind} has gamma=0 (created at {made}): its first decay sets the rate to 0")
            return ProbeOutcome(
                FAIL, f"the learning rate becomes 0: {zeroed.kind} with gamma=0 ({made.split(' ')[0]}) zeroes it at its "
                f"first decay (step {collapsed})", evidence,
                f"give {zeroed.kind} a gamma between 0 and 1 at {made.split(' ')[0]} (0.1 divides the rate by 10 at each "
                "decay; 1 keeps it), or drop the scheduler", data={"cause": "lr_schedule_decay", "collapsed_at": collapsed})
        if per_step:
            where = per_step[0]
            made = next((site for kind, site in facts.scheduler_sites if kind == where.kind), None)
            if made:
                evidence.append(f"{where.kind} created at {made}")
            fix = (f"step {where.kind} once per epoch, not every batch: move scheduler.step() ({where.site}) out of "
                   "the batch loop" if where.kind in SCHEDULES_PER_EPOCH else
                   f"size {where.kind}" + (f" (created at {made})" if made else "") +
                   " for per-batch steps: its step_size / total steps count batches (the run made "
                   f"{curve[-1][0]}), not epochs")
            return ProbeOutcome(FAIL, f"the learning rate decays to nothing: {first:.3g} -> {last:.3g} by step "
                                f"{curve[-1][0]} ({where.kind} stepped every batch)", evidence, fix,
                                data={"cause": "lr_schedule_decay", "collapsed_at": collapsed})
        by_hand = _rate_set_by_hand(evidence)
        return ProbeOutcome(FAIL, f"the learning rate falls to nothing: {first:.3g} -> {last:.3g}" + (
            f" (set by hand at {by_hand})" if by_hand else ""), evidence,
            f"decay the rate once per epoch, not every batch: check the condition around {by_hand}" if by_hand else
            "check the schedule: the rate should stay within a few decades of its start while training",
            data={"cause": "lr_schedule_decay", "collapsed_at": collapsed})
    trainer = ctx.trainer
    trainer.reset(ctx.break_state)
    measured = trainer.step(trainer.prepare(), at_rate(measure_update=True))
    ratio = measured.update_ratio
    if measured.grad_norm == 0:
        return ProbeOutcome(PASS, "the gradients are all zero: no learning rate would move the weights (not the "
                            "rate's fault: see the dead-units check)", evidence)
    evidence.append(f"one step moves the weights by {ratio:.2g} of their size" if ratio is not None else
                    "the size of a step could not be measured")
    if last > 0 and ratio is None:
        return ProbeOutcome(INCONCLUSIVE, "the size of a step could not be measured (no gradient to apply?)", evidence)
    if last > 0 and ratio >= SMALL_UPDATE:
        return ProbeOutcome(PASS, f"the rate ({last:.3g}) moves the weights by {ratio:.2g} of their size a step", evidence)
    origin = rate_origin(facts)
    evidence += origin
    found = _schedule_factor(ctx, evidence) if peak_scale is None else None  # read at the rate now: the annealed one
    if found is not None:
        return _rate_not_factor(ctx, evidence, last, *found)
    as_written = _trial(ctx, at_rate())
    evidence.append(f"replay as written{' at the peak rate' if peak_scale is not None else ''}: {_curve(as_written)}")
    for factor in RATE_FACTORS:
        if last == 0:
            break
        raised = _trial(ctx, at_rate(factor))
        evidence.append(f"... at lr x{factor:g} ({last * factor:.3g}): {_curve(raised)}")
        if _learns(raised) and _beats(raised, as_written):
            held = _held_below_built(ctx, last, last_step, factor, evidence)
            if held is not None:
                return held
            passed = _rate_passed(facts)
            return ProbeOutcome(FAIL, f"the learning rate {last:.3g} is too low: the loss falls at {last * factor:.3g}",
                                evidence, f"raise the learning rate to about {last * factor:.3g}"
                                + (f" where it is passed, at {passed}" if passed else ""),
                                data={"cause": "learning_rate_too_low", "confirmed": True})
    if last == 0:
        where = f" ({origin[-1].split(': ', 1)[-1]})" if origin else ""
        return ProbeOutcome(FAIL, f"the learning rate is 0: no step moves the weights{where}", evidence,
                            "set a learning rate above 0 (1e-3 for Adam, 1e-2 to 1e-1 for SGD are usual starts)"
                            + (f": check {origin[-1].split(': ', 1)[-1]}" if origin else ""),
                            data={"cause": "learning_rate_too_low"})
    if ratio >= TINY_UPDATE:
        return ProbeOutcome(PASS, f"the steps are small ({ratio:.2g} of the weights), but higher rates did not help "
                            "either: not the cause", evidence)
    return ProbeOutcome(FAIL, f"the steps are tiny ({ratio:.2g} of the weights), and higher rates did not help either",
                        evidence, "raise the learning rate", data={"cause": "learning_rate_too_low", "confirmed": False})


def _hand_update_rate(ctx: ProbeContext) -> ProbeOutcome:
    """A loop that updates its weights by hand has no optimizer rate to read: the size of its update is
    measured on a replayed iteration, and the update is scaled up in the trials instead of a rate."""
    where = in_files(ctx.run.facts.source_files, hand_updates)
    evidence = ["the loop updates its weights by hand (no optimizer)"] + [f"the update is at {site}" for site in where]
    origin, option = _hand_rate_origin(ctx, where[0]) if where else ([], None)
    evidence += origin
    trainer = ctx.trainer
    trainer.reset(ctx.break_state)
    ratio = trainer.step(trainer.prepare(), Adjust(measure_update=True)).update_ratio
    if ratio is None:
        return ProbeOutcome(INCONCLUSIVE, "the size of a hand-written update could not be measured", evidence)
    evidence.append(f"one iteration moves the weights by {ratio:.2g} of their size")
    if ratio >= SMALL_UPDATE:
        return ProbeOutcome(PASS, f"the hand-written update moves the weights by {ratio:.2g} of their size a step",
                            evidence)
    evidence.append(f"replay as written: {_curve(_trial(ctx, Adjust()))}")
    at = f" at {where[0].short} (`{where[0].text}`)" if where else ""
    raise_it = (f"raise --{option[0]} (default {option[1]} at {option[2].short})" if option else
                f"raise the learning rate of the update{at}")
    for factor in RATE_FACTORS:
        raised = _trial(ctx, Adjust(lr_scale=factor))
        evidence.append(f"... with the update x{factor:g}: {_curve(raised)}")
        if _learns(raised):
            return ProbeOutcome(
                FAIL, f"the learning rate is too low: the hand-written update moves the weights by {ratio:.2g} of their "
                f"size a step; {factor:g} times larger, the loss falls", evidence,
                f"{raise_it} about {factor:g}-fold",
                data={"cause": "learning_rate_too_low", "confirmed": True})
    if ratio >= TINY_UPDATE:
        return ProbeOutcome(PASS, f"the hand-written steps are small ({ratio:.2g} of the weights), but larger ones did "
                            "not help either: not the cause", evidence)
    return ProbeOutcome(FAIL, f"the hand-written steps are tiny ({ratio:.2g} of the weights), and larger ones did not "
                        "help either", evidence, raise_it,
                        data={"cause": "learning_rate_too_low", "confirmed": False})


def _hand_rate_origin(ctx: ProbeContext, update: Site) -> tuple[list[str], tuple[str, str, Site] | None]:
    """Where the rate of a hand-written update comes from: the calls that pass it by name
    (``LOMO(model, lr=args.learning_rate)``) and the command-line option's default behind them."""
    name = rate_name(update.path, update.line)
    if name is None:
        return [], None
    lines, option = [], None
    for site, value in in_files(ctx.run.facts.source_files, keyword_values, None, name):
        if value.split(".")[-1] == name:
            continue  # passed on under its own name: the call that names its source is the one to show
        lines.append(f"the update's rate `{name}` is passed as {name}={value} at {site}")
        for default_site, default in option_defaults(site.path, value.split(".")[-1]):
            lines.append(f"--{value.split('.')[-1]} defaults to {default} at {default_site}")
            option = option or (value.split(".")[-1], default, default_site)
    return lines, option


def _final_stretch_below(curve: list[tuple[int, float]], threshold: float) -> int | None:
    """The step from which the rate stays below ``threshold`` to the curve's end, None where its last one is not."""
    start = None
    for step, rate in reversed(curve):
        if rate >= threshold:
            break
        start = step
    return start


def _base_rate(ctx: ProbeContext) -> float:
    """The first optimizer's first group's base rate (``initial_lr``, which a scheduler sets), 0 where none is."""
    optimizer = ctx.run.optimizers[0] if ctx.run.optimizers else None
    rate = optimizer.param_groups[0].get("initial_lr") if optimizer is not None else None
    return float(rate) if isinstance(rate, (int, float, torch.Tensor)) else 0.0


def _held_below_built(ctx: ProbeContext, last: float, step: int, factor: float,
                      evidence: list[str]) -> ProbeOutcome | None:
    """A rate proven too low that the script's own schedule holds far below the rate its optimizer was
    built with (a warm-up fed a fraction where it wants a step count, or stepped once an epoch): the rate
    is too low, and the line that computes it, not the optimizer's, is the fix's place. None when no
    schedule or hand-set rate is seen, or the rate applied is within HELD_BELOW of the built one."""
    optimizer = ctx.run.optimizers[0] if ctx.run.optimizers else None
    built = optimizer.defaults.get("lr") if optimizer is not None else None
    if not isinstance(built, (int, float)) or built <= 0 or last >= HELD_BELOW * built:
        return None
    script = os.path.abspath(sys.argv[0])
    assigned = rate_assignments(script)
    if not assigned and not ctx.run.facts.schedulers:
        return None
    computed = None
    if assigned:
        value = assigned_name(assigned[0])
        found = assignment_before(script, value, assigned[0].line) if value else None
        computed = found[0] if found else None
        evidence.append(f"the rate is set by hand at {assigned[0]}" + (f", computed at {computed}" if computed else ""))
    where = computed or (assigned[0] if assigned else None) or _schedule_line(ctx, evidence)
    kind = type(optimizer).__name__
    share = f"{100 * last / built:.2g}%"  # 0.095%, not a rounded 0%
    summary = (f"the learning rate {last:.3g} is too low: the schedule holds it far below the {built:.3g} the {kind} "
               f"was built with ({share} of it at step {step}); the loss falls at {last * factor:.3g}")
    fix = (f"check the rate computed at {where.short} (`{where.text}`): it gives {share} of the rate the "
           f"optimizer was built with (a warm-up given a fraction where it expects a step count, a total too large)"
           if where else f"check the schedule's settings: it keeps the rate at {share} of {built:.3g}")
    return ProbeOutcome(FAIL, summary, evidence, fix, data={"cause": "learning_rate_too_low", "confirmed": True})


def _schedule_line(ctx: ProbeContext, evidence: list[str]) -> Site | None:
    """The user's line that returns the factor a LambdaLR (or MultiplicativeLR) applies now: its lambda called
    once more at the scheduler's step, traced (a lambda that calls a function of the user's gives that
    function's line)."""
    for calls in ctx.run.facts.schedulers.values():
        scheduler = calls.live()
        function = _schedule_function(scheduler)
        if function is None:
            continue
        returns: list[Site] = []

        def tracer(frame: Any, event: str, arg: Any) -> Any:
            if event == "return" and frame.f_code.co_name != "<lambda>" and is_user_file(frame.f_code.co_filename):
                returns.append(Site(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name))
            return tracer

        previous = sys.gettrace()
        sys.settrace(tracer)
        try:
            factor = function(scheduler.last_epoch)
        except Exception:  # the user's lambda: it may need more than an int
            continue
        finally:
            sys.settrace(previous)
        if returns:
            evidence.append(f"{calls.kind}'s factor at step {scheduler.last_epoch} is {float(factor):.3g}, returned at "
                            f"{returns[-1]}")
            return returns[-1]
    return None


def _rate_set_by_hand(evidence: list[str]) -> str | None:
    """Where the script sets the rate itself (no scheduler stepped): the assignment, and the lines that
    call the function holding it (``exp_lr_scheduler(...)`` in the batch loop)."""
    script = os.path.abspath(sys.argv[0])
    assigned = rate_assignments(script)
    if not assigned:
        return None
    where = assigned[0]
    function = enclosing_function(script, where.line)
    callers = calls_named(script, {function}) if function else []
    evidence.append(f"the rate is set by hand at {where}" + (
        f" in {function}(), called at " + ", ".join(map(str, callers[:3])) if callers else ""))
    return (callers[0] if callers else where).short


def _schedule_factor(ctx: ProbeContext, evidence: list[str]) -> tuple[Any, str, str, float] | None:
    """(the scheduler, its kind, where it was created, the factor it applies now) for a LambdaLR /
    MultiplicativeLR whose lambda never comes near 1 over FACTOR_HORIZON steps: it returns a learning
    rate where a factor is expected, and the two multiply. None otherwise (a warm-up starts near 0 but
    reaches 1)."""
    for calls in ctx.run.facts.schedulers.values():
        scheduler = calls.live()
        values = rate_not_factor(scheduler)
        if values is None:
            continue
        site = next((s for kind, s in ctx.run.facts.scheduler_sites if kind == calls.kind), calls.site)
        evidence.append(f"{calls.kind} created at {site}: its lr_lambda gives " + ", ".join(
            f"{v:.3g} at {step}" for step, v in zip(FACTOR_HORIZON, values)) + ": never near 1")
        try:
            factor = float(scheduler.lr_lambdas[0](scheduler.last_epoch))  # the factor applied now
        except Exception:
            factor = values[0]
        return scheduler, calls.kind, site, factor
    return None


def rate_not_factor(scheduler: Any) -> list[float] | None:
    """The factors a LambdaLR / MultiplicativeLR's lambda gives over FACTOR_HORIZON when none comes near
    1 (it returns a rate, not a factor); None for any other scheduler or lambda."""
    function = _schedule_function(scheduler)
    if type(scheduler).__name__ not in ("LambdaLR", "MultiplicativeLR") or function is None:
        return None
    try:
        values = [float(function(step)) for step in FACTOR_HORIZON]
    except Exception:  # the user's lambda: it may need more than an int
        return None
    return values if max(abs(v) for v in values) <= FACTOR_NEVER_NEAR_ONE else None


def _rate_not_factor(ctx: ProbeContext, evidence: list[str], last: float, scheduler: Any, kind: str, site: str,
                     factor: float) -> ProbeOutcome:
    """The schedule's lambda returns a rate: the optimizer's rate is multiplied by it. Proven by the same
    steps at the rate the optimizer was given (the factor taken out), over a longer replay."""
    base = getattr(scheduler, "base_lrs", None)
    intended = base[0] if base else last / factor if factor else None
    as_written = _trial(ctx, Adjust(), steps=FACTOR_TRIAL_STEPS)
    evidence.append(f"replay as written: {_curve(as_written)}")
    restored = _trial(ctx, Adjust(lr_scale=intended / last), steps=FACTOR_TRIAL_STEPS) if intended and last else []
    if restored:
        evidence.append(f"replay at the optimizer's own rate ({intended:.3g}, the factor taken out): {_curve(restored)}")
    confirmed = _learns(restored) and not _learns(as_written)
    if all(value == 0 for value in rate_not_factor(scheduler) or [1.0]):
        return ProbeOutcome(
            FAIL, f"the learning rate applied is 0: the {kind} created at {site} gives a factor of 0 at every step "
            "(its length or warm-up, computed from the run's settings, puts every step past its end)", evidence,
            f"check the steps the schedule is sized with at {site.split('called from ')[-1].split(' ')[0]} (a total "
            "of -1 or 0 steps ends it before it starts): its lr_lambda must reach 1 after the warm-up",
            data={"cause": "lr_schedule_decay", "confirmed": confirmed})
    return ProbeOutcome(
        FAIL, f"the learning rate applied is {last:.3g}: the {kind} at {site.split(' ')[0]} multiplies the "
        f"optimizer's rate by its lr_lambda ({factor:.3g} now), a rate where a factor is expected", evidence,
        f"make lr_lambda return a factor that starts at 1 (e.g. lambda epoch: gamma ** epoch) at {site.split(' ')[0]}",
        data={"cause": "learning_rate_too_low", "confirmed": confirmed})


def _optimizer_source(facts: Any) -> tuple[str, int, str] | None:
    """(the file, the line, the line's text) where the latest optimizer was created, the file as the run read it."""
    for _, site in facts.optimizer_sites[-1:]:
        path, _, line = site.split(" ", 1)[0].rpartition(":")
        full = next((p for p in facts.source_files if p.endswith(path)), None)
        return (full, int(line), site.split("`", 1)[-1].rstrip("`") if "`" in site else "") if full else None
    return None


def _rate_passed(facts: Any) -> Site | None:
    """The line of the latest optimizer's call that passes its rate, where the call spans lines and the rate is
    on a later one than the call's first."""
    source = _optimizer_source(facts)
    return rate_argument_line(*source[:2]) if source is not None else None


def rate_origin(facts: Any) -> list[str]:
    """Where the optimizer's rate comes from: the line that built the optimizer and, when it passes
    ``lr=name``, the lines that assign that name."""
    lines = [f"{kind} created at {site}" for kind, site in facts.optimizer_sites[-1:]]
    source = _optimizer_source(facts)
    if source is not None:
        full, line, text = source
        passed = rate_argument_line(full, line)
        if passed is not None:
            lines.append(f"the rate is passed at {passed}")
        match = re.search(r"\blr\s*=\s*([A-Za-z_][\w.]*)", text)
        if match:
            name = match.group(1).split(".")[-1]
            lines += [f"the rate `{match.group(1)}` is assigned at: {Site(full, assigned.line, '')}"
                      for assigned in assignments(full, name) if assigned.line <= line]
    lines += [f"{kind} created at {site} sets the rate the optimizer applies" for kind, site in facts.scheduler_sites[-1:]]
    return lines


# --- what the loss is given -----------------------------------------------------------------

# Class losses that take unbounded scores (logits): a ReLU in front of them clamps every negative score to 0.
CLAMPED_SCORES = {"cross_entropy", "nll_loss", "binary_cross_entropy_with_logits", "multi_margin_loss"}


@probe("learning.loss_input", on_training_thread=True)
def loss_input(ctx: ProbeContext) -> ProbeOutcome:
    calls = list(ctx.run.facts.loss_calls.values())
    if not calls:
        return ProbeOutcome(INCONCLUSIVE, "no loss function of torch.nn seen (a hand-written loss)")
    evidence = [f"{c.function} at {c.site}: input {tuple(c.input_shape)} made by {c.input_producer or 'a leaf'}"
                + (f" ({c.input_module})" if c.input_module else "") + (
                    f", values {c.input_min:.3g}..{c.input_max:.3g}" if c.input_min is not None else "") for c in calls]
    for call in calls:
        producer = call.input_producer or ""
        loss = f"{call.loss_module} ({call.function})" if call.loss_module else call.function
        layer = f" by {call.input_module}" if call.input_module else ""
        if call.gets_probabilities:
            return _probabilities_to_class_loss(ctx, call, loss, layer, evidence)
        if call.positive_log_probabilities:
            return _not_log_probabilities(ctx, call, loss, layer, evidence)
        if call.function == "binary_cross_entropy_with_logits" and producer.startswith("Sigmoid"):
            where = _activation_sites(ctx, call, {"sigmoid", "Sigmoid"})
            evidence += [f"the sigmoid is applied at {site}" for site in where]
            at = f" at {where[0].short}" if where else layer
            return ProbeOutcome(FAIL, f"{loss} at {call.site.split(' ')[0]} gets sigmoid outputs{layer}: "
                                "it applies the sigmoid itself", evidence,
                                f"drop the sigmoid{at} (keep it only for predictions), or use nn.BCELoss on probabilities",
                                data={"cause": "softmax_before_loss"})
        if call.function in CLAMPED_SCORES and producer.startswith("Relu"):
            return _relu_scores(ctx, call, loss, layer, evidence)
    return ProbeOutcome(PASS, "the losses get what they expect (logits / log-probabilities)", evidence)


def _probabilities_to_class_loss(ctx: ProbeContext, call: Any, loss: str, layer: str,
                                 evidence: list[str]) -> ProbeOutcome:
    """cross_entropy or nll_loss given probabilities: made by a softmax (or viewed from one), or, for nll_loss,
    rows that sum to 1 made otherwise (a mixture of distributions), whose log the loss needs."""
    softmax = (call.input_producer or "").startswith("Softmax")
    mixture = not softmax and call.function == "nll_loss"
    where = [] if mixture else _activation_sites(ctx, call, {"softmax", "Softmax"})
    evidence += [f"the softmax is applied at {site}" for site in where]
    expects = "logits" if call.function == "cross_entropy" else "log-probabilities (log_softmax)"
    at = f" at {where[0].short}" if where else layer
    made = f"(rows that sum to 1, made by {call.input_producer or 'a leaf'})" if mixture else "(softmax)"
    if mixture:
        fix = (f"pass the log of the probabilities to {call.function} at {call.site.split(' ')[0]}: "
               "torch.log(p.clamp_min(1e-12)), or keep log-probabilities throughout (log_softmax, torch.logsumexp "
               "for a mixture)")
    elif call.function == "cross_entropy":
        fix = f"drop the softmax{at} and pass the logits to the loss (apply softmax only for predictions)"
    else:
        fix = f"use log_softmax instead of the softmax{at} before nll_loss"
    made_by = f" made{layer}" if layer else ""
    return ProbeOutcome(FAIL, f"{loss} at {call.site.split(' ')[0]} gets probabilities{made_by} {made}, but it expects "
                        f"{expects}", evidence, fix, data={"cause": "softmax_before_loss"})


def _not_log_probabilities(ctx: ProbeContext, call: Any, loss: str, layer: str, evidence: list[str]) -> ProbeOutcome:
    """kl_div given values above 0: its input is the log of a distribution (it computes target * (log target -
    input)), so probabilities there make a loss that goes below 0 and a gradient that pulls the wrong way."""
    softmax = (call.input_producer or "").startswith("Softmax") or call.rows_sum_to_one
    where = _activation_sites(ctx, call, {"softmax", "Softmax"}) if softmax else []
    evidence += [f"the softmax is applied at {site}" for site in where]
    at = f" at {where[0].short}" if where else layer
    made = "probabilities (rows that sum to 1)" if softmax else f"values up to {call.input_max:.3g}"
    fix = (f"use log_softmax instead of the softmax{at} (or pass torch.log(p)) as {call.function}'s input" if softmax
           else f"pass log-probabilities to {call.function} at {call.site.split(' ')[0]}: F.log_softmax(scores, dim)")
    return ProbeOutcome(FAIL, f"{loss} at {call.site.split(' ')[0]} gets {made}{' made' + layer if layer else ''}, but "
                        "it expects "
                        "log-probabilities (never above 0): its loss falls below 0 and its gradient pulls the wrong way",
                        evidence, fix, data={"cause": "softmax_before_loss"})


def _relu_scores(ctx: ProbeContext, call: Any, loss: str, layer: str, evidence: list[str]) -> ProbeOutcome:
    """A class loss given ReLU outputs as its scores: a class whose score the ReLU holds at 0 for an example
    gets no gradient there, and once its unit is negative for every input it is dead for good."""
    where = _activation_sites(ctx, call, {"relu", "ReLU", "relu_"})
    evidence += [f"the relu is applied at {site}" for site in where]
    at = f" at {where[0].short}" if where else layer
    return ProbeOutcome(FAIL, f"{loss} at {call.site.split(' ')[0]} gets ReLU outputs{layer} as its scores: every score "
                        "the ReLU clamps to 0 passes no gradient, so those classes' units die and stop learning",
                        evidence, f"drop the relu{at}: the last layer's outputs are the logits (the loss applies its own "
                        "softmax or sigmoid)", data={"cause": "dead_units"})


def _activation_sites(ctx: ProbeContext, call: Any, names: set[str]) -> list[Site]:
    """Where the user's code applies the activation the loss should not get: calls named ``names``
    in the class of the module that made the loss's input (else anywhere in the user's files)."""
    owner = re.search(r"\((\w+)\)\s*$", call.input_module or "")
    sites = in_files(ctx.run.facts.source_files, calls_named, names, owner.group(1) if owner else None)
    return sites[:MAX_ACTIVATION_SITES]


# --- training mode --------------------------------------------------------------------------

# An evaluation run in training mode matters when it scores its batch no better than the untrained model
# did: a loss, as the script computes it, of at least UNLEARNED times the run's first training loss, while
# the same batch in eval mode scores under half of that. Over a shuffled batch the batch's statistics are
# close to the running ones, and a model that learned scores far below its first loss in either mode (loss
# ratios between the two modes say nothing there: near 0 both are noise, 0.016 against 0.0006).
UNLEARNED = 0.5

@probe("learning.mode")
def mode(ctx: ProbeContext) -> ProbeOutcome:
    facts = ctx.run.facts
    model = ctx.run.model
    checks = facts.mode_checks[-6:]
    if model is None or not checks:
        return ProbeOutcome(INCONCLUSIVE, "the model's mode was not seen at an optimizer step")
    evaluating = [s for s, training in checks if not training]
    evidence = [f"model.training at steps {', '.join(f'{s}: {t}' for s, t in checks)}",
                "the model has dropout or batch norm layers" if facts.has_mode_layers else
                "the model has no dropout or batch norm layers: its mode changes nothing"]
    site, caller = facts.eval_at_training or facts.eval_sites.get(id(model)) or (None, None)
    if site:
        evidence.append(f"model.eval() called at {site}" + (f" (called from {caller})" if caller else ""))
    found = facts.evaluated_in_train_mode()
    if found and facts.train_mode_evaluation is not None and not evaluating:
        evidence.append(found)
        outcome = _evaluation_in_train_mode(ctx, facts.train_mode_evaluation, evidence)
        if outcome is not None:
            return outcome
    parts = facts.parts_in_eval() if not evaluating else []
    if parts:
        return _parts_in_eval(ctx, parts, evidence)
    if len(evaluating) < len(checks) or not facts.has_mode_layers:
        return ProbeOutcome(PASS, "the model trains in training mode" if not evaluating else
                            "eval mode at some steps only, or no layer it changes", evidence)
    confirmed = None
    if ctx.run.can_replay():
        as_written = _trial(ctx, Adjust())
        in_train = _trial(ctx, Adjust(train_mode=True))
        evidence += [f"replay as written (eval mode): {_curve(as_written)}",
                     f"... in training mode: {_curve(in_train)}"]
        confirmed = _learns(in_train)
    if caller is not None:  # a function the loop calls switches the mode (an attack's __call__) and does not restore it
        where = f" (`{site.text}` at {site.short}, called from {caller}, leaves it in eval mode)"
        fix = (f"put the model back in training mode after {caller.short} (model.train() after that call), "
               f"or make the function restore the mode it found: the eval() at {site.short} runs inside "
               "the training loop")
    else:
        where = f" (model.eval() at {site} is never undone)" if site else ""
        fix = "call model.train() at the start of each training epoch (after evaluating)" + (
            f": the model.eval() at {site.short} leaves it in eval mode" if site else "")
    return ProbeOutcome(FAIL, f"the model trains in eval mode{where}: dropout is off and batch norm uses its "
                        "running statistics", evidence, fix, data={"cause": "eval_mode_training", "confirmed": confirmed})


def _evaluation_in_train_mode(ctx: ProbeContext, evaluation: Any, evidence: list[str]) -> ProbeOutcome | None:
    """The script evaluates in training mode: its latest evaluation batch scored again, as the script did and in
    eval mode. Batch norm in training mode normalises each batch by its own statistics: over a shuffled batch
    they are close to the running ones; over a batch of one clip, one speaker, one class, it normalises away
    what tells them apart, and the evaluation shows a model that never learned (see UNLEARNED)."""
    model = ctx.run.model
    first = next((s.loss for s in ctx.history if s.loss is not None and math.isfinite(s.loss)), None)
    args, kwargs = evaluation.inputs
    function, target, loss_kwargs = evaluation.loss
    was_training, losses = model.training, {}
    try:
        with torch.no_grad():
            for training in (True, False):
                model.train(training)
                output = model(*args, **kwargs)
                losses[training] = float(function(output if evaluation.key is None else output[evaluation.key],
                                                  target, **loss_kwargs))
    except Exception as exc:  # the script's own model and loss, on a batch kept from its evaluation
        evidence.append(f"the evaluation batch of step {evaluation.step} could not be scored again: "
                        f"{type(exc).__name__}: {exc}")
        return None
    finally:
        model.train(was_training)
    evidence.append(f"the evaluation batch of step {evaluation.step} scored again: loss {losses[True]:.4g} in training "
                    f"mode (as the script runs it), {losses[False]:.4g} in eval mode; the run's first training loss "
                    + (f"{first:.4g}" if first is not None else "unknown"))
    if first is None or first <= 0 or not all(map(math.isfinite, losses.values())) or \
            losses[True] < UNLEARNED * first or losses[False] > 0.5 * losses[True]:
        return None
    where = evaluation.mode_site or evaluation.loss_site
    fix = (f"call model.eval() before evaluating (in place of the model.train() at {evaluation.mode_site.short})"
           if evaluation.mode_site else f"call model.eval() before the evaluation at {evaluation.loss_site.short}") + \
        ", and model.train() again before training"
    return ProbeOutcome(FAIL, f"the model is evaluated in training mode{f' ({where})' if where else ''}: batch norm "
                        f"normalises each evaluation batch by its own statistics, so it scores no better than the "
                        f"untrained model (loss {losses[True]:.4g}, the run's first {first:.4g}) where eval mode scores "
                        f"{losses[False]:.4g}", evidence, fix,
                        data={"cause": "eval_mode_training", "confirmed": True})


def _parts_in_eval(ctx: ProbeContext, parts: list[tuple[str, int]], evidence: list[str]) -> ProbeOutcome:
    """The model trains, but parts of it holding dropout or batch norm stay in eval mode (a pretrained
    encoder whose loader called .eval(), which a framework no longer undoes). Freezing batch norm's
    statistics on purpose does the same, so only a replay decides: as written, then with the whole model
    in training mode."""
    facts = ctx.run.facts
    names = [name for name, _ in parts]
    sites = [(name, facts.eval_sites[key][0]) for name, key in parts if key in facts.eval_sites]
    evidence.append(f"in eval mode while the model trains, at the last checks: {_names(names)}"
                    + "".join(f"; {name}.eval() called at {site}" for name, site in sites[:2]))
    if not ctx.run.can_replay():
        return ProbeOutcome(INCONCLUSIVE, f"{_names(names, 3)} stay in eval mode while the model trains; no replay to "
                            "tell whether that stops it learning", evidence)
    as_written, in_train = _trial(ctx, Adjust()), _trial(ctx, Adjust(train_mode=True))
    evidence += [f"replay as written ({_names(names, 2)} in eval mode): {_curve(as_written)}",
                 f"... with the whole model in training mode: {_curve(in_train)}"]
    if not _learns(in_train) or _learns(as_written):
        return ProbeOutcome(PASS, f"{_names(names, 3)} stay in eval mode (frozen statistics): training mode does not "
                            "change the learning", evidence)
    where = f": the {sites[0][0]}.eval() at {sites[0][1].short} is never undone" if sites else ""
    verb = "trains" if len(names) == 1 else "train"
    return ProbeOutcome(FAIL, f"{_names(names, 3)} {verb} in eval mode while the rest of the model trains{where}: "
                        "batch norm there uses its running statistics and dropout is off", evidence,
                        f"call self.{names[0]}.train() after building it (or model.train() at the start of each "
                        "training epoch)" + (f", or drop the .eval() at {sites[0][1].short}" if sites else ""),
                        data={"cause": "eval_mode_training", "confirmed": True})


# --- dead units -----------------------------------------------------------------------------

class ReluWatch(OpWatch):
    """For every ReLU applied in the user's code (functional or a module's): the share of units that are
    zero for every example of the batch, the id of its output, and the layer with parameters that ran
    last before it (``modules``' record: the one that feeds it)."""

    RELUS = {"relu", "relu_", "relu6", "threshold", "hardtanh"}

    def __init__(self, modules: ReluLayers | None = None) -> None:
        super().__init__()
        self.applied: list[tuple[str, float, int, str | None]] = []  # (site, dead share, output id, feeder)
        self._modules = modules

    def visit(self, name: str, args: tuple, kwargs: dict, result: Any, site: Site) -> None:
        if name in self.RELUS and isinstance(result, torch.Tensor) and judgeable(result):
            feeder = self._modules.last if self._modules is not None else None
            self.applied.append((str(site), dead_share(result), id(result), feeder))

    def functional(self, module_outputs: set[int]) -> dict[str, tuple[float, str | None]]:
        """The ReLUs applied outside a ReLU module (``torch.relu(self.fc(h))``), by their line, with the layer that
        feeds it: on a line applied more than once (``for conv in self.convs: x = F.relu(conv(x))``), the application
        with the most dead units (the last layer's may be dead while the first's are alive)."""
        found: dict[str, tuple[float, str | None]] = {}
        for site, share, output, feeder in self.applied:
            if output not in module_outputs and share > found.get(site, (-1.0, None))[0]:
                found[site] = (share, feeder)
        return found


def judgeable(output: torch.Tensor) -> bool:
    """Enough values to call a unit dead: several examples, or one example with many positions (a
    feature map, pixels of one region): a unit zero at all of them is dead, at one it may be by chance."""
    return output.dim() >= 2 and (output.shape[0] > 1 or (output.dim() > 2 and output[0, 0].numel() > 1))


def dead_share(output: torch.Tensor) -> float:
    """The share of units (dimension 1) that are zero for every example (dimension 0)."""
    alive = (output.detach() > 0).flatten(2).any(dim=2) if output.dim() > 2 else output.detach() > 0
    return float(1.0 - alive.any(dim=0).float().mean())


class ReluLayers:
    """Forward hooks on the model a trial trains: for each ReLU module, the share of its units that
    are dead and the layer with parameters that ran just before it (the one that feeds it)."""

    def __init__(self) -> None:
        self.shares: dict[str, float] = {}
        self.feeders: dict[str, str] = {}
        self.outputs: set[int] = set()  # the ids of the ReLU modules' outputs (alive in the graph meanwhile)
        self.last: str | None = None
        self._last_relu: tuple[str, torch.Tensor] | None = None
        self.output_relu: str | None = None  # the ReLU whose output the model returns
        self._handles: list[Any] = []

    def attach(self, model: torch.nn.Module) -> None:
        self._handles.append(model.register_forward_hook(self._model_output))
        for name, module in model.named_modules():
            if isinstance(module, (torch.nn.ReLU, torch.nn.ReLU6)):
                self._handles.append(module.register_forward_hook(self._relu(f"{name} ({type(module).__name__})")))
            elif next(module.parameters(recurse=False), None) is not None:
                self._handles.append(module.register_forward_hook(self._layer(name)))

    def _relu(self, label: str) -> Callable[..., None]:
        def record(module: torch.nn.Module, args: Any, output: Any) -> None:
            if isinstance(output, torch.Tensor):
                self.outputs.add(id(output))
            if isinstance(output, torch.Tensor) and judgeable(output):
                self.shares.setdefault(label, dead_share(output))
                if self.last is not None:
                    self.feeders.setdefault(label, self.last)
                self._last_relu = (label, output)
        return record

    def _model_output(self, module: torch.nn.Module, args: Any, output: Any) -> None:
        """The model returns a ReLU's output as it is: that ReLU is its output layer."""
        if self._last_relu is not None and self._last_relu[1] is output and self.output_relu is None:
            self.output_relu = self._last_relu[0]
        self._last_relu = None

    def _layer(self, name: str) -> Callable[..., None]:
        def record(module: torch.nn.Module, args: Any, output: Any) -> None:
            self.last = name
        return record

    def detach(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []


@probe("learning.activations", prefers_copy=True)
def activations(ctx: ProbeContext) -> ProbeOutcome:
    if ctx.run.model is None:
        return ProbeOutcome(INCONCLUSIVE, "no model seen")
    layers = ReluLayers()
    watch = ReluWatch(layers)
    ended = False
    try:
        trainer = ctx.trainer
        trainer.reset(ctx.break_state)
        trainer.step(trainer.prepare(), Adjust(mode=lambda: watch, lr_scale=0.0, before_forward=layers.attach))
    except (NeedsLoop, LoopGone):
        ended = _forward_last_inputs(ctx, layers, watch)
        if not ended:
            raise
    finally:
        layers.detach()
    shares = dict(layers.shares)
    for site, (share, feeder) in watch.functional(layers.outputs).items():
        shares[f"relu at {site}"] = share
        if feeder is not None:
            layers.feeders[f"relu at {site}"] = feeder
    if not shares:
        return _vanishing(ctx)
    evidence = [f"{name}: {share:.0%} of its units are zero for every example" for name, share in shares.items()]
    dead = [(name, share) for name, share in shares.items() if share >= DEAD_SHARE]
    if not dead:
        return ProbeOutcome(PASS, "no layer of dead units", evidence)
    name, share = dead[0]
    feeder = layers.feeders.get(name)
    created = module_site(ctx.run.model, name.split(" ")[0])
    if created is not None:
        evidence.append(f"{name.split(' ')[0]} is created at {created}")
    summary = f"dead units: {share:.0%} of {name} output zero for every example, so no gradient flows through them"
    if ended:
        evidence.append("measured on the model's last inputs, in the state the run ended in; not replayed: the "
                        "script's loop has ended, so no trial of a fix could run")
        where = name.split(" `", 1)[0]
        return ProbeOutcome(FAIL, summary, evidence, f"leave out the {where} if it is the last layer before the scores "
                            f"(an embedding read by a dot product); else re-initialise {feeder or 'the layer before it'}, "
                            "lower the learning rate, or use nn.LeakyReLU", data={"cause": "dead_units", "layer": name})
    hand_set = in_files(ctx.run.facts.source_files, bias_inits)
    if name == layers.output_relu and not (feeder is not None and hand_set):
        return _output_relu(ctx, summary, evidence, name)  # a bias set by hand is the likelier culprit: below
    if feeder is None:
        return ProbeOutcome(FAIL, summary, evidence, "re-initialise the layer before it, lower the learning rate, "
                            "or use nn.LeakyReLU", data={"cause": "dead_units", "layer": name})
    return _revived(ctx, summary, evidence, name, feeder, hand_set)


def _forward_last_inputs(ctx: ProbeContext, layers: ReluLayers, watch: ReluWatch) -> bool:
    """Where no step can be replayed (a loop without a DataLoader has ended), the model run once more on its latest
    inputs, gradients off: its units as the run left them, which a second run paused at an early step has not
    reached (units that die in training are alive there). Whether it ran."""
    model, inputs = ctx.run.model, ctx.run.model_inputs()
    if model is None or inputs is None:
        return False
    args, kwargs = inputs
    layers.attach(model)
    try:
        with torch.no_grad(), watch:
            model(*args, **kwargs)
    except Exception:  # inputs the model cannot take again (a consumed iterator, a freed buffer): no reading
        return False
    return True


def _vanishing(ctx: ProbeContext) -> ProbeOutcome:
    """A deep stack of sigmoid / tanh layers: each multiplies the gradient by its slope (at most 0.25 for a
    sigmoid) and by small weights, and the first layers get almost none. Measured as the gradient norm
    of the first weight matrix against the last's on one replayed step; proven by the same steps with
    the squashing layers passing ReLU of their input instead."""
    model = ctx.run.trained_module() or ctx.run.model
    squashing = [(name, type(module).__name__) for name, module in model.named_modules()
                 if isinstance(module, SQUASHING)]
    if len(squashing) < MIN_SQUASHING:
        return ProbeOutcome(PASS, "no ReLU layer to check" + (f", and only {len(squashing)} sigmoid/tanh layer(s)"
                                                              if squashing else ""))
    trainer = ctx.trainer
    trainer.reset(ctx.break_state)
    trainer.step(trainer.prepare(), Adjust(lr_scale=0.0))
    norms = [(name, float(p.grad.norm())) for name, p in trainer.named_parameters()
             if p.dim() >= 2 and p.grad is not None]
    if len(norms) < 2 or norms[-1][1] <= 0:
        return ProbeOutcome(PASS, f"{len(squashing)} sigmoid/tanh layers; no gradient at the last weight to compare "
                            "the first's with")
    (first, low), (last, high) = norms[0], norms[-1]
    shrink = high / low if low > 0 else math.inf
    evidence = [f"{len(squashing)} {squashing[0][1]} layers ({', '.join(name for name, _ in squashing[:4])})",
                f"gradient norm {high:.2g} at {last}, {low:.2g} at {first}: {shrink:.2g}x smaller at the first layer"]
    if shrink < VANISHING:
        return ProbeOutcome(PASS, f"the gradient reaches the first layer ({shrink:.2g}x smaller than at the "
                            "last): not vanishing", evidence)
    # Weights trained behind sigmoids make no sense behind ReLUs: both trials start from a fresh
    # initialisation, the same one, so that only the activation differs.
    handles: list[Any] = []

    def fresh(model: torch.nn.Module, swap: bool) -> None:
        with torch.random.fork_rng(devices=[]):  # the run's own random stream is left where it was
            torch.manual_seed(0)
            for module in model.modules():
                if hasattr(module, "reset_parameters") and next(module.parameters(recurse=False), None) is not None:
                    module.reset_parameters()
        for module in model.modules():
            if swap and isinstance(module, SQUASHING):
                handles.append(module.register_forward_hook(lambda m, args, out: torch.relu(args[0])))

    try:
        as_written = _trial(ctx, Adjust(before_forward=Once(lambda model: fresh(model, False))), VANISHING_STEPS)
        swapped = _trial(ctx, Adjust(before_forward=Once(lambda model: fresh(model, True))), VANISHING_STEPS)
    finally:
        for handle in handles:
            handle.remove()
    evidence += [f"from a fresh initialisation, as written: {_curve(as_written)}",
                 f"... with ReLU in place of each {squashing[0][1]}: {_curve(swapped)}"]
    if not _learns(swapped) or not finite(as_written) or not _beats(swapped, as_written):
        return ProbeOutcome(PASS, f"the gradient is {shrink:.2g}x smaller at the first layer, but ReLU in place of "
                            f"the {squashing[0][1]} layers does not make the loss fall either: not the cause", evidence)
    kind = squashing[0][1]
    made = [site for path in sorted(ctx.run.facts.source_files) for site in calls_named(path, {kind})]
    evidence += [f"nn.{kind} is created at {site}" for site in made[:2]]
    return ProbeOutcome(
        FAIL, f"vanishing gradients: {len(squashing)} stacked {kind} layers shrink the gradient {shrink:.2g}x "
        f"by the first layer ({first}); from a fresh initialisation, with ReLU in their place the loss falls to "
        f"{finite(swapped)[-1]:.4g} in {len(swapped)} steps, {finite(as_written)[-1]:.4g} as written", evidence,
        f"use nn.ReLU instead of nn.{kind} between the hidden layers" + (f" at {made[0].short}" if made else "") +
        " (or add normalisation between them)", data={"cause": "dead_units", "layer": first, "confirmed": True})


class Once:
    """A trial's change to the model, made at its first forward only (the steps after train the changed
    model); ``results`` keeps what the change returned (a hook handle to remove afterwards)."""

    def __init__(self, change: Callable[[torch.nn.Module], Any]) -> None:
        self.change = change
        self.results: list[Any] = []

    def __call__(self, model: torch.nn.Module) -> None:
        if not self.results:
            self.results.append(self.change(model))


def _output_relu(ctx: ProbeContext, summary: str, evidence: list[str], relu: str) -> ProbeOutcome:
    """The model's last layer is the dead ReLU: every prediction is clamped to 0 and no gradient flows
    back. Proven by the same steps with that ReLU passing its input through."""
    path = relu.split(" ")[0]
    site = module_site(ctx.run.model, path)
    evidence.append(f"{path} is the model's output layer: the model returns its output" +
                    (f"; it is created at {site}" if site else ""))

    identity = Once(lambda model: model.get_submodule(path).register_forward_hook(lambda m, args, out: args[0]))
    try:
        as_written = _trial(ctx, Adjust())
        without = _trial(ctx, Adjust(before_forward=identity))
    finally:
        for handle in identity.results:
            handle.remove()
    evidence += [f"replay as written: {_curve(as_written)}", f"... with {path} passing its input through: {_curve(without)}"]
    confirmed = _learns(without) and not _learns(as_written)
    where = f" at {site.short} (`{site.text}`)" if site else f" ({path})"
    return ProbeOutcome(
        FAIL, f"the output layer {relu} outputs 0 for every example: no gradient flows back"
        + (f"; without it the loss falls ({_curve(without)})" if confirmed else ""), evidence,
        f"remove the ReLU{where} from the output: the last layer must be able to output the targets' range",
        data={"cause": "dead_units", "layer": relu, "confirmed": confirmed})


def _zero_weight(ctx: ProbeContext, summary: str, evidence: list[str], relu: str, feeder: str) -> ProbeOutcome:
    """The layer that feeds the dead ReLU has an all-zero weight: every unit gets 0 and passes no
    gradient. Proven by the same steps with that layer re-initialised (its own reset_parameters())."""
    owner = next((part for part in reversed(feeder.split(".")) if not part.isdigit()), feeder)
    where = [site for site in in_files(ctx.run.facts.source_files, weight_inits) if owner in site.text]
    evidence.append(f"{feeder} feeds it; its weight is all zero" + (f": set at {where[0]}" if where else ""))

    def reinitialise(model: torch.nn.Module) -> None:
        layer = model.get_submodule(feeder)
        if hasattr(layer, "reset_parameters"):
            layer.reset_parameters()

    as_written = _trial(ctx, Adjust())
    revived = _trial(ctx, Adjust(before_forward=Once(reinitialise)))
    evidence += [f"replay as written: {_curve(as_written)}", f"... with {feeder} re-initialised: {_curve(revived)}"]
    confirmed = _learns(revived) and not _learns(as_written)
    fix = (f"do not initialise {feeder}.weight to zero" + (f" (`{where[0].text}` at {where[0].short})" if where else "")
           + ": keep the layer's default initialisation; a zero weight before a ReLU passes no gradient")
    return ProbeOutcome(FAIL, summary + f": {feeder}.weight is all zero", evidence, fix,
                        data={"cause": "dead_units", "layer": relu, "feeder": feeder, "confirmed": confirmed})


def _revived(ctx: ProbeContext, summary: str, evidence: list[str], relu: str, feeder: str,
             where: list[Site]) -> ProbeOutcome:
    """The dead layer's cause proven: the same steps with the bias of the layer that feeds it set to
    zero (a fresh initialisation's) against the steps as written."""
    params = dict(ctx.trainer.named_parameters())
    weight = params.get(f"{feeder}.weight")
    if weight is not None and not bool(weight.detach().any()):
        return _zero_weight(ctx, summary, evidence, relu, feeder)
    bias = params.get(f"{feeder}.bias")
    data = {"cause": "dead_units", "layer": relu, "feeder": feeder}
    if bias is None:
        return ProbeOutcome(FAIL, summary, evidence, f"re-initialise {feeder} (it feeds {relu.split(' ')[0]}), lower "
                            "the learning rate, or use nn.LeakyReLU", data=data)
    values = bias.detach().float()
    evidence.append(f"{feeder} feeds it; its bias: mean {float(values.mean()):.3g}, min {float(values.min()):.3g}, "
                    f"max {float(values.max()):.3g}")
    evidence += [f"a bias is set by hand at {site}" for site in where]

    zero_bias = Once(lambda model: torch.nn.init.zeros_(dict(model.named_parameters())[f"{feeder}.bias"].data))
    as_written = _trial(ctx, Adjust())
    revived = _trial(ctx, Adjust(before_forward=zero_bias))
    evidence += [f"replay as written: {_curve(as_written)}", f"... with {feeder}.bias set to 0: {_curve(revived)}"]
    written, fixed = finite(as_written), finite(revived)
    confirmed = bool(written and fixed) and not _learns(as_written) and _below(_tail(fixed), _tail(written))
    if where:
        fix = f"initialise {feeder}.bias to zero (nn.init.zeros_): the bias is set at {where[0].short} `{where[0].text}`, " \
              "or use nn.LeakyReLU"
    else:  # nothing set the bias: the updates drove it below every input's pre-activation
        fix = (f"lower the learning rate{_rate_at(ctx)}: no bias is set by hand, so the units died in training, pushed "
               f"below 0 for every input by updates too large; or use nn.LeakyReLU")
    if confirmed:
        summary += f"; with {feeder}.bias set to 0 the loss falls ({_curve(revived)})"
    return ProbeOutcome(FAIL, summary, evidence, fix, data={**data, "confirmed": confirmed})


def _rate_at(ctx: ProbeContext) -> str:
    """`` (lr 0.3, the Adam created at train.py:64 `...`)``: the rate the run trains at and where it is given."""
    rates = sorted({float(g["lr"]) for opt in ctx.run.optimizers for g in opt.param_groups})
    sites = ctx.run.facts.optimizer_sites
    parts = ([f"lr {', '.join(f'{rate:g}' for rate in rates[:3])}"] if rates else []) + (
        [f"the {sites[-1][0]} created at {sites[-1][1]}"] if sites else [])
    return f" ({', '.join(parts)})" if parts else ""


# --- the run's trend and the labels -------------------------------------------------------

def _label_path(ctx: ProbeContext, batch: Any) -> str | None:
    path = ctx.run.facts.target_path
    if path is not None:
        return path
    labels = [(p, t) for p, t in tensors_in(batch) if not t.is_floating_point() and t.dim() == 1]
    return labels[-1][0] if len(labels) >= 1 else None


def _permuted(batch: Any, path: str) -> Any:
    """The batch with the tensor at ``path`` shuffled across examples (inputs and labels apart)."""
    targets = dict(tensors_in(batch))

    def shuffle(t: torch.Tensor) -> torch.Tensor:
        if t is targets.get(path) and t.dim() > 0:
            return t[torch.randperm(t.shape[0], generator=torch.Generator().manual_seed(0)).to(t.device)]
        return t

    return map_tensors(batch, shuffle)


def _chance(ctx: ProbeContext) -> float | None:
    classes = next((c.classes for c in ctx.run.facts.loss_calls.values() if c.classes), None)
    return math.log(classes) if classes and classes > 1 else None


@probe("learning.trend", prefers_copy=True)
def trend(ctx: ProbeContext) -> ProbeOutcome:
    shifted = _shifted_labels(ctx)
    if shifted is not None:
        return shifted
    losses = finite([s.loss for s in ctx.history])
    if len(losses) < 8:
        return ProbeOutcome(INCONCLUSIVE, f"only {len(losses)} steps with a loss: too few for a trend")
    first, last = _head(losses), _tail(losses)
    falls = _below(last, first)
    evidence = [f"the run's loss: {first:.4g} over its first steps, {last:.4g} over its last ({len(losses)} steps)"]
    chance = _chance(ctx)
    if chance is not None:
        evidence.append(f"chance level for {round(math.exp(chance))} classes: ln({round(math.exp(chance))}) = {chance:.3g}")
    try:
        batches = ctx.trainer.recent_batches()
        path = _label_path(ctx, batches[-1]) if batches else None
        verdict, trial = _alignment(ctx, batches, path, evidence) if len(batches) >= 2 and path is not None \
            else (None, None)
    except LoopGone:  # a loop without a DataLoader lends one iteration a replayed step: the trend stands alone
        evidence.append("the labels were not checked against shuffled ones: the script's loop ended during the trial")
        verdict, trial = None, None
    if verdict is not None:
        return verdict
    other = _rises_by_another_objective(losses, first, last, trial, evidence)
    if other is not None:
        return other
    if falls:
        return ProbeOutcome(PASS, f"the run learns: loss {first:.4g} -> {last:.4g}", evidence)
    if steadily_falling(losses):
        return ProbeOutcome(PASS, f"the run learns slowly: loss {first:.4g} -> {last:.4g} over {len(losses)} steps, "
                            "falling in every stretch of the run (a small rate, not a bug)", evidence,
                            data={"finding": "learns slowly"})
    at_chance = chance is not None and abs(last - chance) < 0.1 * chance
    return ProbeOutcome(FAIL, f"the loss does not fall: {first:.4g} -> {last:.4g} over {len(losses)} steps"
                        + (" (at chance level)" if at_chance else ""), evidence,
                        "no single cause was found by the checks: see each check's outcome",
                        data={"cause": "loss_not_decreasing"})


def _shifted_labels(ctx: ProbeContext) -> ProbeOutcome | None:
    """Targets that the watched iteration saw equal to the model's own tokens two positions ahead: a
    misalignment measured on the run's tensors, position by position, with no trial needed to show it."""
    found = ctx.run.facts.shifted_targets
    if found is None:
        return None
    return ProbeOutcome(
        FAIL, f"inputs and labels do not match: {found.text()}",
        [found.text() + " (seen in an iteration of the run watched op by op)"],
        f"shift the labels once, not twice: drop the shift at {found.site.short} or the one where the labels are made "
        "(a dataset's `sample[1:]`); a causal LM that shifts inside its loss takes labels = input_ids",
        data={"cause": "labels_misaligned", "definitive": True})


def _rises_by_another_objective(losses: list[float], first: float, last: float,
                                trial: tuple[float, float, float, float] | None, evidence: list[str]) -> ProbeOutcome | None:
    """The run's loss rose steadily (in every stretch of the run, not by swings: a run that piles up its gradients
    swings), but the loss the checks rebuild is another objective (OTHER_OBJECTIVE apart from the run's) and training
    on recent batches lowers it clearly on a held-out batch: the model learns, and what rises is a term beyond it
    whose target moves with the run (a capacity or a weight annealed upwards, a curriculum)."""
    if trial is None or not last > first > 0 or trial[2] <= 0 or not steadily_falling([-v for v in losses]):
        return None
    apart = max(last / trial[2], trial[2] / last)
    if apart < OTHER_OBJECTIVE or not _below(trial[3], trial[2]):
        return None
    return ProbeOutcome(PASS, f"the run's loss rises ({first:.4g} -> {last:.4g}), but the model learns: the part of the "
                        f"objective the checks rebuild falls on a held-out batch ({trial[2]:.4g} -> {trial[3]:.4g}); the "
                        "rest of the run's loss, whose target moves as it runs, makes the total rise", evidence,
                        data={"finding": "loss rises by design"})


def levelled_off(losses: list[float]) -> bool:
    """The loss fell to something and stays there: its last fifth's median within LEVELLED of its middle
    fifth's, over enough steps to tell."""
    fifth = len(losses) // 5
    if fifth < 3:
        return False
    middle, last = statistics.median(losses[2 * fifth:3 * fifth]), statistics.median(losses[-fifth:])
    return middle > 0 and last >= (1 - LEVELLED) * middle


@probe("learning.labels", prefers_copy=True)
def labels(ctx: ProbeContext) -> ProbeOutcome:
    """A run that looks healthy while one batch fits slowly: when its loss has levelled off, do its
    labels follow its inputs (the alignment trial of the trend check)?"""
    shifted = _shifted_labels(ctx)
    if shifted is not None:
        return shifted
    losses = finite([s.loss for s in ctx.history])
    if not levelled_off(losses):
        return ProbeOutcome(PASS, f"the run's loss keeps falling ({_curve(losses)}): not levelled off"
                            if losses else "no loss recorded: nothing to judge")
    evidence = [f"the run's loss levelled off: {_curve(losses)}"]
    batches = ctx.trainer.recent_batches()
    path = _label_path(ctx, batches[-1]) if batches else None
    if len(batches) < 2 or path is None:
        return ProbeOutcome(INCONCLUSIVE, "the loss levelled off, but no labels to check in the recent batches",
                            evidence)
    verdict, _ = _alignment(ctx, batches, path, evidence)
    return verdict or ProbeOutcome(PASS, "no sign that the labels are misaligned", evidence)


def _alignment(ctx: ProbeContext, batches: list[Any], path: str, evidence: list[str]
               ) -> tuple[ProbeOutcome | None, tuple[float, float, float, float] | None]:
    """Train on a few recent batches, with the labels as given and with them shuffled, and measure
    the loss on the batch held out. Labels that follow the inputs generalise to it, better than
    shuffled ones do; labels shuffled apart from the inputs (the run's own, if they are misaligned)
    are memorised and help the held-out batch no more than shuffled ones. Returned beside the verdict: the
    trial with the labels as given (train loss first, last; held-out loss before, after)."""
    train, held_out = batches[-ALIGNMENT_BATCHES - 1:-1], batches[-1]
    real = _generalisation(ctx, train, held_out)
    shuffled = _generalisation(ctx, [_permuted(b, path) for b in train], held_out)
    if real is None or shuffled is None:
        return None, real
    evidence += [f"labels ({path}) as given: train loss {real[0]:.4g} -> {real[1]:.4g}, held-out batch "
                 f"{real[2]:.4g} -> {real[3]:.4g}",
                 f"labels shuffled: train loss {shuffled[0]:.4g} -> {shuffled[1]:.4g}, held-out batch "
                 f"{shuffled[2]:.4g} -> {shuffled[3]:.4g}"]
    if all(math.isclose(a, b, rel_tol=IDENTICAL, abs_tol=1e-12) for a, b in zip(real, shuffled)):
        # The labels' order changes nothing: the model's output does not depend on its input, whatever the labels
        # (every unit of a layer dead, a constant output). Not a misalignment: the dead-units check says why.
        evidence.append("labels as given and shuffled train exactly alike: the model's output does not depend on its "
                        "input")
        dead = activations(ctx)
        if dead.status == FAIL:
            dead.evidence = evidence + dead.evidence
            return dead, real
        return None, real
    # Memorised: the batches seen fit clearly, or fit somewhat while the held-out batch gets worse (labels
    # that do not follow the inputs are noise to the held-out batch; real ones help it or leave it be).
    memorises = _below(real[1], real[0]) or (real[1] < (1 - SAME) * real[0] and real[3] > (1 + SAME) * real[2])
    generalises = real[3] < (1 - SAME) * real[2]
    # Beating shuffled labels counts where the labels as given leave the held-out batch no worse: two trials that
    # both make it worse memorise noise, and which one made it worse by less is noise too.
    beats_shuffled = real[3] < (1 - SAME) * shuffled[3] and real[3] <= (1 + SAME) * real[2]
    # Containers of different lengths read with one index, or files listed in the file system's order
    # (paired by position with another listing or a label table), make a misalignment by construction;
    # the trial then only has to show that the labels as given help a held-out batch no more than
    # shuffled ones (a slow model may not memorise in ALIGNMENT_STEPS, and what the labels share, their
    # mean or a mask's background, it learns from shuffled ones as well).
    dataset = ctx.run.dataset()
    unequal = _unequal_containers(dataset)
    where = _near_the_loop(ctx, in_files(ctx.run.facts.source_files, shuffles))
    # A listing is the suspect unless a sequence is shuffled on its own where the loop prepares its data.
    listed = [] if unequal or (where and _in_the_loop(ctx, where[0])) else \
        in_files(ctx.run.facts.source_files, unsorted_listings)
    where = [] if listed else where
    drawn = [] if unequal or listed else ctx.run.facts.transforms_drawn_apart(dataset)
    if beats_shuffled or (not (unequal or listed or drawn) and (not memorises or generalises)):
        return None, real
    evidence += [f"one sequence is shuffled on its own at {site}" for site in where]
    idle = [seen for seen in ctx.run.facts.loaders.values() if seen.shuffled and not seen.trained and seen.iterated]
    evidence += [f"a DataLoader with shuffle=True (made at {seen.created or '?'}) is iterated at {seen.iterated} but "
                 "feeds no training step: what is built from its batches comes in a random order, apart from "
                 "anything kept in the dataset's order" for seen in idle]
    if unequal:
        evidence.append("__getitem__ reads containers of different lengths with the same index: " + "; ".join(
            f"`self.{name}` ({length} entries) at {site}" for name, length, site in unequal))
        where = [site for _, _, site in unequal]
    evidence += [f"file names are listed in the file system's order at {site}: labels kept in another order do "
                 "not follow them" for site in listed]
    if drawn:
        one = len({id(getattr(dataset, attr)) for attr, _, _ in drawn}) == 1
        evidence.append(ctx.run.facts.drawn_apart_text() + (" (one transform object)" if one else "")
                        + "; reads of item 0 repeat an image with another label")
        where = [site for _, _, site in drawn]
    if unequal:
        longest, shortest = max(unequal, key=lambda u: u[1]), min(unequal, key=lambda u: u[1])
        sources = _same_length(dataset, longest)
        evidence += [f"`self.{name}` also has {longest[1]} entries, set at {', '.join(s.short for s in sites)}"
                     for name, sites in sources]
        built = f" (like `self.{sources[0][0]}`, set at {sources[0][1][0]})" if sources else ""
        fix = (f"select the same samples in every container __getitem__ reads: `self.{longest[0]}` has {longest[1]} "
               f"entries{built} and `self.{shortest[0]}` {shortest[1]} (apply the same split or mask to both, where "
               "they are built)")
    elif drawn:
        lines = ", ".join(site.short for _, _, site in drawn)
        fix = (f"draw one random transform for all of a sample's parts ({lines}): apply it to them together (a "
               "dictionary transform over image and label, torchvision.transforms.v2 called as transform(image, "
               "mask)), or give each call the same per-item seed")
    elif listed:
        fix = (f"sort the listing at {listed[0].short} (`sorted(os.listdir(...))`, `sorted(glob.glob(...))`) so that the "
               "files come in the order the labels were written in; better, read each file's label by its name")
    elif idle and not where:
        made = idle[0].created.split(" ", 1)[0] if idle[0].created else "its DataLoader(...)"
        fix = (f"build inputs and labels from the same pass: give the loader made at {made} shuffle=False, or "
               "collect the labels from the same batches as the features")
    elif where and "random_split" in where[0].text:
        fix = (f"split once, inputs and labels together: random_split(TensorDataset(inputs, labels), ...) in place of "
               f"the separate splits at {', '.join(site.short for site in where)} (each draws its own permutation)")
    else:
        fix = ("keep each input with its own label: shuffle them together (one permutation for both, or a Dataset "
               "that returns both)" + (f": check {where[0].short} `{where[0].text}`" if where else
                                       ", and check the indexing in __getitem__"))
    trained = (f"training fits the batches it sees (loss {real[0]:.4g} -> {real[1]:.4g}) but" if memorises else
               f"__getitem__ transforms a sample's parts with separate random draws ({drawn[0][2].short}), and "
               "training on them" if drawn else
               f"__getitem__ pairs `self.{unequal[0][0]}` and `self.{unequal[1][0]}` of different lengths, and "
               "training on them" if unequal else
               f"the files are paired in listing order ({listed[0].short}), and training on them")
    return ProbeOutcome(
        FAIL, f"inputs and labels do not match: {trained} helps another batch no more than shuffled labels do "
        f"(held-out {real[2]:.4g} -> {real[3]:.4g}; {shuffled[3]:.4g} after training on shuffled labels)", evidence, fix,
        data={"cause": "labels_misaligned", "confirmed": True}), real


def _unequal_containers(dataset: Any) -> list[tuple[str, int, Site]]:
    """The containers a Dataset's ``__getitem__`` indexes with the sample's index, when their lengths
    differ (file names of every split, labels of one): the same index reads different samples."""
    if dataset is None:
        return []
    path = inspect.getsourcefile(type(dataset)) if inspect.isclass(type(dataset)) else None
    sized = []
    for name, line in indexed_attributes(type(dataset)):
        try:
            sized.append((name, len(getattr(dataset, name)), Site(path, line, "__getitem__")))
        except (TypeError, AttributeError):
            continue
    return sized if len({length for _, length, _ in sized}) > 1 else []


def _same_length(dataset: Any, container: tuple[str, int, Site]) -> list[tuple[str, list[Site]]]:
    """The dataset's other attributes as long as ``container``, with the lines of its file that set them:
    what the longer container was built from (labels taken from the whole table before its split)."""
    name, length, site = container
    found = []
    for other, value in vars(dataset).items():
        if other == name or isinstance(value, (str, bytes, dict)):
            continue
        try:
            same = len(value) == length
        except TypeError:
            continue
        sites = assignments(site.path, other) if same else []
        if sites:
            found.append((other, sites))
    return found


def _near_the_loop(ctx: ProbeContext, sites: list[Site]) -> list[Site]:
    """``sites`` with those in the function that calls the model first (where the loop prepares its
    data), then the rest in file order."""
    return sorted(sites, key=lambda site: not _in_the_loop(ctx, site))


def _in_the_loop(ctx: ProbeContext, site: Site) -> bool:
    """Whether ``site`` is in the function that calls the model (unknown: taken as yes)."""
    loop = ctx.run.facts.model_site
    return loop is None or (site.path == loop.path and
                            enclosing_function(site.path, site.line) == enclosing_function(loop.path, loop.line))


def _generalisation(ctx: ProbeContext, train: list[Any], held_out: Any) -> tuple[float, float, float, float] | None:
    """(train loss first, last, held-out loss before, after) for ALIGNMENT_STEPS steps on ``train``."""
    trainer = ctx.trainer
    trainer.reset(ctx.break_state)
    before = trainer.step(held_out, Adjust(lr_scale=0.0)).loss
    losses = []
    for index in range(ALIGNMENT_STEPS):
        if ctx.cancelled() or ctx.time_left() <= 0:
            return None
        losses.append(trainer.step(train[index % len(train)], Adjust()).loss)
    after = trainer.step(held_out, Adjust(lr_scale=0.0)).loss
    values = finite(losses)
    if before is None or after is None or len(values) < 4:
        return None
    return _head(values), _tail(values), before, after
