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
batch's activations (OVERSIZED times them) does not come from the batch. When memory "grows" is
the agent's (``Facts.memory_growth``).
"""

from __future__ import annotations

import math
import re
import resource
import sys
from typing import Any

import psutil
import torch

from tuidebug.batches import batch_size_of, slice_batch, tensors_of
from tuidebug.format import bytes_text
from tuidebug.probe_api import FAIL, INCONCLUSIVE, PASS, ProbeContext, ProbeOutcome, probe
from tuidebug.probes import holders, source
from tuidebug.sites import is_user_file

# Memory that grows as the batch to the power SQUARED or more (1.8: n^2 with a linear part beside it) over
# the batch sizes measured comes from an intermediate over pairs of rows; the activations of a batch grow
# linearly: over the corpus's out-of-memory runs the exponent measured 0.2-1.0 (ten cases), and 1.97 for the
# one whose relation head pairs every box with every other. Below SQUARED_MIN_BYTES the readings are noise.
SQUARED = 1.8
SQUARED_MIN_BYTES = 8 * 2**20
HEADROOM = 0.1
OVERSIZED = 1.0
# One example's share of the failed allocation (its size over the batch) against the memory the step
# had: in the corpus's batch-too-large cases it is at most ~1% (one activation among many, times a
# large batch); an attention map over 9216 positions takes ~40% for a single example. ONE_EXAMPLE_SHARE
# sits a decade above the first: past it, halving the batch cannot make the allocation fit.
ONE_EXAMPLE_SHARE = 0.1
# The same share for an allocation that is n x n per example (n >= SQUARE_LENGTH positions: attention, a
# correlation volume, pairwise distances), which grows with the square of the resolution or length, not with
# the batch. Over the corpus's 66 out-of-memory cases (2026-12-07) the square ones took 0.5% (BERT's 384 x 384
# attention at batch 32, a batch too large) and 7.5%, 41%, 46% (a 2304 x 2304 correlation volume over a 48 x 48
# map, self-attention over full-resolution maps: oversized). 2% sits near the geometric middle of 0.5% and 7.5%.
# Under ONE_EXAMPLE_SHARE a smaller batch could still make it fit: the finding says so, and names the square.
SQUARE_SHARE = 0.02
SQUARE_LENGTH = 256  # a length below this squared is an ordinary activation (a 16x16 feature map)
# Batches this large or larger are told apart from other axes of the same length in a broadcast shape; a
# smaller batch's every pair is an ordinary tensor (and its length is too likely a feature width by chance).
MIN_BATCH_AXES = 64
MAX_HEADS = 64
FRACTIONS = (0.125, 0.25, 0.5)
# A census finding (tensors spread over many objects of one class) explains measured growth when those
# objects hold at least this share of it: the rest is the allocator's slack and the step's own buffers.
SPREAD_SHARE = 0.5
# Model calls with gradients on and no backward, the latest fed a graph-carrying input, before an out-of-memory
# error put it on that input: a recurrent state carried through an evaluation. Also over twice the calls any
# backward of the run followed (a GAN's D(real), G(z), D(G(z)) make three). Three, not more: a state carried
# through chunks of 100 MiB of activations runs out within a few calls (round 35's streaming LSTM at its third).
CARRIED_CALLS = 3


# --- the allocation that failed -------------------------------------------------------------

@probe("oom.allocation", on_training_thread=True)
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
    where = crash.failing_line
    in_forward = crash.module is not None or _in_model_method(crash.frames, ctx.run.model)
    large = ctx.run.facts.large_call
    if large is not None:  # the failing step's data is many usual steps': the activations above are not its measure
        return _large_call(ctx, large, evidence, data)
    if asked and activations and in_forward and asked > OVERSIZED * activations[1]:  # else not one of its intermediates
        evidence.append(f"it asked for {bytes_text(asked)}, more than the whole forward's activations at batch "
                        f"{activations[0]} ({bytes_text(activations[1])}): this intermediate does not grow with the "
                        "batch but with the data set or the sequence length")
        return ProbeOutcome(FAIL, f"one intermediate at {where} needs {bytes_text(asked)}, more than the batch's "
                            "whole activations: a smaller batch will not fix it", evidence,
                            f"compute it in chunks (or over the batch, not the whole data set) at {where}",
                            data={**data, "cause": "oversized_intermediate"})
    oversized = _oversized_for_one_example(ctx, asked, crash)
    if oversized is not None:
        summary, lines, halving_fits = oversized
        evidence += lines
        batch = ("a smaller batch shrinks it only in step with the batch, not with the square" if halving_fits else
                 "a smaller batch will not fix it")
        return ProbeOutcome(FAIL, f"one intermediate at {where} {summary}: {batch}", evidence,
                            f"compute it on a smaller input (downsampled features, a shorter sequence) or in chunks "
                            f"at {where}", data={**data, "cause": "oversized_intermediate"})
    pairs = _all_pairs(asked, crash)
    if pairs is not None:
        n, per_pair = pairs
        evidence.append(f"it asked for {bytes_text(asked)}: {n} x {n} pairs x {per_pair} values, beside an input of "
                        f"{n} x {n} (every row of the batch against every other: a whole graph or distance matrix)")
        return ProbeOutcome(FAIL, f"one intermediate at {where} holds all {n} x {n} pairs of the batch's rows "
                            f"({bytes_text(asked)}): it grows with the square of the {n} rows", evidence,
                            f"do not materialise every pair at {where}: combine per-row terms by broadcasting "
                            "(a[:, None] + b[None, :]), use only the pairs that exist (the edges), or process the rows "
                            "in chunks", data={**data, "cause": "oversized_intermediate"})
    inputs = ctx.run.model_inputs()
    power = _batch_power(asked, crash, batch_size_of(inputs) if inputs is not None else None)
    if power is not None:
        shape, n, k = power
        evidence.append(f"the operands broadcast to {shape}: {k} axes of the batch's {n} rows, every "
                        f"{'pair' if k == 2 else 'triple' if k == 3 else f'{k}-tuple'} of them ({bytes_text(asked)})")
        return ProbeOutcome(FAIL, f"one intermediate at {where} broadcasts to {shape}, every "
                            f"{'pair' if k == 2 else 'triple' if k == 3 else f'{k}-tuple'} of the batch's {n} rows "
                            f"({bytes_text(asked)}): it grows with the batch to the power {k}", evidence,
                            f"do not materialise every {'pair' if k == 2 else 'combination'} at {where}: select the "
                            "valid ones first (indices of the pairs that count) or loop over anchors in chunks; "
                            f"halving the batch divides it by {2 ** k}",
                            data={**data, "cause": "oversized_intermediate"})
    jacobian = _batch_jacobian(crash)
    if jacobian is not None:
        call, operand, n = jacobian
        evidence.append(f"{call}() at {where} is taken with respect to `{operand}`, the whole batch of {n}: it holds "
                        f"{n} x {n} blocks of per-sample derivatives, all but the {n} on the diagonal zero for a model "
                        "that treats its samples apart")
        return ProbeOutcome(FAIL, f"the {call} at {where} is taken over the whole batch of {n}: it grows with the square "
                            f"of the batch ({bytes_text(asked) if asked else 'the allocation'} failed)", evidence,
                            f"take it per sample at {where}: {call}(lambda inp: f(inp).sum(0), {operand}) gives the "
                            "per-sample derivatives of a function that treats samples apart, or use "
                            "torch.func.vmap(torch.func.jacrev(f))", data={**data, "cause": "oversized_intermediate"})
    return ProbeOutcome(PASS, f"an allocation of {bytes_text(asked) if asked else 'unknown size'} failed"
                        + (f" at {crash.site.split(' ', 1)[0]}" if crash.site else ""), evidence, data=data)


def _in_model_method(frames: list[str], model: torch.nn.Module | None) -> bool:
    """A frame of the failure is forward, or a method the model's own classes define (a scoring function an
    evaluation calls directly): an intermediate of the model's computation, as the forward's activations are."""
    names = {frame.rsplit(" in ", 1)[-1] for frame in frames}
    if "forward" in names:
        return True
    own = [cls for cls in type(model).__mro__ if is_user_file(getattr(sys.modules.get(cls.__module__), "__file__", "") or "")] \
        if model is not None else []
    return any(name in vars(cls) for cls in own for name in names)


# The derivatives of a whole function at once: over a batch, every output row against every input row.
JACOBIANS = re.compile(r"\b(jacobian|hessian|jacrev|jacfwd)\s*\(")


def _batch_jacobian(crash: Any) -> tuple[str, str, int] | None:
    """(the call, the operand, n) when the failing line takes a Jacobian or Hessian (torch.autograd.functional or
    torch.func) and an operand of that line is a batch of n >= 2 rows: the result is n x n blocks."""
    called = JACOBIANS.search(crash.site or "")
    if called is None:
        return None
    for line in crash.operands:
        name, _, shape = line.partition(": ")
        dims = re.match(r"\((\d+), \d+", shape)
        if dims and int(dims.group(1)) >= 2 and name.isidentifier():
            return called.group(1), name, int(dims.group(1))
    return None


def _large_call(ctx: ProbeContext, large: tuple, evidence: list[str], data: dict[str, Any]) -> ProbeOutcome:
    """The model's last call held many times the values of a usual one, on a non-batch axis. At the
    training loop's own call, that is one batch of the run grown too large (a sequence far longer than
    the others): cap it. Anywhere else, a forward over far more than a batch (a data set at once)."""
    size, usual, shapes, site = large
    shown = ", ".join(map(str, shapes))
    evidence.append(f"the model was called at {site} on inputs {shown}: {size:,} values, {size / usual:.0f} times "
                    f"its usual call ({usual:,})")
    where = site.split(" ", 1)[0]
    training_call = ctx.run.facts.model_site is not None and where == ctx.run.facts.model_site.short
    if training_call:
        evidence.append(f"{where} is where the training loop calls the model: this step's batch is the outlier")
        return ProbeOutcome(FAIL, f"the batch of this step is {size / usual:.0f} times a usual one ({shown}): one "
                            "sample far longer or larger than the rest does not fit", evidence,
                            "cap the length of a sample (truncate sequences, crop or resize inputs) to what the usual "
                            "batches hold, or group samples of similar length into batches", data={
                                **data, "cause": "batch_too_large"})
    return ProbeOutcome(FAIL, f"the forward at {where} runs on {size / usual:.0f} times the data of a usual step "
                        f"({shown}) at once: a smaller batch size will not fix it", evidence,
                        f"run it in batches (and under torch.no_grad() when it only evaluates) at {where}, or on "
                        "the sample it was meant to take", data={**data, "cause": "oversized_intermediate"})


def _oversized_for_one_example(ctx: ProbeContext, asked: int | None,
                               crash: Any) -> tuple[str, list[str], bool] | None:
    """The failed allocation divided by the batch still takes ONE_EXAMPLE_SHARE of the memory the step
    had (SQUARE_SHARE where it is n x n per example for a length n of the operands: attention or distances
    over n positions, named as such): one example's share of one tensor that large is not the batch's doing.
    (summary, evidence, whether it is under ONE_EXAMPLE_SHARE: a smaller batch might still hold it)."""
    inputs = ctx.run.model_inputs()
    size = batch_size_of(inputs) if inputs is not None else None
    if not asked or not size:
        return None
    limit, base, label = limit_and_base(ctx)
    free = limit - base
    per_example = asked / size
    square = _square_length(per_example, crash.operands)
    if free <= 0 or per_example < (SQUARE_SHARE if square is not None else ONE_EXAMPLE_SHARE) * free:
        return None
    lines = [f"per example of the batch of {size} it is {bytes_text(per_example)}, {per_example / free:.1%} of the "
             f"{bytes_text(free)} the step had ({label} less what was in use)"]
    if square is not None:
        lines.append(f"that is {square} x {square} values per example: an intermediate that grows with the square "
                     f"of a length of {square} (attention or pairwise distances over {square} positions)")
        return f"is {square} x {square} per example ({bytes_text(asked)})", lines, per_example < ONE_EXAMPLE_SHARE * free
    return f"needs {bytes_text(per_example)} per example ({bytes_text(asked)} in all)", lines, False


def _square_length(per_example: float, operands: list[str]) -> int | None:
    """A length n >= SQUARE_LENGTH of the operands' shapes with n*n elements per example (times a few heads)."""
    lengths = sorted({int(n) for line in operands for shape in re.findall(r"\(([\d, ]+)\)", line)
                      for n in shape.split(",") if n.strip().isdigit() and int(n) >= SQUARE_LENGTH}, reverse=True)
    for itemsize in (4, 2, 8):
        for n in lengths:
            if _per_pair(per_example, itemsize, n) is not None:
                return n
    return None


def _batch_power(asked: int | None, crash: Any, n: int | None) -> tuple[tuple[int, ...], int, int] | None:
    """(the broadcast shape, n, k) when the failing op's operands broadcast to a shape with k >= 2 axes of
    the batch's n rows (n >= MIN_BATCH_AXES: a (n, n, 1) against a (n, 1, n), a batch-all triplet mask)
    and the failed allocation is that shape: an intermediate over every pair or triple of the batch."""
    if not asked or not n or n < MIN_BATCH_AXES:
        return None
    shapes = [tuple(int(d) for d in found.split(",") if d.strip()) for line in crash.operands
              for found in re.findall(r"\(([\d, ]+)\)", line.split(":", 1)[-1])[:1]]
    try:
        shape = tuple(torch.broadcast_shapes(*shapes)) if len(shapes) >= 2 else None
    except RuntimeError:
        return None
    k = sum(d == n for d in shape) if shape else 0
    if k < 2 or not any(asked == math.prod(shape) * itemsize for itemsize in (4, 2, 8, 1)):
        return None
    return shape, n, k


def _per_pair(nbytes: float, itemsize: int, n: int) -> int | None:
    """How many values of ``itemsize`` bytes ``nbytes`` holds for each of n x n pairs, when that is a whole
    number from 1 to MAX_HEADS (the heads of an attention map, the features of a pairwise tensor)."""
    count = nbytes / itemsize / (n * n)
    return int(count) if 1 <= count <= MAX_HEADS and count.is_integer() else None


def _all_pairs(asked: int | None, crash: Any) -> tuple[int, int] | None:
    """(n, values per pair) when the failing module takes an n x n input (n >= SQUARE_LENGTH: an adjacency
    or distance matrix over the n rows it is given) and the failed allocation is n * n times a few values
    (at most MAX_HEADS): an intermediate over every pair of rows, which a smaller batch of rows would shrink
    by its square but which no batch size of the script's controls (the rows are the whole data set)."""
    if not asked:
        return None
    squares = {int(a) for text in crash.module_inputs for a, b in re.findall(r"\((\d+), (\d+)\)", text)
               if a == b and int(a) >= SQUARE_LENGTH}
    for n in sorted(squares, reverse=True):
        for itemsize in (4, 2, 8):
            per_pair = _per_pair(asked, itemsize, n)
            if per_pair is not None:
                return n, per_pair
    return None


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


class Unmeasured(Exception):
    """The batch's memory could not be measured: the message says why."""


def measure(ctx: ProbeContext) -> tuple[str, list[tuple[int, int]], int]:
    """(what is measured, [(batch, bytes)], full batch) at slices of the model's latest inputs."""
    model, inputs = ctx.run.model, ctx.run.model_inputs()
    size = batch_size_of(inputs) if inputs is not None else None
    if model is None or inputs is None or not size or size < 2:
        raise Unmeasured("no model call with a batch of several examples to measure")
    cuda = any(p.is_cuda for p in model.parameters())
    what = "peak CUDA memory of forward and backward" if cuda else \
        "bytes autograd saves for backward in one forward (CPU: the allocator has no peak counter)"
    points, failure = [], ""
    for fraction in FRACTIONS:
        count = max(1, int(size * fraction))
        if points and points[-1][0] == count:
            continue
        part = slice_batch(inputs, count, size)
        try:
            points.append((count, _cuda_peak(model, part) if cuda else _saved_bytes(model, part)))
        except Exception as exc:  # out of memory, or inputs that do not cut by rows (a graph's edges index them all)
            failure = f"a forward of {count} examples failed: {str(exc).splitlines()[0][:160]}"
            break
        finally:
            model.zero_grad(set_to_none=True)
    if len(points) < 2:
        raise Unmeasured(failure if len(points) < len(FRACTIONS) else "too few batch sizes to fit")
    return what, points, size


def fit(points: list[tuple[int, int]]) -> tuple[float, float]:
    """Least squares of bytes = a + k * batch."""
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    var = sum((x - mean_x) ** 2 for x, _ in points)
    k = sum((x - mean_x) * (y - mean_y) for x, y in points) / var if var else 0.0
    return mean_y - k * mean_x, k


def limit_and_base(ctx: ProbeContext) -> tuple[int, int, str]:
    """(the memory limit, what is in use outside a step's activations, a label) on the model's device:
    on a GPU the allocator's figures; on the CPU under an address-space limit, the address space at the
    latest step boundary (or before the first forward), else the machine's available memory."""
    model = ctx.run.model
    if model is not None and any(p.is_cuda for p in model.parameters()):
        index = next(p.device for p in model.parameters()).index or 0
        return (torch.cuda.get_device_properties(index).total_memory, torch.cuda.memory_allocated(index),
                f"cuda:{index} total")
    info = psutil.Process().memory_info()
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        return soft, ctx.run.facts.address_space or info.vms, "the process's address-space limit"
    return psutil.virtual_memory().available + info.rss, info.rss, "the machine's available memory"


def _activations_at_batch(ctx: ProbeContext) -> tuple[int, float] | None:
    try:
        _, points, size = measure(ctx)
    except Unmeasured:
        return None
    a, k = fit(points)
    return size, a + k * size


@probe("oom.batch_size", on_training_thread=True)
def batch_size(ctx: ProbeContext) -> ProbeOutcome:
    try:
        what, points, size = measure(ctx)
    except Unmeasured as exc:
        return _unmeasured(ctx, str(exc))
    a, k = fit(points)
    limit, base, label = limit_and_base(ctx)
    crashed = ctx.run.crash is not None and ctx.run.crash.kind == "oom"
    evidence = [f"measured: {what}", "points: " + ", ".join(f"batch {b}: {bytes_text(v)}" for b, v in points),
                f"fit: {bytes_text(a)} + {bytes_text(k)} per example; at the script's batch of {size}: "
                f"{bytes_text(a + k * size)}",
                f"limit: {bytes_text(limit)} ({label}), in use outside the step {bytes_text(base)}, "
                f"{HEADROOM:.0%} kept free"]
    if crashed and size and limit > base:
        # The batch of ``size`` did not fit: a step costs at least what was left per example, whatever the
        # measurement (which sees the forward's saved tensors, not backward's buffers) says.
        k = max(k, (limit - base) / size)
        evidence.append(f"the run failed at a batch of {size}: at least {bytes_text(k)} per example")
    budget = (1 - HEADROOM) * limit - base - a
    largest = max(0, int(budget // k)) if k > 0 else None
    data = {"points": points, "per_example": k, "batch": size, "largest": largest}
    if largest is not None:
        evidence.append(f"largest batch predicted to fit: {largest}")
    squared = _grows_with_square(points) if crashed else None
    if squared is not None:
        return _pairs_of_rows(ctx, size, squared, evidence, data)
    if crashed and largest is not None and largest < size:
        suggested = verify(ctx, max(1, _round_down(largest)), size, evidence)
        data["verified"] = suggested
        return ProbeOutcome(FAIL, f"the batch of {size} does not fit: about {bytes_text(k)} per example, the largest "
                            f"batch that fits is about {max(largest, 1)}", evidence,
                            f"use batch_size={suggested} (keep the effective batch with gradient accumulation over "
                            f"{math.ceil(size / suggested)} steps)", data={**data, "cause": "batch_too_large"})
    if crashed:
        return ProbeOutcome(FAIL, f"out of memory at a batch of {size}, which the fit says should fit", evidence,
                            "reduce the batch size", data={**data, "cause": "batch_too_large"})
    return ProbeOutcome(PASS, f"the batch of {size} fits (largest predicted: {largest})", evidence, data=data)


def _grows_with_square(points: list[tuple[int, int]]) -> float | None:
    """The exponent of bytes against batch between the smallest and largest point measured, when it is
    SQUARED or more (and the bytes are past noise): the step holds an intermediate that pairs every row of
    the batch with every other (relations between all boxes, a distance matrix), not the rows' own
    activations, which grow linearly."""
    (small, low), (large, high) = min(points), max(points)
    if large <= small or low <= 0 or high < SQUARED_MIN_BYTES:
        return None
    exponent = math.log(high / low) / math.log(large / small)
    return exponent if exponent >= SQUARED else None


def _pairs_of_rows(ctx: ProbeContext, size: int, exponent: float, evidence: list[str], data: dict) -> ProbeOutcome:
    where = ctx.run.crash.failing_line
    evidence.append(f"the step's memory grows as the batch to the power {exponent:.2f}: an intermediate pairs the "
                    f"{size} rows of the input with each other ({size:,} x {size:,} = {size * size:,} pairs)")
    return ProbeOutcome(FAIL, f"the memory at {where} grows with the square of the {size} rows of the input: "
                        f"{size * size:,} pairs do not fit; a smaller batch only hides it", evidence,
                        f"bound the rows that meet pairwise at {where}: cap or sample them (boxes, points, "
                        "nodes per example), or compute the pairs in chunks", data={**data, "cause": "oversized_intermediate"})


def _unmeasured(ctx: ProbeContext, why: str) -> ProbeOutcome:
    """No measurement, but the run ran out of memory on a tensor that has the batch as its first
    dimension: the batch is what does not fit; halving it is the first thing to try."""
    crash = ctx.run.crash
    inputs = ctx.run.model_inputs()
    size = batch_size_of(inputs) if inputs is not None else None
    evidence = [f"the batch's memory could not be measured: {why}"]
    oom = crash is not None and crash.kind == "oom" and bool(size)
    grows = oom and any(
        text.startswith(f"({size},") for text in crash.module_inputs + [o.split(": ", 1)[-1] for o in crash.operands])
    first_step = oom and not ctx.history
    if not grows and not first_step:
        return ProbeOutcome(INCONCLUSIVE, evidence[0], evidence)
    if grows:
        evidence.append(f"the allocation failed on a tensor whose first dimension is the batch of {size}: it grows "
                        "with the batch")
        summary = f"the batch of {size} does not fit: the failing allocation grows with the batch"
    else:  # nothing could have piled up across steps: the step's own activations, which scale with the batch
        evidence.append("no step completed before the run ran out of memory: nothing was kept across steps, the "
                        f"first step itself does not fit at a batch of {size}")
        summary = f"the batch of {size} does not fit: the very first step ran out of memory"
    if ctx.run.facts.model_site:
        evidence.append(f"the model is called with the batch of {size} at {ctx.run.facts.model_site}")
    return ProbeOutcome(FAIL, summary, evidence,
                        f"use batch_size={max(1, size // 2)} or less (keep the effective batch with gradient accumulation)",
                        data={"cause": "batch_too_large", "batch": size})


def verify(ctx: ProbeContext, batch: int, size: int, evidence: list[str]) -> int:
    """Run a forward and backward at the predicted batch (halving it while it fails): the batch to suggest
    (the prediction itself when none could be verified, which the evidence says)."""
    model, inputs = ctx.run.model, ctx.run.model_inputs()
    predicted = batch
    while batch >= 1:
        try:
            with torch.enable_grad():
                args, kwargs = slice_batch(inputs, batch, size)
                output = model(*args, **kwargs)
                loss = sum(t.float().sum() for t in _leaves(output))
                if isinstance(loss, torch.Tensor):
                    loss.backward()
            del output, loss
            evidence.append(f"verified: a forward and backward at batch {batch} ran")
            return batch
        except Exception as exc:  # as in measure: out of memory, or inputs that do not cut by rows
            evidence.append(f"a forward and backward at batch {batch} failed too: {str(exc).splitlines()[0][:120]}")
            batch //= 2
        finally:
            model.zero_grad(set_to_none=True)
    evidence.append(f"could not verify any batch size now (the process itself is at its limit): suggesting the "
                    f"prediction, {predicted}")
    return predicted


def _round_down(value: int) -> int:
    """A batch size users would pick: the power of two at or below ``value``."""
    return 2 ** int(math.log2(value)) if value >= 1 else 1


# --- memory kept across steps ------------------------------------------------------------------

@probe("oom.leak", on_training_thread=True)
def leak(ctx: ProbeContext) -> ProbeOutcome:
    facts = ctx.run.facts
    step = max([s.step for s in ctx.history] + [0]) + 1
    alive = facts.old_graphs_alive(step)
    growth = facts.kept_memory_growth()
    evidence = []
    if growth is not None:
        slope, total, steps, label = growth
        evidence.append(f"{label}: {bytes_text(slope)} per step over the last {steps} steps, {bytes_text(total)} in all")
    old_steps = sorted({tag.step for tag in alive})
    evidence.append(f"autograd graphs of {len(old_steps)} earlier step(s) still alive at step {step}"
                    + (f" (steps {old_steps[0]}..{old_steps[-1]})" if old_steps else ""))
    found = _search(ctx, step, evidence) or list(facts.leak_holders)
    if facts.leak_holders and found is not facts.leak_holders:
        evidence.append(f"seen while the run was live (step {facts.leak_step}): "
                        + "; ".join(h.text() for h in facts.leak_holders[:3]))
    evidence += [h.text() for h in found[:4]]
    keeping = [h for h in found if h.oldest is not None] or [h for h in facts.leak_holders if h.oldest is not None]
    if keeping or len(old_steps) >= 3 or "graphs_kept" in facts.reported:
        if keeping:
            holder = keeping[0]
            where = f" at {holder.line.split(' ', 1)[0]}" if holder.line else ""
            summary = (f"`{holder.name}`{where} keeps the autograd graph of every step alive: memory grows until it "
                       "runs out")
            fix = _leak_fix(holder)
        else:
            summary = "the autograd graphs of earlier steps stay alive: memory grows every step"
            fix = ("keep numbers, not graphs, across steps: accumulate loss.item() (or loss.detach()), "
                   "store outputs.detach(), and evaluate under torch.no_grad()")
        return ProbeOutcome(FAIL, summary, evidence, fix, data={"cause": "memory_leak"})
    crash = ctx.run.crash
    if crash is not None and crash.kind == "oom":
        carried = _carried_graph(ctx, evidence) or _unrolled(ctx, evidence)
        if carried is not None:
            return carried
        gathered = facts.gathered or _piled(ctx, step, evidence)
        if gathered:
            return _gathered(gathered[0], evidence, facts.outputs_per_step)
        named = {h.name for h in found}
        at_failure = [h for h in facts.held_at_oom if h.name not in named]  # locals of frames now gone
        kept = _kept_more_than(found + at_failure, crash.memory.get("asked_bytes") or 0)
        if kept:
            return _kept_at_oom(ctx, kept, crash.memory["asked_bytes"], evidence)
    if facts.growing_container is not None:
        owner = facts.growing_container.rsplit(".", 1)[0]
        kept = [h for h in _search(ctx, step, evidence, min_tensors=1) if h.name.rsplit(".", 1)[0] == owner]
        if kept:
            evidence.append(f"`{facts.growing_container}` grew at every pass over the data: "
                            + ", ".join(map(str, facts.container_counts[facts.growing_container][1][-8:])))
            return _kept_state(ctx, kept, evidence)
    if growth is not None or "memory_growth" in facts.reported:
        spread = _spread_over_instances(found, growth, facts, evidence)
        if spread is not None:
            return _spread_outcome(ctx, spread, evidence, growth)
        holder = found[0] if found else None
        summary = f"memory grows{_per_step(growth)} a step" + (
            f": `{holder.name}` holds {holder.counted} ({bytes_text(holder.bytes)})"
            + (f", fed at {holder.line.split(' ', 1)[0]}" if holder.line else "") if holder else "")
        return ProbeOutcome(FAIL, summary, evidence,
                            f"bound `{holder.name}` (keep a running summary, or only the last N entries)" if holder else
                            "find what keeps growing: a list or cache filled every step",
                            data={"cause": "memory_growth"})
    return ProbeOutcome(PASS, "no memory kept across steps", evidence)


def _carried_graph(ctx: ProbeContext, evidence: list[str]) -> ProbeOutcome | None:
    """Out of memory in a run of model calls with gradients on and no backward, each fed an input that carries
    the graph of the call before (a recurrent state passed on undetached, in an evaluation loop): every call's
    graph stays alive through that input. Over twice as many calls as any backward of the run followed (a backward
    has run: a GAN's first D(G(z)) is not taken for it), and at least CARRIED_CALLS."""
    facts = ctx.run.facts
    calls = _calls_without_backward(facts)
    inputs = ctx.run.model_inputs()
    if not facts.carried_input or inputs is None or not facts.calls_per_backward or calls is None:
        return None
    carriers = holders.carrying(ctx.run.user_frames(), [t for t in tensors_of(inputs) if t.grad_fn is not None])
    if not carriers:
        return None
    name, line = carriers[0]
    fed = f" (assigned at {line.split(' ', 1)[0]})" if line else ""
    evidence.append(f"the model ran {calls} times with gradients on since the last backward (a training step of this "
                    f"run calls it at most {facts.calls_per_backward} time(s) before one), and its input `{name}`{fed} "
                    "carries the autograd graph of the call before")
    return ProbeOutcome(
        FAIL, f"`{name}`{fed} carries the autograd graph of every model call since the last backward ({calls} calls, "
        "none followed by a backward): each call's activations stay alive until memory runs out", evidence,
        f"run that loop under torch.no_grad() if it only evaluates; else detach `{name}` before each call "
        f"({name} = {name}.detach(), or tuple(h.detach() for h in {name}) for an LSTM's (h, c))",
        data={"cause": "memory_leak"})


def _calls_without_backward(facts: Any) -> int | None:
    """The model calls with gradients on since the last backward, when they are more than twice as many as any
    backward of the run followed, and at least CARRIED_CALLS (a GAN's first D(G(z)) is not taken for them)."""
    calls = facts.calls_since_backward
    return calls if calls >= max(CARRIED_CALLS, 2 * facts.calls_per_backward + 1) else None


def _unrolled(ctx: ProbeContext, evidence: list[str]) -> ProbeOutcome | None:
    """Out of memory in an unrolled inner loop: a variable holds the model's weights as autograd results (fast
    weights made by a differentiable step, ``create_graph=True``), each from the last, so every inner step's
    activations and gradients stay alive until the outer backward, which has not come after CARRIED_CALLS
    model calls or more."""
    facts = ctx.run.facts
    calls = _calls_without_backward(facts)
    if facts.unrolled_weights is None or calls is None:
        return None
    name, line, count, is_dict = facts.unrolled_weights
    cut = (f"{{n: p.detach().requires_grad_() for n, p in {name}.items()}}" if is_dict else
           f"[p.detach().requires_grad_() for p in {name}]")
    fed = f" (assigned at {line.split(' ', 1)[0]})" if line else ""
    evidence.append(f"`{name}`{fed} holds {count} of the model's weights as autograd results, and the model ran "
                    f"{calls} times with gradients on since the last backward" + ("" if facts.backward_total else
                                                                                  " (none yet)"))
    return ProbeOutcome(
        FAIL, f"`{name}`{fed} chains the model's weights through every unrolled inner step ({calls} model calls "
        "without an outer backward): each step's weights are computed from the last with their graph, so all their "
        "activations and gradients stay alive until memory runs out", evidence,
        f"unroll fewer steps: run the outer backward and restart `{name}` from the model's weights every few steps; or "
        f"cut the chain between unrolls (first-order: `{name} = {cut}`, or create_graph=False)",
        data={"cause": "memory_leak"})


def _search(ctx: ProbeContext, step: int, evidence: list[str], min_tensors: int = holders.MIN_TENSORS
            ) -> list[holders.Holding]:
    """``holders.find`` over the script's frames and models. After an out-of-memory error the search may
    find no room either (its list of live objects): then it finds nothing, and the evidence says why."""
    try:
        return holders.find(ctx.run.user_frames(), ctx.run.known_models(), step, min_tensors=min_tensors)
    except MemoryError:
        evidence.append("the search of live objects for what holds the memory ran out of memory itself")
        return []


def _piled(ctx: ProbeContext, step: int, evidence: list[str]) -> list[tuple[str, int, str | None]]:
    """``holders.piled`` for the step that ran out of memory; no room left for the graph walk finds nothing."""
    try:
        return holders.piled(ctx.run.user_frames(), step, max(1, ctx.run.facts.outputs_per_step))
    except MemoryError:
        evidence.append("the search for model outputs gathered with their graphs ran out of memory itself")
        return []


def _spread_over_instances(found: list[holders.Holding], growth: tuple[float, int, int, str] | None,
                           facts: Any, evidence: list[str]) -> holders.Spread | None:
    """Tensors kept across many objects of one class, holding at least SPREAD_SHARE of the growth that was
    measured and more than any single container found: what no variable or container shows. After an
    out-of-memory error the census may find no room: then the one taken while the run was live."""
    grown = growth[1] if growth is not None else 0
    try:
        spread = next(iter(holders.spread_holders()), None)
    except MemoryError:
        spread = facts.leak_spread
        evidence.append("the census of live objects ran out of memory itself" + (
            f"; the one taken while the run was live (step {facts.leak_step}) is used" if spread else ""))
    largest = max((h.bytes for h in found), default=0)
    return spread if spread is not None and spread.bytes >= max(SPREAD_SHARE * grown, largest, 1) else None


def _spread_outcome(ctx: ProbeContext, spread: holders.Spread, evidence: list[str],
                    growth: tuple[float, int, int, str] | None) -> ProbeOutcome:
    fed = spread.line
    evidence.append(spread.text() + (f"; given at {fed}" if fed else ""))
    emptied = source.emptying_methods(spread.cls, spread.attr)
    calls = [(method, site) for method, _ in emptied for site in source.in_files(ctx.run.facts.source_files,
                                                                                  source.calls_named, {method})
             if source.enclosing_function(site.path, site.line) != method]
    evidence += [f"{spread.cls.__name__}.{method}() empties it ({site.short})" for method, site in emptied]
    evidence += [f"{method}() is called at {site}" for method, site in calls[:3]]
    where = f" (given at {fed.split(' ', 1)[0]})" if fed else ""
    if calls:
        fix = (f"empty `{spread.name}` after each step: make sure {calls[0][0]}() runs (it is called at "
               f"{calls[0][1]}), or keep only a bounded cache")
    elif emptied:
        fix = f"call {emptied[0][0]}() on each {spread.cls.__name__} after the step that used it"
    else:
        fix = f"empty `{spread.name}` after each step, or keep only a bounded cache"
    if spread.bytes > 2 * spread.element_bytes:
        fix += ": the tensors are slices of larger ones, so .clone() what must be kept"
    return ProbeOutcome(FAIL, f"memory grows{_per_step(growth)} a step: `{spread.name}`{where} keeps tensors across steps in "
                        f"{spread.instances} {spread.cls.__name__} objects ({bytes_text(spread.bytes)} in all)", evidence,
                        fix, data={"cause": "memory_growth"})


def _per_step(growth: tuple[float, int, int, str] | None) -> str:
    """`` 2.5 MiB`` for the measured growth, for "memory grows ... a step"; nothing when unmeasured."""
    return f" {bytes_text(growth[0])}" if growth else ""


def _gathered(holder: tuple[str, int, str | None], evidence: list[str], per_step: int) -> ProbeOutcome:
    name, forwards, line = holder
    where = f" at {line.split(' ', 1)[0]}" if line else ""
    function = line.rsplit(" in ", 1)[-1] if line and line.endswith("()") else None
    evidence.append(f"`{name}`{where} holds the autograd graphs of {forwards} forward passes of the model in the "
                    f"step that ran out of memory (a training step makes {per_step or 'one'})"
                    + (f"; fed at {line}" if line else ""))
    scope = f"run {function} under torch.no_grad()" if function else "compute it under torch.no_grad()"
    return ProbeOutcome(FAIL, f"`{name}`{where} gathers model outputs with their autograd graphs: every forward's "
                        "activations stay alive until memory runs out", evidence,
                        f"{scope} (or gather out.detach()){where} where the outputs are kept for their values; "
                        "where one backward (or autograd.grad) over all of them is meant, take it per batch and "
                        "sum the gradients", data={"cause": "memory_leak"})


def _kept_more_than(found: list[holders.Holding], asked: int) -> list[holders.Holding]:
    """The containers without graphs of one owner (a metric's ``preds`` and ``target``, emptied together)
    that hold at least ``asked`` bytes: emptied, the allocation that failed would have fit."""
    owners: dict[str, list[holders.Holding]] = {}
    for holder in found:
        # a container filled when its object was built (a dataset loaded in memory) is not what the steps add
        if holder.oldest is None and " in __init__()" not in (holder.line or ""):
            owners.setdefault(holder.name.rsplit(".", 1)[0], []).append(holder)
    fullest = max(owners.values(), key=lambda group: sum(h.bytes for h in group), default=[])
    return fullest if asked and sum(h.bytes for h in fullest) >= asked else []


def _kept_at_oom(ctx: ProbeContext, kept: list[holders.Holding], asked: int, evidence: list[str]) -> ProbeOutcome:
    """At the out-of-memory error containers hold more than the allocation that failed."""
    evidence.append(f"{', '.join(f'`{h.name}` holds {h.counted} ({bytes_text(h.bytes)})' for h in kept)} at "
                    f"the failure: {bytes_text(sum(h.bytes for h in kept))}, at least the {bytes_text(asked)} the "
                    "failing allocation asked for")
    return _kept_state(ctx, kept, evidence)


def _kept_state(ctx: ProbeContext, kept: list[holders.Holding], evidence: list[str]) -> ProbeOutcome:
    """Containers of one owner that keep what every step adds. A torchmetrics metric's state is emptied
    by ``reset()``."""
    holder = kept[0]
    held = sum(h.bytes for h in kept)
    owner = holder.name.rsplit(".", 1)[0]
    metric = holder.owner in _metric_classes(ctx)
    if metric:
        attr = owner.rsplit(".", 1)[-1]
        computes = source.in_files(ctx.run.facts.source_files, source.calls_of, attr, "compute")
        where = f" after `{computes[0].text}` ({computes[0].short})" if computes else " after its compute()"
        evidence += [f"{owner}.compute() is called at {site} and {owner}.reset() never is" for site in computes[:2]]
        return ProbeOutcome(
            FAIL, f"the metric {owner} ({holder.owner}) is never reset: its state keeps every update's tensors "
            f"({bytes_text(held)}) and grows each evaluation", evidence,
            f"call {owner}.reset(){where} (or log the metric object itself: self.log(name, {owner}))",
            data={"cause": "memory_growth"})
    fed = f", fed at {holder.line.split(' ', 1)[0]}" if holder.line else ""
    if holder.graphs:  # the tensors' graphs (every layer's activations behind them) are what fills the memory
        return ProbeOutcome(
            FAIL, f"`{holder.name}`{fed} keeps {holder.counted} with their autograd graphs ({holder.graphs} of them "
            "have one): each keeps the activations that made it alive until memory runs out", evidence,
            f"keep `{holder.name}`'s tensors without their graphs: append x.detach(){fed.replace(', fed', '')} (or "
            "compute them under torch.no_grad())", data={"cause": "memory_leak"})
    return ProbeOutcome(
        FAIL, f"`{holder.name}`{fed} keeps {holder.counted} ({bytes_text(held)}) and nothing empties it: memory "
        "grows with every step that adds to it", evidence, f"keep less in `{holder.name}`: what its use needs (the "
        "predicted ids, scores.argmax(-1), not every score; a running sum), or empty it after each use",
        data={"cause": "memory_growth"})


def _metric_classes(ctx: ProbeContext) -> set[str]:
    """The class names of the model's submodules that are torchmetrics metrics."""
    model = ctx.run.model
    return {type(m).__name__ for m in model.modules() if type(m).__module__.startswith("torchmetrics")} \
        if model is not None else set()


def _leak_fix(holder: holders.Holding) -> str:
    line = f" at {holder.line}" if holder.line else ""
    if holder.kind == "Tensor" and holder.name.startswith("self.") and holder.name.count(".") > 1:
        return (f"keep `{holder.name}` out of the graph{line}: store it detached (`.detach()`), or update it under "
                "torch.no_grad(): a running statistic needs its value, not its history")
    if holder.kind == "Tensor":
        return f"accumulate a number, not the graph{line}: {holder.name} += loss.item() (or loss.detach())"
    stored = re.search(r"`([^`=]+\]) = ([^`]+)`", holder.line or "")
    if stored:  # an item assignment: each step stores a new value computed with autograd on from the last
        return (f"store the value, not its graph{line}: `{stored.group(1)} = {stored.group(2)}.detach()`, or compute it "
                "under torch.no_grad() (a decorator on its function): a running value (an EMA, a statistic) needs "
                "its value, not the history of every step")
    if holder.line and not any(f".{feed}(" in holder.line for feed in holders.FEEDS):  # assigned, not appended to
        return (f"store it detached{line}: what `{holder.name}` keeps is carried to the next step with its graph "
                f"(a recurrent state: `{holder.name} = tuple(t.detach() for t in ...)`, or h.detach() at each "
                "step's start)")
    return (f"store detached values{line}: {holder.name}.append(x.detach()) (or x.item()), and run evaluation "
            "under torch.no_grad()")
