"""The shape checks: the failing op explained, the forward traced module by module, the silent ones.

The protocol asks for assertions on ``tensor.shape`` before matmuls and losses; the hooks make them
without touching the script. ``shape.operands`` reads the exception's analysis (the module path and
its sizes, the shapes it got, the loss call and its targets, the user's line) or, without an
exception, what the hooks saw of the losses: an input and target that broadcast to another shape,
one-hot targets whose width follows the batch. ``shape.trace`` re-runs the model's forward on the
inputs of its latest call and records every module's input and output shapes in call order, with
the failing row marked, and the reshape that folds the batch dimension if one does.
"""

from __future__ import annotations

import ast
import math
from typing import Any

import torch

from tuidebug.batches import batch_size_of
from tuidebug.probe_api import FAIL, INCONCLUSIVE, PASS, ProbeContext, ProbeOutcome, probe
from tuidebug.probes.watch import OpWatch, tensors_of
from tuidebug.sites import Site

TRACE_ROWS = 40
RESHAPES = {"view", "reshape", "flatten", "permute", "transpose", "squeeze", "unsqueeze", "contiguous", "t"}
CONCATENATIONS = {"cat", "concat", "concatenate"}  # of batch-sized parts along dim 0: parts stacked into the batch


def shape_text(shape: Any) -> str:
    dims = [int(d) for d in shape]
    return "(" + ", ".join(map(str, dims)) + ("," if len(dims) == 1 else "") + ")"


@probe("shape.operands", on_training_thread=True)
def operands(ctx: ProbeContext) -> ProbeOutcome:
    crash = ctx.run.crash
    if crash is not None and crash.kind == "shape":
        evidence = crash.lines()
        summary = crash.findings[0] if crash.findings else f"shape error: {crash.exception}"
        if crash.site:
            summary += f" (at {crash.site.split(' ', 1)[0]})"
        return ProbeOutcome(FAIL, summary, evidence, crash.fix, data={"cause": crash.cause})
    facts = ctx.run.facts
    broadcast = next((c for c in facts.loss_calls.values() if c.broadcasts and c.function not in
                      ("cross_entropy", "nll_loss")), None)
    inputs = ctx.run.model_inputs()
    batch = batch_size_of(inputs) if inputs is not None else None
    if broadcast is not None and batch and broadcast.target_shape and broadcast.target_shape[0] == batch \
            and broadcast.input_shape and broadcast.input_shape[0] != batch:
        # The model's output has more (or fewer) rows than its input batch and the target: the model moved the
        # batch dimension (the trace finds the reshape), the broadcast is its symptom.
        return ProbeOutcome(PASS, f"{broadcast.function} at {broadcast.site.split(' ', 1)[0]} gets an input of "
                            f"{broadcast.input_shape[0]} rows for a batch of {batch}: the model changes the batch "
                            "dimension (the forward's trace says where)",
                            [f"loss call: {broadcast.function} at {broadcast.site}",
                             f"input {shape_text(broadcast.input_shape)}, target {shape_text(broadcast.target_shape)},"
                             f" model input batch {batch}"])
    if broadcast is not None:
        shape = tuple(torch.broadcast_shapes(torch.Size(broadcast.input_shape), torch.Size(broadcast.target_shape)))
        site = broadcast.site.split(" ", 1)[0]
        fix = (f"make both {shape_text(broadcast.input_shape)} at {site}: "
               + ("output.squeeze(-1) (or target.unsqueeze(-1) / target.view(-1, 1))"
                  if len(broadcast.input_shape) == len(broadcast.target_shape) + 1 and broadcast.input_shape[-1] == 1
                  else "target.view_as(output)"))
        return ProbeOutcome(
            FAIL, f"{broadcast.function} at {site} compares input {shape_text(broadcast.input_shape)} with target "
            f"{shape_text(broadcast.target_shape)}: they broadcast to {shape_text(shape)}, every output against every "
            "target, so the loss cannot reach its minimum", [f"loss call: {broadcast.function} at {broadcast.site}",
                                                              f"input {shape_text(broadcast.input_shape)} "
                                                              f"{broadcast.input_dtype}, target "
                                                              f"{shape_text(broadcast.target_shape)} {broadcast.target_dtype}"],
            fix, data={"cause": "loss_broadcast"})
    widths = {site: sorted(w) for site, w in facts.one_hot.items() if len(w) > 1}
    if widths:
        site, seen = next(iter(widths.items()))
        return ProbeOutcome(FAIL, f"F.one_hot without num_classes at {site.split(' ', 1)[0]} gives widths {seen}: the "
                            "width follows the largest label of each batch", [f"one-hot at {site}: widths {seen}"],
                            f"pass num_classes: F.one_hot(labels, num_classes={max(seen)}) (the number of classes)",
                            data={"cause": "shape_mismatch"})
    if crash is not None:
        return ProbeOutcome(PASS, f"the exception is not a shape error: {crash.exception}", crash.lines())
    return ProbeOutcome(PASS, "no shape error and no loss that broadcasts its input and target",
                        [f"{c.function} at {c.site}: input {shape_text(c.input_shape)}, target "
                         f"{shape_text(c.target_shape) if c.target_shape else '-'}" for c in facts.loss_calls.values()])


class Folds(OpWatch):
    """The first reshape in the forward whose output's first dimension is not the batch's any more."""

    def __init__(self, batch: int) -> None:
        super().__init__()
        self.batch = batch
        self.fold: tuple[str, Site, tuple[int, ...], tuple[int, ...]] | None = None  # op, site, shapes before, after

    def visit(self, name: str, args: tuple, kwargs: dict, result: Any, site: Site) -> None:
        inputs, outputs = tensors_of(args[:1]), tensors_of([result])
        if name not in RESHAPES | CONCATENATIONS or not inputs or not outputs or not inputs[0].dim() \
                or not outputs[0].dim():
            return
        before, after = inputs[0].shape, outputs[0].shape
        if before[0] == self.batch and after[0] != self.batch:
            self.fold = (name, site, tuple(before), tuple(after))

    def done(self) -> bool:
        return self.fold is not None


@probe("shape.trace", on_training_thread=True)
def trace(ctx: ProbeContext) -> ProbeOutcome:
    model, inputs = ctx.run.model, ctx.run.model_inputs()
    if model is None or inputs is None:
        return ProbeOutcome(INCONCLUSIVE, "no model call seen to trace")
    names = {id(m): n or type(m).__name__ for n, m in model.named_modules()}
    rows: list[dict[str, Any]] = []
    open_rows: list[int] = []  # the rows of the calls under way, outermost first

    def before(module: torch.nn.Module, args: Any) -> None:
        index = -1
        if len(rows) < TRACE_ROWS:
            rows.append({"module": names[id(module)], "type": type(module).__name__, "depth": len(open_rows),
                         "input": _shapes(args), "output": None, "dtype": "-",
                         "params": sum(p.numel() for p in module.parameters(recurse=False))})
            index = len(rows) - 1
        open_rows.append(index)

    def after(module: torch.nn.Module, args: Any, output: Any) -> None:
        index = open_rows.pop() if open_rows else -1
        if index >= 0 and output is not None:  # None: the call raised (``always_call``)
            rows[index].update(output=_shapes(output), dtype=_dtype(output))

    handles = [m.register_forward_pre_hook(before) for m in model.modules()]
    handles += [m.register_forward_hook(after, always_call=True) for m in model.modules()]
    batch = batch_size_of(inputs)
    folds = Folds(batch) if batch else None
    args, kwargs = inputs
    error = None
    try:
        with torch.no_grad():
            if folds is not None:
                with folds:
                    model(*args, **kwargs)
            else:
                model(*args, **kwargs)
    except Exception as exc:  # the failure being diagnosed: the trace stops at it
        error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    finally:
        for handle in handles:
            handle.remove()
    evidence = [f"trace: {row_text(row)}" for row in rows]
    data: dict[str, Any] = {"rows": rows}
    if error:
        evidence.append(f"the forward raised: {error}")
    if folds is not None and folds.fold is not None:
        name, site, before, after = folds.fold
        change = f"{shape_text(before)} -> {shape_text(after)}"
        evidence.append(f"{name} at {site} changes the batch dimension: {change}")
        per_sample = _per_sample_ratio(before, after)
        if per_sample:
            evidence.append(f"each sample has {per_sample}x the values the {name} makes room for: the input is larger "
                            "than the layers before it were sized for")
        fix = (f"concatenate along the features at {site.short} (torch.cat(parts, dim=1)), not along the batch, "
               "and size the next layer for it" if name in CONCATENATIONS else
               f"keep the batch first at {site.short}: {_batch_first(site.text, name)}"
               + (f", and give the model inputs of the size it was built for (each sample is {per_sample}x too large "
                  "here) or size its layers for them" if per_sample else ""))
        return ProbeOutcome(FAIL, f"`{name}` at {site.short} folds the batch dimension: {change}", evidence, fix,
                            data={**data, "cause": "batch_folded"})
    if error:
        return ProbeOutcome(FAIL, f"the forward fails: {error}", evidence, data={**data, "cause": "shape_mismatch"})
    return ProbeOutcome(PASS, f"the forward runs: {len(rows)} module call(s) traced", evidence, data=data)


def _per_sample_ratio(before: tuple[int, ...], after: tuple[int, ...]) -> int | None:
    """How many times the values of one sample before the fold fill one row after it (more than once: the
    reshape spilled the extra values of a too-large input into the batch)."""
    if len(before) < 2 or len(after) < 2:
        return None
    per_before, per_after = math.prod(before[1:]), math.prod(after[1:])
    ratio = per_before // per_after if per_after else 0
    return ratio if ratio > 1 and per_before == ratio * per_after else None


def _batch_first(text: str, name: str) -> str:
    """The reshape with its leading -1 given the batch instead: ``x.view(x.size(0), 32, 2, 4, 4)``."""
    try:
        call = next(node for node in ast.walk(ast.parse(text.strip().rstrip(":"), mode="exec"))
                    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == name)
    except (SyntaxError, StopIteration):
        call = None
    if call is not None and call.args and ast.unparse(call.args[0]) == "-1":
        receiver = ast.unparse(call.func.value)
        rest = ", ".join(ast.unparse(arg) for arg in call.args[1:])
        return f"{receiver}.{name}({receiver}.size(0), {rest})"
    return "x.view(x.size(0), -1) (or x.flatten(1))"


def row_text(row: dict[str, Any]) -> str:
    """One traced module call as a line: ``classifier.0 Linear: in (64, 128) -> FAILED, 65,664 params``."""
    params = f", {row['params']:,} params" if row["params"] else ""
    return f"{row['module']} {row['type']}: in {row['input']} -> {row['output'] or 'FAILED'}{params}"


def _dtype(value: Any) -> str:
    tensors = tensors_of(value if isinstance(value, (list, tuple)) else [value])
    return str(tensors[0].dtype).removeprefix("torch.") if tensors else "-"


def _shapes(value: Any) -> str:
    tensors = tensors_of(value if isinstance(value, (list, tuple)) else [value])
    if not tensors:
        return "-"
    return ", ".join(shape_text(t.shape) for t in tensors[:3])
