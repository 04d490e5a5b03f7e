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
import dataclasses
import itertools
import math
import operator
import re
from dataclasses import dataclass
from typing import Any

import torch

from tuidebug.batches import batch_size_of
from tuidebug.probe_api import FAIL, INCONCLUSIVE, PASS, ProbeContext, ProbeOutcome, probe
from tuidebug.probes.source import (assignments, call_argument, calls_named, in_files, keyword_values, reshaped_before,
                                    statement_start)
from tuidebug.probes.watch import OpWatch, op_tensors
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
    outside = facts.probabilities_outside()
    if outside is not None:
        return _probability_targets(outside)
    if facts.ignored_class is not None and "ignored_class" in facts.reported:
        return _ignored_class(facts.ignored_class, facts.source_files)
    if facts.pairing is not None:
        return _pairwise(facts.pairing)
    if facts.relabel is not None:
        return _relabelled(facts.relabel)
    if facts.batch_as_sequence is not None:
        return _batch_as_sequence(facts.batch_as_sequence, facts.source_files)
    if facts.singleton_softmax is not None:
        return _singleton_softmax(facts.singleton_softmax)
    classes_last = next((c for c in facts.loss_calls.values() if c.classes_last), None)
    if classes_last is not None:
        return _classes_last(classes_last)
    if facts.reordered_view is not None:
        return _reordered(facts.reordered_view, facts.source_files)
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


def _ignored_class(found: Any, files: set[str]) -> ProbeOutcome:
    """The padding's index is also a class (``facts.IgnoredClass``): the loss ignores that class at every real token."""
    site = found.site.split(" ", 1)[0]
    loss_line = set(re.findall(r"\w+", found.site.split(" ", 1)[-1]))
    padded = sorted(in_files(files, keyword_values, None, "padding_value"),  # the padding of the loss's target first
                    key=lambda pair: re.match(r"\s*(\w+)\s*=", pair[0].text or "") is None or
                    re.match(r"\s*(\w+)\s*=", pair[0].text).group(1) not in loss_line)
    evidence = [found.text()] + [f"padded with {value} at {where}" for where, value in padded[:3]]
    at = f" at {padded[0][0].short}" if padded else ""
    return ProbeOutcome(FAIL, f"the loss at {site} ignores index {found.index}, which is also a class: "
                        f"{found.ignored} of {found.real} real tokens have it and are never learned", evidence,
                        f"pad the targets with an index no class uses{at} (padding_value=-100, the loss's default "
                        f"ignore_index) and drop ignore_index={found.index} at {site}; or number the classes from 1",
                        data={"cause": "target_out_of_range"})


class Folds(OpWatch):
    """The first reshape in the forward whose output's first dimension is not the batch's any more."""

    def __init__(self, batch: int) -> None:
        super().__init__()
        self.batch = batch
        self.fold: tuple[str, Site, tuple[int, ...], tuple[int, ...]] | None = None  # op, site, shapes before, after

    def visit(self, name: str, args: tuple, kwargs: dict, result: Any, site: Site) -> None:
        inputs, outputs = op_tensors(args[:1]), op_tensors([result])
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
    tensors = op_tensors(value if isinstance(value, (list, tuple)) else [value])
    return str(tensors[0].dtype).removeprefix("torch.") if tensors else "-"


def _shapes(value: Any) -> str:
    tensors = op_tensors(value if isinstance(value, (list, tuple)) else [value])
    if not tensors:
        return "-"
    return ", ".join(shape_text(t.shape) for t in tensors[:3])


# The elementwise ops a hand-written loss compares a prediction and a target with (``pred - y``, ``y * pred``).
# Ops that keep the data's order: the squeeze that makes a (N,) prediction, the view that relabels the dims
VIEWS = {"squeeze", "view", "reshape", "flatten", "ravel", "squeeze_"}
ELEMENTWISE = {"sub", "add", "mul", "div", "rsub", "__sub__", "__rsub__", "__add__", "__radd__", "__mul__",
               "__rmul__", "__truediv__", "__rtruediv__", "__rdiv__", "sub_", "add_", "mul_", "div_"}
OPERATORS = {"sub": ast.Sub, "add": ast.Add, "mul": ast.Mult, "div": ast.Div, "truediv": ast.Div}
CLASS_LOSSES = {"cross_entropy", "nll_loss"}  # losses that read each row of their input as one position's classes
KEPT_FLATTENED = 32  # the latest squeezes of the iteration, to say which one made the (N,) prediction
# A class loss's targets read as the model's token inputs some positions ahead (``ShiftedTargets``), over at least
# SHIFT_POSITIONS target positions: the shifts 1 and 2 are compared. Two counts when at least SHIFTED of the
# positions match it and under half match the next-token shift of 1 (tokens that repeat, padding or one class, match
# every shift alike; real text matches one), and when a tensor of the tokens' shape in the iteration holds them
# shifted by 1: the labels made for next-token prediction. A shift of 2 alone is a head trained for the token after
# next on purpose (Medusa's heads, multi-token prediction), or prefix tokens before the targets.
SHIFT_POSITIONS = 64
SHIFTED = 0.9
KEPT_LABELS = 8  # integer tensors of the tokens' shape that the iteration's ops read: the candidate label tensors
MAX_REGROUPED_DIMS = 6  # a view's source dims searched for another order (the first kept: 5! = 120 at most)
# The ops of the layers that take (seq, batch, features) unless built with batch_first=True, and those layers.
# The attention op gets the input as the layer reads it (a batch-first layer has transposed it already);
# the recurrent ops get the input as given, with batch_first as their argument BATCH_FIRST_ARG.
SEQUENCE_FIRST = {"multi_head_attention_forward": ("nn.TransformerEncoderLayer", "nn.TransformerDecoderLayer",
                                                   "nn.MultiheadAttention", "nn.Transformer"),
                  "lstm": ("nn.LSTM",), "gru": ("nn.GRU",), "rnn_tanh": ("nn.RNN",), "rnn_relu": ("nn.RNN",)}
BATCH_FIRST_ARG = 8


@dataclass
class Pairing:
    """An elementwise op that paired every example of a prediction with every example of a target
    (``SilentShapes``): a (N,) prediction with a (N, 1) target, or (N, 1, H, W) masks with (N, H, W) ones."""

    op: str
    site: Site
    prediction: tuple[int, ...]
    target: tuple[int, ...]
    prediction_left: bool  # the prediction is the op's left operand in the source
    made: tuple[str, Site] | None = None  # the squeeze (or view) that made the prediction (N,)
    result: tuple[int, ...] = ()  # the broadcast shape: N times the larger operand
    both_predicted: bool = False  # both operands carry the graph (one of them ``over_padded``)

    def text(self) -> str:
        if self.both_predicted:
            return (f"{self.op} at {self.site} pairs {shape_text(self.prediction)} with {shape_text(self.target)}, both "
                    f"computed by the model: they broadcast to {shape_text(self.result)}, every example against every "
                    "other")
        return (f"{self.op} at {self.site} pairs a prediction {shape_text(self.prediction)} with a target "
                f"{shape_text(self.target)}: they broadcast to {shape_text(self.result)}, every prediction against "
                "every target")


@dataclass
class Relabel:
    """A view that relabels the data without moving it (``SilentShapes``): it gives the source's sizes in
    another order, makes the batch (at ``batch_dim`` of the source) the first dim, or flattens scores to
    rows of classes for a loss while their class dim (``class_dim``) is not the last."""

    op: str
    site: Site
    before: tuple[int, ...]
    after: tuple[int, ...]
    batch_dim: int | None = None
    stacked: tuple[int, Site] | None = None  # (k, the line): k tensors of the batch's rows joined along dim 0
    class_dim: int | None = None  # the source's class dim, which the loss reads from the last dim of the rows
    loss: str | None = None  # the loss that reads the rows as classes
    straddle: tuple[int, int, int] | None = None  # (result dim, source dims it starts and ends inside): see _straddled
    order: list[int] | None = None  # the source's dims in the order whose runs, merged, give the result: see regrouped

    def text(self) -> str:
        if self.class_dim is not None:
            return (f"{self.op} at {self.site} turns {shape_text(self.before)} into {shape_text(self.after)} for "
                    f"{self.loss}: the classes are dim {self.class_dim} of the source, but each row of the result "
                    f"takes {self.after[-1]} consecutive values of its last dim ({self.before[-1]} positions), so the "
                    "loss reads the scores of different positions as one position's classes")
        if self.stacked is not None:
            parts, joined = self.stacked
            return (f"{self.op} at {self.site} reads {shape_text(self.before)}, {parts} blocks of the batch's rows joined "
                    f"along dim 0 by torch.cat at {joined}, as {shape_text(self.after)}: each row of the result takes "
                    f"{parts} consecutive rows of the first block, so values of different samples are mixed")
        if self.straddle is not None:
            return (f"{self.op} at {self.site} turns {shape_text(self.before)} into {shape_text(self.after)}: "
                    f"{_straddle_text(self)}, so its values are not the source's dims split or merged")
        what = (f"the batch (dim {self.batch_dim}) becomes the first dim" if self.batch_dim is not None else
                f"the source's dims merged in the order {tuple(self.order)}, not their own" if self.order is not None
                else "the same sizes in another order")
        return (f"{self.op} at {self.site} turns {shape_text(self.before)} into {shape_text(self.after)}: {what} "
                "without moving the data, so values of different samples or features are mixed")


@dataclass
class SingletonSoftmax:
    """A softmax (or log_softmax) over a dim of size 1 of a tensor in the training's graph whose dim 0 folds the
    batch with another dim (``SilentShapes``): every output is 1 (log: 0) whatever its input, and no gradient
    passes back through it. Attention scores viewed as (seq * batch, 1) and normalised over dim 1 weigh every
    item by 1: the weights the layer means to learn are never used."""

    op: str
    site: Site
    shape: tuple[int, ...]
    dim: int

    def text(self) -> str:
        value = "0" if self.op == "log_softmax" else "1"
        return (f"{self.op} at {self.site} normalises {shape_text(self.shape)} over dim {self.dim}, which has size 1: "
                f"every output is {value} whatever its input, and no gradient passes back through it")


@dataclass
class ShiftedTargets:
    """A class loss whose targets are the tokens the model reads two positions ahead (``SilentShapes``): labels
    made for next-token prediction (``sample[1:]`` in the dataset) and shifted again where the loss is taken
    (``labels[..., 1:]``), so each position is trained on the token after the next one."""

    loss: str
    site: Site
    tokens: Site  # where the model reads the tokens (its first embedding)
    shape: tuple[int, ...]  # the tokens'
    matched: float  # the share of the target positions equal to the tokens two ahead

    def text(self) -> str:
        return (f"the targets of {self.loss} at {self.site} are the token inputs read at {self.tokens} "
                f"{shape_text(self.shape)} two positions ahead ({self.matched:.0%} of the positions), not one: labels "
                "already shifted for next-token prediction are shifted again, so each position learns the token after "
                "the next")


@dataclass
class BatchAsSequence:
    """A sequence-first layer (batch_first=False) given the DataLoader's batch first, or a batch-first one
    given it second (``SilentShapes``)."""

    op: str  # multi_head_attention_forward, lstm, gru, rnn_tanh, rnn_relu
    site: Site
    shape: tuple[int, ...]  # the input as the layer got it
    batch: int  # the DataLoader's batch size
    batch_first: bool = False  # the layer's flag: True, it read the (seq, batch, features) input as batch first

    @property
    def layers(self) -> tuple[str, ...]:
        """The layer classes that call this op."""
        return SEQUENCE_FIRST[self.op]

    def text(self) -> str:
        if self.batch_first:
            return (f"{self.layers[0]} at {self.site} gets {shape_text(self.shape)} with batch_first=True: it reads dim 1, "
                    f"the {self.batch} examples of the DataLoader's batch, as the sequence, and the sequence as the batch")
        return (f"{self.layers[0]} at {self.site} gets {shape_text(self.shape)} with batch_first=False: it reads dim 0, "
                f"the {self.batch} examples of the DataLoader's batch, as the sequence, and the sequence as the batch")


def _matched(target: torch.Tensor, tokens: torch.Tensor, shift: int, ignored: int) -> float | None:
    """The share of ``target``'s positions (``ignored`` left out) equal to ``tokens`` ``shift`` positions ahead,
    compared where both have values; None over fewer than SHIFT_POSITIONS of them."""
    overlap = min(target.shape[1], tokens.shape[1] - shift)
    wanted = target[:, :overlap]
    kept = wanted != ignored
    if overlap < 1 or int(kept.sum()) < SHIFT_POSITIONS:
        return None
    return float((wanted == tokens[:, shift:shift + overlap])[kept].float().mean())


def crossed(first: tuple[int, ...], second: tuple[int, ...], result: tuple[int, ...]) -> bool:
    """Two operands with the same batch of N > 1 first whose broadcast is N times the larger one: the
    batch of one lines up against a dim of 1 of the other, so every example meets every other."""
    rows = first[0] if first else 0
    return rows > 1 and bool(second) and second[0] == rows and \
        math.prod(result) == rows * max(math.prod(first), math.prod(second))


def over_padded(first: tuple[int, ...], second: tuple[int, ...]) -> bool:
    """One operand has more dims than the other, which has two or more, and every dim it lines up against the
    other's is 1: (N, 1, 1) against (N, K) is an (N, 1) given one unsqueeze too many. A pairwise term on purpose
    lines real sizes up (``x[:, None] - x``: (N, 1, D) against (N, D)), pads both (``a[:, None] - b[None]``), or
    is the (N, N) matrix of a score column against its row (``s - s.squeeze(-1)``: (N, 1) against (N,))."""
    high, low = (first, second) if len(first) > len(second) else (second, first)
    return len(high) > len(low) >= 2 and all(d == 1 for d in high[len(high) - len(low):])


def _column_against_other_row(first: torch.Tensor, second: torch.Tensor) -> bool:
    """A (N, 1) and a (N,) that both carry a graph and share no storage: two different outputs, one kept as a
    column (a GFlowNet's state flows, (N, 1) from a Linear(h, 1), against the policy's (N,) log-probabilities).
    A score column against its own row (``s - s.squeeze(-1)``, one storage) is a pairwise matrix on purpose."""
    column, row = (first, second) if first.dim() == 2 else (second, first)
    if column.dim() != 2 or row.dim() != 1 or column.shape[1] != 1 or column.shape[0] != row.shape[0]:
        return False
    if _reduced(column) or _reduced(row):  # ||x||² + ||y||² - 2 x·y: a pairwise distance's row and column norms
        return False
    return column.untyped_storage().data_ptr() != row.untyped_storage().data_ptr()


# The reductions whose (N, 1) (keepdim) and (N,) results make the terms of a pairwise matrix on purpose: squared
# norms of two sets of points (an RBF kernel, MMD, a distance-based triplet loss), log-sum-exps, maxima.
REDUCTIONS = ("Sum", "Mean", "Norm", "LinalgVectorNorm", "Logsumexp", "Amax", "Amin", "Max", "Min", "Std", "Var")


def _reduced(tensor: torch.Tensor) -> bool:
    name = type(tensor.grad_fn).__name__ if tensor.grad_fn is not None else ""
    return re.sub(r"Backward\d+$", "", name) in REDUCTIONS


def _class_dim_split(before: tuple[int, ...], after: tuple[int, ...]) -> int | None:
    """``after`` is (rows, k) of a tensor laid out in order whose size-k dim is not its last, with more than
    one value after it: ``.reshape(-1, n_class)`` of (batch, n_class, frames). Each row then holds k
    consecutive values of the trailing dims, not the k values of that dim. The dim, else None."""
    if len(after) != 2 or len(before) < 3 or after[1] < 2 or before[-1] == after[1]:
        return None
    return next((d for d in range(len(before) - 1) if before[d] == after[1] and math.prod(before[d + 1:]) > 1
                 and math.prod(before) == after[0] * after[1]), None)


def _straddled(before: tuple[int, ...], after: tuple[int, ...]) -> tuple[int, int, int] | None:
    """A result dim that starts inside one dim of the source and ends inside a later one: (b * t, c, 16, 16) viewed
    as (b * 256, c, t) makes its dim 1 of the last part of a row and the first part of a column. A view that only
    splits and merges the source's dims (the batch with its positions, heads out of the features) starts or ends
    each of its dims on a boundary of the source's. (result dim, source dims it starts and ends in), else None."""
    starts = list(itertools.accumulate(before, operator.mul, initial=1))  # dim d spans (starts[d], starts[d + 1]]

    def inside(point: int) -> int | None:
        return next((d for d in range(len(before)) if starts[d] < point < starts[d + 1]), None)

    low = 1
    for dim, size in enumerate(after):
        first, last = inside(low), inside(low * size)
        if first is not None and last is not None and first < last:
            return dim, first, last
        low *= size
    return None


def _straddle_text(found: Relabel) -> str:
    dim, first, last = found.straddle
    return (f"its dim {dim} ({found.after[dim]}) takes the last part of the source's dim {first} "
            f"({found.before[first]}) and the first part of its dim {last} ({found.before[last]})")


def regrouped(before: tuple[int, ...], after: tuple[int, ...]) -> list[int] | None:
    """The order of ``before``'s dims after its first (the batch, kept first), other than their own, whose sizes
    merged in runs give ``after``'s: (32, 16, 8, 64) -> (32, 64, 128) is (32, 64, 16 * 8), the dims in the order
    (0, 3, 1, 2): a view where a permute was meant (features, positions) -> (positions, features). None when
    ``after`` merges them in their own order, or changes the first dim: a view that also splits a dim, such as
    (16, 15, 32) -> (16 * 15 * 2, 16) (two groups of 16 out of 32 features, rows of batch and time), may match
    other dims' sizes in another order by chance (the batch of 16 last), and keeps the data's meaning."""
    dims = [d for d, size in enumerate(before) if size != 1]
    wanted = [size for size in after if size != 1]
    if len(wanted) < 3 or len(dims) > MAX_REGROUPED_DIMS or wanted[0] != before[dims[0]] or \
            _merges([before[d] for d in dims], wanted):
        return None
    first, rest = dims[0], dims[1:]
    order = next(([first, *o] for o in itertools.permutations(rest) if _merges([before[d] for d in o], wanted[1:])),
                 None)
    return order + [d for d, size in enumerate(before) if size == 1] if order is not None else None


def _merges(sizes: list[int], wanted: list[int]) -> bool:
    """``wanted`` is ``sizes`` merged in consecutive runs: (16, 8, 64) gives (128, 64), not (64, 128)."""
    taken = 0
    for size in wanted:
        product = 1
        while taken < len(sizes) and product < size:
            product, taken = product * sizes[taken], taken + 1
        if product != size:
            return False
    return taken == len(sizes)


def _batch_dim(before: tuple[int, ...], batch: int) -> int | None:
    """The first dim after the first that has the batch's size, with dims of more than one value before it."""
    where = next((d for d in range(1, len(before)) if before[d] == batch), None)
    return where if where is not None and math.prod(before[:where]) > 1 else None


def reordered(before: tuple[int, ...], after: tuple[int, ...]) -> bool:
    """``after`` has ``before``'s sizes (leaving out dims of 1) in another order: (640, 20) -> (20, 640, 1)."""
    dims, source = [d for d in after if d != 1], [d for d in before if d != 1]
    return len(dims) >= 2 and dims != source and sorted(dims) == sorted(source)


SOFTMAXES = ("softmax", "log_softmax", "_softmax", "_log_softmax")


class SilentShapes(OpWatch):
    """What goes wrong without an error in one iteration of the user's code (``agent/watched_step.py``):

    - an elementwise op between a prediction of shape (N,) and a target of shape (N, 1), or the other way
      round: the result is (N, N), every prediction against every target. The prediction is the operand
      that carries a graph, the target the one that does not: two operands that both carry one are a
      pairwise term on purpose (a ranking loss, a distance matrix), unless one is padded with dims of 1
      against all of the other's (``over_padded``: a margin loss's (N, 1, 1) positives against (N, K) negatives);
    - a view (or reshape) of a tensor laid out in order whose batch is not its first dim, that makes the
      batch the first: ``h.view(batch, -1)`` of an RNN's (layers, batch, hidden) state puts the states of
      different samples in one row; a ``transpose`` first moves the data;
    - a ``reshape(-1, n_class)`` of (batch, n_class, frames) scores read by cross_entropy or nll_loss: each
      row holds consecutive frames of one class, not one frame's classes;
    - the first class loss's targets equal to the tokens of the first embedding two positions ahead, with labels
      that hold them one ahead: labels shifted for next-token prediction twice.
    """

    def __init__(self, batch: int | None, loader_batch: int | None = None) -> None:
        super().__init__()
        self.batch = batch
        self.loader_batch = loader_batch  # the DataLoader's batch_size: the layout's own evidence of the batch
        self.pairing: Pairing | None = None
        self.relabel: Relabel | None = None
        self.batch_as_sequence: BatchAsSequence | None = None
        self.singleton_softmax: SingletonSoftmax | None = None
        self.shifted_targets: ShiftedTargets | None = None
        self._tokens: tuple[torch.Tensor, Site] | None = None  # the first embedding's token ids
        self._labels: list[torch.Tensor] = []  # other integer tensors of their shape the ops read (``KEPT_LABELS``)
        self._class_loss_seen = False  # only the iteration's first class loss is compared with the tokens
        self._top_values: list[torch.Tensor] = []  # topk's values: a top-1 router's softmax over them is 1 by design
        self._flattened: dict[int, tuple[torch.Tensor, str, Site]] = {}
        self._stacked: dict[int, tuple[torch.Tensor, int, Site]] = {}
        self._class_rows: dict[int, tuple[torch.Tensor, Relabel]] = {}

    def visit(self, name: str, args: tuple, kwargs: dict, result: Any, site: Site) -> None:
        if name in SEQUENCE_FIRST and args and isinstance(args[0], torch.Tensor):  # their result is a tuple
            self._sequence_first(name, args, site)
        if name == "topk" and isinstance(result, tuple) and result and isinstance(result[0], torch.Tensor):
            self._top_values.append(result[0])
        if not isinstance(result, torch.Tensor):
            return
        if self._tokens is None or not self._class_loss_seen:
            self._token_inputs(name, args, kwargs, site)
        if name in SOFTMAXES and args and isinstance(args[0], torch.Tensor) and self.singleton_softmax is None:
            self._softmax(name, args, kwargs, site)
        if name in ("cat", "concat", "concatenate") and args and isinstance(args[0], (list, tuple)):
            self._joined(args[0], kwargs.get("dim", args[1] if len(args) > 1 else 0), result, site)
        if name in VIEWS and args and isinstance(args[0], torch.Tensor):
            self._reshaped(name, args[0], result, site)
        elif name in CLASS_LOSSES and args and isinstance(args[0], torch.Tensor):
            rows = self._class_rows.get(id(args[0]))
            if rows is not None and rows[0] is args[0] and self.relabel is None:
                self.relabel = dataclasses.replace(rows[1], loss=name)
        elif name in ELEMENTWISE and len(args) >= 2 and all(isinstance(a, torch.Tensor) for a in args[:2]):
            self._paired(name, args[0], args[1], result, site)

    def _softmax(self, name: str, args: tuple, kwargs: dict, site: Site) -> None:
        x, dim = args[0], kwargs.get("dim", args[1] if len(args) > 1 else None)
        if not isinstance(dim, int) or x.dim() < 2 or not x.requires_grad or not -x.dim() <= dim < x.dim() \
                or any(x is top for top in self._top_values):
            return
        # Only where dim 0 holds the batch folded with another dim (seq * batch rows): attention over a single
        # key, or a router with one expert, normalises over one element by design.
        batch = self.loader_batch or self.batch
        folded = bool(batch) and batch >= 2 and x.shape[0] % batch == 0 and x.shape[0] // batch >= 2
        if x.shape[dim] == 1 and folded:
            self.singleton_softmax = SingletonSoftmax(name.lstrip("_"), site, tuple(x.shape), dim % x.dim())

    def _token_inputs(self, name: str, args: tuple, kwargs: dict, site: Site) -> None:
        """The first embedding's token ids, the integer tensors of their shape read after them (the labels), and
        the first class loss's targets compared with both (``ShiftedTargets``)."""
        first = args[0] if args and isinstance(args[0], torch.Tensor) else None
        if self._tokens is None:
            if name == "embedding" and first is not None and first.dim() == 2 and not first.is_floating_point():
                self._tokens = (first.detach(), site)
            return
        tokens = self._tokens[0]
        if name in CLASS_LOSSES:
            self._class_loss_seen = True
            target = kwargs.get("target", args[1] if len(args) > 1 else None)
            if isinstance(target, torch.Tensor) and not target.is_floating_point() and target.device == tokens.device:
                self._shifted(name, target.detach(), kwargs.get("ignore_index", -100), site)
        elif first is not None and first is not tokens and first.shape == tokens.shape and len(self._labels) < KEPT_LABELS \
                and not first.is_floating_point() and first.device == tokens.device:
            self._labels.append(first.detach())

    def _shifted(self, name: str, target: torch.Tensor, ignored: int, site: Site) -> None:
        """Targets over the whole sequence (its length, or one less) that equal the tokens two positions ahead,
        where no more than half equal them one ahead, while a label tensor read in the iteration holds the tokens one
        ahead: the labels' first shift (``ShiftedTargets``)."""
        tokens, where = self._tokens
        rows, length = tokens.shape
        if not rows or target.numel() % rows or target.numel() // rows < length - 2:
            return
        target = target.reshape(rows, -1)
        next_token, after_next = (_matched(target, tokens, shift, ignored) for shift in (1, 2))
        if after_next is None or after_next < SHIFTED or (next_token or 0.0) >= 0.5:
            return
        if any((_matched(labels, tokens, 1, ignored) or 0.0) >= SHIFTED for labels in self._labels):
            self.shifted_targets = ShiftedTargets(name, site, where, (rows, length), after_next)

    def _sequence_first(self, name: str, args: tuple, site: Site) -> None:
        """A layer reading (seq, batch, features) whose dim 0 is the DataLoader's batch and dim 1 is not: the
        batch is read as the sequence. A collate that puts the batch second (padded sequences) gives dim 1.
        A recurrent layer built with batch_first=True reads (batch, seq, features): given the batch in dim 1
        and not in dim 0 (features permuted to sequence first, as CTC wants them), it has them swapped."""
        x, batch = args[0], self.loader_batch
        if self.batch_as_sequence is not None or not batch or batch < 2 or x.dim() != 3:
            return
        batch_first = False
        if name != "multi_head_attention_forward":
            if len(args) <= BATCH_FIRST_ARG or not isinstance(args[BATCH_FIRST_ARG], bool):
                return
            if isinstance(args[1], torch.Tensor) and args[1].dim() == 1 and not args[1].is_floating_point():
                return  # a packed sequence: (data, batch_sizes, ...), no batch_first argument
            batch_first = args[BATCH_FIRST_ARG]
            if batch_first and self.batch != batch:
                return  # a smaller last batch (batch, seq, features) whose sequence is as long as a full batch
        read_as_sequence = 1 if batch_first else 0
        if x.shape[read_as_sequence] == batch and x.shape[1 - read_as_sequence] != batch:
            self.batch_as_sequence = BatchAsSequence(name, site, tuple(x.shape), batch, batch_first)

    def _joined(self, parts: Any, dim: Any, result: torch.Tensor, site: Site) -> None:
        """k tensors that each hold the batch's rows, joined along dim 0: the result is laid out block by
        block (k, batch), not sample by sample."""
        batch = self.batch
        if dim != 0 or not batch or batch < 2 or len(parts) < 2 or self.relabel is not None or \
                not all(isinstance(p, torch.Tensor) and p.dim() >= 1 and p.shape[0] == batch for p in parts):
            return
        if len(self._stacked) >= KEPT_FLATTENED:
            del self._stacked[next(iter(self._stacked))]
        self._stacked[id(result)] = (result, len(parts), site)  # the tensor is kept: its id stays its own

    def _reshaped(self, name: str, source: torch.Tensor, result: torch.Tensor, site: Site) -> None:
        if result.dim() == 1 and result.requires_grad:
            if len(self._flattened) >= KEPT_FLATTENED:
                del self._flattened[next(iter(self._flattened))]
            self._flattened[id(result)] = (result, name, site)  # the tensor is kept: its id stays its own
        if self.relabel is not None or source.dim() < 2 or not result.dim():
            return
        before, after, batch = tuple(source.shape), tuple(result.shape), self.batch
        if not source.is_contiguous():
            # A reshape of a moved tensor (after a transpose) reads it in its logical order, as a view of a
            # contiguous copy would: its sizes in another order relabel the data all the same.
            if reordered(before, after):
                self.relabel = Relabel(name, site, before, after)
            elif before[0] == self.batch and (order := regrouped(before, after)) is not None:
                self.relabel = Relabel(name, site, before, after, order=order)
            return
        stacked = self._stacked.get(id(source))
        if stacked is not None and stacked[0] is source:
            dims = [d for d in after if d != 1]
            if dims and dims[0] == batch and math.prod(dims[1:]) == stacked[1] * math.prod(before[1:]):
                self.relabel = Relabel(name, site, before, after, stacked=stacked[1:])
                return
        classes = _class_dim_split(before, after)
        if classes is not None and len(self._class_rows) < KEPT_FLATTENED:
            self._class_rows[id(result)] = (result, Relabel(name, site, before, after, class_dim=classes))
        if reordered(before, after):
            self.relabel = Relabel(name, site, before, after)
        elif batch and batch > 1 and before[0] != batch == after[0] and not _unflattens(before, after):
            where = _batch_dim(before, batch)
            if where is not None:
                self.relabel = Relabel(name, site, before, after, where)
        elif (where := self._loader_batch_dim(before, after)) is not None:
            self.relabel = Relabel(name, site, before, after, where)
        elif batch and batch > 1 and before[0] % batch == 0:
            straddle = _straddled(before, after)
            if straddle is not None:
                self.relabel = Relabel(name, site, before, after, straddle=straddle)
        if self.relabel is None and before[0] == batch and (order := regrouped(before, after)) is not None:
            self.relabel = Relabel(name, site, before, after, order=order)  # a sample's values, regrouped

    def _loader_batch_dim(self, before: tuple[int, ...], after: tuple[int, ...]) -> int | None:
        """The dim of ``before`` holding the DataLoader's batch, where it is not the model input's first dim and a
        view makes it the result's first: a sequence-first model gets (seq, batch) tokens, and its GRU's (layers *
        directions, batch, hidden) state viewed as (batch, -1) mixes samples. A first dim that is a multiple of the
        batch holds it already (rows of batch-major items viewed back), whatever size a later dim has."""
        batch = self.loader_batch
        if not batch or batch < 2 or batch == self.batch or before[0] % batch == 0 or after[0] != batch \
                or _unflattens(before, after):
            return None
        return _batch_dim(before, batch)

    def _paired(self, name: str, first: torch.Tensor, second: torch.Tensor, result: torch.Tensor, site: Site) -> None:
        if self.pairing is not None or not (first.requires_grad or second.requires_grad):
            return
        shapes = tuple(first.shape), tuple(second.shape)
        if first.requires_grad == second.requires_grad and not over_padded(*shapes) and \
                not _column_against_other_row(first, second):
            return
        if crossed(*shapes, tuple(result.shape)):
            left = second if name.startswith("__r") or name == "rsub" else first
            if first.requires_grad != second.requires_grad:
                prediction, target = (first, second) if first.requires_grad else (second, first)
            else:  # both carry a graph: the padded one was reshaped away from the other's layout
                prediction, target = (first, second) if first.dim() < second.dim() else (second, first)
            if (prediction is left) in _new_axis_written(site.text, name):
                return
            made = self._flattened.get(id(prediction))
            self.pairing = Pairing(name, site, tuple(prediction.shape), tuple(target.shape), prediction is left,
                                   made[1:] if made is not None and made[0] is prediction else None,
                                   tuple(result.shape), first.requires_grad == second.requires_grad)
            self._flattened.clear()

    def done(self) -> bool:
        return self.pairing is not None and self.relabel is not None and self.batch_as_sequence is not None


def _pairwise(found: Pairing) -> ProbeOutcome:
    site = found.site
    names = _operand_names(site.text, found.op)
    predicted, wanted = (names if found.prediction_left else names[::-1]) if names else ("the prediction", "the target")
    operands = (f"{predicted} {shape_text(found.prediction)} and {wanted} {shape_text(found.target)} (both carry the "
                "graph)" if found.both_predicted else
                f"{predicted} {shape_text(found.prediction)} (carries the graph), {wanted} {shape_text(found.target)}")
    evidence = [f"{found.op} at {site}: {operands} -> {shape_text(found.result)} (seen in an iteration of the run "
                "watched op by op)"]
    statement = statement_start(site)
    if statement is not None:
        evidence.append(f"in the statement at {statement}")
    fix = f"give both operands at {site.short} the same shape: " + _same_shape(found, predicted, wanted)
    names_on_line = [wanted] if wanted.isidentifier() else list(dict.fromkeys(re.findall(r"[A-Za-z_]\w*", site.text)))
    reshaped = next(((name, where) for name in names_on_line if (where := reshaped_before(site.path, name, site.line))), None)
    if reshaped is not None:  # an operand was given its extra dim just before: that line is the one to change
        name, where = reshaped
        evidence.append(f"`{name}` is reshaped just before, at {where}")
        fix = f"drop the reshape at {where.short} (`{where.text}`): `{name}` then has the other operand's shape"
    if found.made is not None:
        op, where = found.made
        evidence.append(f"{predicted} was made {shape_text(found.prediction)} by {op} at {where}")
        fix += f"; or keep the prediction {shape_text(found.target)} where {op} at {where.short} flattens it"
    return ProbeOutcome(
        FAIL, f"`{found.op}` at {site.short} pairs {predicted} of shape {shape_text(found.prediction)} with {wanted} of "
        f"shape {shape_text(found.target)}: they broadcast to {shape_text(found.result)}, "
        + ("every example against every other" if found.both_predicted else "every prediction against every target")
        + ", so the loss cannot reach its minimum", evidence, fix, data={"cause": "loss_broadcast"})


def _same_shape(found: Pairing, predicted: str, wanted: str) -> str:
    """How to line the operands up: the one without the other's dim of 1 gets it (``gt.unsqueeze(1)`` for
    (N, H, W) masks against (N, 1, H, W) scores); a (N,) and a (N, 1) are flattened."""
    if len(found.prediction) <= 2 and len(found.target) <= 2:
        column = predicted if len(found.prediction) == 2 else wanted  # the (N, 1) operand
        return f"{column}.view(-1), or the other one .view(-1, 1)"
    (short, short_shape), (long, long_shape) = sorted(((predicted, found.prediction), (wanted, found.target)),
                                                      key=lambda named: len(named[1]))
    at = next((d for d in range(len(long_shape)) if long_shape[d] == 1
               and long_shape[:d] + long_shape[d + 1:] == short_shape), None)
    if at is None:
        return f"{short}.view_as({long}) where it has {long}'s elements, else reshape the one that is wrong"
    return f"{short}.unsqueeze({at}) (or {long}.squeeze({at}))"


def _operand_names(text: str, name: str) -> tuple[str, str] | None:
    """The source of the left and right operands of the line's only binary operation of that kind
    (``values - prev_values``), else None."""
    operator = OPERATORS.get(name.strip("_").removeprefix("r").removesuffix("_"))
    try:
        tree = ast.parse(text.strip().rstrip(":"), mode="exec")
    except SyntaxError:
        return None
    found = [n for n in ast.walk(tree) if isinstance(n, ast.BinOp) and operator and isinstance(n.op, operator)]
    return (ast.unparse(found[0].left), ast.unparse(found[0].right)) if len(found) == 1 else None


def _new_axis_written(text: str, name: str) -> set[bool]:
    """Which operands of the line's operation (True: the left one) are given a dim of 1 in the expression itself
    (``area1[:, None]``, ``x.unsqueeze(1)``). Written on the prediction (DETR's ``area1[:, None] + area2`` of
    predicted against target boxes, a distance matrix) it is an outer sum asked for; written on the target alone
    (``pred - y.unsqueeze(1)`` with ``pred`` of (N,)) it is the broadcast the check is for."""
    operands = _operand_names(text, name)
    if operands is None:
        return set()
    return {side for side, operand in zip((True, False), operands) if _adds_axis(ast.parse(operand, mode="eval"))}


def _adds_axis(expression: ast.AST) -> bool:
    for node in ast.walk(expression):
        if isinstance(node, ast.Subscript) and any(
                isinstance(part, ast.Constant) and part.value is None or
                isinstance(part, ast.Attribute) and part.attr == "newaxis"
                for part in (node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice])):
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "unsqueeze":
            return True
    return False


def _reordered(view: Any, files: set[str]) -> ProbeOutcome:
    """A model input viewed from a tensor with the same sizes in another order (``facts.ReorderedView``)."""
    name = call_argument(view.site.text, view.index) if view.site is not None else None
    made = [site for site in in_files(files, assignments, name) if re.search(r"\.(view|reshape)\(", site.text)
            and (view.site is None or site.path != view.site.path or site.line < view.site.line)] if name else []
    where = made[-1] if made else None
    sizes = [d for d in view.shape if d != 1]
    order = _order(view.base, sizes)
    evidence = [f"the model's input {name or view.index} at {view.site}: {shape_text(view.shape)}, a view of a "
                f"{shape_text(view.base)} tensor; both are laid out in order, so its values are in the "
                f"{shape_text(view.base)} tensor's order"]
    if where is not None:
        evidence.append(f"{name} is reshaped at {where}")
    at = f" at {where.short}" if where else ""
    receiver = name or "x"
    return ProbeOutcome(
        FAIL, f"{name or 'the model input'} is a view{at} that gives the {shape_text(view.base)} tensor's sizes in "
        f"another order, {shape_text(view.shape)}: a view does not move the data, so its dims do not hold what "
        "their sizes say and the values of different samples are mixed", evidence,
        f"move the dims before reshaping{at}: {receiver}.permute({', '.join(map(str, order))}).reshape"
        f"({', '.join(map(str, view.shape))})" + (f" ({receiver}.t() for a matrix)" if len(view.base) == 2 else ""),
        data={"cause": "batch_folded"})


def _order(base: tuple[int, ...], sizes: list[int]) -> list[int]:
    """The permutation of ``base``'s dims that puts its sizes in the order ``sizes`` (dims of 1 last)."""
    left = list(range(len(base)))
    order = []
    for size in sizes:
        dim = next(d for d in left if base[d] == size)
        left.remove(dim)
        order.append(dim)
    return order + left


def _unflattens(before: tuple[int, ...], after: tuple[int, ...]) -> bool:
    """The view splits the source's first dim into the result's first few: (b * t, ...) back to (b, t, ...), a
    batch flattened with its positions and restored (wav2vec 2.0's quantizer), not a dim moved to the front."""
    return any(math.prod(after[:k]) == before[0] for k in range(2, len(after) + 1))


def _relabelled(found: Relabel) -> ProbeOutcome:
    site, dim = found.site, found.batch_dim
    if found.class_dim is not None:
        order = [d for d in range(len(found.before)) if d != found.class_dim] + [found.class_dim]
        return ProbeOutcome(
            FAIL, f"`{found.op}` at {site.short} flattens {shape_text(found.before)} to {shape_text(found.after)} for "
            f"{found.loss} without moving the class dim ({found.class_dim}) last: each row mixes the scores of "
            f"{found.after[-1]} different positions", [found.text()],
            f"move the class dim last before flattening, at {site.short}: "
            f"x.permute({', '.join(map(str, order))}).reshape({', '.join(map(str, found.after))})",
            data={"cause": "batch_folded"})
    if found.stacked is not None:
        parts, joined = found.stacked
        return ProbeOutcome(
            FAIL, f"`{found.op}` at {site.short} reads {parts} blocks of the batch's rows, joined along dim 0 at "
            f"{joined.short}, as {shape_text(found.after)}: each row mixes {parts} different samples", [found.text()],
            f"join along the features instead: torch.cat([...], dim=1) at {joined.short} (each sample's {parts} parts "
            "side by side), then the view",
            data={"cause": "batch_folded"})
    if found.straddle is not None:
        return ProbeOutcome(
            FAIL, f"`{found.op}` at {site.short} reads {shape_text(found.before)} as {shape_text(found.after)}: "
            f"{_straddle_text(found)}: the view mixes values of different positions (or features) in one dim",
            [found.text() + " (seen in an iteration of the run watched op by op)"],
            f"at {site.short}: permute the source so the dims the result puts together are next to each other and in "
            f"its order, then reshape (x.permute(...).reshape({', '.join(map(str, found.after))}))",
            data={"cause": "batch_folded"})
    if dim is not None:
        order = [dim, *(d for d in range(len(found.before)) if d != dim)]
        what = f"makes the batch the first dim of {shape_text(found.before)} without moving the data"
    elif found.order is not None:
        order = found.order
        what = (f"merges the dims of {shape_text(found.before)} in the order {tuple(order)}, not their own, without "
                "moving the data")
    else:
        order = _order(found.before, [d for d in found.after if d != 1])
        what = f"gives the sizes of {shape_text(found.before)} in another order without moving the data"
    moved = "transpose(0, 1)" if order[:2] == [1, 0] and order[2:] == list(range(2, len(order))) else \
        f"permute({', '.join(map(str, order))})"
    return ProbeOutcome(
        FAIL, f"`{found.op}` at {site.short} {what}: the {shape_text(found.after)} result mixes values of different "
        "samples (or features)",
        [f"{found.op} at {site}: {shape_text(found.before)} -> {shape_text(found.after)}, in the source's memory order "
         "(seen in an iteration of the run watched op by op)"],
        f"move the dims first, then reshape, at {site.short}: x.{moved}.reshape({', '.join(map(str, found.after))})",
        data={"cause": "batch_folded"})


def _singleton_softmax(found: SingletonSoftmax) -> ProbeOutcome:
    """A softmax over a dim of size 1: the items it should weigh lie along another dim, or were folded into the
    batch by a view before it."""
    others = [f"dim {d} ({size})" for d, size in enumerate(found.shape) if d != found.dim and size > 1]
    return ProbeOutcome(
        FAIL, f"{found.op} at {found.site.short} normalises over dim {found.dim} of {shape_text(found.shape)}, which "
        f"has size 1: every weight it gives is {'0' if found.op == 'log_softmax' else '1'}, so the items are summed, "
        "never weighed, and the scores before it learn nothing", [found.text() + " (seen in an iteration of the run "
                                                                   "watched op by op)",
                                                                   f"the other dims: {', '.join(others)}"],
        f"normalise over the dim that holds the items to weigh ({', '.join(others)}) at {found.site.short}: keep them "
        "in their own dim (view the scores as (seq, batch) rather than folding the sequence into the batch) and pass "
        "that dim to softmax", data={"cause": "batch_folded"})


def _batch_as_sequence(found: BatchAsSequence, files: set[str]) -> ProbeOutcome:
    """A sequence-first layer given the DataLoader's batch first, or a batch_first=True one given it second:
    either way the layer runs across the examples of a batch."""
    names = {layer.removeprefix("nn.") for layer in found.layers}
    flags = in_files(files, keyword_values, names, "batch_first")
    shape, (first, second, features) = shape_text(found.shape), found.shape
    if found.batch_first:
        built = [site for site, value in flags if value == "True"]
        read, how = f"(batch {first}, seq {second}, features {features})", "with batch_first=True"
        summary = (f"it is built with batch_first=True and gets its {shape} input sequence first, so it runs across "
                   f"the {found.batch} examples instead of along each sequence of {first}")
    else:
        flagged = {site for site, value in flags if value != "False"}
        built = [site for site in in_files(files, calls_named, names) if site not in flagged]
        read, how = f"(seq {first}, batch {second}, features {features})", "without batch_first=True"
        summary = (f"it is built with batch_first=False (the default) and reads its {shape} input as (seq, batch, "
                   f"features), so it runs across the {found.batch} examples instead of along each sequence")
    where = f" at {built[0].short}" if built else ""
    evidence = [f"{found.op} at {found.site}: input {shape} read as {read}; the DataLoader's batches hold "
                f"{found.batch} examples" + (", in dim 1" if found.batch_first else "")
                + " (seen in an iteration of the run watched op by op)"]
    evidence += [f"built at {site} {how}" for site in built[:2]]
    fix = (f"drop batch_first=True{where} for this sequence-first input (or feed it x.transpose(0, 1) and transpose "
           "its output back)" if found.batch_first else
           f"build the layer with batch_first=True{where} ({found.layers[0]}(..., batch_first=True)), or pass it "
           "x.transpose(0, 1) and transpose its output back")
    return ProbeOutcome(FAIL, f"{found.layers[0]} at {found.site.short} mixes the examples of a batch: {summary}",
                        evidence, fix, data={"cause": "batch_folded"})


def classes_moved_to_dim1(function: str, shape: tuple[int, ...], scores: str) -> str:
    """The call that gives class loss ``function`` its ``scores`` of ``shape`` with their classes moved from
    last to dim 1, or both flattened (the fix of a raising and of a silent classes-last loss input)."""
    last = len(shape) - 1
    moved = "transpose(1, 2)" if last == 2 else f"permute(0, {last}, {', '.join(map(str, range(1, last)))})"
    return (f"{function}({scores}.{moved}, target), or flatten both: {scores}.reshape(-1, {shape[-1]}) with "
            "target.reshape(-1)")


def _classes_last(call: Any) -> ProbeOutcome:
    """Scores with their classes last given to a class loss that reads dim 1 as the classes (``Facts._classes_last``)."""
    site, shape = call.site.split(" ", 1)[0], tuple(call.input_shape)
    made = f"made by {call.input_module}" if call.input_module else f"made by {call.input_producer}"
    return ProbeOutcome(
        FAIL, f"{call.function} at {site} reads dim 1 of the {shape_text(call.input_shape)} scores as the classes, but "
        f"their {shape[-1]} classes are last: each position is scored against the wrong axis (it does not raise as the "
        f"sequence is also {shape[1]} long)", [f"loss call: {call.function} at {call.site}",
                                                f"input {shape_text(call.input_shape)} {made}, target "
                                                f"{shape_text(call.target_shape)} {call.target_dtype}"],
        f"move the classes to dim 1 at {site}: {classes_moved_to_dim1(call.function, shape, 'scores')}",
        data={"cause": "target_out_of_range"})


def _probability_targets(call: Any) -> ProbeOutcome:
    """A binary cross-entropy given targets outside [0, 1] (``Facts.probabilities_outside``)."""
    site = call.site.split(" ", 1)[0]
    scale = f" / {call.target_max:g}" if call.target_min >= 0 and call.target_max > 1 else ""
    return ProbeOutcome(
        FAIL, f"{call.function} at {site} gets targets from {call.target_min:g} to {call.target_max:g}: it expects "
        "probabilities in [0, 1], and with others its loss falls without bound instead of fitting them",
        [f"loss call: {call.function} at {call.site}", f"target {shape_text(call.target_shape)} {call.target_dtype}, "
         f"values {call.target_min:g}..{call.target_max:g}"],
        f"bring the targets into [0, 1] where they are made (target{scale}" + (", e.g. 8-bit masks / 255" if scale else "")
        + f"), before {site}", data={"cause": "target_out_of_range"})
