"""The failing step's loss, computed again on the values the script's frames still hold.

When the loss is already non-finite before backward, the agent keeps the values of the user's frame
that called backward (``HeldFrame``): the variable that holds the loss is found among them, and the
statement that last assigned it (``loss = beta_nll(alpha, beta, yb)``, or an inline formula) can be
run again on the very tensors of the failing step. That is what a replay cannot always give: a loop
without a DataLoader hands a replay its next batch, not the failing one.

The statement runs on the probe's thread (the agent's hooks ignore it), with autograd on so that a
value's ``requires_grad`` still says whether it depends on the weights (nothing calls backward on
it). A model's forward in it runs again on the failing batch; the probe's snapshot puts the state
it touches back (batch-norm statistics, the RNG). It is not run when it could move the run on: a
call of an optimizer, an iterator or I/O, directly or in the body of a user function it calls.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import os
import textwrap
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch

from tuidebug.probe_api import HeldFrame, ProbeContext
from tuidebug.probes.source import holds, unpacked_assignment_before
from tuidebug.sites import Site, is_user_file

# Calls that would move the run on (an iterator, a step, a backward) or reach outside it: a statement
# or a user function that makes one is not run again.
MOVES_THE_RUN = {"next", "iter", "backward", "step", "zero_grad", "open", "save", "load", "write", "input", "print",
                 "exec", "eval", "send", "recv", "all_reduce", "barrier"}
PURE_BUILTINS = {abs, sum, min, max, float, int, len, pow, round}


@dataclass
class FailingLoss:
    """The statement that computed the failing loss, and the frame whose values it runs on."""

    site: Site
    expression: ast.expr
    frame: HeldFrame
    position: int | None = None  # ``loss, logits = ...``: where the loss is in the value unpacked

    def compute(self, mode: AbstractContextManager | None = None) -> Any:
        """The statement's value (the loss's part of it, when unpacked) on the held values, under ``mode``
        (an op watch, a safe op)."""
        code = compile(ast.Expression(body=self.expression), self.site.path, "eval")
        with torch.enable_grad(), mode or nullcontext():
            value = eval(code, dict(self.frame.globals), dict(self.frame.locals))  # noqa: S307 - vetted by _unsafe
        return value if self.position is None else value[self.position]


def failing_loss(ctx: ProbeContext) -> tuple[FailingLoss | None, str]:
    """The failing loss's statement, or None and why it cannot be run again."""
    failure = ctx.run.failure
    frame = getattr(failure, "held_frame", None)
    if failure is None or frame is None:
        return None, "the loss was finite when backward began"
    for name in (name for name, value in frame.locals.items() if holds(value, failure.loss)):
        found = unpacked_assignment_before(frame.path, name, frame.line)
        if found is None:
            continue
        site, expression, position = found
        why = _unsafe(expression, frame)
        if why:
            return None, f"`{site.text}` at {site.short} is not run again: {why}"
        return FailingLoss(Site(site.path, site.line, frame.function), expression, frame, position), ""
    return None, (f"no assignment in {frame.function} at {os.path.basename(frame.path)} before line {frame.line} sets "
                  "a variable that holds the loss")


def _unsafe(expression: ast.expr, frame: HeldFrame) -> str:
    """Why running ``expression`` again could change the run; "" when it cannot."""
    scope, names = dict(frame.globals), dict(frame.locals)
    for call in (node for node in ast.walk(expression) if isinstance(node, ast.Call)):
        if any(isinstance(node, ast.Call) for node in ast.walk(call.func)):
            return "it calls the result of a call"
        if _called_name(call) in MOVES_THE_RUN:
            return f"it calls {_called_name(call)}()"
        try:
            callee = eval(compile(ast.Expression(body=call.func), "<callee>", "eval"), scope, names)  # noqa: S307
        except Exception:
            return f"{ast.unparse(call.func)} cannot be looked up"
        why = _callee_unsafe(callee)
        if why:
            return f"{ast.unparse(call.func)} {why}"
    return ""


def _callee_unsafe(callee: Any) -> str:
    if isinstance(callee, torch.nn.Module) or any(callee is pure for pure in PURE_BUILTINS):
        return ""
    owner = getattr(callee, "__self__", None)
    if isinstance(owner, torch.Tensor) or getattr(callee, "__module__", "") and str(
            getattr(callee, "__module__", "")).startswith("torch"):
        return ""
    if inspect.isfunction(callee) and is_user_file(callee.__code__.co_filename):
        return _body_unsafe(callee)
    if callee is getattr(builtins, getattr(callee, "__name__", ""), None):
        return "is a builtin that may have effects"
    return "is not a function of the script's or torch's"


def _body_unsafe(function: Any) -> str:
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return "has no source to check"
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _called_name(node) in MOVES_THE_RUN:
            return f"calls {_called_name(node)}()"
    return ""


def _called_name(call: ast.Call) -> str:
    """``step`` for ``optimizer.step()``, ``next`` for ``next(it)``; "" for anything else called."""
    return call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")

