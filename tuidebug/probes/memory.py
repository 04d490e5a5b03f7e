"""The OOM checks: the allocation that failed, the batch size that fits, and what keeps memory alive.

The protocol: reduce the batch size, and check the training loop for leaks, because a smaller batch
only postpones a leak. ``oom.allocation`` reads the failed allocation (its size, the op and the
user's line) from the exception's analysis. ``oom.batch_size`` measures the activation memory of
the model's forward at slices of the captured batch, fits memory = a + k x batch, and predicts the
largest batch that fits the limit (on a GPU the allocator's peak; on the CPU the bytes autograd
saves for backward, labelled as such). ``oom.leak`` finds what keeps earlier steps alive: every
loss and model output carries a tag in its autograd graph, and a graph from more than two steps ago
still alive is held by something; the variables, containers and attributes of the user's code are
searched for the tensors that reach such graphs, and named with the line that feeds them.

Thresholds: a prediction keeps HEADROOM of the limit free; an allocation larger than the whole
batch's activations (OVERSIZED times them) does not come from the batch; memory that grows by
more than GROWTH_BYTES a step over the second half of the samples, and by GROWTH_TOTAL in all,
grows (a cache that warms up and then stays flat does not).
"""

from __future__ import annotations

import collections
import gc
import math
import resource
import sys
from typing import Any

import psutil
import torch

from tuidebug.batches import batch_size_of, slice_batch
from tuidebug.format import bytes_text
from tuidebug.probe_api import FAIL, INCONCLUSIVE, PASS, ProbeContext, ProbeOutcome, probe
from tuidebug.probes.source import assignments, calls_of
from tuidebug.sites import Site, is_user_file

HEADROOM = 0.1
OVERSIZED = 1.0
GROWTH_BYTES = 64 * 1024
GROWTH_TOTAL = 32 * 1024 * 1024
GRAPH_AGE = 2
SEARCH_NODES = 5000
MAX_DEPTH = 3
FRACTIONS = (0.125, 0.25, 0.5)


# --- the allocation that failed -------------------------------------------------------------

@probe("oom.allocation")
def allocation(ctx: ProbeContext) -> ProbeOutcome:
    crash = ctx.run.crash
    if crash is None or crash.kind != "oom":
        return ProbeOutcome(PASS, "no allocation failed: the run did not run out of memory", [])
    figures = {k: v for k, v in crash.memory.items() if not k.endswith("_bytes")}
    evidence = [f"memory at the failure: {', '.join(f'{k} {v}' for k, v in figures.items())}"]
    if crash.site:
        evidence.append(f"the allocation was asked for at {crash.site}")
    if crash.module:
        evidence.append(f"inside {crash.module}" + (f" with input {', '.join(crash.module_inputs)}" if crash.module_inputs else ""))
    evidence += [f"operand {line}" for line in crash.operands]
    asked = crash.memory.get("asked_bytes")
    activations = _activations_at_batch(ctx)
    data: dict[str, Any] = {"asked": asked}
    if asked and activations and asked > OVERSIZED * activations[1]:
        evidence.append(f"it asked for {bytes_text(asked)}, more than the whole forward's activations at batch "
                        f"{activations[0]} ({bytes_text(activations[1])}): this intermediate does not grow with the "
                        "batch but with the data set or the sequence length")
        where = crash.site.split(" ", 1)[0] if crash.site else "the failing line"
        return ProbeOutcome(FAIL, f"one intermediate at {where} needs {bytes_text(asked)}, more than the batch's "
                            "whole activations: a smaller batch will not fix it", evidence,
                            f"compute it in chunks (or over the batch, not the whole data set) at {where}",
                            data={**data, "cause": "oversized_intermediate"})
    return ProbeOutcome(PASS, f"an allocation of {bytes_text(asked) if asked else 'unknown size'} failed"
                        + (f" at {crash.site.split(' ', 1)[0]}" if crash.site else ""), evidence, data=data)


# --- batch size -------------------------------------------------------------------------------

def _saved_bytes(model: torch.nn.Module, inputs: tuple[tuple, dict]) -> int:
    """The bytes autograd saves for backward in one forward of ``model`` on ``inputs``."""
    seen: set[int] = set()
    total = [0]

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in seen:
            seen.add(storage.data_ptr())
            total[0] += storage.nbytes()
        return tensor

    args, kwargs = inputs
    with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        output = model(*args, **kwargs)
    del output
    return total[0]


def _cuda_peak(model: torch.nn.Module, inputs: tuple[tuple, dict]) -> int:
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    args, kwargs = inputs
    with torch.enable_grad():
        output = model(*args, **kwargs)
        loss = sum(t.float().sum() for t in _leaves(output))
        loss.backward()
    del output, loss
    model.zero_grad(set_to_none=True)
    return torch.cuda.max_memory_allocated() - before


def _leaves(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value] if value.requires_grad else []
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _leaves(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _leaves(v)]
    return []


def measure(ctx: ProbeContext) -> tuple[str, list[tuple[int, int]], int] | None:
    """(what is measured, [(batch, bytes)], full batch) at slices of the model's latest inputs."""
    model, inputs = ctx.run.model, ctx.run.model_inputs()
    size = batch_size_of(inputs) if inputs is not None else None
    if model is None or inputs is None or not size or size < 2:
        return None
    cuda = any(p.is_cuda for p in model.parameters())
    what = "peak CUDA memory of forward and backward" if cuda else \
        "bytes autograd saves for backward in one forward (CPU: the allocator has no peak counter)"
    points = []
    for fraction in FRACTIONS:
        count = max(1, int(size * fraction))
        if points and points[-1][0] == count:
            continue
        part = slice_batch(inputs, count, size)
        try:
            points.append((count, _cuda_peak(model, part) if cuda else _saved_bytes(model, part)))
        except (RuntimeError, MemoryError):
            break
        finally:
            model.zero_grad(set_to_none=True)
    return (what, points, size) if len(points) >= 2 else None


def fit(points: list[tuple[int, int]]) -> tuple[float, float]:
    """Least squares of bytes = a + k * batch."""
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    var = sum((x - mean_x) ** 2 for x, _ in points)
    k = sum((x - mean_x) * (y - mean_y) for x, y in points) / var if var else 0.0
    return mean_y - k * mean_x, k


def limit_and_base(ctx: ProbeContext) -> tuple[int, int, str]:
    """(the memory limit, what is in use now, a label) on the model's device."""
    model = ctx.run.model
    if model is not None and any(p.is_cuda for p in model.parameters()):
        index = next(p.device for p in model.parameters()).index or 0
        return (torch.cuda.get_device_properties(index).total_memory, torch.cuda.memory_allocated(index),
                f"cuda:{index} total")
    info = psutil.Process().memory_info()
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        return soft, info.vms, "the process's address-space limit"
    return psutil.virtual_memory().available + info.rss, info.rss, "the machine's available memory"


def _activations_at_batch(ctx: ProbeContext) -> tuple[int, float] | None:
    measured = measure(ctx)
    if measured is None:
        return None
    _, points, size = measured
    a, k = fit(points)
    return size, a + k * size


@probe("oom.batch_size")
def batch_size(ctx: ProbeContext) -> ProbeOutcome:
    measured = measure(ctx)
    if measured is None:
        return ProbeOutcome(INCONCLUSIVE, "no model call with a batch of several examples to measure")
    what, points, size = measured
    a, k = fit(points)
    limit, base, label = limit_and_base(ctx)
    budget = (1 - HEADROOM) * limit - base
    largest = int(budget // k) if k > 0 else None
    evidence = [f"measured: {what}", "points: " + ", ".join(f"batch {b}: {bytes_text(v)}" for b, v in points),
                f"fit: {bytes_text(a)} + {bytes_text(k)} per example; at the script's batch of {size}: "
                f"{bytes_text(a + k * size)}",
                f"limit: {bytes_text(limit)} ({label}), in use now {bytes_text(base)}, {HEADROOM:.0%} kept free"]
    data = {"points": points, "per_example": k, "batch": size, "largest": largest}
    crashed = ctx.run.crash is not None and ctx.run.crash.kind == "oom"
    if largest is not None:
        evidence.append(f"largest batch predicted to fit: {largest}")
    if crashed and largest is not None and largest < size:
        return ProbeOutcome(FAIL, f"the batch of {size} does not fit: about {bytes_text(k)} per example, the largest "
                            f"batch that fits is about {max(largest, 1)}", evidence,
                            f"use batch_size={max(1, _round_down(largest))} (keep the effective batch with gradient "
                            f"accumulation over {math.ceil(size / max(1, _round_down(largest)))} steps)",
                            data={**data, "cause": "batch_too_large"})
    if crashed:
        return ProbeOutcome(FAIL, f"out of memory at a batch of {size}, which the fit says should fit", evidence,
                            "reduce the batch size", data={**data, "cause": "batch_too_large"})
    return ProbeOutcome(PASS, f"the batch of {size} fits (largest predicted: {largest})", evidence, data=data)


def _round_down(value: int) -> int:
    """A batch size users would pick: the power of two at or below ``value``."""
    return 2 ** int(math.log2(value)) if value >= 1 else 1


# --- memory kept across steps ------------------------------------------------------------------

def _graph_steps(tensor: torch.Tensor, before: int, memo: dict[int, int | None]) -> int | None:
    """The oldest step tag older than ``before`` that ``tensor``'s graph reaches, or None."""
    node = tensor.grad_fn
    if node is None:
        return None
    found, todo, seen = None, [node], 0
    while todo and seen < SEARCH_NODES:
        node = todo.pop()
        if node is None:
            continue
        key = id(node)
        if key in memo:
            if memo[key] is not None and (found is None or memo[key] < found):
                found = memo[key]
            continue
        memo[key] = None
        seen += 1
        tag = node.metadata.get("tuidebug") if hasattr(node, "metadata") else None
        if tag is not None and tag.step < before and (found is None or tag.step < found):
            found = tag.step
        todo.extend(next_node for next_node, _ in node.next_functions)
    return found


class Holder:
    def __init__(self, name: str, value: Any, path: str | None, owner: str) -> None:
        self.name, self.value, self.path, self.owner = name, value, path, owner
        self.graphs: list[int] = []  # the oldest step each held tensor's graph reaches
        self.tensors = 0
        self.bytes = 0


def _candidates(ctx: ProbeContext) -> list[tuple[str, Any, str | None, str]]:
    """(name, value, source file, owner) to search: the user's frames, the script's globals, and the
    attributes of the models and of the objects that own them (a LightningModule holding the model)."""
    found: list[tuple[str, Any, str | None, str]] = []
    seen_scopes: set[int] = set()
    for frame in ctx.run.user_frames():
        for scope, owner in ((frame.f_locals, frame.f_code.co_name), (frame.f_globals, "global")):
            if id(scope) in seen_scopes:
                continue
            seen_scopes.add(id(scope))
            found += [(name, value, frame.f_code.co_filename, owner) for name, value in list(scope.items())
                      if not name.startswith("__")]
    main = sys.modules.get("__main__")
    if main is not None and id(vars(main)) not in seen_scopes:
        found += [(name, value, getattr(main, "__file__", None), "global") for name, value in list(vars(main).items())
                  if not name.startswith("__")]
    for model in _models_and_owners(ctx):
        path = getattr(sys.modules.get(type(model).__module__), "__file__", None)
        found += [(f"self.{name}", value, path, type(model).__name__) for name, value in vars(model).items()
                  if not name.startswith("_")]
    return found


def _models_and_owners(ctx: ProbeContext) -> list[Any]:
    models = ctx.run.known_models()
    owners = []
    for model in models:
        for referrer in gc.get_referrers(model):
            holder = referrer if isinstance(referrer, torch.nn.Module) else None
            if isinstance(referrer, dict):
                holder = next((r for r in gc.get_referrers(referrer) if isinstance(r, torch.nn.Module)
                               and getattr(r, "__dict__", None) is referrer), None)
            if holder is not None and holder not in models and holder not in owners:
                owners.append(holder)
    return models + owners


def _scan(holder: Holder, value: Any, step: int, memo: dict[int, int | None], depth: int, seen: set[int]) -> None:
    if id(value) in seen or depth > MAX_DEPTH:
        return
    seen.add(id(value))
    if isinstance(value, torch.Tensor):
        holder.tensors += 1
        holder.bytes += value.numel() * value.element_size()
        oldest = _graph_steps(value, step - GRAPH_AGE, memo)
        if oldest is not None:
            holder.graphs.append(oldest)
        return
    if isinstance(value, torch.nn.Module) or isinstance(value, (type, type(sys))) or callable(value):
        return
    if isinstance(value, dict):
        items = list(value.values())
    elif isinstance(value, (list, tuple, collections.deque, set)):
        items = list(value)
    else:
        return
    for item in items[:64] + items[-64:] if len(items) > 128 else items:
        _scan(holder, item, step, memo, depth + 1, seen)


def find_holders(ctx: ProbeContext, step: int) -> list[Holder]:
    memo: dict[int, int | None] = {}
    holders = []
    for name, value, path, owner in _candidates(ctx):
        holder = Holder(name, value, path, owner)
        _scan(holder, value, step, memo, 0, set())
        if holder.graphs or (holder.tensors >= 8 and isinstance(value, (list, dict, collections.deque))):
            holders.append(holder)
    holders.sort(key=lambda h: (-len(h.graphs), -h.bytes))
    return holders


def where_fed(holder: Holder) -> Site | None:
    """The line that feeds the holder: an augmented assignment, an append, a plain assignment."""
    if not holder.path or not is_user_file(holder.path):
        return None
    name = holder.name.split(".")[-1]
    for method in ("append", "extend", "insert", "appendleft"):
        calls = calls_of(holder.path, name, method)
        if calls:
            return calls[-1]
    lines = assignments(holder.path, name)
    return lines[-1] if lines else None


def memory_trend(ctx: ProbeContext) -> tuple[float, int, str] | None:
    """(bytes per step over the second half of the samples, growth in all, what was read)."""
    samples = [(step, cuda if cuda is not None else rss) for step, rss, cuda in ctx.run.facts.memory]
    samples = [(s, b) for s, b in samples if b is not None]
    if len(samples) < 8:
        return None
    half = samples[len(samples) // 2:]
    steps = half[-1][0] - half[0][0]
    if steps <= 0:
        return None
    slope = (half[-1][1] - half[0][1]) / steps
    label = "CUDA allocated" if ctx.run.facts.memory[-1][2] is not None else "RSS"
    return slope, samples[-1][1] - samples[0][1], label


@probe("oom.leak")
def leak(ctx: ProbeContext) -> ProbeOutcome:
    facts = ctx.run.facts
    step = max([s.step for s in ctx.history] + [0]) + 1
    alive = facts.old_graphs_alive(step)
    trend = memory_trend(ctx)
    evidence = []
    if trend is not None:
        slope, total, label = trend
        evidence.append(f"{label}: {bytes_text(slope)} per step over the second half of the run, "
                        f"{bytes_text(total)} in all")
    old_steps = sorted({tag.step for tag in alive})
    evidence.append(f"autograd graphs of {len(old_steps)} earlier step(s) still alive at step {step}"
                    + (f" (steps {old_steps[0]}..{old_steps[-1]})" if old_steps else ""))
    holders = find_holders(ctx, step)
    graph_holders = [h for h in holders if h.graphs]
    for holder in holders[:4]:
        site = where_fed(holder)
        kind = type(holder.value).__name__
        evidence.append(f"`{holder.name}` ({kind} in {holder.owner}) holds {holder.tensors} tensor(s), "
                        f"{bytes_text(holder.bytes)}" + (f", graphs back to step {min(holder.graphs)}" if holder.graphs else "")
                        + (f"; fed at {site}" if site else ""))
    if graph_holders or len(old_steps) >= 3:
        if graph_holders:
            holder = graph_holders[0]
            site = where_fed(holder)
            where = f" at {site.short}" if site else ""
            summary = (f"`{holder.name}`{where} keeps the autograd graph of every step alive "
                       f"({len(set(holder.graphs)) or len(old_steps)} step(s) so far): memory grows until it runs out")
            fix = _leak_fix(holder, site)
        else:
            summary = f"the autograd graphs of {len(old_steps)} earlier steps stay alive: memory grows every step"
            fix = ("keep numbers, not graphs, across steps: accumulate loss.item() (or loss.detach()), "
                   "store outputs.detach(), and evaluate under torch.no_grad()")
        return ProbeOutcome(FAIL, summary, evidence, fix, data={"cause": "memory_leak"})
    growing = trend is not None and trend[0] > GROWTH_BYTES and trend[1] > GROWTH_TOTAL
    if growing:
        holder = holders[0] if holders else None
        site = where_fed(holder) if holder else None
        summary = (f"memory grows {bytes_text(trend[0])} a step" +
                   (f": `{holder.name}` holds {holder.tensors} tensors ({bytes_text(holder.bytes)})" if holder else "")
                   + (f", fed at {site.short}" if site else ""))
        return ProbeOutcome(FAIL, summary, evidence,
                            f"bound `{holder.name}` (keep a running summary, or only the last N entries)" if holder else
                            "find what keeps growing: a list or cache filled every step",
                            data={"cause": "memory_growth"})
    return ProbeOutcome(PASS, "no memory kept across steps", evidence)


def _leak_fix(holder: Holder, site: Site | None) -> str:
    line = f" at {site.short} (`{site.text}`)" if site else ""
    name = holder.name
    if isinstance(holder.value, torch.Tensor):
        return f"accumulate a number, not the graph{line}: {name} += loss.item() (or loss.detach())"
    return (f"store detached values{line}: {name}.append(x.detach()) (or x.item()), and run evaluation under "
            "torch.no_grad()")
