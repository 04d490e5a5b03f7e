"""A run that looks healthy while one batch fits slowly: does its optimizer hold frozen weights it was meant to train?

A param group is the user saying "these train, at this rate": a group whose every parameter has
requires_grad=False, beside groups that do train, was meant to train (a freeze that a later
"unfreeze" did not undo). So was a frozen weight whose own module's other parameters train (a layer
written from scratch whose weight is made with ``nn.Parameter(..., requires_grad=False)`` while its
bias trains): a deliberate freeze sets a whole part of the model aside. A fixed backbone handed to the
optimizer together with its head, in one group as accelerate's examples do, says nothing of the kind
and is not looked at.

The cause is proven by a trial on a copy: the same batch at the script's own rate, as it is and
with that group's parameters turned back on. When the batch fits only with them on, the freeze is
what holds the run back.
"""

from __future__ import annotations

import os

import torch

from tuidebug.probe_api import FAIL, INCONCLUSIVE, PASS, Adjust, ProbeContext, ProbeOutcome, optimizer_params, probe
from tuidebug.probes.overfit import STEPS, fit, near_zero
from tuidebug.probes.source import flag_setter_calls, flag_setters, freezes, in_files

EXAMPLES = 10
# A frozen group smaller than this share of the model's weights (a bias or a norm's scale set aside with
# its own rate and frozen) cannot be what keeps a batch from fitting: the trial is not worth its time.
MIN_SHARE = 0.05


@probe("learning.held_frozen", prefers_copy=True)
def held_frozen(ctx: ProbeContext) -> ProbeOutcome:
    trainer = ctx.trainer
    optimizer = getattr(trainer, "optimizer", None)
    if optimizer is None:
        return ProbeOutcome(INCONCLUSIVE, "the unfreeze trial needs a copy of the model and its optimizer")
    names = {id(p): name for name, p in trainer.named_parameters()}
    groups = frozen_groups(optimizer)
    frozen = [p for index in groups for p in optimizer.param_groups[index]["params"]] or split_frozen(optimizer, names)
    if not frozen:
        return ProbeOutcome(PASS, "no param group of the optimizer is frozen as a whole, and no layer's weight is "
                            "frozen while its other parameters train")
    total = sum(p.numel() for p in optimizer_params(optimizer))
    share = sum(p.numel() for p in frozen) / max(1, total)
    frozen_names = sorted(names[id(p)] for p in frozen if id(p) in names)
    owners = _parts(sorted({name.rsplit(".", 1)[0] for name in frozen_names})) if groups else frozen_names
    evidence = [f"param group {index} of the {type(optimizer).__name__} holds "
                f"{len(optimizer.param_groups[index]['params'])} parameter tensor(s) at lr "
                f"{optimizer.param_groups[index]['lr']:.3g}, every one with requires_grad=False" for index in groups]
    if not groups:
        evidence.append(f"the {type(optimizer).__name__} holds {len(frozen)} parameter(s) with requires_grad=False "
                        f"whose layer's other parameters train: {', '.join(frozen_names[:4])}")
    evidence.append(f"{share:.0%} of the optimizer's weights" + (f": {', '.join(owners[:4])}" if owners else ""))
    if share < MIN_SHARE:
        return ProbeOutcome(PASS, f"the frozen parameters hold only {share:.1%} of the weights: not what slows the "
                            "fit", evidence)
    batch = trainer.prepare(EXAMPLES)
    as_is, _ = fit(ctx, batch, STEPS, Adjust(freeze_schedule=True), ctx.break_state, share=0.5)
    positions = _positions(optimizer, frozen)
    unfrozen, _ = fit(ctx, batch, STEPS, Adjust(freeze_schedule=True, before_forward=lambda _: _unfreeze(
        trainer.optimizer, positions)), ctx.break_state)
    if not as_is or not unfrozen:
        return ProbeOutcome(INCONCLUSIVE, "the unfreeze trial ran out of time", evidence)
    evidence += [f"one batch at the script's rate, as it is: loss {as_is[0]:.4g} -> {min(as_is[-5:]):.4g} in "
                 f"{len(as_is)} steps",
                 f"the same with the frozen parameters turned back on: loss {unfrozen[0]:.4g} -> "
                 f"{min(unfrozen[-5:]):.4g} in {len(unfrozen)} steps"]
    if near_zero(as_is) or not near_zero(unfrozen):
        return ProbeOutcome(PASS, f"turning the frozen parameters back on does not make the batch fit where it did not "
                            f"(loss {min(as_is[-5:]):.4g} as it is, {min(unfrozen[-5:]):.4g} turned on)", evidence)
    return _verdict(ctx, owners, share, evidence, "a param group of the optimizer is frozen" if groups else
                    "layers train with their weight frozen")


def frozen_groups(optimizer: torch.optim.Optimizer) -> list[int]:
    """The indices of the param groups, at a rate above 0, whose parameters are all frozen, when
    another group trains: with one group only, or every group frozen, there is no choice to read."""
    groups = optimizer.param_groups
    frozen = [index for index, group in enumerate(groups) if group["params"] and group.get("lr", 0) > 0 and
              not any(p.requires_grad for p in group["params"])]
    trains = any(p.requires_grad for group in groups for p in group["params"])
    return frozen if frozen and trains else []


def _parts(modules: list[str]) -> list[str]:
    """The one module that holds all of ``modules`` (``backbone`` for backbone.0 and backbone.2), or them."""
    shared = os.path.commonprefix([name.split(".") for name in modules]) if modules else []
    return [".".join(shared)] if shared and len(modules) > 1 else modules


def split_frozen(optimizer: torch.optim.Optimizer, names: dict[int, str]) -> list[torch.Tensor]:
    """The parameters in a training param group with requires_grad=False whose module has another
    parameter in the optimizer that trains (``layers.0.weight`` frozen, ``layers.0.bias`` not)."""
    held = [p for group in optimizer.param_groups if group.get("lr", 0) > 0 for p in group["params"]]
    training = {names[id(p)].rsplit(".", 1)[0] for p in held if p.requires_grad and id(p) in names}
    return [p for p in held if not p.requires_grad and id(p) in names and names[id(p)].rsplit(".", 1)[0] in training]


def _positions(optimizer: torch.optim.Optimizer, params: list[torch.Tensor]) -> list[tuple[int, int]]:
    """Where ``params`` sit in the optimizer's groups: the same places in a fresh copy hold their copies."""
    wanted = {id(p) for p in params}
    return [(g, i) for g, group in enumerate(optimizer.param_groups) for i, p in enumerate(group["params"])
            if id(p) in wanted]


def _names(names: list[str]) -> str:
    return ", ".join(f"`{name}`" for name in names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _unfreeze(optimizer: torch.optim.Optimizer, positions: list[tuple[int, int]]) -> None:
    for group, index in positions:
        optimizer.param_groups[group]["params"][index].requires_grad_(True)


def _verdict(ctx: ProbeContext, owners: list[str], share: float, evidence: list[str], what: str) -> ProbeOutcome:
    files = ctx.run.facts.source_files
    where = in_files(files, freezes)
    evidence += [f"requires_grad is turned off at {site}" for site in where]
    setters = {name: found for path in sorted(files) for name, found in flag_setters(path).items()}
    unfreezes = [site for path in sorted(files) for site in flag_setter_calls(path, setters, True)]
    guarded = [(name, *found) for name, found in setters.items() if found[1] is not None]
    part = f"`{owners[0]}`" if len(owners) == 1 else _names(owners) if owners else "the frozen parameters"
    one = len(owners) == 1
    summary = (f"{what}: {part} ({share:.0%} of the weights) {'has' if one else 'have'} requires_grad=False and never "
               f"train{'s' if one else ''}; turned back on, one batch fits at the script's own rate")
    if guarded and unfreezes:
        name, assigned, guard = guarded[0]
        evidence.append(f"`{unfreezes[0].text}` at {unfreezes[0].short} does not turn them back on: `{assigned.text}` "
                        f"at {assigned.short} only runs under `{guard.text}` at {guard.short}, for parameters that "
                        "already require grad")
        fix = (f"drop the `{guard.text}` test at {guard.short} in {name}() so that `{assigned.text}` sets every "
               "parameter, frozen ones included")
    elif what.startswith("layers"):
        fix = f"make {part} trainable: drop the requires_grad=False " + (
            f"at {where[0].short} (`{where[0].text}`)" if where else "where they are made")
    else:
        fix = (f"turn requires_grad back on before building the optimizer: for p in model.{owners[0]}.parameters(): "
               "p.requires_grad = True" if owners else
               "turn requires_grad back on for the frozen group's parameters before building the optimizer") + \
            (f" (they are turned off at {where[0].short})" if where else "")
    return ProbeOutcome(FAIL, summary, evidence, fix, data={"cause": "frozen_parameters", "confirmed": True,
                                                             "sites": [str(site) for site in where]})
