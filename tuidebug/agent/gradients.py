"""Gradient norms of an optimizer's parameters, at a cost that stays a small share of the step.

Per step: one ``torch._foreach_norm`` over the gradients (fused on a GPU; a loop in C++ on a CPU)
and one ``torch.stack`` of the results (gathered on one device when a model spans several), so that
reading them is one host transfer, not one per tensor. A non-finite total is the NaN/Inf flag for the gradients: no separate
``isfinite`` pass. The list of an optimizer's parameters is kept between steps.

On a CPU each norm costs a few microseconds per tensor: a model of 10,000 tensors would spend 6% of
its step on them. ``NormSampler`` measures what they cost and, beyond NORM_BUDGET of the step, has
them taken every k-th step only, once break-on-NaN is off: while it is armed they are its check, at
every step (a NaN gradient is caught before the optimizer applies it, not a step later).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Iterable

import torch

from tuidebug.probe_api import optimizer_params

# The share of the step time the gradient norms may take once break-on-NaN is off. They are real work
# over every gradient value plus a few microseconds per tensor on a CPU: in the loop, the bench's MLP
# (6 tensors, 270k values, 2.5 ms steps) spends about 100 us on them, a model of 10,000 tensors (475 ms
# steps) about 30 ms, 4-6% of either. At 2% they cost no more than the module hooks do (0-4% measured),
# and 10,000 tensors run at 1.07x (make bench, scale table) against 1.19x with the norms at every step.
NORM_BUDGET = 0.02
MAX_NORM_EVERY = 64  # take them at least this often: the gradient pane stays alive on tiny steps
COST_SMOOTHING = 0.1  # weight of the newest measurement in the running cost and step time
# On a CPU a gradient under SMALL_GRADIENT values is normed as part of a flattened chunk: copying 4,096
# values costs about what one norm call's fixed cost does (1.5-2.5 us), so smaller ones are cheaper
# copied. A chunk holds up to FLAT_CHUNK values (8 MiB in float64, freed at once), whatever the model.
# Fewer than MIN_FLATTENED small ones are normed one by one too: the few ops of a chunk cost more.
SMALL_GRADIENT = 4096
MIN_FLATTENED = 32
FLAT_CHUNK = 1 << 20
KEPT_PLANS = 8


class ParameterLists:
    """Each optimizer's parameters as one flat list, rebuilt only when its groups change."""

    def __init__(self) -> None:
        self._lists: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def with_grad(self, optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
        """The parameters whose gradient exists and is dense, in the optimizer's order."""
        key = tuple((id(group["params"]), len(group["params"])) for group in optimizer.param_groups)
        cached = self._lists.get(optimizer)
        if cached is None or cached[0] != key:
            cached = (key, optimizer_params(optimizer))
            self._lists[optimizer] = cached
        return with_dense_grad(cached[1])


def with_dense_grad(params: Iterable[torch.Tensor]) -> list[torch.Tensor]:
    """The parameters whose gradient exists and is dense (``_foreach_norm`` takes no sparse one), in order."""
    return [p for p in params if (grad := p.grad) is not None and not grad.is_sparse]


def stacked_norms(params: list[torch.Tensor]) -> torch.Tensor | None:
    """The 2-norm of each parameter's gradient, in order, as one 1-D tensor."""
    if not params:
        return None
    with torch.no_grad():
        if len(params) >= MIN_FLATTENED and params[0].grad.device.type == "cpu":
            try:
                norms = _cpu_plan(params).norms(params)
                return norms if norms is not None else _cpu_plan(params, fresh=True).norms(params)
            except RuntimeError:  # some on another device (a model split between the CPU and a GPU)
                pass
        norms = torch._foreach_norm([p.grad for p in params])
        try:
            return torch.stack(norms)
        except RuntimeError:  # the gradients span devices (a model split across GPUs): gathered on one
            return torch.stack([norm.to(norms[0].device, non_blocking=True) for norm in norms])


class _CpuNormPlan:
    """How one list of CPU gradients is normed: the large ones one by one (``_foreach_norm``), the small
    ones flattened into chunks and summed per tensor (one ``index_add_`` a chunk). A norm costs 1.5-2.5 us
    a tensor on a CPU whatever its size: 25-30 ms a step for a model of 10,000 small tensors, 12 ms this way.
    The squares are summed in float64: no overflow or underflow a float32 norm would not have."""

    def __init__(self, params: list[torch.Tensor]) -> None:
        sizes = [p.numel() for p in params]
        small = [n < SMALL_GRADIENT and not p.is_complex() for p, n in zip(params, sizes)]
        flat = [i for i, is_small in enumerate(small) if is_small]
        if len(flat) < MIN_FLATTENED:
            flat, small = [], [False] * len(params)
        self.large = [i for i, is_small in enumerate(small) if not is_small]
        self.large_at = torch.tensor(self.large, dtype=torch.long)
        self.chunks: list[tuple[list[int], torch.Tensor, torch.Tensor]] = []  # (positions, their index, each value's)
        while flat:
            taken, total = 0, 0
            while taken < len(flat) and (taken == 0 or total + sizes[flat[taken]] <= FLAT_CHUNK):
                total += sizes[flat[taken]]
                taken += 1
            positions, flat = flat[:taken], flat[taken:]
            lengths = torch.tensor([sizes[i] for i in positions])
            owner = torch.repeat_interleave(torch.arange(len(positions)), lengths)
            self.chunks.append((positions, torch.tensor(positions, dtype=torch.long), owner))

    def norms(self, params: list[torch.Tensor]) -> torch.Tensor | None:
        """The norms, or None if the list is not the one planned (an id reused by a new parameter)."""
        grads = [p.grad for p in params]
        if not self.chunks:
            return torch.stack(torch._foreach_norm(grads))
        out = torch.empty(len(grads), dtype=torch.float64)
        if self.large:
            out[self.large_at] = torch.stack(torch._foreach_norm([grads[i] for i in self.large])).double()
        for positions, at, owner in self.chunks:
            values = torch._utils._flatten_dense_tensors([grads[i] for i in positions]).double()
            if values.numel() != owner.numel():
                return None
            sums = torch.zeros(len(positions), dtype=torch.float64).index_add_(0, owner, values.square_())
            out[at] = sums.sqrt_()
        return out


_plans: dict[tuple[int, ...], _CpuNormPlan] = {}


def _cpu_plan(params: list[torch.Tensor], fresh: bool = False) -> _CpuNormPlan:
    """The plan for this list of parameters (kept for the few lists a run norms: each optimizer's, the model's)."""
    key = tuple(map(id, params))
    plan = _plans.get(key)
    if plan is None or fresh:
        if len(_plans) >= KEPT_PLANS:
            _plans.pop(next(iter(_plans)))
        plan = _plans[key] = _CpuNormPlan(params)
    return plan


def values_of(items: list[torch.Tensor | float]) -> list[float]:
    """The values of numbers and of 0-dim and 1-D tensors, one host read per tensor."""
    return [value for item in items
            for value in (item.reshape(-1).tolist() if isinstance(item, torch.Tensor) else (item,))]


def blocks_host(tensor: torch.Tensor) -> bool:
    """Reading this tensor's value waits for its device to finish the queued work (a device sync)."""
    return tensor.device.type != "cpu"


def total_of(values: list[float]) -> float:
    return math.sqrt(sum(v * v for v in values))


class NormSampler:
    """How often to take the gradient norms: every step while they cost under NORM_BUDGET of it, else
    every k-th step, k from their running cost over the running step time."""

    def __init__(self) -> None:
        self.every = 1
        self._cost: float | None = None
        self._step: float | None = None

    def due(self, step: int) -> bool:
        return self.every == 1 or step % self.every == 0

    def measured(self, seconds: float) -> None:
        """What taking (and checking) the norms cost this step."""
        self._cost = seconds if self._cost is None else self._cost + COST_SMOOTHING * (seconds - self._cost)

    def step_took(self, seconds: float | None) -> None:
        if seconds is None or seconds <= 0 or self._cost is None:
            return
        self._step = seconds if self._step is None else self._step + COST_SMOOTHING * (seconds - self._step)
        self.every = max(1, min(MAX_NORM_EVERY, math.ceil(self._cost / (NORM_BUDGET * self._step))))
