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
import inspect
import linecache
import os
import math
import operator
import re
import textwrap
from collections.abc import Callable, Iterable, Iterator
from types import FrameType, ModuleType
from typing import Any, TypeVar

import torch

from tuidebug.sites import Site, frame_locals

SAFE_METHODS = {"std", "var", "mean", "sum", "min", "max", "abs", "sqrt", "float", "double", "amin", "amax",
                "clamp", "clip", "values", "t", "T", "squeeze", "unsqueeze", "reshape", "view", "log", "exp"}
SAFE_FUNCTIONS = SAFE_METHODS | {"std", "var", "mean", "nanstd", "nanmean", "ptp"}
BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
          ast.Pow: operator.pow}


T = TypeVar("T")


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
        for scope in (frame_locals(frame), frame.f_globals):
            if id(scope) in seen:
                continue
            seen.add(id(scope))
            for name, held in list(scope.items()):
                if not name.startswith("__") and holds(held, value):
                    found.append((name, frame))
    return found


def holds(held: Any, value: Any) -> bool:
    """Whether a variable's value ``held`` is ``value`` or a view of its data (never a module or a class)."""
    if isinstance(held, (ModuleType, type)) or callable(held) and not hasattr(held, "shape"):
        return False
    try:
        return same_data(held, value)
    except Exception:
        return False


def in_files(paths: Iterable[str], read: Callable[..., list[T]], *args: Any) -> list[T]:
    """What ``read(path, *args)`` finds in each of the user's files ``paths``, the files in name order."""
    return [found for path in sorted(paths) for found in read(path, *args)]


@functools.lru_cache(maxsize=64)
def _tree(path: str) -> ast.AST | None:
    text = "".join(linecache.getlines(path))
    try:
        return ast.parse(text)
    except SyntaxError:
        return None


def statement_start(site: Site) -> Site | None:
    """The first line of the simple statement ``site``'s line is inside, where that statement spans several
    lines (an op reported at line 185 of ``per_node_loss = (`` ... ``)`` starting at 184); None otherwise."""
    tree = _tree(site.path)
    if tree is None:
        return None
    starts = [node.lineno for node in ast.walk(tree) if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign,
                                                                         ast.Return, ast.Expr))
              and node.lineno < site.line <= (node.end_lineno or node.lineno)]
    return Site(site.path, max(starts), site.function) if starts else None


def assignments(path: str, name: str, attribute: bool = False) -> list[Site]:
    """The lines of ``path`` that assign ``name`` (``x = ...``, ``x += ...``, ``self.x = ...``); with
    ``attribute``, only ``<object>.name = ...`` (not a local of the same name)."""
    tree = _tree(path)
    if tree is None:
        return []
    lines = []
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AugAssign, ast.AnnAssign)) else []
        for target in targets:
            for leaf in ast.walk(target):
                if (isinstance(leaf, ast.Name) and leaf.id == name and not attribute) or (
                        isinstance(leaf, ast.Attribute) and leaf.attr == name):
                    lines.append(Site(path, node.lineno, ""))
    return sorted(set(lines), key=lambda site: site.line)


def written_sites(files: Iterable[str], written: str) -> list[Site]:
    """The sites a ``file.py:LINE `text``` written in the facts may name: its line in each of ``files`` of that
    name, in sorted order (two of the run's files can share a name)."""
    name, _, rest = written.partition(":")
    line = rest.split(" ", 1)[0]
    if not line.isdigit():
        return []
    return [Site(path, int(line), "") for path in sorted(files) if os.path.basename(path) == name]


def assignment_target(site: Site) -> str | None:
    """The name a line assigns (``log_probs = torch.tensor(...)`` -> ``log_probs``), if it assigns one."""
    tree = _parse_line(site.text)
    node = tree.body[0] if isinstance(tree, ast.Module) and tree.body else None
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        target = node.targets[0] if isinstance(node, ast.Assign) else node.target
        return ast.unparse(target) if isinstance(target, (ast.Name, ast.Attribute)) else None
    return None


def assigned_value(site: Site) -> str | None:
    """The source text of what a line assigns (``self.attn = weights`` -> ``weights``), if it is one assignment."""
    text = site.text
    tree = _parse_line(text)
    node = tree.body[0] if isinstance(tree, ast.Module) and tree.body else None
    return ast.get_source_segment(text, node.value) if isinstance(node, ast.Assign) else None


def assigned_name(site: Site) -> str | None:
    """The variable a line assigns from (``group["lr"] = lr_this_step`` -> ``lr_this_step``), if it is one."""
    tree = _parse_line(site.text)
    node = tree.body[0] if isinstance(tree, ast.Module) and tree.body else None
    return node.value.id if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) else None


def item_assignments(path: str, name: str) -> list[Site]:
    """The lines of ``path`` that store into ``name`` by key: ``self.cache[key] = value``."""
    tree = _tree(path)
    if tree is None:
        return []
    return sorted({Site(path, node.lineno, "") for node in ast.walk(tree) if isinstance(node, ast.Assign)
                   for target in node.targets if isinstance(target, ast.Subscript) and _name_of(target.value) == name},
                  key=lambda site: site.line)


def emptying_methods(cls: type, name: str) -> list[tuple[str, Site]]:
    """(method, line) of the methods of ``cls`` that empty ``self.<name>``: assign it an empty container or
    call its ``clear()``."""
    try:
        path = inspect.getsourcefile(cls)
    except TypeError:
        return []
    tree = _tree(path) if path else None
    node = next((n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls.__name__), None) if tree else None
    found = []
    for method in (n for n in (node.body if node else []) if isinstance(n, ast.FunctionDef) and n.name != "__init__"):
        for sub in ast.walk(method):
            empties = (isinstance(sub, ast.Assign) and any(_name_of(t) == name for t in sub.targets)
                       and isinstance(sub.value, (ast.Dict, ast.List, ast.Set)) and not _elements(sub.value)) or (
                isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr == "clear"
                and _name_of(sub.func.value) == name)
            if empties:
                found.append((method.name, Site(path, sub.lineno, method.name)))
                break
    return found


def returns_nothing(method: Callable) -> Site | None:
    """The ``def`` line of ``method`` when no ``return`` in its own body gives a value (a Lightning
    ``training_step`` that only logs its loss), else None."""
    try:
        path, (lines, start) = inspect.getsourcefile(method), inspect.getsourcelines(method)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError, IndexError):
        return None
    function = tree.body[0] if tree.body and isinstance(tree.body[0], (ast.FunctionDef, ast.AsyncFunctionDef)) else None
    if path is None or function is None:
        return None
    if any(isinstance(n, (ast.Return, ast.Yield)) and n.value is not None for n in _own_nodes(function)):
        return None
    return Site(path, start + function.lineno - 1, function.name)


def _own_nodes(function: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[ast.AST]:
    """The nodes of ``function``'s own body, not those inside the functions and lambdas it defines."""
    todo: list[ast.AST] = list(function.body)
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))


def _elements(node: ast.expr) -> list[Any]:
    return node.keys if isinstance(node, ast.Dict) else node.elts


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


def assignment_before(path: str, name: str, line: int) -> tuple[Site, ast.expr] | None:
    """The statement that last set ``name`` (``name = <expression>``) before ``line``, in the same
    function, and its expression; None when it is not a plain assignment (``+=``, a tuple, none)."""
    found = _last_assignment(path, name, line, unpack=False)
    return (found[0], found[1]) if found is not None else None


def unpacked_assignment_before(path: str, name: str, line: int) -> tuple[Site, ast.expr, int | None] | None:
    """As ``assignment_before``, and also ``loss, logits = <expression>``: then the position of ``name``
    among the names the expression's value is unpacked into."""
    return _last_assignment(path, name, line, unpack=True)


def _last_assignment(path: str, name: str, line: int, unpack: bool) -> tuple[Site, ast.expr, int | None] | None:
    tree = _tree(path)
    if tree is None:
        return None
    scope = enclosing_function(path, line)
    found: tuple[ast.Assign, int | None] | None = None
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1 or node.lineno >= line:
            continue
        position = _target_position(node.targets[0], name, unpack)
        if position is not False and enclosing_function(path, node.lineno) == scope \
                and (found is None or node.lineno > found[0].lineno):
            found = (node, position)
    return (Site(path, found[0].lineno, ""), found[0].value, found[1]) if found is not None else None


def _target_position(target: ast.expr, name: str, unpack: bool) -> int | None | bool:
    """None when ``target`` is ``name`` itself, its position in a flat tuple of names that holds it (with
    ``unpack``), else False."""
    if isinstance(target, ast.Name):
        return None if target.id == name else False
    if unpack and isinstance(target, (ast.Tuple, ast.List)) and all(isinstance(e, ast.Name) for e in target.elts):
        names = [e.id for e in target.elts]
        return names.index(name) if name in names else False
    return False


RESHAPE_CALLS = {"unsqueeze", "view", "reshape", "expand", "repeat"}


def reshaped_before(path: str, name: str, line: int) -> Site | None:
    """The assignment just before ``line``, in its function, that sets ``name`` to a reshape of itself
    (``target = target.unsqueeze(dim=1)``)."""
    found = assignment_before(path, name, line)
    if found is None:
        return None
    where, value = found
    calls = {_name_of(node.func) for node in ast.walk(value) if isinstance(node, ast.Call)}
    uses_itself = any(isinstance(node, ast.Name) and node.id == name for node in ast.walk(value))
    return where if uses_itself and calls & RESHAPE_CALLS else None


def rate_assignments(path: str) -> list[Site]:
    """The lines of ``path`` that set a param group's rate by hand: ``group["lr"] = ...`` (or ``*=``)."""
    tree = _tree(path)
    if tree is None:
        return []
    found = []
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AugAssign) else []
        if any(isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Constant) and t.slice.value == "lr"
               for t in targets):
            found.append(Site(path, node.lineno, ""))
    return sorted(set(found), key=lambda site: site.line)


def calls_of(path: str, owner: str, method: str) -> list[Site]:
    """The lines of ``path`` that call ``owner.method(...)`` (``outputs.append``), or that method of one of
    owner's items (``results["preds"].append``: a dict of lists)."""
    tree = _tree(path)
    if tree is None:
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == method:
            receiver = node.func.value.value if isinstance(node.func.value, ast.Subscript) else node.func.value
            if _name_of(receiver) == owner:
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


def detached_returns(path: str, class_name: str) -> list[Site]:
    """The lines of class ``class_name`` in ``path`` that cut what its ``forward`` returns from the graph:
    ``return out.detach()``, ``logits = torch.stack(logits, 1).data`` and then ``return logits``, or
    ``self.latents = output.detach()`` in a hook whose value forward reads back."""
    tree = _tree(path)
    if tree is None:
        return []
    def cut(value: ast.AST | None) -> bool:
        return isinstance(value, ast.Attribute) and value.attr == "data" or \
            isinstance(value, ast.Call) and _name_of(value.func) == "detach"

    def own(node: ast.AST) -> str | None:
        return node.attr if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
            node.value.id == "self" else None

    found = []
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == class_name):
        methods = [n for n in cls.body if isinstance(n, ast.FunctionDef)]
        # self.x = ....detach() in any method (a forward hook keeping a layer's output), read back in forward
        stored = {own(target): node.lineno for method in methods for node in ast.walk(method)
                  if isinstance(node, ast.Assign) and cut(node.value) for target in node.targets if own(target)}
        for function in (n for n in methods if n.name == "forward"):
            returned = {sub.id for node in ast.walk(function) if isinstance(node, ast.Return) and node.value
                        for sub in ast.walk(node.value) if isinstance(sub, ast.Name)}
            for node in ast.walk(function):
                if isinstance(node, ast.Return) and cut(node.value) or isinstance(node, ast.Assign) and cut(node.value) \
                        and any(isinstance(t, ast.Name) and t.id in returned for t in node.targets):
                    found.append(Site(path, node.lineno, ""))  # return out.data, or logits = ....data; return logits
            read = {own(node) for node in ast.walk(function) if isinstance(getattr(node, "ctx", None), ast.Load)}
            found += [Site(path, line, "") for attr, line in stored.items() if attr in read]
    return sorted(set(found), key=lambda site: site.line)


GUARDS = {"maximum", "clip", "clamp", "clamp_min", "clamp_", "clamp_min_", "abs"}


def unguarded_logs(path: str) -> list[Site]:
    """The lines of ``path`` that take a log (``log``, ``log10``, ``log2``) of a variable that nothing keeps
    above 0: not of constants, not of ``np.maximum(x, m)`` / ``x.clamp_min(eps)``, not of ``x + eps``."""
    tree = _tree(path)
    if tree is None:
        return []

    def guarded(arg: ast.AST) -> bool:
        if not any(isinstance(node, ast.Name) for node in ast.walk(arg)):
            return True  # np.log(6.4): a constant
        if isinstance(arg, ast.Call) and _name_of(arg.func) in GUARDS:
            return True
        if isinstance(arg, ast.BinOp) and isinstance(arg.op, (ast.Div, ast.Mult)):
            return guarded(arg.left)  # np.maximum(f, m) / m
        return isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Add) and (
            isinstance(arg.right, ast.Constant) or isinstance(arg.left, ast.Constant))

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _name_of(node.func) in ("log", "log10", "log2"):
            arg = node.args[0] if node.args else node.func.value if isinstance(node.func, ast.Attribute) else None
            if arg is not None and not guarded(arg):
                found.append(Site(path, node.lineno, ""))
    return sorted(set(found), key=lambda site: site.line)


def keyword_values(path: str, names: set[str] | None, keyword: str) -> list[tuple[Site, str]]:
    """The calls in ``path`` to a function or class named one of ``names`` (any, for None) that pass
    ``keyword``, each with that argument's source text (``Trainer(precision="16-true")`` gives
    ``'16-true'``)."""
    tree = _tree(path)
    if tree is None:
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and (names is None or _name_of(node.func) in names):
            found += [(Site(path, node.lineno, ""), ast.unparse(arg.value)) for arg in node.keywords if arg.arg == keyword]
    return sorted(found, key=lambda pair: pair[0].line)


def hand_updates(path: str) -> list[Site]:
    """The lines of ``path`` that update weights by hand from their gradients: ``p -= lr * p.grad``,
    ``p.data.add_(p.grad, alpha=-lr)``, ``w.sub_(lr * grad)``."""
    tree = _tree(path)
    if tree is None:
        return []

    def mentions_grad(node: ast.AST) -> bool:
        return any(isinstance(sub, ast.Attribute) and sub.attr == "grad" or
                   isinstance(sub, ast.Name) and "grad" in sub.id.lower() for sub in ast.walk(node))

    found = [Site(path, node.lineno, "") for node in ast.walk(tree)
             if isinstance(node, ast.AugAssign) and isinstance(node.op, (ast.Sub, ast.Add)) and mentions_grad(node.value)
             or isinstance(node, ast.Call) and _name_of(node.func) in ("add_", "sub_")
             and any(map(mentions_grad, [*node.args, *(k.value for k in node.keywords)]))]
    return sorted(set(found), key=lambda site: site.line)


RATE_NAME = re.compile(r"^(lr|learning_rate|step_size|eta|alpha|rate)$", re.IGNORECASE)


def rate_name(path: str, line: int) -> str | None:
    """The name the statement at ``line`` uses for a learning rate (``lr`` in ``p -= lr * p.grad``,
    ``lr`` in ``p.add_(g, alpha=-self.lr)``)."""
    tree = _tree(path)
    statements = [node for node in ast.walk(tree) if isinstance(node, ast.stmt) and node.lineno == line] \
        if tree is not None else []
    return next((name for statement in statements for sub in ast.walk(statement) for name in [_name_of(sub)]
                 if name and RATE_NAME.match(name)), None)


def rate_argument_sites(path: str, line: int) -> list[Site]:
    """Where the rate passed to the call on ``line`` (``SGD(params, lr=base_lr)``, or its second argument)
    is set: the last assignment of that name before it in the same function (``base_lr = cfg["lr"] *
    batch_size / 16``), or the command-line option's default for ``args.lr``. Empty for a literal rate."""
    call = _call_at(path, line)
    value = _rate_argument(call) if call is not None else None
    if isinstance(value, ast.Name):
        found = assignment_before(path, value.id, line)
        return [found[0]] if found else []
    if isinstance(value, ast.Attribute):
        return [site for site, _ in option_defaults(path, value.attr)]
    return []


def _rate_argument(call: ast.Call) -> ast.expr | None:
    """The rate a call passes: its ``lr=`` keyword, else its second positional argument."""
    return next((k.value for k in call.keywords if k.arg == "lr"), call.args[1] if len(call.args) > 1 else None)


def rate_argument_line(path: str, line: int) -> Site | None:
    """The line of the rate passed to the call on ``line`` where the call spans lines and the rate is on a
    later one (``optim.SGD(params,`` then ``lr=build_info['weight_decay']['val'],``)."""
    call = _call_at(path, line)
    value = _rate_argument(call) if call is not None else None
    return Site(path, value.lineno, "") if value is not None and value.lineno != line else None


def option_defaults(path: str, option: str) -> list[tuple[Site, str]]:
    """The ``parser.add_argument("--option", default=...)`` calls of ``path``, with the default's source text."""
    tree = _tree(path)
    if tree is None:
        return []
    flags = {"--" + option, "--" + option.replace("_", "-")}
    return [(Site(path, node.lineno, ""), ast.unparse(keyword.value)) for node in ast.walk(tree)
            if isinstance(node, ast.Call) and _name_of(node.func) == "add_argument"
            and any(isinstance(arg, ast.Constant) and arg.value in flags for arg in node.args)
            for keyword in node.keywords if keyword.arg == "default"]


def freezes(path: str) -> list[Site]:
    """The lines of ``path`` that turn gradients off: ``p.requires_grad = False``,
    ``m.requires_grad_(False)``, ``nn.Parameter(w, requires_grad=False)``, ``nn.Embedding.from_pretrained(w)`` (frozen unless ``freeze=False``), a
    call named ``freeze`` (Lightning's ``BaseFinetuning.freeze(modules)`` and ``LightningModule.freeze()``),
    or a call with ``False`` of the file's own function that sets requires_grad (``set_trainable(False)``)."""
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
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "from_pretrained" \
                and not any(k.arg == "freeze" and false(k.value) for k in node.keywords) and _embedding(node.func.value):
            lines.append(Site(path, node.lineno, ""))  # nn.Embedding.from_pretrained freezes by default
        elif isinstance(node, ast.Call) and _name_of(node.func) == "freeze":
            lines.append(Site(path, node.lineno, ""))
        elif isinstance(node, ast.Call) and _name_of(node.func) == "Parameter" and any(
                k.arg == "requires_grad" and false(k.value) for k in node.keywords):
            lines.append(Site(path, node.lineno, ""))  # made frozen: nn.Parameter(w, requires_grad=False)
    lines += flag_setter_calls(path, flag_setters(path), False)
    return sorted(set(lines), key=lambda site: site.line)


def flag_setters(path: str) -> dict[str, tuple[Site, Site | None]]:
    """The functions of ``path`` that set ``requires_grad`` from one of their parameters
    (``def set_trainable(self, trainable): ... p.requires_grad = trainable``), by name: the line that
    sets it, and the ``if`` around it when that tests ``requires_grad`` (then only the parameters that
    already require grad are ever set, and a frozen one is never turned back on)."""
    tree = _tree(path)
    if tree is None:
        return {}
    found = {}
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        arguments = {a.arg for a in function.args.args + function.args.kwonlyargs}
        guards: dict[int, ast.If] = {}
        for node in ast.walk(function):
            if isinstance(node, ast.If) and "requires_grad" in ast.unparse(node.test):
                guards.update({id(child): node for child in node.body})
        for node in _own_nodes(function):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id in arguments and \
                    any(isinstance(t, ast.Attribute) and t.attr == "requires_grad" for t in node.targets):
                guard = guards.get(id(node))
                found[function.name] = (Site(path, node.lineno, function.name),
                                        Site(path, guard.lineno, function.name) if guard else None)
    return found


def flag_setter_calls(path: str, setters: dict[str, Any], value: bool) -> list[Site]:
    """The calls in ``path`` of the functions ``setters`` (by name) with the literal ``value`` as an argument."""
    tree = _tree(path)
    if tree is None or not setters:
        return []
    return sorted({Site(path, node.lineno, "") for node in ast.walk(tree)
                   if isinstance(node, ast.Call) and _name_of(node.func) in setters and any(
                       isinstance(a, ast.Constant) and a.value is value
                       for a in [*node.args, *(k.value for k in node.keywords)])}, key=lambda site: site.line)


def _embedding(node: ast.expr) -> bool:
    """``nn.Embedding`` / ``Embedding`` / ``nn.EmbeddingBag``: the classes whose from_pretrained freezes."""
    return _name_of(node) in ("Embedding", "EmbeddingBag")


def _name_of(node: ast.AST) -> str | None:
    """The last name of ``a.b.name`` or ``name``; None for any other expression."""
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None


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


def weight_inits(path: str) -> list[Site]:
    """The lines of ``path`` that set a weight by hand: ``nn.init.zeros_(layer.weight)`` (any init
    function), ``layer.weight.data.fill_(...)`` / ``.zero_()``."""
    tree = _tree(path)
    if tree is None:
        return []

    def weight(node: ast.AST) -> bool:
        return any(isinstance(n, ast.Attribute) and n.attr == "weight" for n in ast.walk(node))

    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        initialiser = isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "init" and node.args
        if (initialiser and weight(node.args[0])) or (node.func.attr in ("fill_", "zero_") and weight(node.func.value)):
            lines.append(Site(path, node.lineno, ""))
    return sorted(set(lines), key=lambda site: site.line)


def shuffles(path: str) -> list[Site]:
    """The lines of ``path`` that shuffle one sequence on its own: ``random.shuffle(x)``,
    ``np.random.shuffle(x)`` (its partner, the labels, is not shuffled with it by that call), and
    ``random_split`` called on two different sequences (each draws its own permutation: ``random_split(x, ...)``
    and ``random_split(y, ...)`` pair the i-th input of one split with another sample's label)."""
    tree = _tree(path)
    if tree is None:
        return []
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
    lines = [Site(path, node.lineno, "") for node in calls
             if isinstance(node.func, ast.Attribute) and node.func.attr == "shuffle"
             and len(node.args) == 1 and isinstance(node.args[0], (ast.Name, ast.Attribute, ast.Subscript))]
    splits = [node for node in calls if _name_of(node.func) == "random_split" and node.args]
    if len({ast.dump(node.args[0]) for node in splits}) >= 2:
        lines += [Site(path, node.lineno, "") for node in splits]
    return sorted(set(lines), key=lambda site: site.line)


NAN_NAMES = {"nan", "NaN", "NAN"}


def nan_literals(path: str) -> list[Site]:
    """The lines of ``path`` that write NaN into values on purpose: ``np.nan``, ``math.nan``, ``torch.nan``,
    ``float("nan")``, or ``errors="coerce"`` (pandas turns what it cannot parse into NaN): missing
    readings kept as NaN."""
    tree = _tree(path)
    if tree is None:
        return []
    found = [Site(path, node.lineno, "") for node in ast.walk(tree)
             if isinstance(node, ast.Attribute) and node.attr in NAN_NAMES and _name_of(node.value) in
             ("np", "numpy", "math", "torch")
             or isinstance(node, ast.Call) and _name_of(node.func) == "float" and node.args
             and isinstance(node.args[0], ast.Constant) and str(node.args[0].value).lower() == "nan"
             or isinstance(node, ast.keyword) and node.arg == "errors" and isinstance(node.value, ast.Constant)
             and node.value.value == "coerce"]
    return sorted(set(found), key=lambda site: site.line)


LISTINGS = {"listdir", "scandir", "glob", "iglob", "iterdir", "rglob"}


def unsorted_listings(path: str) -> list[Site]:
    """The lines of ``path`` that list a directory (``os.listdir``, ``glob.glob``, ``Path.iterdir``...)
    without sorting it: the order is the file system's, so anything kept in another order (labels
    read from a CSV) does not follow it."""
    tree = _tree(path)
    if tree is None:
        return []
    sorted_ids = {id(sub) for node in ast.walk(tree) if isinstance(node, ast.Call) and _name_of(node.func) == "sorted"
                  for sub in ast.walk(node)}
    targets = {id(sub): target.id for node in ast.walk(tree) if isinstance(node, ast.Assign)
               for target in node.targets if isinstance(target, ast.Name) for sub in ast.walk(node.value)}
    found = [Site(path, node.lineno, "") for node in ast.walk(tree)
             if isinstance(node, ast.Call) and _name_of(node.func) in LISTINGS and id(node) not in sorted_ids
             and not (id(node) in targets and calls_of(path, targets[id(node)], "sort"))]
    return sorted(set(found), key=lambda site: site.line)


CONTAINERS = {"Sequential", "ModuleList"}


def module_site(model: torch.nn.Module, path: str) -> Site | None:
    """Where the submodule at ``path`` (``regressor.3``) is created in the user's source: the
    ``self.regressor = ...`` of its owner's class, and inside an ``nn.Sequential(...)`` /
    ``nn.ModuleList([...])`` call there, the element at its index."""
    owner_path, _, attr = path.rpartition(".")
    owner = model.get_submodule(owner_path) if owner_path else model
    if attr.isdigit() and type(owner).__name__ in CONTAINERS and owner_path:
        site = module_site(model, owner_path)
        call = _call_at(site.path, site.line) if site is not None else None
        items = call.args[0].elts if call is not None and call.args and isinstance(
            call.args[0], (ast.List, ast.Tuple)) else call.args if call is not None else []
        return Site(site.path, items[int(attr)].lineno, "") if site is not None and int(attr) < len(items) else site
    try:
        source = inspect.getsourcefile(type(owner))
    except TypeError:
        return None
    tree = _tree(source) if source else None
    classes = [node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)
               and node.name == type(owner).__name__] if tree is not None else []
    lines = [node.lineno for cls in classes for node in ast.walk(cls) if isinstance(node, ast.Assign) and any(
        isinstance(t, ast.Attribute) and t.attr == attr for t in node.targets)]
    return Site(source, min(lines), "") if lines else None


def _call_at(path: str, line: int) -> ast.Call | None:
    """The call assigned by the statement at ``line`` (``self.head = nn.Sequential(...)``)."""
    tree = _tree(path)
    statement = next((node for node in ast.walk(tree) if isinstance(node, ast.Assign) and node.lineno == line),
                     None) if tree is not None else None
    return statement.value if statement is not None and isinstance(statement.value, ast.Call) else None


def _method_node(cls: type, method: str) -> ast.FunctionDef | None:
    """The definition of ``cls.method`` in its source file's syntax tree (None where there is no source)."""
    function = getattr(cls, method, None)
    try:
        path = inspect.getsourcefile(function)
        start = inspect.getsourcelines(function)[1]
    except (TypeError, OSError):
        return None
    tree = _tree(path) if path else None
    return next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == method
                 and n.lineno <= start + 2 and (n.end_lineno or n.lineno) >= start), None) if tree else None


def indexed_attributes(cls: type, method: str = "__getitem__") -> list[tuple[str, int]]:
    """(attribute, line) of each ``self.<attribute>[...<index>...]`` in ``cls.method``, where ``<index>``
    is the method's first parameter: the containers a Dataset reads each sample from."""
    node = _method_node(cls, method)
    if node is None or len(node.args.args) < 2:
        return []
    index = node.args.args[1].arg
    found = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Attribute) \
                and isinstance(sub.value.value, ast.Name) and sub.value.value.id == "self" \
                and any(isinstance(n, ast.Name) and n.id == index for n in ast.walk(sub.slice)) \
                and not any(isinstance(n, ast.Subscript) for n in ast.walk(sub.slice)):
            found.append((sub.value.attr, sub.lineno))
    return found


def attribute_calls(cls: type, method: str = "__getitem__") -> list[tuple[str, str, int]]:
    """(attribute, argument, line) of each ``self.<attribute>(<name>, ...)`` in ``cls.method``: the transforms a
    Dataset applies to each of a sample's parts (``img = self.img_transform(img)``)."""
    node = _method_node(cls, method)
    if node is None:
        return []
    return sorted((sub.func.attr, sub.args[0].id, sub.lineno) for sub in ast.walk(node)
                  if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute)
                  and isinstance(sub.func.value, ast.Name) and sub.func.value.id == "self"
                  and sub.args and isinstance(sub.args[0], ast.Name))


GRAD_OFF = {"no_grad", "inference_mode", "set_grad_enabled"}


def loop_around(path: str, line: int) -> tuple[Site, Site | None] | None:
    """The innermost ``for``/``while`` of ``path`` whose body holds ``line`` (in the same function), and
    the innermost ``if`` between the two: what makes the line repeat, and how often. None out of any loop."""
    tree = _tree(path)
    if tree is None:
        return None
    loops, ifs = [], []
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While)) and node.body[0].lineno <= line <= node.end_lineno:
            loops.append(node)
        elif isinstance(node, ast.If) and node.body[0].lineno <= line <= node.body[-1].end_lineno:
            ifs.append(node)
    loops = [node for node in loops if enclosing_function(path, node.lineno) == enclosing_function(path, line)]
    if not loops:
        return None
    loop = max(loops, key=lambda node: node.lineno)
    inner = [node for node in ifs if node.lineno > loop.lineno]
    return Site(path, loop.lineno, ""), (Site(path, max(inner, key=lambda n: n.lineno).lineno, "") if inner else None)


def grad_off_block(path: str, line: int) -> Site | None:
    """The innermost ``with torch.no_grad():`` (``inference_mode``, ``set_grad_enabled``) block of
    ``path`` whose body holds ``line``, or the ``@torch.no_grad()`` of the function that does."""
    tree = _tree(path)
    if tree is None:
        return None

    def turns_off(expr: ast.expr) -> bool:
        return _name_of(expr.func if isinstance(expr, ast.Call) else expr) in GRAD_OFF

    found = []
    for node in ast.walk(tree):
        if not _node_holds(node, line):
            continue
        if isinstance(node, (ast.With, ast.AsyncWith)) and any(turns_off(item.context_expr) for item in node.items) \
                and node.body[0].lineno <= line:
            found.append((node.lineno, node.lineno))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found += [(node.lineno, d.lineno) for d in node.decorator_list if turns_off(d)]
    return Site(path, max(found)[1], "") if found else None


def grad_switched_off(path: str) -> list[Site]:
    """Lines of ``path`` that turn gradients off for everything after them: ``torch.set_grad_enabled(False)``
    called as a statement, not as a ``with`` block (a model loader's, left on for the whole script)."""
    tree = _tree(path)
    return [Site(path, node.lineno, "") for node in (ast.walk(tree) if tree is not None else ())
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
            and _name_of(node.value.func) in ("set_grad_enabled", "_set_grad_enabled") and node.value.args
            and isinstance(node.value.args[0], ast.Constant) and node.value.args[0].value is False]


def backward_target(text: str) -> str | None:
    """The variable a line calls backward on: ``loss`` of ``loss.backward()``, ``accelerator.backward(loss)``
    or ``scaler.scale(loss).backward()``."""
    tree = _parse_line(text)
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Call) and _name_of(node.func) in ("backward", "manual_backward"):
            receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
            if node.args and isinstance(node.args[0], ast.Name):
                return node.args[0].id
            while isinstance(receiver, ast.Call) and receiver.args:  # scaler.scale(loss)
                receiver = receiver.args[0]
            if isinstance(receiver, ast.Name):
                return receiver.id
    return None


def call_argument(text: str, index: int) -> str | None:
    """The source of argument ``index`` of the outermost call of a line: ``outputs`` of ``loss =
    loss_func(outputs, labels)`` (index 0), ``X_train`` of ``model(X_train)``."""
    tree = _parse_line(text.strip().rstrip(":"))
    call = next((node for node in ast.walk(tree) if isinstance(node, ast.Call)), None) if tree is not None else None
    return ast.unparse(call.args[index]) if call is not None and index < len(call.args) else None


def forced_requires_grad(path: str, name: str) -> list[Site]:
    """Lines of ``path`` that make ``name`` require grad after it was computed (``loss.requires_grad =
    True``, ``loss.requires_grad_()``, or re-made by ``rewrapped``): what silences "element 0 of tensors does
    not require grad" without giving the loss a graph."""
    tree = _tree(path)
    found = []
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Attribute) and t.attr == "requires_grad"
                                                and isinstance(t.value, ast.Name) and t.value.id == name
                                                for t in node.targets) \
                and isinstance(node.value, ast.Constant) and node.value.value is True:
            found.append(Site(path, node.lineno, ""))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "requires_grad_" \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == name:
            found.append(Site(path, node.lineno, ""))
    return sorted(found + rewrapped(path, name), key=lambda site: site.line)


def rewrapped(path: str, name: str) -> list[Site]:
    """Lines of ``path`` that re-make ``name`` as a new tensor that requires grad (``loss =
    torch.tensor(loss.item(), requires_grad=True)``, ``Variable(..., requires_grad=True)``): a tensor with
    no history, the cut itself."""
    tree = _tree(path)
    if tree is None:
        return []
    return [Site(path, node.lineno, "") for node in ast.walk(tree)
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
            and isinstance(node.value, ast.Call) and _name_of(node.value.func) in ("tensor", "Variable", "as_tensor")
            and any(k.arg == "requires_grad" and isinstance(k.value, ast.Constant) and k.value.value is True
                    for k in node.value.keywords)]


def guarded_steps(path: str) -> list[tuple[Site, Site]]:
    """(call, condition) for each ``<optimizer>.step()`` call of ``path`` (a receiver whose name says
    optimizer: ``optimizer``, ``opt_g``, ``self.optim``) that sits in the body of an ``if``: the step runs
    only when that condition holds."""
    def optimizer_step(call: ast.Call) -> bool:
        return isinstance(call.func, ast.Attribute) and call.func.attr == "step" \
            and "opt" in (_name_of(call.func.value) or "").lower()
    return sorted(_calls_under_if(path, optimizer_step).items(), key=lambda item: item[0].line)


CLIP_CALLS = ("clip_grad_norm_", "clip_grad_value_")
COMMENTED_CLIP = re.compile(r"^\s*#.*\bclip_grad_(norm|value)_\(")


def switched_off_clips(path: str) -> list[tuple[Site, Site | None]]:
    """(call, condition) for each gradient clip of ``path`` that may never run: a ``clip_grad_norm_`` /
    ``clip_grad_value_`` call in the body of an ``if`` (condition: the innermost one), or a commented-out
    one (condition None). Whether it ran is the run's to say: the agent sees every clip."""
    found: dict[Site, Site | None] = dict(_calls_under_if(path, lambda call: _name_of(call.func) in CLIP_CALLS))
    found.update({Site(path, number, ""): None for number, text in enumerate(linecache.getlines(path), 1)
                  if COMMENTED_CLIP.match(text)})
    return sorted(found.items(), key=lambda item: item[0].line)


def clip_arguments(path: str) -> list[tuple[Site, str, ast.expr | None]]:
    """(call, parameters' name, max_norm expression or None) for each gradient clip of ``path`` given its
    parameters as a plain name (``clip_grad_norm_(params, 1.0)``, ``accelerator.clip_grad_norm_(layers, ...)``)."""
    tree = _tree(path)
    found = []
    for node in ast.walk(tree) if tree is not None else ():
        if not (isinstance(node, ast.Call) and _name_of(node.func) in CLIP_CALLS):
            continue
        keywords = {k.arg: k.value for k in node.keywords}
        given = node.args[0] if node.args else keywords.get("parameters")
        limit = node.args[1] if len(node.args) > 1 else keywords.get("max_norm", keywords.get("clip_value"))
        if isinstance(given, ast.Name):
            found.append((Site(path, node.lineno, ""), given.id, limit))
    return sorted(found, key=lambda item: item[0].line)


MISSING = object()  # what ``frame_value`` gives for a name the frame does not hold


def attribute_chain(node: ast.AST | None) -> str | None:
    """``self.fc.weight`` for an attribute chain on a name, the name for a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def frame_value(name: str | None, frame: FrameType) -> Any:
    """What a name or a dotted name (``args.max_grad_norm``) holds in ``frame`` (its locals, then its globals),
    else MISSING. Attributes are read, nothing is called; a tensor ends the chain (``x.shape``: the tensor)."""
    if name is None:
        return MISSING
    head, *rest = name.split(".")
    scope = frame_locals(frame)
    if head in scope:
        value = scope[head]
    elif head in frame.f_globals:
        value = frame.f_globals[head]
    else:
        return MISSING
    for attr in rest:
        if isinstance(value, torch.Tensor):
            return value
        try:
            value = getattr(value, attr)
        except Exception:
            return MISSING
    return value


def _calls_under_if(path: str, matches: Callable[[ast.Call], bool]) -> dict[Site, Site]:
    """Each matching call of ``path`` in the body of an ``if``, with the innermost such ``if``."""
    tree = _tree(path)
    innermost: dict[Site, Site] = {}
    for node in ast.walk(tree) if tree is not None else ():
        if not isinstance(node, ast.If):
            continue
        for sub in (n for statement in node.body for n in ast.walk(statement)):
            if not (isinstance(sub, ast.Call) and matches(sub)):
                continue
            call = Site(path, sub.lineno, "")
            if call not in innermost or node.lineno > innermost[call].line:  # nested ifs: the nearest one
                innermost[call] = Site(path, node.lineno, "")
    return innermost


def _node_holds(node: ast.AST, line: int) -> bool:
    return getattr(node, "lineno", line + 1) <= line <= (getattr(node, "end_lineno", None) or -1)


def enclosing_function(path: str, line: int) -> str | None:
    """The name of the innermost function of ``path`` whose body holds ``line``."""
    function = _innermost_function(path, line)
    return function.name if function is not None else None


def function_lines(path: str, line: int) -> tuple[int, int] | None:
    """The first and last lines of the innermost function of ``path`` that holds ``line``."""
    function = _innermost_function(path, line)
    return (function.lineno, function.end_lineno or function.lineno) if function is not None else None


def _innermost_function(path: str, line: int) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    tree = _tree(path)
    if tree is None:
        return None
    functions = [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and node.lineno <= line <= (node.end_lineno or node.lineno)]
    return max(functions, key=lambda node: node.lineno) if functions else None


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
