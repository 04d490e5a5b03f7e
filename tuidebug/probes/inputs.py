"""The NaN check on the data: NaN or Inf in the failing batch or the dataset, and where it came from.

Where the data set's own tensor holds them, the variable that holds it is looked up in the
script's frames and globals, the lines that assign it are read, and a division on such a line is
evaluated from the values still held: a standardisation by a std of 0 names its column and line.
The trial replays the failing step with the non-finite values replaced by 0.
"""

from __future__ import annotations

import ast
import inspect
import math
import sys
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import torch

from tuidebug.batches import holds_nonfinite, map_tensors, tensors_in
from tuidebug.probes.unsafe_math import FIXES, Culprit, ForwardWatch, display_name
from tuidebug.probe_api import (FAIL, PASS, Adjust, LoopGone, NeedsLoop, NoPipeline, ProbeContext, ProbeOutcome, Trainer,
                                probe)
from tuidebug.probes.source import (Unsafe, assignments, divisions, evaluate, in_files, names_of, nan_literals,
                                    same_data, unguarded_logs, zero_entries)
from tuidebug.sites import Site, frame_locals

SCAN_SAMPLES = 5000
SCAN_SECONDS = 10.0
SHOWN = 8
# A sample whose __getitem__ draws at random (a crop, a gain) may come out non-finite only for some
# draws: it is fetched again up to REFETCHES times (within REFETCH_SECONDS) to catch the op that does it.
REFETCHES = 50
REFETCH_SECONDS = 3.0
# What to do about each kind of floating-point warning numpy gave at a line of the script.
NUMPY_FIXES = {
    "divide by zero": "guard the denominator where it is 0 (drop those rows, or divide by np.where(d == 0, 1, d))",
    "invalid value": "guard the operation where it is undefined (0/0, the log or sqrt of a negative): drop those "
                     "rows or clip its argument",
    "overflow": "rescale the values before the operation (np.exp of a large value overflows; subtract the max first)",
}


def nonfinite_tensors(batch: Any, carried: Any = ()) -> list[str]:
    """One line per tensor holding NaN/Inf: how many values, which rows, which columns. Tensors at the
    paths in ``carried`` are state the model computed (an RNN's hidden state fed back in), not data."""
    return [line for _, line in _nonfinite(batch, carried)]


def _nonfinite(batch: Any, carried: Any = ()) -> list[tuple[str, str]]:
    found = []
    for path, tensor in tensors_in(batch):
        if not tensor.is_floating_point() and not tensor.is_complex() or path in carried:
            continue
        bad = ~torch.isfinite(tensor.detach())
        count = int(bad.sum())
        if not count:
            continue
        text = f"{path}: {count} NaN/Inf value(s)" + _kinds(tensor.detach())
        if tensor.dim():
            rows = nonfinite_rows(tensor)
            text += f" in {len(rows)} of {tensor.shape[0]} rows {rows[:SHOWN]}"
        if tensor.dim() == 2:
            text += _column_text(bad)
        found.append((path, text))
    return found


def _kinds(tensor: torch.Tensor) -> str:
    """Which non-finite values: a -inf is the log of 0, a NaN is 0/0 or an operation on a NaN."""
    if tensor.is_complex():
        return ""
    counts = [(int(torch.isnan(tensor).sum()), "NaN"), (int(torch.isneginf(tensor).sum()), "-inf"),
              (int(torch.isposinf(tensor).sum()), "+inf")]
    return " (" + ", ".join(f"{count} {kind}" for count, kind in counts if count) + ")"


def _column_text(bad: torch.Tensor) -> str:
    columns = bad.any(dim=0).nonzero().flatten().tolist()
    everywhere = bad.all(dim=0).nonzero().flatten().tolist()
    text = f", in {_columns(columns)}"
    if everywhere:
        text += f" ({_columns(everywhere)} NaN/Inf in every row)"
    return text


def _columns(indices: list[int]) -> str:
    shown = ", ".join(str(i) for i in indices[:SHOWN]) + (f" and {len(indices) - SHOWN} more" if len(indices) > SHOWN else "")
    return f"column {shown}" if len(indices) == 1 else f"columns {shown}"


@dataclass
class Provenance:
    """Where the data set's non-finite values come from: the evidence lines, and what they name (the
    variables assigned the values, with their lines; a division on such a line by a value that is 0)."""

    lines: list[str] = field(default_factory=list)
    assigned: list[tuple[str, Site]] = field(default_factory=list)
    divided: list[tuple[str, Site, str]] = field(default_factory=list)  # (variable, line, the denominator)


def scan_dataset(ctx: ProbeContext, dataset: Any) -> tuple[list[tuple[int, str]], int, str]:
    """Map-style datasets: the samples holding NaN/Inf among the first SCAN_SAMPLES (bounded in time),
    as (index, evidence line)."""
    if dataset is None or isinstance(dataset, torch.utils.data.IterableDataset) or not hasattr(dataset, "__len__"):
        return [], 0, "no map-style dataset to scan"
    total = min(len(dataset), int(ctx.params.get("scan", SCAN_SAMPLES)))
    found, deadline = [], time.monotonic() + SCAN_SECONDS
    for index in range(total):
        if ctx.cancelled() or time.monotonic() > deadline:
            return found, index, f"scanned {index} of {len(dataset)} samples (stopped early)"
        for line in nonfinite_tensors(dataset[index]):
            found.append((index, f"sample {index}: {line.replace('batch', 'sample', 1)}"))
        ctx.progress((index + 1) / total, f"scanning sample {index + 1}/{total}")
    return found, total, f"scanned {total} of {len(dataset)} samples"


def made_in_getitem(dataset: Any, indices: list[int], tries: int = 1) -> tuple[list[str], Culprit | None]:
    """For samples that come out of ``__getitem__`` with NaN/Inf: the op of the user's code that made
    the value non-finite, found by fetching the sample again under an op watch (up to ``tries`` times,
    for a random draw), and what its operands held (a constant image divided by its own range: 0 / 0)."""
    lines, found = [], None
    stop = time.monotonic() + REFETCH_SECONDS
    for index in indices:
        for _ in range(tries):
            watch = ForwardWatch()
            with watch, warnings.catch_warnings():
                warnings.simplefilter("ignore")
                dataset[index]
            if watch.first or watch.first_other or time.monotonic() > stop:
                break
        culprit = watch.first or watch.first_other
        if culprit is None:
            continue
        found = found or culprit
        lines.append(f"sample {index} is made non-finite in the Dataset: {culprit.line(in_model=False)}")
        lines += [f"sample {index}: {risk}" for site, risk in watch.risky.items() if site == str(culprit.site)]
    return lines, found


def failing_samples(ctx: ProbeContext) -> list[tuple[int, int]]:
    """(row, dataset index) of the failing batch's rows that hold NaN/Inf, where the loader said which
    samples it fetched."""
    recent = getattr(ctx.run.failure, "recent", None) or []
    captured = recent[-1] if recent else None
    indices = getattr(captured, "indices", None)
    if not indices:
        return []
    rows: set[int] = set()
    for _, tensor in tensors_in(captured.batch):
        if tensor.is_floating_point() and tensor.dim() and tensor.shape[0] == len(indices):
            rows.update(nonfinite_rows(tensor))
    return [(row, indices[row]) for row in sorted(rows)]


def nonfinite_rows(tensor: torch.Tensor) -> list[int]:
    """The rows (first dimension) of ``tensor`` that hold a NaN or an Inf."""
    bad = ~torch.isfinite(tensor.detach())
    return bad.reshape(bad.shape[0], -1).any(dim=1).nonzero().flatten().tolist()


def data_tensors(dataset: Any, windows: bool = False) -> list[tuple[str, Any]]:
    """The tensors (or arrays) a dataset keeps for all its samples: TensorDataset's, or its attributes
    with one row per sample; with ``windows``, also those with more rows than samples (a series cut
    into windows: sample i is rows i to i + k)."""
    if dataset is None:
        return []
    if isinstance(dataset, torch.utils.data.TensorDataset):
        return [(f"dataset.tensors[{i}]", t) for i, t in enumerate(dataset.tensors)]
    size = len(dataset) if hasattr(dataset, "__len__") else None
    found = []
    for name, value in vars(dataset).items():
        shape = getattr(value, "shape", None)
        if shape is not None and len(shape) >= 1 and (size is None or shape[0] == size or
                                                      windows and shape[0] > size):
            found.append((f"dataset.{name}", value))
    return found


def provenance(ctx: ProbeContext, dataset: Any) -> Provenance:
    """Where the data set's non-finite columns come from: the variable, its lines, a zero divisor."""
    found = Provenance()
    lines = found.lines
    frames = ctx.run.user_frames()
    main = sys.modules.get("__main__")
    for label, data in data_tensors(dataset, windows=True):
        try:
            values = torch.as_tensor(data) if not isinstance(data, torch.Tensor) else data
        except (TypeError, ValueError, RuntimeError):
            continue
        if not values.is_floating_point():
            continue
        bad = ~torch.isfinite(values.detach())
        if not bool(bad.any()):
            continue
        share = float(bad.reshape(bad.shape[0], -1).any(dim=1).float().mean())
        text = f"{label}: {share:.0%} of the samples hold NaN/Inf"
        if values.dim() == 2:
            text += _column_text(bad)
        lines.append(text)
        lines += _attribute_lines(dataset, label)
        holders = names_of(data, frames)
        if not holders and main is not None:
            holders = [(name, None) for name, value in vars(main).items() if _same(value, data)]
        if not holders and values.dim() in (1, 2):
            holders = _same_pattern(values, bad, frames, main)
        for name, frame in holders[:2]:
            path = frame.f_code.co_filename if frame is not None else getattr(main, "__file__", "")
            scope = {**(frame.f_globals if frame is not None else vars(main)), **(frame_locals(frame) if frame else {})}
            _built(name, path, scope, found)
    return found


def _attribute_lines(dataset: Any, label: str) -> list[str]:
    """Where the Dataset's class builds the attribute that holds the values (``self.readings = ...``)."""
    if not label.startswith("dataset.") or "[" in label:
        return []
    try:
        path = inspect.getsourcefile(type(dataset))
    except TypeError:
        return []
    name = label.split(".", 1)[1]
    return [f"`self.{name}` is built at {Site(path, site.line, '')}" for site in assignments(path, name)] if path else []


def _same_pattern(values: torch.Tensor, bad: torch.Tensor, frames: list[Any], main: Any) -> list[tuple[str, Any]]:
    """Arrays the script holds with NaN/Inf in the same columns (a series: a column of one), the data set's
    tensor copied from one of them (torch.tensor(array) copies): that one's lines say where the values came
    from."""
    if values.dim() == 1:
        values, bad = values.unsqueeze(1), bad.unsqueeze(1)
    columns = bad.any(dim=0)
    found = []
    scopes = [(frame_locals(f), f) for f in frames] + ([(vars(main), None)] if main is not None else [])
    for scope, frame in scopes:
        for name, value in list(scope.items()):
            shape = getattr(value, "shape", None)
            if isinstance(shape, tuple) and len(shape) == 1:
                shape = (*shape, 1)
            if name.startswith("_") or not isinstance(shape, tuple) or len(shape) != 2 or shape[1] != values.shape[1]:
                continue
            try:
                other = torch.as_tensor(value).reshape(shape)
            except (TypeError, ValueError, RuntimeError):
                continue
            if other.is_floating_point() and bool(((~torch.isfinite(other)).any(dim=0) == columns).all()):
                found.append((name, frame))
    return found


def _same(value: Any, data: Any) -> bool:
    try:
        return same_data(value, data)
    except Exception:
        return False


def _built(name: str, path: str, scope: dict[str, Any], found: Provenance) -> None:
    """The lines that assign ``name``, and any division on them by a value that is 0 somewhere."""
    lines = found.lines
    for site in assignments(path, name):
        site = Site(site.path, site.line, "")
        lines.append(f"`{name}` is assigned at {site}")
        found.assigned.append((name, site))
        for denominator in divisions(site):
            try:
                value = evaluate(denominator, scope)
            except (Unsafe, Exception):
                continue
            zeros = zero_entries(value)
            if zeros:
                what = _source(denominator)
                lines.append(f"at {site.short} `{name}` is divided by `{what}`, which is 0 at index(es) {zeros[:SHOWN]}: "
                             "0/0 gives NaN there (a std or range of 0: a constant feature)")
                found.divided.append((name, site, f"`{what}`, which is 0 at index(es) {zeros[:SHOWN]}"))


def _source(node: Any) -> str:
    try:
        return ast.unparse(node)
    except Exception:
        return "the denominator"


def clean(batch: Any) -> Any:
    return map_tensors(batch, lambda t: torch.nan_to_num(t, nan=0.0, posinf=0.0, neginf=0.0)
                       if t.is_floating_point() else t)


def failing_batch(ctx: ProbeContext) -> tuple[Trainer | None, Any]:
    """The failing step's batch and a trainer to replay it with; where no pipeline can run (a loss that
    cannot be rebuilt, a loop that ended), the model's inputs at the failing step as the hooks kept them,
    without a trainer: what was fed is what this check reads first."""
    try:
        trainer = ctx.trainer
        return trainer, trainer.prepare()
    except (NoPipeline, NeedsLoop, LoopGone):
        failure = ctx.run.failure
        if failure is None or not failure.inputs:
            raise
        fed = failure.inputs[-1]
        return None, (fed.args, fed.kwargs)


def _held_as(ctx: ProbeContext, batch: Any) -> list[str]:
    """For a loop without a Dataset: the variables of the user's frames that hold the batch's non-finite
    tensors (``features`` in main()), where the data was made."""
    frames = ctx.run.user_frames()
    lines = []
    for path, tensor in tensors_in(batch):
        if holds_nonfinite(tensor):
            names = [f"`{name}` in {frame.f_code.co_name}()" for name, frame in names_of(tensor, frames)]
            if names:
                lines.append(f"{path} is {', '.join(names[:SHOWN])}")
    return lines


def _cleaned_replay(ctx: ProbeContext, trainer: Trainer | None, batch: Any) -> tuple[bool | None, str]:
    """Whether the failing batch with its NaN/Inf replaced by 0 trains finite, and the evidence line."""
    if trainer is None:
        return None, "not replayed with the NaN/Inf replaced: the pipeline cannot be run here"
    try:
        trainer.reset(ctx.break_state)
        result = trainer.step(clean(batch), Adjust())
    except NoPipeline as exc:
        return None, f"not replayed with the NaN/Inf replaced: {exc}"
    except (NeedsLoop, LoopGone):
        return None, "not replayed with the NaN/Inf replaced: the script's loop ended first"
    finite = result.loss is not None and math.isfinite(result.loss) and result.grads_finite
    return finite, f"the failing batch with NaN/Inf replaced by 0: loss {result.loss}, " \
                   f"{'finite' if finite else 'still not finite'}"


@probe("nan.inputs")
def nan_inputs(ctx: ProbeContext) -> ProbeOutcome:
    trainer, batch = failing_batch(ctx)
    in_batch = nonfinite_tensors(batch, getattr(trainer, "carried", ()))
    dataset = ctx.run.dataset()
    bad_samples, scanned, scan_note = scan_dataset(ctx, dataset)
    in_dataset = [line for _, line in bad_samples]
    sources = provenance(ctx, dataset) if in_batch or in_dataset else Provenance()
    origin = sources.lines
    made, culprit = made_in_getitem(dataset, [index for index, _ in bad_samples[:1]])
    if culprit is None and in_batch and not in_dataset and dataset is not None:
        rows = failing_samples(ctx)
        if rows:
            origin.append("the failing batch's non-finite rows are dataset sample(s) "
                          + ", ".join(f"{index} (row {row})" for row, index in rows[:SHOWN])
                          + ": none is non-finite when fetched once, so each is fetched again")
            made, culprit = made_in_getitem(dataset, [index for _, index in rows[:3]], tries=REFETCHES)
    origin += made
    if in_batch and dataset is None:
        origin += _held_as(ctx, batch)
    evidence = in_batch + origin + in_dataset[:12] + [scan_note]
    data: dict[str, Any] = {"samples": [f"sample {index}" for index, _ in bad_samples], "definitive": True}
    if not in_batch and not in_dataset:
        return ProbeOutcome(PASS, f"no NaN/Inf in the failing batch nor in {scanned} dataset samples",
                            evidence, data=data)
    if in_batch and not in_dataset and (made_by_model := _model_output_nonfinite(ctx)):
        return ProbeOutcome(PASS, "the failing batch's NaN/Inf are not data: " + made_by_model,
                            evidence + [made_by_model], data=data)
    if in_batch:
        data["confirmed"], line = _cleaned_replay(ctx, trainer, batch)
        evidence.append(line)
    warned = [f"numpy warned \"{message}\" at {site} while the script ran"
              for site, message in ctx.run.facts.numeric_warnings]
    evidence += warned
    found = [f"{len(in_batch)} tensor(s) of the failing batch"] if in_batch else []
    found += [f"{len(in_dataset)} dataset sample(s)"] if in_dataset else []
    summary = f"NaN/Inf in the inputs: {' and '.join(found)}"
    if culprit is not None:
        summary += f"; made by {display_name(culprit.op)} at {culprit.site.short} in the Dataset's __getitem__"
        fix = f"at {culprit.site.short} (`{culprit.site.text}`): {FIXES[culprit.kind]}"
    elif sources.divided:
        name, site, denominator = sources.divided[0]
        summary += f"; at {site.short} `{name}` is divided by {denominator} (a std of 0)"
        fix = (f"guard the standardisation at {site.short}: divide by (std + 1e-8) or drop the constant "
               "column(s); assert torch.isfinite(x).all() after preprocessing")
    elif ctx.run.facts.numeric_warnings:
        site, message = ctx.run.facts.numeric_warnings[0]
        summary += f"; numpy warned \"{message}\" at {site.short}"
        fix = f"at {site} (where numpy warned \"{message}\"): {_numpy_fix(message)}; then assert np.isfinite(x).all()"
    elif written := _nan_written(ctx, dataset):
        evidence += [f"the script writes NaN into values at {site}" for site in written[:3]]
        summary += f"; the script writes NaN for missing values at {written[0].short}"
        fix = (f"at {written[0]}: fill the missing values (interpolate, carry the last reading, a column mean) or "
               "leave out the samples that have them, instead of keeping NaN")
    elif sources.assigned:
        name, site = sources.assigned[0]
        fix = (f"drop or fill the NaN/Inf rows of `{name}` where it is made ({site.short}), e.g. "
               f"`{name} = {name}[np.isfinite({name}).reshape(len({name}), -1).all(axis=1)]`, before the Dataset is built")
    elif logs := _logs_of_zero(ctx, batch):
        evidence += [f"every non-finite value is -inf, what a log of 0 gives: a log is taken at {site}" for site in logs[:3]]
        summary += f"; every one is -inf, a log of 0 (a log at {logs[0].short})"
        fix = (f"at {logs[0]}: keep the log's argument above 0 (`.clamp_min(1e-5)` before it), and find why it is 0 "
               "for those values (an empty band or bin, a silent frame, a constant feature)")
    else:
        fix = ("clean the data at its source: drop or impute those samples, or assert torch.isfinite(x).all() in "
               "the Dataset's __getitem__ so bad rows fail loudly")
    return ProbeOutcome(FAIL, summary, evidence, fix, data=data)


def _model_output_nonfinite(ctx: ProbeContext) -> str | None:
    """A call of the model in the failing iteration (a loop without a DataLoader keeps them) whose inputs are all
    finite and whose output, run again in the failing state, holds NaN or +inf, while the same call from the
    checkpoint before the failure gives a finite one: the network's own divergence. The batch's non-finite values
    are then not the data's: targets built from the model's output (a Q-learning target, a pseudo-label, a
    prediction fed back) carry its overflow into the loss. Outputs non-finite at the checkpoint too (a mask's -inf
    written on purpose) and weights already non-finite (the run went on past the break) say nothing. Running the
    model again changes what the snapshot restores; Python attributes a forward sets (a kept hidden state, a
    counter) are left as the last call set them, as in the other checks that run the model on its inputs."""
    failure, model, checkpoint = ctx.run.failure, ctx.run.model, ctx.run.checkpoint_before_failure()
    if failure is None or model is None or checkpoint is None or ctx.break_state is None:
        return None
    if any(not bool(torch.isfinite(t).all()) for t in [*model.parameters(), *model.buffers()] if t.is_floating_point()):
        return None
    for fed in (inputs for inputs in [*failure.inputs, *failure.untrained_inputs] if inputs.step == failure.step):
        given = [t for _, t in tensors_in((fed.args, fed.kwargs)) if t.is_floating_point()]
        if not given or any(map(holds_nonfinite, given)) or _diverged(model, fed) is not True:
            continue
        checkpoint[1].restore()
        try:
            earlier = _diverged(model, fed)
        finally:
            ctx.break_state.restore()
        if earlier is False:
            shapes = ", ".join(str(tuple(t.shape)) for t in given[:2])
            return (f"the model's own output holds NaN/+inf on finite inputs ({shapes}) in the failing state, and is "
                    f"finite on the same inputs from the checkpoint of step {checkpoint[0]}: the network diverges by "
                    "itself, and values built from its output (bootstrapped targets, predictions fed back) carry that "
                    "into the batch")
    return None


def _diverged(model: torch.nn.Module, fed: Any) -> bool | None:
    """Whether the model's output on ``fed`` holds NaN or +inf (-inf alone is a mask's fill), None where the model
    cannot take those inputs again."""
    try:
        with torch.no_grad(), torch.random.fork_rng():
            output = model(*fed.args, **fed.kwargs)
    except Exception:  # inputs the model cannot take again (a consumed iterator, a freed buffer)
        return None
    made = [t for _, t in tensors_in(output) if t.is_floating_point()]
    return any(bool((torch.isnan(t) | torch.isposinf(t)).any()) for t in made)


def _logs_of_zero(ctx: ProbeContext, batch: Any) -> list[Site]:
    """Where the user's code takes a log, when every non-finite value of the failing batch is -inf (no NaN,
    no +inf): the mark of a log of 0 made while the data was prepared."""
    values = [t.detach() for _, t in tensors_in(batch) if t.is_floating_point()]
    if not values or any(bool(torch.isnan(t).any() | torch.isposinf(t).any()) for t in values) or \
            not any(bool(torch.isneginf(t).any()) for t in values):
        return []
    return in_files(ctx.run.facts.source_files, unguarded_logs)


def _nan_written(ctx: ProbeContext, dataset: Any) -> list[Site]:
    """The user's lines that put NaN into values on purpose (``np.nan if v is None``), those in the
    Dataset's own class first."""
    written = in_files(ctx.run.facts.source_files, nan_literals)
    try:
        lines, first = inspect.getsourcelines(type(dataset)) if dataset is not None else ([], 0)
        path = inspect.getsourcefile(type(dataset)) if dataset is not None else None
    except (OSError, TypeError):
        lines, first, path = [], 0, None
    return sorted(written, key=lambda site: not (site.path == path and first <= site.line < first + len(lines)))


def _numpy_fix(message: str) -> str:
    return next((fix for kind, fix in NUMPY_FIXES.items() if message.startswith(kind)), NUMPY_FIXES["invalid value"])
