"""Whether the model keeps the samples of a batch apart: change one sample's input, see which outputs move.

In eval mode (BatchNorm on its running statistics, no dropout) a model that treats its samples apart moves
only that sample's output when that sample's input changes. A ``reshape`` that reads the batch as another
dim, or a sequence-first layer given a batch-first tensor, moves other samples' outputs too (MIXED): the
model can still fit one batch, yet learns nothing that carries over. A batch sorted for packing and never
put back moves exactly one other sample's output (REORDERED): each output meets another sample's label.
The op where that starts is found the same way, on the outputs of the forward's ops on the user's lines.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from tuidebug.batches import first_dim, map_tensors, tensors_of
from tuidebug.probe_api import FAIL, INCONCLUSIVE, PASS, ProbeContext, ProbeOutcome, probe
from tuidebug.probes.source import calls_named, function_lines
from tuidebug.probes.watch import OpWatch
from tuidebug.sites import Site

APART, REORDERED, MIXED = "apart", "reordered", "mixed"
UNSTABLE = "unstable"  # two runs on the same inputs, from the same random state, differ: no change can be read
# The op outputs kept for the search of where the samples part ways: the forward's first ones, in order.
KEPT_OUTPUTS = 400
# A row "moved" when it changed by more than this share of the tensor's largest value: the other rows are
# computed from the same numbers as before and come out the same, up to a reduction's rounding at most.
MOVED = 1e-5


@dataclasses.dataclass
class Output:
    name: str
    site: Site
    tensor: torch.Tensor


class Outputs(OpWatch):
    """The floating outputs of the forward's ops on the user's lines that have a dim of the batch's size."""

    def __init__(self, batch: int) -> None:
        super().__init__()
        self.batch = batch
        self.seen: list[Output] = []

    def visit(self, name: str, args: tuple, kwargs: dict, result: Any, site: Site) -> None:
        for tensor in tensors_of([result]):
            if tensor.is_floating_point() and self.batch in tensor.shape:
                self.seen.append(Output(name, site, tensor))

    def done(self) -> bool:
        return len(self.seen) >= KEPT_OUTPUTS


@dataclasses.dataclass
class Chart:
    """How the model's outputs follow a change of one sample (APART, REORDERED, MIXED; None: they do not
    move), and between which ops of the forward the samples part ways."""

    outputs: list[tuple[int, ...]]
    samples: str | None
    first_mixed: Output | None = None
    last_apart: Output | None = None


def moved_rows(before: torch.Tensor, after: torch.Tensor, dim: int) -> list[int]:
    """The indices along ``dim`` whose slices changed between the two runs."""
    if before.dim() <= dim or not before.numel():
        return []
    change = (after.detach().float() - before.detach().float()).abs().movedim(dim, 0)
    change = change.reshape(change.shape[0], -1).amax(1)  # a 1-D output (a logit per sample) has no dim 1 to flatten
    scale = max(float(before.detach().float().abs().max()), 1e-12)
    return (change > MOVED * scale).nonzero().flatten().tolist()


def samples_in(before: torch.Tensor, after: torch.Tensor, row: int, batch: int) -> str | None:
    """How ``after`` (sample ``row``'s input changed) differs from ``before`` along the dims of the batch's size:
    APART when along some such dim only ``row`` moved, REORDERED when exactly one other index did, else MIXED;
    None when nothing moved."""
    if before.shape != after.shape:
        return None
    found = None
    for dim in (d for d, size in enumerate(before.shape) if size == batch):
        moved = moved_rows(before, after, dim)
        if moved == [row]:
            return APART
        if len(moved) == 1:
            found = REORDERED
        elif moved and found is None:
            found = MIXED
    return found


def chart(model: torch.nn.Module, args: tuple, kwargs: dict, batch: int) -> Chart | None:
    """Run the model in eval mode on (args, kwargs), then with the first sample changed, then with the last; None
    when no input can be changed (no tensor with the batch first). Modes are put back; nothing is trained."""
    runs = [_run(model, args, kwargs, batch)]
    again, _ = _run(model, args, kwargs, batch)
    if any(a.shape != b.shape or moved_rows(a, b, 0) for a, b in zip(runs[0][0], again)):
        return Chart([tuple(t.shape) for t in runs[0][0]], UNSTABLE)
    for row in (0, batch - 1):
        changed = _with_sample_changed(args, kwargs, batch, row)
        if changed is None:
            return None
        runs.append(_run(model, *changed, batch))
    (outputs, seen), readings = runs[0], []
    for row, (other, other_seen) in zip((0, batch - 1), runs[1:]):
        readings += [r for a, b in zip(outputs, other) if (r := samples_in(a, b, row, batch)) is not None]
    samples = APART if APART in readings else MIXED if MIXED in readings else readings[0] if readings else None
    if samples == MIXED and _each_input_reordered(model, args, kwargs, batch, outputs):
        samples = REORDERED
    found = Chart([tuple(t.shape) for t in outputs], samples)
    if samples in (REORDERED, MIXED):
        _locate(found, seen, runs[1][1], batch)
    return found


def _each_input_reordered(model: torch.nn.Module, args: tuple, kwargs: dict, batch: int,
                          outputs: list[torch.Tensor]) -> bool:
    """Whether sample 0 changed in one input at a time moves one output each time, another sample's at least
    once: a model given two inputs a sample (a pair's two sentences) that sorts each by its own lengths moves
    two outputs when both change, and mixes nothing."""
    readings = []
    for index in range(_tensor_count((args, kwargs))):
        changed = _with_sample_changed(args, kwargs, batch, 0, only=index)
        if changed is None:
            continue
        other, _ = _run(model, *changed, batch)
        readings += [r for a, b in zip(outputs, other) if (r := samples_in(a, b, 0, batch)) is not None]
    return REORDERED in readings and all(reading in (REORDERED, APART) for reading in readings)


def _tensor_count(value: Any) -> int:
    """How many tensors ``map_tensors`` visits in ``value``: the indices ``_with_sample_changed`` counts."""
    count = [0]

    def seen(tensor: torch.Tensor) -> torch.Tensor:
        count[0] += 1
        return tensor

    map_tensors(value, seen)
    return count[0]


def _run(model: torch.nn.Module, args: tuple, kwargs: dict, batch: int) -> tuple[list[torch.Tensor], list[Output]]:
    """One forward in eval mode, from the same random state each time (a VAE's sampled latent, a layer built
    in forward draw the same numbers in every run); the script's own random state is put back after."""
    modes = [(m, m.training) for m in model.modules()]
    model.eval()  # BatchNorm on its running statistics, no dropout: nothing that mixes samples on purpose
    try:
        with torch.no_grad(), torch.random.fork_rng():
            torch.manual_seed(0)
            watch = Outputs(batch)
            with watch:
                output = model(*args, **kwargs)
    finally:
        for module, training in modes:
            module.training = training
    values = list(output.values()) if isinstance(output, dict) else output
    outputs = [t for t in tensors_of([values] if isinstance(values, torch.Tensor) else list(values))
               if t.is_floating_point() and batch in t.shape]
    return outputs, watch.seen


def _with_sample_changed(args: tuple, kwargs: dict, batch: int, row: int,
                         only: int | None = None) -> tuple[tuple, dict] | None:
    """(args, kwargs) with sample ``row`` changed: its floating features shifted, its first token id (of an id
    matrix) replaced by another sample's; in every input, or in the ``only``-th tensor alone. Per-sample scalars
    (lengths) are kept, so that a sort by them sorts the same way."""
    changed = [False]
    other = (row + 1) % batch
    index = [-1]

    def change(t: torch.Tensor) -> torch.Tensor:
        index[0] += 1
        if (only is not None and index[0] != only) or t.dim() == 0 or t.shape[0] != batch:
            return t
        t = t.clone()
        if t.is_floating_point():
            t[row] += 0.5 * float(t.float().std()) + 0.1 if t.numel() > 1 else 0.1
        elif t.dim() >= 2 and t.dtype != torch.bool:
            flat_row, flat_other = t[row].view(-1), t[other].view(-1)
            differs = (flat_row != flat_other).nonzero().flatten()
            if not len(differs):
                return t
            flat_row[differs[0]] = flat_other[differs[0]]
        else:
            return t
        changed[0] = True
        return t

    result = map_tensors((args, kwargs), change)
    return result if changed[0] else None


def _locate(found: Chart, seen: list[Output], changed: list[Output], batch: int) -> None:
    """The first op output (in the forward's order, the same op in both runs) that does not keep sample 0 apart,
    and the last before it that does."""
    for before, after in zip(seen, changed):
        if before.name != after.name:
            return
        samples = samples_in(before.tensor, after.tensor, 0, batch)
        if samples == APART:
            found.last_apart = before
        elif samples is not None:
            found.first_mixed = before
            return


@probe("shape.mixing")
def mixing(ctx: ProbeContext) -> ProbeOutcome:
    model, called = ctx.run.model, ctx.run.model_inputs()
    batch = first_dim(tensors_of(called)) if called is not None else None
    if model is None or called is None or not batch or batch < 2:
        return ProbeOutcome(INCONCLUSIVE, "no batch of two samples or more seen at the model's call", [])
    not_batch = _dim_0_not_the_batch(tensors_of(called), batch, ctx.run.loader_batch_size())
    if not_batch is not None:
        return ProbeOutcome(INCONCLUSIVE, f"the model's latest input is {not_batch}: this check changes one sample "
                            "along dim 0, which does not hold the samples here", [])
    found = chart(model, *called, batch)
    if found is None:
        return ProbeOutcome(INCONCLUSIVE, "no input of the model's call has the batch first to change one sample of", [])
    evidence = [f"the model run in eval mode on its latest inputs, then with sample 0 and sample {batch - 1} changed: "
                f"which of its outputs {', '.join(map(str, found.outputs[:2])) or '?'} moved"]
    if found.samples is None:
        return ProbeOutcome(INCONCLUSIVE, "the model's outputs do not change with its inputs", evidence)
    if found.samples == UNSTABLE:
        return ProbeOutcome(INCONCLUSIVE, "two runs of the model on the same inputs, from the same random state, give "
                            "different outputs: what a changed sample moves cannot be told", evidence)
    if found.samples == APART:
        return ProbeOutcome(PASS, "the model keeps the samples apart: changing one sample's input moves its own "
                            "output only", evidence)
    if found.samples == REORDERED:
        return _reordered(found, evidence)
    evidence.append("changing one sample's input moves the outputs of other samples of the batch: the model mixes them")
    mixed, before = found.first_mixed, _before(found, evidence)
    if mixed is None:
        return ProbeOutcome(FAIL, "the model mixes the samples of a batch: each output depends on other samples' inputs",
                            evidence, "find the reshape, view or permute that moves the batch dimension (keep the "
                            "batch first: x.view(x.size(0), ...), and transpose, not view, to swap dims)",
                            data={"cause": "batch_folded"})
    return ProbeOutcome(
        FAIL, f"the samples of a batch mix at {mixed.site.short}: `{mixed.site.text}` makes each sample's output depend "
        "on other samples' inputs", evidence,
        f"keep the batch dimension where {mixed.name} at {mixed.site.short} reads it{before}: swap dims with "
        ".transpose()/.permute(), not .view()/.reshape(), and give a sequence-first layer (seq, batch, features) or "
        "build it with batch_first=True", data={"cause": "batch_folded", "site": str(mixed.site)})


def _dim_0_not_the_batch(inputs: list[torch.Tensor], batch: int, loader_batch: int | None) -> str | None:
    """The model's inputs not laid out batch first, said as the input's shape: the DataLoader's batch_size in
    dim 1 and not in dim 0 (a collate that makes them sequence first), or more rows in dim 0 than the DataLoader's
    batches hold (positions of a sequence-first call: a sampling loop's (seq, 1) prompt). None where dim 0 may
    be the batch (the loader's size, or an epoch's smaller last batch)."""
    if not loader_batch or batch == loader_batch:
        return None
    laid = next((t for t in inputs if t.dim() >= 2 and t.shape[1] == loader_batch), None)
    if laid is not None:
        return f"{tuple(laid.shape)}, sequence first, with the DataLoader's batch of {loader_batch} in dim 1"
    first = next((t for t in inputs if t.dim() >= 1), None)
    if batch > loader_batch and first is not None:
        return f"{tuple(first.shape)}, with {batch} rows in dim 0, more than the DataLoader's batches of {loader_batch}"
    return None


def _before(found: Chart, evidence: list[str]) -> str:
    """The evidence of where the samples part ways, and `` (its input comes from ...)`` for the fix."""
    changed, kept = found.first_mixed, found.last_apart
    if changed is None:
        return ""
    evidence.append(f"first op whose output for sample 0 follows other samples' inputs: {changed.name} at "
                    f"{changed.site}, output {tuple(changed.tensor.shape)}")
    if kept is None:
        return ""
    evidence.append(f"the last op before it that kept them apart: {kept.name} at {kept.site}, output {tuple(kept.tensor.shape)}")
    return f" (its input comes from {kept.name} at {kept.site.short})"


def _reordered(found: Chart, evidence: list[str]) -> ProbeOutcome:
    """Changing one sample moves exactly one other output: the model returns the batch in another order (a sort
    for packing never undone), so each output meets another sample's label."""
    evidence.append("changing one sample (in one input at a time) moves exactly one output, another sample's: the "
                    "model returns the batch in another order than it was given")
    changed, before = found.first_mixed, _before(found, evidence)
    where = f" at {changed.site.short} (`{changed.site.text}`)" if changed is not None else ""
    sorts = _sorts_before(changed.site) if changed is not None else []
    if sorts:
        evidence.append("the batch is sorted in the same function, and the order never put back: "
                        + ", ".join(str(site) for site in sorts))
        where = f" (sorted at {sorts[0].short}, `{sorts[0].text}`)"
    return ProbeOutcome(
        FAIL, f"the model returns its samples in another order{where}: each output meets another sample's label",
        evidence, f"put the outputs back in the order of the inputs{where}{before}: keep the permutation of a sort "
        "(sorted, order = lengths.sort(descending=True)) and index the result with order.argsort()",
        data={"cause": "labels_misaligned", "site": str(changed.site) if changed is not None else None})


def _sorts_before(site: Site) -> list[Site]:
    """The calls to sort/argsort/sorted in the function of ``site``, up to its line: the sort whose order the
    model's outputs keep."""
    lines = function_lines(site.path, site.line)
    if lines is None:
        return []
    sorts = calls_named(site.path, {"sort", "argsort", "sorted"})
    return [found for found in sorts if lines[0] <= found.line <= site.line]
