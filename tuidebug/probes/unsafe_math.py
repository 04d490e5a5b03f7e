"""The NaN check on the math: log, exp, divide, sqrt, pow, acos, norm, logdet at their domain's boundary,
and arithmetic that meets an infinity (0 * inf, inf - inf).

The failing step is replayed twice over. Forward: under an op watch over the user's own calls, the
first op whose output holds NaN (or ±inf) while its inputs did not: that op, on that line, made it
(``-inf`` written on purpose by a mask fill is not counted, but a product or sum that turns such an
infinity into NaN is: ``probs * log_probs`` where a masked entry has probability 0). Backward: with the
graph's nodes hooked (and anomaly mode recording each node's forward line), the first node whose incoming
gradient is finite and whose outgoing one is not: sqrt at 0, a fractional power at 0, acos at ±1,
the norm of a zero vector, a division by 0; its saved operand says which boundary. Then the trial:
the steps replayed with that op made safe at that line (an eps, a clamp), which must keep the
run finite and the loss falling.
"""

from __future__ import annotations

import math
import os
import re
import weakref
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import Any, Callable, Iterator

import torch
from torch.overrides import TorchFunctionMode

from tuidebug.probe_api import (FAIL, INCONCLUSIVE, PASS, Adjust, LoopGone, NeedsLoop, NoPipeline, ProbeContext,
                                ProbeOutcome, probe)
from tuidebug.probes.failing_loss import failing_loss
from tuidebug.probes.source import function_lines
from tuidebug.probes.trials import MIN_STEPS, run_trial, start_point
from tuidebug.probes.watch import OpWatch, caller_site, op_name, op_tensors
from tuidebug.sites import Site, frame_locals, is_user_file

EPS = 1e-6  # the safe variant's margin: sqrt(x + eps) and friends; small enough not to change a healthy value
CHECKPOINT_EXTRA_STEPS = 2  # steps past the failing one the watched replay from a checkpoint may take
# ... and at least the rate trials' MIN_STEPS: a loop that makes its data as it runs (self-play, a generator) replays
# other draws than the run's, and its NaN comes a few steps earlier or later; the trials that would otherwise name the
# rate run that long, so the watch sees every step they see.
TINY = 1e-12
# A backward op of no risky kind (a matmul, a sum) whose gradient goes non-finite from finite values is an overflow
# when its incoming gradient times its saved operand comes within this factor of the dtype's largest number (a
# sum of up to this many such products overflows): a divergence's symptom, not unsafe math.
OVERFLOW_MARGIN = 1e8
EXP_LIMIT = {torch.float16: 10.0, torch.bfloat16: 80.0, torch.float32: 80.0, torch.float64: 700.0}
SET_ITEMS = ("__setitem__", "index_put_", "index_put")  # a fill where what they write is a number: x[mask] = -inf
MASKS = ("masked_fill", "masked_fill_", "fill_", "fill", "full", "full_like", "new_full", "where", "index_fill",
         "index_fill_", "masked_scatter", "scatter", "scatter_")
CATEGORIES = {
    "log": {"log", "log_", "log2", "log10", "xlogy", "log1p", "log1p_"},
    # the log of a determinant is NaN where the determinant is negative (an orthogonal init has det -1 half the time)
    "logdet": {"logdet"},
    # ``1 / x`` reaches a TorchFunctionMode as Tensor.__rdiv__ (torch's __rtruediv__ is an alias of it)
    "divide": {"div", "div_", "true_divide", "__truediv__", "__rtruediv__", "__rdiv__", "__itruediv__", "reciprocal",
               "reciprocal_", "rsqrt", "floor_divide", "__floordiv__"},
    "exp": {"exp", "exp_", "exp2", "expm1"},
    # grow as exp(|x|): torch computes I0 and I1 through exp(x), inf in float32 from about 89
    "growth": {"i0", "i0_", "special_i0", "special_i1", "sinh", "cosh"},
    "sqrt": {"sqrt", "sqrt_"},
    "pow": {"pow", "pow_", "__pow__", "__rpow__", "float_power"},
    "acos": {"acos", "asin", "arccos", "arcsin", "acos_", "asin_", "atanh"},
    "norm": {"norm", "vector_norm", "linalg_vector_norm", "frobenius_norm", "cdist", "pairwise_distance", "dist"},
    "softmax": {"softmax", "log_softmax", "_softmax"},
    "statistics": {"std", "var", "std_mean", "var_mean"},
}
# Arithmetic that makes a NaN only from an infinity it is given: 0 * inf, inf - inf (a sum or a matmul of both).
# Its category, "infinity", is given only where it did (a product that overflowed is not unsafe math).
MULTIPLY = {"mul", "mul_", "__mul__", "__rmul__", "__imul__", "multiply"}
INFINITY_ARITHMETIC = MULTIPLY | {"add", "add_", "__add__", "__radd__", "__iadd__", "sub", "sub_", "__sub__",
                                  "__rsub__", "__isub__", "subtract", "sum", "mean", "matmul", "__matmul__", "mm",
                                  "bmm", "einsum", "addmm", "linear", "dot"}
FIXES = {
    "log": "clamp the argument (torch.log(x.clamp_min(1e-8))) or stay in log space: F.log_softmax, "
           "torch.logsumexp, F.binary_cross_entropy_with_logits / F.cross_entropy on logits",
    "logdet": "take the log of |det| with torch.linalg.slogdet(W)[1] (logdet is NaN where the determinant is "
              "negative), or start W with a positive determinant (flip a column's sign after a QR init)",
    "divide": "guard the denominator where it can be 0: mask or skip those rows, or x / d.clamp_min(1) for a "
              "count (x / (d + eps) only if x vanishes with d)",
    "exp": "avoid exp of large values: subtract the row maximum first (x - x.max(dim, keepdim=True).values), "
           "or use torch.softmax / torch.logsumexp",
    "sqrt": "sqrt(x + eps) or x.clamp_min(eps).sqrt(): the gradient of sqrt at 0 is infinite",
    "growth": "a Bessel function: use its exponentially scaled form, which never overflows (torch.log(torch.special."
              "i0(x)) is torch.log(torch.special.i0e(x)) + x.abs(), i1e for i1); sinh / cosh: stay in log space "
              "(log cosh x = |x| + log1p(exp(-2|x|)) - log 2) or clamp the argument below 80",
    "pow": "take the power of x.abs() + eps (or clamp the base): a fractional power at 0 has an infinite gradient, "
           "and of a negative base is NaN",
    "acos": "clamp strictly inside the domain: x.clamp(-1 + eps, 1 - eps).acos(): the gradient of acos at ±1 is infinite",
    "norm": "add an eps inside the norm (torch.sqrt((x * x).sum(dim) + eps)) or use F.normalize(x, dim=..., eps=...): "
            "the norm of a zero vector has no gradient",
    "softmax": "never let a whole row be -inf: mask with a large negative number (-1e9) or skip rows that are "
               "entirely masked",
    "statistics": "a std / var over a single element is NaN (it divides by n - 1 = 0): skip batches of one sample "
                  "(DataLoader(..., drop_last=True)) or use correction=0 (unbiased=False)",
    "infinity": "an infinity meets a 0 or the opposite infinity here (0 * inf and inf - inf are NaN): fill masks "
                "with a large finite number (-1e9, torch.finfo(x.dtype).min) rather than inf, or zero the masked "
                "entries before the product (p * log_p.masked_fill(~mask, 0); a torch.where after it still gives a "
                "NaN gradient)",
    "other": "keep the argument inside the function's domain (clamp it)",
}
NODE_OPS = {"Sqrt": "sqrt", "Rsqrt": "divide", "Pow": "pow", "Acos": "acos", "Asin": "acos", "Log": "log",
            "Log2": "log", "Log10": "log", "Log1p": "log", "Logdet": "logdet", "Div": "divide", "Reciprocal": "divide",
            "Exp": "exp", "Norm": "norm", "I0": "growth", "SpecialI1": "growth", "Sinh": "growth",
            "Cosh": "growth",
            "LinalgVectorNorm": "norm", "Cdist": "norm", "Softmax": "softmax", "LogSoftmax": "softmax",
            "Atanh": "acos", "Std": "statistics", "Var": "statistics", "StdMean": "statistics",
            "VarMean": "statistics"}
_TRACE_LINE = re.compile(r'File "(?P<path>[^"]+)", line (?P<line>\d+)')


def category(name: str) -> str:
    return next((key for key, names in CATEGORIES.items() if name in names), "other")


OPERATORS = {"__truediv__": "/", "__rtruediv__": "/", "__rdiv__": "/", "__itruediv__": "/=", "__floordiv__": "//",
             "__pow__": "**", "__rpow__": "**", "__mul__": "*", "__add__": "+", "__sub__": "-", "__setitem__": "x[...] ="}


def display_name(name: str) -> str:
    """``torch.log`` for functions, the symbol for operators."""
    return f"`{OPERATORS[name]}`" if name in OPERATORS else f"torch.{name.rstrip('_')}"


@dataclass
class Culprit:
    op: str  # the op's name as called, or the category for a backward node
    site: Site
    detail: str
    backward: bool = False
    from_data: bool = False  # its operand depends on no weight (labels, features): no rate or clip changes it
    given: str | None = None  # the category it was found under where its name has none ("infinity" for a `*`)

    @property
    def kind(self) -> str:
        return self.given or (self.op if self.op in FIXES else category(self.op))

    def line(self, in_model: bool = True) -> str:
        """The op, its line and what made it non-finite; ``in_model``: say whether in forward or backward (not
        for an op of a Dataset's __getitem__)."""
        where = (" (in backward)" if self.backward else " (in forward)") if in_model else ""
        return f"{display_name(self.op)} at {self.site}{where}: {self.detail}"


def _finite(tensors: list[torch.Tensor]) -> bool:
    return all(bool(torch.isfinite(t).all()) for t in tensors if t.is_floating_point() or t.is_complex())


def _no_nan(tensors: list[torch.Tensor]) -> bool:
    return not any(bool(torch.isnan(t).any()) for t in tensors if t.is_floating_point() or t.is_complex())


def _range(t: torch.Tensor) -> str:
    if t.numel() == 0 or not t.is_floating_point():
        return ""
    t = t.detach()
    finite = t[torch.isfinite(t)]
    if not finite.numel():
        return "no finite value"
    return f"min {float(finite.min()):.3g}, max {float(finite.max()):.3g}, min |x| {float(finite.abs().min()):.3g}"


class ForwardWatch(OpWatch):
    """The first unsafe op whose output went non-finite from inputs that were not, and risky calls."""

    keeps_overwritten = True

    def __init__(self) -> None:
        super().__init__()
        self.first: Culprit | None = None
        self.first_other: Culprit | None = None
        self.risky: dict[str, str] = {}
        self.filled: str | None = None  # the first mask fill that wrote an infinity: "torch.masked_fill at x.py:52 `...`"
        self._infinite: dict[int, weakref.ref] = {}  # tensors holding a fill's infinities, or carrying them on

    def visit(self, name: str, args: tuple, kwargs: dict, result: Any, site: Site) -> None:
        operands = args
        args = self.inputs_before(args)  # `x /= x.max()` made its NaN from the x it overwrote
        inputs = [t for t in op_tensors(args) + op_tensors(kwargs.values()) if t.is_floating_point()]
        writes_infinity = name in SET_ITEMS and any(_infinite_number(v) for v in operands)
        outputs = op_tensors([result]) or (op_tensors(operands[:1]) if writes_infinity else [])  # x[mask] = -inf: x
        if not outputs:
            return
        if name in MASKS or writes_infinity:
            if (writes_infinity or _finite(inputs)) and not _finite(outputs):
                self.filled = self.filled or f"{display_name(name)} at {site}"
                self._mark(outputs)
            return
        if self._infinite and self._carries_fill(op_tensors(operands) + op_tensors(kwargs.values())):
            self._mark(outputs)  # log_softmax of filled logits is -inf where they were
        # An op given no floating tensor (torch.tensor(v), from_numpy) converts values that already hold
        # the NaN: it is where the data enters torch, not where the NaN is made.
        made_nan = bool(inputs) and _no_nan(inputs) and not _no_nan(outputs)
        made_inf = bool(inputs) and _finite(inputs) and not _finite(outputs)
        if made_nan and self.first is None and self.first_other is None and name in INFINITY_ARITHMETIC:
            met = _infinity_met(name, list(args) + list(kwargs.values()), list(operands) + list(kwargs.values()),
                                self.frame, site, self.filled, self._carries_fill)
            if met is not None:
                self.first = Culprit(name, site, f"NaN from {met}", given="infinity")
                return
        if (made_nan or made_inf) and self.first is None:
            value = "NaN" if made_nan else "Inf"
            detail = _single_element(name, args, kwargs) or "; ".join(
                part for part in (_at_boundary(name, args, self.frame), _range(inputs[0]) if inputs else "") if part)
            operand = _operand(name, operands)
            culprit = Culprit(name, site, f"{value} from inputs without it ({detail})",
                              from_data=operand is not None and not operand.requires_grad)
            if category(name) != "other" and not _overflow_of_huge(name, args, made_nan):
                self.first = culprit
            elif self.first_other is None:
                self.first_other = culprit
        risk = _risk(name, args)
        if risk and str(site) not in self.risky:
            self.risky[str(site)] = f"{display_name(name)} at {site}: {risk}"

    def done(self) -> bool:
        return self.first is not None and len(self.risky) > 20

    def _mark(self, tensors: list[torch.Tensor]) -> None:
        for tensor in tensors:
            if _holds_infinity(tensor):
                self._infinite[id(tensor)] = weakref.ref(tensor)

    def _carries_fill(self, tensors: list[torch.Tensor]) -> bool:
        return any((ref := self._infinite.get(id(t))) is not None and ref() is t for t in tensors)


def _infinity_met(name: str, values: list, originals: list, frame: FrameType | None, site: Site, filled: str | None,
                  carries_fill: Callable[[list[torch.Tensor]], bool]) -> str | None:
    """What an arithmetic op that made a NaN was given (``values``, as they were before an in-place op; ``originals``,
    the objects the user's names hold): an infinity put there on purpose, a number or the entries a mask fill wrote
    (not an overflow of a run that diverges), and, for a product, the 0 it met: "0 * -inf: `log_probs` is -inf at 37
    of 512 entries, where `probs` is 0; the infinity was written by ..."."""
    product = name in MULTIPLY
    number = next((v for v in values if _infinite_number(v)), None)
    if number is not None:
        return f"{'0 * ' if product else ''}{number}: the number {number} in `{site.text}`"
    at = next((i for i, (v, o) in enumerate(zip(values, originals)) if _holds_infinity(v) and carries_fill([o])), None)
    if at is None or filled is None:
        return None
    infinite = values[at].detach()
    signs = infinite[torch.isinf(infinite)]
    sign = "-inf" if bool((signs < 0).all()) else "inf" if bool((signs > 0).all()) else "±inf"
    said = (f"{_operand_name(originals[at], frame)} is {sign} at {int(torch.isinf(infinite).sum())} of "
            f"{infinite.numel()} entries")
    other = next((i for i, v in enumerate(values) if i != at and isinstance(v, torch.Tensor)), None)
    if product and other is not None:
        try:
            mask, zeros = torch.broadcast_tensors(torch.isinf(infinite), values[other].detach() == 0)
        except RuntimeError:  # shapes that do not broadcast (a matmul's): no entry-by-entry pairing
            mask = zeros = torch.zeros((), dtype=torch.bool)
        if bool((mask & zeros).any()):
            said = f"0 * {sign}: {said}, where {_operand_name(originals[other], frame)} is 0"
    elif not product:
        said = f"an infinity met by its opposite or by 0 inside the op: {said}"
    return f"{said}; the infinity was written by {filled}"


def _overflow_of_huge(name: str, args: tuple, made_nan: bool) -> bool:
    """An Inf from a power with a positive exponent: no domain edge, the base was already huge (|x| ** 2 passes
    float32's 3.4e38 from |x| > 1.8e19), a divergence's symptom, like any other op overflowing."""
    exponent = args[1] if len(args) > 1 else None
    return not made_nan and category(name) == "pow" and name != "__rpow__" and isinstance(exponent, (int, float)) \
        and not isinstance(exponent, bool) and exponent > 0


def _single_element(name: str, args: tuple, kwargs: dict) -> str | None:
    """For a std / var: the reduced dimensions of size 1 (a batch of one sample), said as such."""
    if category(name) != "statistics" or not args or not isinstance(args[0], torch.Tensor):
        return None
    x, dim = args[0], _reduced_dim(args, kwargs)
    dims = [dim] if isinstance(dim, int) else list(dim) if isinstance(dim, (list, tuple)) else list(range(x.dim()))
    if math.prod(x.shape[d] for d in dims) > 1:
        return None
    return f"over dim {dim} of input {tuple(x.shape)}: a single element, a batch of one sample"


DIVISOR_FIRST = ("__rtruediv__", "__rdiv__", "reciprocal", "reciprocal_", "rsqrt")  # ops whose first argument is the divisor


def _divisor_index(name: str) -> int:
    """Which argument of a division divides: the second, but the first of ``1 / x`` and its kin."""
    return 0 if name in DIVISOR_FIRST else 1


def _operand(name: str, args: tuple) -> torch.Tensor | None:
    """The argument whose value decides the op's domain: a division's denominator, else the first."""
    index = _divisor_index(name) if category(name) == "divide" else 0
    x = args[index] if index < len(args) else None
    return x if isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel() else None


def _at_boundary(name: str, args: tuple, frame: FrameType | None) -> str:
    """The entries of the op's operand on its domain's edge, and the operand's name in the user's frame:
    "`y` = 0 at 3 of 50 entries"."""
    kind, operand = category(name), _operand(name, args)
    if operand is None:
        return ""
    x = operand.detach()
    if kind == "logdet":
        edges, counted = _determinant_edges(x), "matrices"
    else:
        edges = {"log": [("= 0", x == 0), ("< 0", x < 0)], "divide": [("= 0", x == 0)], "sqrt": [("< 0", x < 0)],
                 "acos": [("outside [-1, 1]", x.abs() > 1)]}.get(kind, [])
        counted = "entries"
    label = _operand_name(operand, frame)
    said = [f"{label} {edge} at {int(mask.sum())} of {mask.numel()} {counted}" for edge, mask in edges if bool(mask.any())]
    if kind == "divide" and said:
        said[0] = f"a division by 0: the denominator {said[0].replace('the operand ', '')}"
    return ", ".join(said)


def _operand_name(operand: torch.Tensor, frame: FrameType | None) -> str:
    """The operand's name in the user's frame: a local (`y`), or a tensor of the frame's module (`self.weight`)."""
    names = frame_locals(frame) if frame else {}
    local = next((name for name, value in names.items() if value is operand), None)
    if local is not None:
        return f"`{local}`"
    owner = names.get("self")
    if isinstance(owner, torch.nn.Module):
        found = next((name for name, value in owner.named_parameters(recurse=False) if value is operand), None)
        found = found or next((name for name, value in owner.named_buffers(recurse=False) if value is operand), None)
        if found is not None:
            return f"`self.{found}`"
    return "the operand"


def _determinant_edges(x: torch.Tensor) -> list[tuple[str, torch.Tensor]]:
    """A (batch of) square matrices: which have a negative or a zero determinant (``logdet``'s NaN and -inf)."""
    if x.dim() < 2 or x.shape[-1] != x.shape[-2]:
        return []
    sign = torch.linalg.slogdet(x.double())[0].reshape(-1)
    return [("with a negative determinant", sign < 0), ("with a zero determinant", sign == 0)]


def _reduced_dim(args: tuple, kwargs: dict) -> Any:
    """The ``dim`` a std / var call reduces over (positional or keyword; None for all of them)."""
    return kwargs.get("dim", args[1] if len(args) > 1 and not isinstance(args[1], bool) else None)


def _risk(name: str, args: tuple) -> str | None:
    """Why this call is risky now, before it has gone non-finite; None when it is not."""
    tensors = op_tensors(args)
    if not tensors or not tensors[0].is_floating_point() or not tensors[0].numel():
        return None
    x, kind = tensors[0], category(name)
    if kind == "log" and float(x.min()) <= TINY:
        return f"log of values at or near 0 (min {float(x.min()):.3g})"
    if kind == "divide":
        index = _divisor_index(name)
        denominator = args[index] if index < len(args) else args[0]
        if isinstance(denominator, torch.Tensor) and denominator.numel() and float(denominator.abs().min()) < TINY:
            return f"division by values at or near 0 (min |denominator| {float(denominator.abs().min()):.3g})"
    if kind == "exp" and float(x.max()) > EXP_LIMIT.get(x.dtype, 80.0):
        return f"exp of large values (max {float(x.max()):.3g}) overflows {x.dtype}"
    if kind == "growth" and float(x.abs().max()) > EXP_LIMIT.get(x.dtype, 80.0):
        return f"{name} of large values (max |x| {float(x.abs().max()):.3g}) grows as exp(|x|) and overflows {x.dtype}"
    if kind == "sqrt" and float(x.min()) <= 0:
        return f"sqrt at {float(x.min()):.3g}: an infinite or NaN gradient in backward"
    if kind == "acos" and float(x.abs().max()) >= 1.0:
        return f"acos at |x| = {float(x.abs().max()):.3g}: an infinite gradient at ±1"
    if kind == "norm" and x.dim() >= 1 and bool((x.reshape(x.shape[0], -1).abs().sum(dim=1) == 0).any()):
        return "norm of a zero vector: no gradient there (0/0)"
    if kind == "pow" and len(args) > 1 and isinstance(args[1], float) and not args[1].is_integer() and float(x.min()) <= 0:
        return f"pow of values at or below 0 to the power {args[1]}"
    return None


class BackwardWatch:
    """Hooks every node of the loss's graph: the first one whose incoming gradient is finite and
    whose outgoing gradient is not (nodes run in backward order, so the first hook to see it wins)."""

    def __init__(self) -> None:
        self.first: Culprit | None = None
        self.first_other: Culprit | None = None  # an op of no risky kind whose gradient overflowed
        self._handles: list[Any] = []

    def attach(self, loss: torch.Tensor) -> None:
        seen, todo = set(), [loss.grad_fn]
        while todo:
            node = todo.pop()
            if node is None or id(node) in seen or len(seen) > 50_000:
                continue
            seen.add(id(node))
            self._handles.append(node.register_hook(self._hook(node)))
            todo.extend(next_node for next_node, _ in node.next_functions)

    def _hook(self, node: Any) -> Any:
        def check(grad_inputs: tuple, grad_outputs: tuple) -> None:
            if self.first is not None:
                return
            incoming = [g for g in grad_outputs if isinstance(g, torch.Tensor)]
            outgoing = [g for g in grad_inputs if isinstance(g, torch.Tensor)]
            saved = _saved(node)
            if not outgoing or not _finite(incoming) or _finite(outgoing) or not _finite(saved):
                return
            culprit = _node_culprit(node)
            if culprit.kind == "other" and _overflowing(incoming + saved):
                self.first_other = self.first_other or culprit
            else:
                self.first = culprit
        return check

    def detach(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []


def _overflowing(tensors: list[torch.Tensor]) -> bool:
    """The largest incoming gradient times the largest saved value comes within OVERFLOW_MARGIN of the dtype's
    largest number: a product or a sum of them overflows. Values that large come from a divergence."""
    floating = [t for t in tensors if t.is_floating_point() and t.numel()]
    if len(floating) < 2:
        return False
    largest = [float(t.detach().abs().max()) for t in floating]
    return largest[0] * max(largest[1:]) > torch.finfo(floating[0].dtype).max / OVERFLOW_MARGIN


def _saved(node: Any) -> list[torch.Tensor]:
    """The tensors a backward node saved from its forward (its operands or result). Non-finite ones
    mean the NaN came in with the values; the node only passes it on."""
    saved = []
    for attr in dir(node):
        if attr.startswith("_saved_"):
            try:
                value = getattr(node, attr)
            except RuntimeError:  # freed, or not a tensor that can be read back
                continue
            if isinstance(value, torch.Tensor):
                saved.append(value.detach())
    return saved


def _node_culprit(node: Any) -> Culprit:
    kind = type(node).__name__
    base = re.sub(r"Backward\d*$", "", kind)
    op = NODE_OPS.get(base, base.lower())
    operand = next((v for v in _saved(node) if v.is_floating_point()), None)
    detail = f"{kind} returned a non-finite gradient from a finite one"
    if operand is not None:
        detail += f"; its saved operand: {_range(operand.detach())}"
    return Culprit(op, _forward_site(node) or Site("?", 0, ""), detail, backward=True)


def _forward_site(node: Any) -> Site | None:
    """The user's line that made this node in forward, from anomaly mode's record of the stack."""
    stack = node.metadata.get("traceback_") if hasattr(node, "metadata") else None
    if not stack:
        return None
    text = "".join(stack) if isinstance(stack, (list, tuple)) else str(stack)
    sites = [Site(m["path"], int(m["line"]), "") for m in _TRACE_LINE.finditer(text) if is_user_file(m["path"])]
    return sites[-1] if sites else None


class SafeOp(TorchFunctionMode):
    """The trial's change: the culprit op computed in its safe form at the culprit's line, and ops of its kind in
    the function that holds that line (the two logs of a hand-written binary cross-entropy: made safe at one, a
    replay that draws other batches goes non-finite at the other; the fix goes into that function)."""

    def __init__(self, culprit: Culprit) -> None:
        super().__init__()
        self.kind, self.path, self.line = culprit.kind, culprit.site.path, culprit.site.line
        self.lines = function_lines(self.path, self.line) if not culprit.backward else None
        self.applied: set[int] = set()  # the lines it made safe

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        name = op_name(func)
        if self.kind == "infinity" and name in INFINITY_ARITHMETIC and not _in_place(name) and \
                _given_infinity(args, kwargs):
            result = func(*args, **kwargs)  # made safe only where it turned the infinity into a NaN
            site = caller_site()
            if _no_nan(op_tensors([result])) or site is None or site.path != self.path or not self._covers(site.line):
                return result
            self.applied.add(site.line)
            with torch._C.DisableTorchFunction():
                return _safe(self.kind, name, func, args, kwargs)
        if category(name) == self.kind:
            site = caller_site()
            if site is not None and site.path == self.path and self._covers(site.line):
                self.applied.add(site.line)
                with torch._C.DisableTorchFunction():
                    return _safe(self.kind, name, func, args, kwargs)
        return func(*args, **kwargs)

    def _covers(self, line: int) -> bool:
        return line == self.line or (self.lines is not None and self.lines[0] <= line <= self.lines[1])

    def also(self) -> str:
        """The other lines it made safe, for the trial's evidence."""
        others = sorted(self.applied - {self.line})
        name = os.path.basename(self.path)
        return f" (and at {', '.join(f'{name}:{line}' for line in others)}, in the same function)" if others else ""


def _safe(kind: str, name: str, func: Any, args: tuple, kwargs: dict) -> Any:
    args = list(args)
    if kind in ("log", "sqrt") and isinstance(args[0], torch.Tensor):
        args[0] = args[0].clamp_min(EPS)
    elif kind == "acos" and isinstance(args[0], torch.Tensor):
        args[0] = args[0].clamp(-1 + EPS, 1 - EPS)
    elif kind == "exp" and isinstance(args[0], torch.Tensor):
        args[0] = args[0].clamp_max(EXP_LIMIT.get(args[0].dtype, 80.0))
    elif kind == "growth" and isinstance(args[0], torch.Tensor):
        limit = EXP_LIMIT.get(args[0].dtype, 80.0)
        args[0] = args[0].clamp(-limit, limit)
    elif kind == "pow" and isinstance(args[0], torch.Tensor):
        args[0] = args[0].abs() + EPS
    elif kind == "divide":
        index = _divisor_index(name)
        if index < len(args) and isinstance(args[index], torch.Tensor):
            d = args[index]  # a zero divisor becomes 1: the row keeps a finite value of its own scale
            args[index] = torch.where(d.abs() < EPS, torch.ones_like(d), d)
    elif kind == "norm" and isinstance(args[0], torch.Tensor) and name in ("norm", "vector_norm"):
        x = args[0]
        dim = kwargs.get("dim", args[2] if len(args) > 2 else None)
        keepdim = kwargs.get("keepdim", False)
        squares = (x * x).sum(dim=dim, keepdim=keepdim) if dim is not None else (x * x).sum()
        return (squares + EPS).sqrt()
    elif kind == "softmax" and isinstance(args[0], torch.Tensor):
        args[0] = args[0].clamp_min(-1e4)
    elif kind == "logdet" and isinstance(args[0], torch.Tensor):
        return torch.linalg.slogdet(args[0])[1]
    elif kind == "infinity":  # an infinity becomes the dtype's largest number: 0 * it is 0, it minus itself 0
        dtype = next((t.dtype for t in op_tensors(args) if t.is_floating_point()), torch.get_default_dtype())
        return func(*[_finite_version(a, dtype) for a in args],
                    **{k: _finite_version(v, dtype) for k, v in kwargs.items()})
    elif kind == "statistics" and name in ("std", "var") and isinstance(args[0], torch.Tensor):
        # The spread of one sample is 0, not 0/0; with an eps under the root, its gradient is finite too.
        variance = args[0].var(dim=_reduced_dim(args, kwargs), correction=0, keepdim=kwargs.get("keepdim", False))
        return (variance + EPS).sqrt() if name == "std" else variance
    return func(*args, **kwargs)


def _in_place(name: str) -> bool:
    """``x.mul_(y)``, ``x *= y``: run once already, a second run on safe copies would not change ``x``."""
    return (name.endswith("_") and not name.endswith("__")) or name.startswith("__i")


def _infinite_number(value: Any) -> bool:
    return isinstance(value, float) and math.isinf(value)


def _holds_infinity(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.is_floating_point() and bool(torch.isinf(value).any())


def _given_infinity(args: tuple, kwargs: dict) -> bool:
    values = list(args) + list(kwargs.values())
    return any(_infinite_number(v) or _holds_infinity(v) for v in values)


def _finite_version(value: Any, dtype: torch.dtype) -> Any:
    """An infinity becomes the largest number of its tensor's dtype (of ``dtype`` for a number); a NaN from
    elsewhere stays a NaN."""
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        largest = torch.finfo(value.dtype).max
        return value.clamp(-largest, largest)
    if _infinite_number(value):
        return math.copysign(torch.finfo(dtype).max, value)
    return value


@contextmanager
def watched(forward: ForwardWatch) -> Iterator[None]:
    """The forward watch, with anomaly mode recording each node's forward stack for the backward watch."""
    with ExitStack() as stack:
        stack.enter_context(torch.autograd.set_detect_anomaly(True, check_nan=False))
        stack.enter_context(forward)
        yield


@probe("nan.unsafe_math")
def unsafe_math(ctx: ProbeContext) -> ProbeOutcome:
    on_values = OnFailingValues.check(ctx)  # needs no loop: the failing step's own values were kept
    try:
        forward, backward, result = _watched_replay(ctx)
        if _reproduced(result) is False and forward.first is None and backward.first is None:
            forward, backward, result = _watched_from_checkpoint(ctx) or (forward, backward, result)
    except (NeedsLoop, LoopGone, NoPipeline) as exc:
        if on_values.culprit is None:
            on_values.culprit, said = _warned(ctx)
            on_values.evidence += said
        if on_values.culprit is None:
            raise
        forward, backward, result = ForwardWatch(), BackwardWatch(), None
        on_values.evidence.append(f"no replay of the failing step: {_why_no_loop(exc)}")
    risky = list(forward.risky.values())
    evidence = [] if result is None else [f"replayed the failing step op by op: loss {result.loss}, "
                                          f"gradients {'finite' if result.grads_finite else 'not finite'}"]
    evidence += on_values.evidence
    culprit = on_values.culprit or forward.first or backward.first
    data: dict[str, Any] = {"first": culprit.line() if culprit else None, "risky": risky}
    if culprit is None:
        evidence += [f"risky (not yet non-finite): {line}" for line in risky[:8]]
        for other in (forward.first_other, backward.first_other):
            if other is not None:
                evidence.append(f"first non-finite value{' in backward' if other.backward else ''}: "
                                f"{display_name(other.op)} at {other.site}, an overflow of values that were already huge")
        if result.loss is None:
            return ProbeOutcome(INCONCLUSIVE, "the replayed step computed no loss", evidence, data=data)
        return ProbeOutcome(PASS, "no op produced a non-finite value from finite inputs, forward or backward",
                            evidence, data=data)
    evidence.append(f"first non-finite value: {culprit.line()}")
    evidence += [f"risky: {line}" for line in risky[:6]]
    replayed = _trials(ctx, culprit) if result is not None else None
    if replayed is not None:
        evidence += replayed.evidence
    data["confirmed"] = bool(replayed and replayed.confirmed) or on_values.confirmed
    data["definitive"] = on_values.confirmed and culprit.from_data
    data["fixed_loss"] = replayed.fixed_loss if replayed else None
    data["fixed_learns"] = bool(replayed and replayed.confirmed and replayed.learns)
    where = "backward" if culprit.backward else "forward"
    summary = (f"unsafe math: {display_name(culprit.op)} at {culprit.site.short} gives a non-finite value in {where}"
               + (f" ({culprit.detail.split('; ')[-1]})" if culprit.backward else ""))
    from_data = " (the operand comes from the data: clamp it into the domain where it is made, or drop the rows " \
        "on the edge)" if data["definitive"] else ""
    return ProbeOutcome(FAIL, summary, evidence,
                        f"at {culprit.site.short} (`{culprit.site.text}`): {FIXES[culprit.kind]}{from_data}", data=data)


def _watched_replay(ctx: ProbeContext) -> tuple[ForwardWatch, BackwardWatch, Any]:
    """The failing step replayed once under both watches."""
    trainer = ctx.trainer
    forward, backward = ForwardWatch(), BackwardWatch()
    trainer.reset(ctx.break_state)
    try:
        result = trainer.step(trainer.prepare(), Adjust(mode=lambda: watched(forward), before_backward=backward.attach))
    finally:
        backward.detach()
    return forward, backward, result


def _reproduced(result: Any) -> bool | None:
    """Whether a replayed step went non-finite as the run did (None: no step was replayed)."""
    if result is None or result.loss is None:
        return None
    return not math.isfinite(result.loss) or not result.grads_finite


def _watched_from_checkpoint(ctx: ProbeContext) -> tuple[ForwardWatch, BackwardWatch, Any] | None:
    """The steps from the checkpoint before the failure replayed under both watches, up to the first that
    goes non-finite: a failure that needs the run's own random draws (a uniform sample of exactly 0 under a
    log) comes back only on the draws the checkpoint's random state gives, not on a replay of the last step."""
    start = start_point(ctx)
    if start.steps_before <= 1:
        return None
    trainer = ctx.trainer
    batches = trainer.recent_batches() or [trainer.prepare()]
    trainer.reset(start.snapshot)
    for index in range(max(start.steps_before + CHECKPOINT_EXTRA_STEPS, MIN_STEPS)):
        if ctx.cancelled() or ctx.time_left() <= 0:
            return None
        forward, backward = ForwardWatch(), BackwardWatch()
        try:
            result = trainer.step(batches[(len(batches) - start.steps_before + index) % len(batches)],
                                  Adjust(mode=lambda: watched(forward), before_backward=backward.attach))
        finally:
            backward.detach()
        if forward.first is not None or backward.first is not None or _reproduced(result):
            return forward, backward, result
    return None


@dataclass
class ReplayedFix:
    evidence: list[str]
    confirmed: bool
    fixed_loss: float | None
    learns: bool


def _trials(ctx: ProbeContext, culprit: Culprit) -> ReplayedFix | None:
    """The steps up to the failure replayed as written and with the culprit made safe; None when the
    loop ended meanwhile."""
    try:
        start = start_point(ctx)
        as_written = run_trial(ctx, start, Adjust())
        safe = SafeOp(culprit)
        fixed = run_trial(ctx, start, Adjust(mode=lambda: safe))
    except (NeedsLoop, LoopGone, NoPipeline):
        return None
    return ReplayedFix([f"replay from {start.label} as written: {as_written.describe()}",
                        f"... with {_made_safe(culprit)} at {culprit.site.short}{safe.also()}: {fixed.describe()}"],
                       as_written.blew_up and fixed.holds, fixed.final if fixed.holds else None, fixed.learns)


def _made_safe(culprit: Culprit) -> str:
    return "the infinities it meets made finite" if culprit.kind == "infinity" else f"{culprit.kind} made safe"


def _warned(ctx: ProbeContext) -> tuple[Culprit | None, list[str]]:
    """The op torch warned about at the user's line while the run ran (a std over one element, NaN by
    definition): the culprit where no replay can show one."""
    for site, warned in ctx.run.facts.domain_warnings:
        message = warned.split(" (Triggered internally", 1)[0]
        op = message.split("(", 1)[0].strip()
        if category(op) == "statistics":
            return (Culprit(op, site, "NaN from a reduction over a single element: a batch of one sample"),
                    [f"torch warned \"{message}\" at {site} while the script ran: a {op} over one element is NaN"])
    return None, []


def _why_no_loop(exc: Exception) -> str:
    if isinstance(exc, NoPipeline):
        return str(exc)
    return "the script's loop had ended" if isinstance(exc, NeedsLoop) else "the script's loop ended during it"


@dataclass
class OnFailingValues:
    """The failing step's own loss statement, run again on its own values (see ``failing_loss``): the
    first op that makes it non-finite, and whether that op made safe gives a finite loss."""

    culprit: Culprit | None
    evidence: list[str]
    confirmed: bool = False

    @classmethod
    def check(cls, ctx: ProbeContext) -> OnFailingValues:
        loss, why = failing_loss(ctx)
        if loss is None:
            return cls(None, [f"the failing step's own values: {why}"])
        said = f"the failing step's loss computed again on its own values (`{loss.site.text}` at {loss.site.short})"
        watch = ForwardWatch()
        try:
            value = loss.compute(watch)
        except Exception as exc:  # the user's statement, on values a replay never saw
            return cls(None, [f"{said}: raised {type(exc).__name__}: {exc}"])
        evidence = [f"{said}: {_value(value)}"]
        if watch.first is None:
            return cls(None, evidence + ["... no op made a non-finite value from finite inputs"])
        safe = SafeOp(watch.first)
        try:
            fixed = loss.compute(safe)
        except Exception as exc:
            return cls(watch.first, evidence + [f"... with {_made_safe(watch.first)}: raised {type(exc).__name__}"])
        evidence.append(f"... with {_made_safe(watch.first)} at {watch.first.site.short}: {_value(fixed)}")
        confirmed = not _finite(op_tensors([value])) and bool(safe.applied) and _finite(op_tensors([fixed]))
        if confirmed and watch.first.from_data:
            evidence.append(f"... the operand of {display_name(watch.first.op)} depends on no weight: the data put it "
                            "on the edge of the op's domain, whatever the rate or the clipping")
        return cls(watch.first, evidence, confirmed)


def _value(value: Any) -> str:
    tensors = [t for t in op_tensors([value]) if t.is_floating_point()]
    if not tensors:
        return f"{value!r}"
    if tensors[0].numel() == 1:
        return f"{float(tensors[0]):.6g}" + ("" if _finite(tensors) else ", non-finite as in the run")
    return "finite" if _finite(tensors) else "non-finite, as in the run"
