"""What keeps tensors of earlier steps alive: the variables, containers and attributes that hold them.

Every loss and model output carries a tag (``GraphTag``) in its autograd graph's root; a graph from
more than GRAPH_AGE steps ago that is still alive is held by something. The search walks what the
user's code can reach: the locals of the training thread's frames, the script's globals, the
attributes of the models and of the objects that own them (a LightningModule, a Trainer), down to
MAX_DEPTH containers, and names each holder with the line that feeds it (``total_loss += loss``,
``outputs.append(out)``). The result is plain strings and counts: nothing it returns keeps memory.
"""

from __future__ import annotations

import collections
import functools
import gc
import inspect
import sys
import time
import types
import warnings
from dataclasses import dataclass, field
from types import FrameType, ModuleType
from collections.abc import Callable, Iterator
from typing import Any

import torch

from tuidebug.format import bytes_text
from tuidebug.probes.source import (accumulations, assignments, calls_of, enclosing_function, item_assignments,
                                    loop_around)
from tuidebug.sites import Site, frame_locals, is_user_file

GRAPH_AGE = 2
SEARCH_NODES = 5000
MAX_DEPTH = 3
SAMPLED = 64  # items looked at from each end of a long container
MIN_TENSORS = 8  # a container of this many tensors is reported as growth even without graphs
FUNCTIONS = (types.FunctionType, types.MethodType, types.BuiltinFunctionType, functools.partial)
FEEDS = ("append", "extend", "insert", "appendleft", "add", "update", "__setitem__")
# Tensors spread over many objects of one class (a per-item cache: each token keeps its embeddings) are
# found by a census of the live objects: at least MIN_INSTANCES of them, within CENSUS_SECONDS.
MIN_INSTANCES = 8
CENSUS_SECONDS = 3.0


@dataclass
class Holding:
    name: str
    kind: str
    owner: str
    tensors: int
    bytes: int
    oldest: int | None  # the oldest earlier step whose graph it keeps alive, None without graphs
    line: str | None  # where it is fed: "train.py:57 `total_loss += loss`"
    graphs: int = 0  # of its tensors, those that keep an autograd graph (of any step, tagged or not)

    @property
    def counted(self) -> str:
        """``12 tensors``, or ``128 arrays`` for a holding of numpy arrays only."""
        return f"{self.tensors} {'arrays' if self.kind.endswith(' arrays') else 'tensors'}"

    def text(self) -> str:
        graphs = f", keeps graphs back to step {self.oldest}" if self.oldest is not None else ""
        fed = f"; fed at {self.line}" if self.line else ""
        return f"`{self.name}` ({self.kind} in {self.owner}) holds {self.counted}{graphs}{fed}"


class _Search:
    def __init__(self, step: int, tag: Callable[[torch.Tensor], None] | None = None) -> None:
        self.before = step - GRAPH_AGE
        self.memo: dict[int, int | None] = {}
        self.seen: set[int] = set()
        self.arrays = 0  # numpy arrays counted so far: a holding of arrays only is named so
        self.tag = tag  # given each tensor with a graph that is found

    def graph_step(self, tensor: torch.Tensor) -> int | None:
        """The oldest tag older than ``before`` that the tensor's graph reaches."""
        found, todo, visited = None, [tensor.grad_fn], 0
        while todo and visited < SEARCH_NODES:
            node = todo.pop()
            if node is None:
                continue
            key = id(node)
            if key in self.memo:
                if self.memo[key] is not None and (found is None or self.memo[key] < found):
                    found = self.memo[key]
                continue
            self.memo[key] = None
            visited += 1
            tag = node.metadata.get("tuidebug") if hasattr(node, "metadata") else None
            if tag is not None and tag.step < self.before:
                self.memo[key] = tag.step
                found = tag.step if found is None else min(found, tag.step)
            todo.extend(next_node for next_node, _ in node.next_functions)
        return found


def find(frames: list[FrameType], models: list[torch.nn.Module], step: int, any_graph: bool = False,
         min_tensors: int = MIN_TENSORS) -> list[Holding]:
    """The holders of tensors kept across steps, most graphs first (with ``any_graph``, of any tagged
    graph: graphs that pile up within one step, in an evaluation loop run with gradients on); containers
    without graphs from ``min_tensors`` tensors (fewer, once a container is known to grow)."""
    search = _Search(step + GRAPH_AGE + 1 if any_graph else step)
    found = []
    for name, value, path, owner in _roots(frames, models):
        for holding in _visit(search, name, value, path, owner, 0):
            if holding.oldest is not None or (holding.tensors >= min_tensors and holding.kind.startswith(("list", "dict", "deque"))):
                found.append(holding)
    found.sort(key=lambda h: (h.oldest is None, h.oldest or 0, -h.tensors, -h.bytes))
    return list({h.name: h for h in found}.values())


def tag_held(frames: list[FrameType], models: list[torch.nn.Module], step: int,
             tag: Callable[[torch.Tensor], None]) -> None:
    """Hand ``tag`` every tensor with an autograd graph that the search reaches. Tagged, a graph that
    only the script's own objects extend (an EMA's shadow weights updated outside torch.no_grad(), built
    from the parameters and never from a loss or a model output) shows up as an earlier step's graph
    still alive, as a kept loss does. It runs at a few early steps, so the models' owners are not looked
    up (they are reached through the script's variables when it holds them)."""
    search = _Search(step, tag)
    for name, value, path, owner in _roots(frames, models, owners=False):
        _visit(search, name, value, path, owner, 0)


@dataclass
class Spread:
    """An attribute of many instances of one user class that holds tensors."""
    cls: type
    attr: str
    instances: int
    tensors: int
    bytes: int  # of the storages behind them, each counted once (a slice keeps its whole base alive)
    element_bytes: int  # of the tensors' own elements

    @property
    def name(self) -> str:
        return f"{self.cls.__name__}.{self.attr}"

    @property
    def line(self) -> str | None:
        """Where instances are given their tensors: ``train.py:31 `self._embeddings[name] = vector```."""
        try:
            return _fed_at(self.attr, inspect.getsourcefile(self.cls))
        except TypeError:
            return None

    def text(self) -> str:
        views = (f" (views into {bytes_text(self.bytes)} of storage: each keeps its whole base tensor alive, "
                 f"{bytes_text(self.element_bytes)} of its own)" if self.bytes > 2 * self.element_bytes else
                 f" ({bytes_text(self.bytes)})")
        return f"`{self.name}` in {self.instances} {self.cls.__name__} objects holds {self.tensors} tensors{views}"


@dataclass
class _Tally:
    instances: int = 0
    tensors: int = 0
    element_bytes: int = 0
    storages: dict[int, int] = field(default_factory=dict)  # data pointer -> bytes: a shared base counted once

    def add(self, tensors: list[torch.Tensor]) -> None:
        self.instances += 1
        self.tensors += len(tensors)
        for tensor in tensors:
            self.element_bytes += tensor.numel() * tensor.element_size()
            storage = tensor.untyped_storage()
            self.storages[storage.data_ptr()] = storage.nbytes()


def spread_holders() -> list[Spread]:
    """The attributes of user-class instances that hold tensors, most storage first: a census of the live
    objects (the only way to see a cache split over thousands of small objects)."""
    user_modules = {name: module for name, module in list(sys.modules.items())
                    if is_user_file(getattr(module, "__file__", None) or "")}
    tallies: dict[tuple[type, str], _Tally] = collections.defaultdict(_Tally)
    deadline = time.monotonic() + CENSUS_SECONDS
    for index, candidate in enumerate(_census(user_modules)):
        if index % 20000 == 0 and time.monotonic() > deadline:
            break
        cls = type(candidate)
        if cls.__module__ not in user_modules or isinstance(candidate, (torch.nn.Module, torch.Tensor, type)):
            continue
        for attr, value in getattr(candidate, "__dict__", {}).items():
            tensors = [t for t in _tensors_in(value, 0) if not t.is_meta]
            if tensors:
                tallies[(cls, attr)].add(tensors)
    found = [Spread(cls, attr, tally.instances, tally.tensors, sum(tally.storages.values()), tally.element_bytes)
             for (cls, attr), tally in tallies.items() if tally.instances >= MIN_INSTANCES]
    return sorted(found, key=lambda spread: -spread.bytes)


def _census(user_modules: dict[str, ModuleType]) -> list[Any]:
    """Every live object; after an out-of-memory error, when there is no room for that list, the instances
    of the classes defined at the top of the user's modules (they refer to their class): far fewer."""
    try:
        return gc.get_objects()
    except MemoryError:
        classes = [value for module in user_modules.values() for value in list(vars(module).values())
                   if isinstance(value, type) and value.__module__ in user_modules]
        return gc.get_referrers(*classes) if classes else []


def _tensors_in(value: Any, depth: int) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if depth >= 2 or not isinstance(value, (dict, list, tuple)):
        return []
    items = value.values() if isinstance(value, dict) else value
    return [t for item in items for t in _tensors_in(item, depth + 1)]


def piled(frames: list[FrameType], step: int, more_than: int) -> list[tuple[str, int, str | None]]:
    """(name, forwards, line) of the tensors (or lists and tuples of them) in the user's frames whose graphs
    hold the model outputs of more than ``more_than`` forward passes of the step in progress: outputs
    gathered with their graphs (``feats = torch.cat((feats, model(x)))`` in an evaluation run with
    gradients on, or ``log_likelihoods.append(out[:, y])`` for one ``autograd.grad`` over all of them)."""
    found = []
    for name, value, path, owner in _roots(frames, []):
        roots = [tensor.grad_fn for tensor in _held_directly(value) if tensor.grad_fn is not None]
        if roots and (forwards := _outputs_in_graph(roots, step)) > more_than:
            found.append((name, forwards, _fed_at(name, path, owner)))
    return sorted(found, key=lambda item: -item[1])


def carrying(frames: list[FrameType], tensors: list[torch.Tensor]) -> list[tuple[str, str | None]]:
    """(name, line) of the user's variables that are one of ``tensors``, or a tuple or list holding one: the
    model's inputs that carry a graph (``hidden`` in ``out, hidden = model(x, hidden)``), and the line that
    assigns them."""
    ids = {id(tensor) for tensor in tensors}
    found = []
    for name, value, path, owner in _roots(frames, []):
        if any(id(tensor) in ids for tensor in _held_directly(value)):
            found.append((name, _fed_at(name, path, owner)))
    return found


def weights_with_graph(frames: list[FrameType], model: torch.nn.Module | None
                       ) -> tuple[str, str | None, int, bool] | None:
    """(name, feeding line, count, whether a dict) of a variable holding at least half of the model's weights as
    autograd results (tensors of the parameters' shapes with a ``grad_fn``): the fast weights of an unrolled inner
    loop (MAML, ``higher``, a differentiable optimizer), each computed from the last with its graph."""
    if model is None:
        return None
    shapes = collections.Counter(tuple(p.shape) for p in model.parameters())
    wanted, names = max(1, sum(shapes.values()) // 2), {name for name, _ in model.named_parameters()}
    found = []
    for name, value, path, _ in _roots(frames, [], owners=False):
        items = list(value.values()) if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else []
        if not wanted <= len(items) <= 2 * sum(shapes.values()):  # a data set's list is not a set of weights
            continue
        left, count = collections.Counter(shapes), 0
        for item in items:
            if isinstance(item, torch.Tensor) and item.grad_fn is not None and left[tuple(item.shape)] > 0:
                left[tuple(item.shape)] -= 1
                count += 1
        if count >= wanted:
            found.append((isinstance(value, dict) and set(value) <= names, name, path, count, isinstance(value, dict)))
    # The weights themselves before the gradients made with create_graph (as many, of the same shapes): a
    # dict keyed by the parameters' names is what torch.func.functional_call takes.
    found.sort(key=lambda candidate: not candidate[0])
    if not found:
        return None
    _, name, path, count, is_dict = found[0]
    return name, _fed_at(name, path), count, is_dict


def _held_directly(value: Any) -> list[torch.Tensor]:
    """The tensor itself, or the tensors a list or tuple holds as its items."""
    items = [value] if isinstance(value, torch.Tensor) else value if isinstance(value, (list, tuple)) else []
    return [item for item in items if isinstance(item, torch.Tensor)]


def _outputs_in_graph(roots: list[Any], step: int) -> int:
    """How many forward passes of ``step`` (their model outputs' tags) the graphs from ``roots`` reach; an output
    computed from another's graph (a head run on the body's output) is part of that pass."""
    tags = (node.metadata.get("tuidebug") for node in graph_nodes(roots, SEARCH_NODES) if hasattr(node, "metadata"))
    return len({id(tag) for tag in tags if tag is not None and tag.step == step and tag.what == "model output"
                and not tag.chained})


def graph_nodes(roots: Any, limit: int) -> Iterator[Any]:
    """The autograd nodes reachable from ``roots`` (a ``grad_fn``, or a list of them), each once, at most
    ``limit`` of them."""
    todo, seen = list(roots) if isinstance(roots, list) else [roots], set()
    while todo and len(seen) < limit:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        yield node
        todo.extend(next_node for next_node, _ in node.next_functions)


def _roots(frames: list[FrameType], models: list[torch.nn.Module],
           owners: bool = True) -> list[tuple[str, Any, str | None, str]]:
    """What the search starts from: the frames' variables, the script's globals, the models' attributes
    and, with ``owners``, those of the modules that hold them (found through gc referrers: a scan of every
    live object, most of a search's time)."""
    roots: list[tuple[str, Any, str | None, str]] = []
    scopes: set[int] = set()
    for frame in frames:
        for scope, owner in ((frame_locals(frame), f"{frame.f_code.co_name}()"), (frame.f_globals, "the script's globals")):
            if id(scope) not in scopes:
                scopes.add(id(scope))
                roots += [(n, v, frame.f_code.co_filename, owner) for n, v in list(scope.items()) if not n.startswith("__")]
    main = sys.modules.get("__main__")
    if main is not None and id(vars(main)) not in scopes:
        roots += [(n, v, getattr(main, "__file__", None), "the script's globals") for n, v in list(vars(main).items())
                  if not n.startswith("__")]
    for module in _models_and_owners(models) if owners else models:
        path = getattr(sys.modules.get(type(module).__module__), "__file__", None)
        roots += [(f"self.{n}", v, path, type(module).__name__) for n, v in vars(module).items() if not n.startswith("_")]
    for model in models:
        roots += _submodule_containers(model)
    return roots


def container_sizes(models: list[torch.nn.Module]) -> dict[str, tuple[int, str]]:
    """The tensors each list, dict or deque attribute of the models' submodules holds directly:
    ``{"self.val_ap.preds": (11, "BinaryAveragePrecision")}``. Cheap: one level, no graph walk."""
    sizes = {}
    for model in models:
        for name, value, _, owner in _submodule_containers(model):
            if isinstance(value, (list, dict, collections.deque)) and getattr(value, "maxlen", None) is None:
                items = value.values() if isinstance(value, dict) else value
                sizes[name] = (sum(isinstance(item, torch.Tensor) for item in items), owner)
    return sizes


def _submodule_containers(model: torch.nn.Module) -> list[tuple[str, Any, str | None, str]]:
    """Lists and dicts kept as plain attributes of the model's submodules (a torchmetrics metric's
    ``preds``, a layer's cache): they grow when nothing empties them; and tensors kept there with a
    graph (a running statistic updated outside torch.no_grad()): each links to the step before."""
    return [(f"self.{name}.{attr}", value, getattr(sys.modules.get(type(module).__module__), "__file__", None),
             type(module).__name__)
            for name, module in model.named_modules() if name
            for attr, value in vars(module).items()
            if not attr.startswith("_") and (isinstance(value, (list, dict, collections.deque))
                                             or isinstance(value, torch.Tensor) and value.grad_fn is not None)]


def _models_and_owners(models: list[torch.nn.Module]) -> list[torch.nn.Module]:
    """The models, and the modules that hold them (a LightningModule's ``self.net``): the owners of the
    ``_modules`` dicts that refer to a model. Found through referrers, not a list of every live object:
    after an out-of-memory error there is no room for that list (16 MB for two million objects)."""
    if not models:
        return []
    wanted = {id(m) for m in models}
    with warnings.catch_warnings():  # isinstance on some module objects warns (torch.distributed.reduce_op)
        warnings.simplefilter("ignore")
        holding = [d for d in gc.get_referrers(*models) if isinstance(d, dict)]
        ids = {id(d) for d in holding}
        referrers = gc.get_referrers(*holding) if holding else []
        # The owner refers to its _modules dict itself, or through its instance __dict__ (Python 3.11).
        instance_dicts = [r for r in referrers if isinstance(r, dict) and id(r.get("_modules")) in ids]
        candidates = referrers + (gc.get_referrers(*instance_dicts) if instance_dicts else [])
        owners = {id(o): o for o in candidates if isinstance(o, torch.nn.Module) and id(o) not in wanted
                  and id(o.__dict__.get("_modules")) in ids}
    return list(models) + list(owners.values())


def _visit(search: _Search, name: str, value: Any, path: str | None, owner: str, depth: int) -> list[Holding]:
    """The holding named ``name`` (its tensors, counted through its containers), and the holdings
    of the attributes of a user-defined object."""
    if id(value) in search.seen or isinstance(value, (type, type(sys))) or depth > MAX_DEPTH:
        return []
    if user_object(value):
        search.seen.add(id(value))
        cls_path = getattr(sys.modules.get(type(value).__module__), "__file__", path)
        return [h for attr, item in vars(value).items() if not attr.startswith("_")
                for h in _visit(search, f"{name}.{attr}", item, cls_path, type(value).__name__, depth + 1)]
    arrays_before = search.arrays
    tensors, size, oldest, graphs = _count(search, value, 0)
    if not tensors:
        return []
    what = "arrays" if search.arrays - arrays_before == tensors else "tensors"
    kind = type(value).__name__ if isinstance(value, torch.Tensor) else f"{type(value).__name__} of {tensors} {what}"
    line = _fed_at(name, path, owner) if search.tag is None else None  # a tagging search names no holder: no source read
    return [Holding(name, kind, owner, tensors, size, oldest, line, graphs)]


def _count(search: _Search, value: Any, depth: int) -> tuple[int, int, int | None, int]:
    """(tensors, bytes, the oldest earlier step whose graph they keep, how many keep a graph) in ``value``."""
    if isinstance(value, torch.Tensor):
        if search.tag is not None and value.grad_fn is not None:
            search.tag(value)
        oldest = search.graph_step(value) if value.grad_fn is not None else None
        return 1, value.numel() * value.element_size(), oldest, int(value.grad_fn is not None)
    if _is_array(value):  # a numpy copy made each step (outputs kept for an epoch-end metric) grows as a tensor does
        search.arrays += 1
        return 1, value.nbytes, None, 0
    if depth > MAX_DEPTH or id(value) in search.seen:
        return 0, 0, None, 0
    if isinstance(value, dict):
        items = list(value.values())
    elif isinstance(value, (list, tuple, collections.deque, set)):
        items = list(value)
    else:
        return 0, 0, None, 0
    search.seen.add(id(value))
    if len(items) > 2 * SAMPLED:
        items = items[:SAMPLED] + items[-SAMPLED:]
    tensors, size, oldest, graphs = 0, 0, None, 0
    for item in items:
        t, b, o, g = _count(search, item, depth + 1)
        tensors, size, graphs = tensors + t, size + b, graphs + g
        if o is not None:
            oldest = o if oldest is None else min(oldest, o)
    return tensors, size, oldest, graphs


def _is_array(value: Any) -> bool:
    ndarray = getattr(sys.modules.get("numpy"), "ndarray", None)  # never imported here: only if the script did
    return ndarray is not None and isinstance(value, ndarray)


def user_object(value: Any) -> bool:
    """An instance of a class the user wrote (not a module, tensor or container): its attributes are searched."""
    if isinstance(value, (torch.Tensor, dict, list, tuple, set, str, bytes, int, float, type, *FUNCTIONS)):
        return False
    module = sys.modules.get(type(value).__module__)
    return hasattr(value, "__dict__") and module is not None and is_user_file(getattr(module, "__file__", "") or "")


def _fed_at(name: str, path: str | None, owner: str | None = None) -> str | None:
    """The line that feeds ``name``: an append (or the like), else an (augmented) assignment. A local of
    ``owner`` (``"train()"``) is fed in that function: ``running_loss += loss`` in train() and in test() are
    two variables (a script's top level, ``"<module>()"``, feeds its own outside any function)."""
    if not path or not is_user_file(path):
        return None
    attr = name.split(".")[-1]
    scope = owner[:-2] if owner and owner.endswith("()") and "." not in name else None
    function = None if scope == "<module>" else scope  # what enclosing_function says of a line at the top level

    def feeding(keep: Callable[[list[Site]], list[Site]]) -> list[Site]:
        return next((kept for method in FEEDS if (kept := keep(calls_of(path, attr, method)))), None) or \
            keep(item_assignments(path, attr)) or keep(accumulations(path, attr)) or \
            keep(assignments(path, attr, attribute="." in name))

    in_scope = feeding(lambda sites: [s for s in sites if enclosing_function(path, s.line) == function]) if scope else []
    sites = in_scope or feeding(list)
    if not sites:
        return None
    # What grows is fed over and over: a line inside a loop before a one-off store after it (a final copy).
    repeated = [(site, around) for site in sites if (around := loop_around(path, site.line)) is not None]
    site, around = repeated[-1] if repeated else (sites[-1], None)
    function = enclosing_function(path, site.line)
    condition = f", when `{around[1].text}` ({around[1].short}) holds" if around and around[1] else ""
    return str(Site(path, site.line, "")) + (f" in {function}()" if function else "") + condition
