"""The fourth NaN check: log, exp, divide and friends, named with the user's source line.

The failing step is replayed under a ``TorchFunctionMode`` that looks at every torch call made by
the script's own code (calls from torch internals and from tuidebug are let through unseen). It
records the first call that produced a non-finite value from finite inputs, and the risky calls
that have not gone non-finite yet: log of values at or near 0, division by values near 0, exp of
large values, sqrt at 0 (an infinite gradient in backward), pow of negative bases.
"""

from __future__ import annotations

import linecache
import math
import os
import sys
from dataclasses import dataclass
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from tuidebug.agent.trainers import Adjust
from tuidebug.probes import FAIL, INCONCLUSIVE, PASS, ProbeContext, ProbeOutcome
from tuidebug.probes.trials import Start

TINY = 1e-12
EXP_LIMIT = {torch.float16: 10.0, torch.bfloat16: 80.0, torch.float32: 80.0, torch.float64: 700.0}
_SKIP = (os.path.dirname(torch.__file__) + os.sep,
         os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep)

LOG = {"log", "log2", "log10", "log_", "xlogy"}
DIVIDE = {"div", "div_", "true_divide", "__truediv__", "__rtruediv__", "__itruediv__", "reciprocal", "rsqrt",
          "floor_divide", "__floordiv__"}
EXP = {"exp", "exp_", "exp2", "expm1", "pow_exp"}
SQRT = {"sqrt", "sqrt_"}
POW = {"pow", "pow_", "__pow__", "__rpow__", "float_power"}
UNSAFE = LOG | DIVIDE | EXP | SQRT | POW | {"log1p", "acos", "asin", "atanh"}

FIXES = {
    "log": "clamp the argument (torch.log(x.clamp_min(1e-8))) or stay in log space: F.log_softmax, "
           "torch.logsumexp, F.binary_cross_entropy_with_logits / F.cross_entropy on logits",
    "divide": "guard the denominator: x / (d + eps) or x / d.clamp_min(eps), or mask the rows where it is 0",
    "exp": "avoid exp of large values: torch.logsumexp, softmax / log_softmax, or clamp the exponent",
    "sqrt": "sqrt(x + eps) or x.clamp_min(eps).sqrt(): the gradient of sqrt at 0 is infinite",
    "pow": "take the power of x.abs() or clamp the base: a negative base to a fractional power is NaN",
    "other": "keep the argument inside the function's domain (clamp it)",
}


@dataclass
class Call:
    op: str
    site: str
    detail: str

    def line(self) -> str:
        return f"{display_name(self.op)} at {self.site}: {self.detail}"


OPERATORS = {"__truediv__": "/", "__rtruediv__": "/", "__itruediv__": "/=", "__floordiv__": "//",
             "__pow__": "**", "__rpow__": "**", "__mul__": "*", "__add__": "+", "__sub__": "-"}


def display_name(name: str) -> str:
    """``torch.log`` for functions, the symbol for operators."""
    return f"`{OPERATORS[name]}`" if name in OPERATORS else f"torch.{name.rstrip('_')}"


def _category(name: str) -> str:
    for category, names in (("log", LOG), ("divide", DIVIDE), ("exp", EXP), ("sqrt", SQRT), ("pow", POW)):
        if name in names:
            return category
    return "other"


def _user_site() -> str | None:
    """The script's own frame that made this call; None when torch or tuidebug made it."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back
    while frame is not None and frame.f_code.co_filename.startswith(_SKIP[0]):
        frame = frame.f_back
    if frame is None or frame.f_code.co_filename.startswith(_SKIP[1]):
        return None
    path, line = frame.f_code.co_filename, frame.f_lineno
    text = linecache.getline(path, line).strip()
    return f"{os.path.basename(path)}:{line}" + (f" `{text}`" if text else "")


def _tensors(values: Any) -> list[torch.Tensor]:
    found = []
    for value in values:
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            found.extend(v for v in value if isinstance(v, torch.Tensor))
    return found


def _all_finite(tensors: list[torch.Tensor]) -> bool:
    return all(bool(torch.isfinite(t).all()) for t in tensors if t.is_floating_point() or t.is_complex())


def _range(t: torch.Tensor) -> str:
    if t.numel() == 0 or not t.is_floating_point():
        return ""
    return f"min {float(t.min()):.3g}, max {float(t.max()):.3g}"


class Watch(TorchFunctionMode):
    """Records the first non-finite result from finite inputs and the risky calls, in the user's code."""

    def __init__(self) -> None:
        super().__init__()
        self.first: Call | None = None
        self.risky: dict[str, Call] = {}

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        if self.first is not None and len(self.risky) > 20:
            return result
        with torch._C.DisableTorchFunction():
            self._inspect(getattr(func, "__name__", str(func)), args, kwargs, result)
        return result

    def _inspect(self, name: str, args: tuple, kwargs: dict, result: Any) -> None:
        inputs = _tensors(args) + _tensors(kwargs.values())
        outputs = _tensors([result])
        if not outputs or not inputs:
            return
        site = _user_site()
        if site is None:
            return
        if self.first is None and _all_finite(inputs) and not _all_finite(outputs):
            bad = next(t for t in outputs if not bool(torch.isfinite(t).all()))
            value = "NaN" if bool(torch.isnan(bad).any()) else "Inf"
            self.first = Call(name, site, f"{value} from finite inputs ({_range(inputs[0])})")
        risk = _risk(name, args)
        if risk and f"{name}@{site}" not in self.risky:
            self.risky[f"{name}@{site}"] = Call(name, site, risk)


def _risk(name: str, args: tuple) -> str | None:
    """Why this call is risky now, before it has gone non-finite; None when it is not."""
    tensors = _tensors(args)
    if not tensors or not tensors[0].is_floating_point():
        return None
    x = tensors[0]
    if name in LOG and x.numel() and float(x.min()) <= TINY:
        return f"log of values at or near 0 (min {float(x.min()):.3g})"
    if name in {"rsqrt", "reciprocal"} and x.numel() and float(x.abs().min()) < TINY:
        return f"division by values near 0 (min |x| {float(x.abs().min()):.3g})"
    if name in DIVIDE and name not in {"rsqrt", "reciprocal"}:
        denominator = args[0] if name == "__rtruediv__" else (args[1] if len(args) > 1 else None)
        if isinstance(denominator, torch.Tensor) and denominator.numel() and float(denominator.abs().min()) < TINY:
            return f"division by values near 0 (min |denominator| {float(denominator.abs().min()):.3g})"
        if isinstance(denominator, (int, float)) and abs(denominator) < TINY:
            return "division by 0"
    if name in EXP and x.numel() and float(x.max()) > EXP_LIMIT.get(x.dtype, 80.0):
        return f"exp of large values (max {float(x.max()):.3g}) overflows {x.dtype}"
    if name in SQRT and x.numel() and float(x.min()) <= 0:
        return f"sqrt at {float(x.min()):.3g}: an infinite or NaN gradient in backward"
    if name in POW and len(args) > 1 and x.numel() and float(x.min()) < 0:
        exponent = args[1]
        if isinstance(exponent, float) and not exponent.is_integer():
            return f"pow of negative values to the power {exponent}"
    return None


def unsafe_math(ctx: ProbeContext) -> ProbeOutcome:
    trainer = ctx.trainer
    watch = Watch()
    start = Start(ctx.runtime.snapshot, 1, "the state at the break")
    trainer.reset(start.snapshot)
    result = trainer.step(trainer.prepare(), Adjust(mode=lambda: watch))
    risky = [call.line() for call in watch.risky.values()]
    evidence = [f"replayed the failing step under an op-by-op check: loss {result.loss}, "
                f"gradients {'finite' if result.grads_finite else 'not finite'}"]
    first = watch.first
    data = {"first": first.line() if first else None, "risky": risky}
    if first is not None:
        category = _category(first.op) if first.op in UNSAFE else None
        evidence.append(f"first non-finite value: {first.line()}")
        evidence += [f"risky: {line}" for line in risky[:8]]
        if category is not None:
            return ProbeOutcome(FAIL, f"unsafe math: {display_name(first.op)} at {first.site.split(' ')[0]} produced "
                                f"{first.detail.split(' ')[0]}", evidence, FIXES[category], data=data)
        return ProbeOutcome(PASS, f"no unsafe op: the first non-finite value is an overflow in {display_name(first.op)} of "
                            "values that were already huge (see learning rate and gradients)", evidence, data=data)
    loss_ok = result.loss is not None and math.isfinite(result.loss)
    if loss_ok and not result.grads_finite and risky:
        evidence += [f"risky: {line}" for line in risky[:8]]
        category = _category(next(iter(watch.risky.values())).op)
        return ProbeOutcome(FAIL, f"unsafe math in backward: {risky[0]}", evidence, FIXES[category], data=data)
    if result.loss is None:
        return ProbeOutcome(INCONCLUSIVE, "the replayed step computed no loss", evidence, data=data)
    evidence += [f"risky (not yet non-finite): {line}" for line in risky[:8]]
    summary = "no op produced a non-finite value from finite inputs"
    if not loss_ok:
        summary += ": non-finite values came in through the inputs or the weights"
    return ProbeOutcome(PASS, summary, evidence, data=data)
