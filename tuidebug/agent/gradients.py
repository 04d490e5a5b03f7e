"""Gradient norms of an optimizer's parameters: one fused op on the training thread, no host sync.

``torch._foreach_norm`` gives every parameter's gradient norm in one call (falling back to a loop
by itself when the gradients span devices or dtypes). The results stay tensors on their devices;
the agent's writer thread reads them and sums the squares later. A non-finite total is the NaN/Inf
flag for the gradients: no separate ``isfinite`` pass over them.
"""

from __future__ import annotations

import math

import torch


def parameters_with_grad(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    return [
        p for group in optimizer.param_groups for p in group["params"]
        if p.grad is not None and not p.grad.is_sparse
    ]


def per_parameter_norms(params: list[torch.Tensor]) -> list[torch.Tensor]:
    """The 2-norm of each parameter's gradient, in order, as 0-dim tensors on their devices."""
    if not params:
        return []
    with torch.no_grad():
        return list(torch._foreach_norm([p.grad for p in params]))


def total_of(values: list[float]) -> float:
    return math.sqrt(sum(v * v for v in values))


def total_norm_now(norms: list[torch.Tensor]) -> float:
    """The total norm as a number, at once (one host sync per device): for break-on-NaN only."""
    if all(norm.device.type == "cpu" for norm in norms):  # reading a CPU scalar costs less than an op
        return total_of([norm.item() for norm in norms])
    by_device: dict[torch.device, list[torch.Tensor]] = {}
    for norm in norms:
        by_device.setdefault(norm.device, []).append(norm)
    squares = [float(torch.linalg.vector_norm(torch.stack(group).float())) ** 2 for group in by_device.values()]
    return math.sqrt(sum(squares))
