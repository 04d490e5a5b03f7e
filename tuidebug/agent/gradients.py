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

# The share of the step time the gradient norms may take once break-on-NaN is off. They are real work
# over every gradient value plus a few microseconds per tensor on a CPU: in the loop, the bench's MLP
# (6 tensors, 270k values, 2.5 ms steps) spends about 100 us on them, a model of 10,000 tensors (475 ms
# steps) about 30 ms, 4-6% of either. At 2% they cost no more than the module hooks do (0-4% measured),
# and 10,000 tensors run at 1.07x (make bench, scale table) against 1.19x with the norms at every step.
NORM_BUDGET = 0.02
MAX_NORM_EVERY = 64  # take them at least this often: the gradient pane stays alive on tiny steps
COST_SMOOTHING = 0.1  # weight of the newest measurement in the running cost and step time


class ParameterLists:
    """Each optimizer's parameters as one flat list, rebuilt only when its groups change."""

    def __init__(self) -> None:
        self._lists: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def with_grad(self, optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
        """The parameters whose gradient exists and is dense, in the optimizer's order."""
        key = tuple((id(group["params"]), len(group["params"])) for group in optimizer.param_groups)
        cached = self._lists.get(optimizer)
        if cached is None or cached[0] != key:
            cached = (key, [p for group in optimizer.param_groups for p in group["params"]])
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
        norms = torch._foreach_norm([p.grad for p in params])
        try:
            return torch.stack(norms)
        except RuntimeError:  # the gradients span devices (a model split across GPUs): gathered on one
            return torch.stack([norm.to(norms[0].device, non_blocking=True) for norm in norms])


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
