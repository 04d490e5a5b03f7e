"""The user's own source, read to name what holds a value and where it was made.

``names_of`` finds the variables (locals of the training thread's frames, module globals, object
attributes) that hold a tensor; ``assignments`` finds the lines of a script that assign a name;
``evaluate`` computes a small expression of a line (a denominator, a log's argument) from the values
the frame still holds, allowing only tensor/array arithmetic and reductions: nothing that could
run the user's own functions.
"""

from __future__ import annotations

import ast
import functools
import linecache
import math
import operator
from types import FrameType, ModuleType
from typing import Any

import torch

from tuidebug.sites import Site

SAFE_METHODS = {"std", "var", "mean", "sum", "min", "max", "abs", "sqrt", "float", "double", "amin", "amax",
                "clamp", "clip", "values", "t", "T", "squeeze", "unsqueeze", "reshape", "view", "log", "exp"}
SAFE_FUNCTIONS = SAFE_METHODS | {"std", "var", "mean", "nanstd", "nanmean", "ptp"}
BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
          ast.Pow: operator.pow}


class Unsafe(Exception):
    """The expression uses something ``evaluate`` does not allow."""


def same_data(a: Any, b: Any) -> bool:
    """The same tensor or array, or views of the same memory."""
    if a is b:
        return True
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.device == b.device and a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    numpy = _numpy()
    if numpy is not None and isinstance(a, numpy.ndarray) and isinstance(b, numpy.ndarray):
        return bool(numpy.shares_memory(a, b))
    return False


def names_of(value: Any, frames: list[FrameType]) -> list[tuple[str, FrameType]]:
    """The variables that hold ``value`` in the frames' locals and globals, innermost first."""
    found, seen = [], set()
    for frame in frames:
        for scope in (frame.f_locals, frame.f_globals):
            if id(scope) in seen:
                continue
            seen.add(id(scope))
            for name, held in list(scope.items()):
                if not name.startswith("__") and _holds(held, value):
                    found.append((name, frame))
    return found


def _holds(held: Any, value: Any) -> bool:
    if isinstance(held, (ModuleType, type)) or callable(held) and not hasattr(held, "shape"):
        return False
    try:
        return same_data(held, value)
    except Exception:
        return False


@functools.lru_cache(maxsize=64)
def _tree(path: str) -> ast.AST | None:
    text = "".join(linecache.getlines(path))
    try:
        return ast.parse(text)
    except SyntaxError:
        return None


def assignments(path: str, name: str) -> list[Site]:
    """The lines of ``path`` that assign ``name`` (``x = ...``, ``x += ...``, ``self.x = ...``)."""
    tree = _tree(path)
    if tree is None:
        return []
    lines = []
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AugAssign, ast.AnnAssign)) else []
        for target in targets:
            for leaf in ast.walk(target):
                if (isinstance(leaf, ast.Name) and leaf.id == name) or (
                        isinstance(leaf, ast.Attribute) and leaf.attr == name):
                    lines.append(Site(path, node.lineno, ""))
    return sorted(set(lines), key=lambda site: site.line)


def accumulations(path: str, name: str) -> list[Site]:
    """The lines of ``path`` that add to ``name``: ``x += ...`` or ``x = x + ...`` (and on ``self.x``)."""
    tree = _tree(path)
    if tree is None:
        return []

    def named(node: ast.AST) -> bool:
        return (isinstance(node, ast.Name) and node.id == name) or (isinstance(node, ast.Attribute) and node.attr == name)

    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.AugAssign) and named(node.target):
            lines.append(Site(path, node.lineno, ""))
        elif isinstance(node, ast.Assign) and any(named(t) for t in node.targets) and isinstance(node.value, ast.BinOp) \
                and any(named(n) for n in ast.walk(node.value)):
            lines.append(Site(path, node.lineno, ""))
    return sorted(set(lines), key=lambda site: site.line)


def calls_of(path: str, owner: str, method: str) -> list[Site]:
    """The lines of ``path`` that call ``owner.method(...)`` (``outputs.append``)."""
    tree = _tree(path)
    if tree is None:
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == method:
            target = node.func.value
            name = target.attr if isinstance(target, ast.Attribute) else target.id if isinstance(target, ast.Name) else None
            if name == owner:
                found.append(Site(path, node.lineno, ""))
    return sorted(set(found), key=lambda site: site.line)


def calls_named(path: str, names: set[str], inside_class: str | None = None) -> list[Site]:
    """The lines of ``path`` that call a function, method or layer named one of ``names``
    (``F.softmax(x)``, ``x.softmax(1)``, ``nn.Softmax(dim=1)``), only within class ``inside_class``
    when it has any there."""
    tree = _tree(path)
    if tree is None:
        return []

    def found_in(root: ast.AST) -> list[Site]:
        return sorted({Site(path, node.lineno, "") for node in ast.walk(root) if isinstance(node, ast.Call) and (
            (isinstance(node.func, ast.Name) and node.func.id in names) or
            (isinstance(node.func, ast.Attribute) and node.func.attr in names))}, key=lambda site: site.line)

    classes = [node for node in ast.walk(tree) if isinstance(node, ast.ClassDef) and node.name == inside_class]
    return next((sites for sites in map(found_in, classes) if sites), None) or found_in(tree)


def freezes(path: str) -> list[Site]:
    """The lines of ``path`` that turn gradients off: ``p.requires_grad = False`` or
    ``m.requires_grad_(False)``."""
    tree = _tree(path)
    if tree is None:
        return []

    def false(node: ast.AST | None) -> bool:
        return isinstance(node, ast.Constant) and node.value is False

    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and false(node.value) and any(
                isinstance(t, ast.Attribute) and t.attr == "requires_grad" for t in node.targets):
            lines.append(Site(path, node.lineno, ""))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "requires_grad_" \
                and (any(map(false, node.args)) or any(false(k.value) for k in node.keywords)):
            lines.append(Site(path, node.lineno, ""))
    return sorted(set(lines), key=lambda site: site.line)


def bias_inits(path: str) -> list[Site]:
    """The lines of ``path`` that set a bias by hand: ``layer.bias.data = ...``, ``layer.bias =
    nn.Parameter(...)``, ``layer.bias.data.fill_(...)`` or ``nn.init.constant_(layer.bias, ...)``."""
    tree = _tree(path)
    if tree is None:
        return []

    def bias(node: ast.AST) -> bool:
        while isinstance(node, ast.Attribute):
            if node.attr == "bias":
                return True
            node = node.value
        return False

    lines = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(bias(target) for target in targets):
                lines.append(Site(path, node.lineno, ""))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr.endswith("_") \
                and (bias(node.func.value) or any(bias(arg) for arg in node.args[:1])):
            lines.append(Site(path, node.lineno, ""))
    return sorted(set(lines), key=lambda site: site.line)


def shuffles(path: str) -> list[Site]:
    """The lines of ``path`` that shuffle one sequence in place: ``random.shuffle(x)``,
    ``np.random.shuffle(x)`` (its partner, the labels, is not shuffled with it by that call)."""
    tree = _tree(path)
    if tree is None:
        return []
    lines = [Site(path, node.lineno, "") for node in ast.walk(tree)
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "shuffle"
             and len(node.args) == 1 and isinstance(node.args[0], (ast.Name, ast.Attribute, ast.Subscript))]
    return sorted(set(lines), key=lambda site: site.line)


def enclosing_function(path: str, line: int) -> str | None:
    """The name of the innermost function of ``path`` whose body holds ``line``."""
    tree = _tree(path)
    if tree is None:
        return None
    functions = [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and node.lineno <= line <= (node.end_lineno or node.lineno)]
    return max(functions, key=lambda node: node.lineno).name if functions else None


def divisions(site: Site) -> list[ast.expr]:
    """The denominators on a line of source."""
    tree = _parse_line(site.text)
    if tree is None:
        return []
    return [node.right for node in ast.walk(tree) if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)]


def _parse_line(text: str) -> ast.AST | None:
    try:
        return ast.parse(text.strip())
    except SyntaxError:
        return None


def evaluate(expression: ast.expr, scope: dict[str, Any]) -> Any:
    """The value of a small expression over tensors and arrays in ``scope`` (Unsafe otherwise)."""
    if isinstance(expression, ast.Constant) and isinstance(expression.value, (int, float)):
        return expression.value
    if isinstance(expression, ast.Name):
        if expression.id not in scope:
            raise Unsafe(expression.id)
        return scope[expression.id]
    if isinstance(expression, ast.BinOp) and type(expression.op) in BINARY:
        return BINARY[type(expression.op)](evaluate(expression.left, scope), evaluate(expression.right, scope))
    if isinstance(expression, ast.UnaryOp) and isinstance(expression.op, ast.USub):
        return -evaluate(expression.operand, scope)
    if isinstance(expression, ast.Attribute):
        owner = evaluate(expression.value, scope)
        if expression.attr not in SAFE_METHODS or isinstance(owner, (int, float)):
            raise Unsafe(expression.attr)
        return getattr(owner, expression.attr)
    if isinstance(expression, ast.Call):
        return _call(expression, scope)
    if isinstance(expression, ast.Subscript):
        return evaluate(expression.value, scope)[_index(expression.slice, scope)]
    raise Unsafe(type(expression).__name__)


def _call(call: ast.Call, scope: dict[str, Any]) -> Any:
    func = call.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in ("torch", "np", "numpy"):
        module = scope.get(func.value.id)
        if func.attr not in SAFE_FUNCTIONS or not isinstance(module, ModuleType):
            raise Unsafe(func.attr)
        target = getattr(module, func.attr)
    else:
        target = evaluate(func, scope)
        if not callable(target) or getattr(target, "__name__", "") not in SAFE_METHODS:
            raise Unsafe("call")
    args = [evaluate(a, scope) for a in call.args]
    kwargs = {k.arg: evaluate(k.value, scope) for k in call.keywords if k.arg in ("dim", "axis", "keepdim",
                                                                                  "keepdims", "unbiased", "ddof")}
    return target(*args, **kwargs)


def _index(node: ast.expr, scope: dict[str, Any]) -> Any:
    if isinstance(node, ast.Slice):
        return slice(*(evaluate(p, scope) if p is not None else None for p in (node.lower, node.upper, node.step)))
    if isinstance(node, ast.Tuple):
        return tuple(_index(e, scope) for e in node.elts)
    return evaluate(node, scope)


def zero_entries(value: Any) -> list[int] | None:
    """The flat indices where a tensor or array is 0 (or not finite); None when it is not one."""
    numpy = _numpy()
    if numpy is not None and isinstance(value, numpy.ndarray):
        value = torch.from_numpy(numpy.asarray(value, dtype="float64"))
    if isinstance(value, (int, float)):
        return [0] if value == 0 or not math.isfinite(value) else []
    if not isinstance(value, torch.Tensor):
        return None
    flat = value.detach().double().flatten()
    return (flat == 0).logical_or(~torch.isfinite(flat)).nonzero().flatten().tolist()


def _numpy() -> Any:
    import sys

    return sys.modules.get("numpy")
