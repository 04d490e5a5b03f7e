"""Gradient norms of an optimizer's parameters, fused and without a host sync.

The same grouping as ``torch.nn.utils.clip_grad_norm_``: one ``_foreach_norm`` per (device, dtype)
group. The results stay tensors on their device; the agent's writer thread reads them later.
A non-finite total norm is the NaN/Inf flag for the gradients: no separate ``isfinite`` pass.
"""

from __future__ import annotations

from collections import defaultdict

import torch


def parameters_with_grad(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    return [
        p for group in optimizer.param_groups for p in group["params"]
        if p.grad is not None and not p.grad.is_sparse
    ]


def per_parameter_norms(params: list[torch.Tensor]) -> torch.Tensor | None:
    """The 2-norm of each parameter's gradient, in order, as one float32 tensor on the first device."""
    if not params:
        return None
    groups: dict[tuple[torch.device, torch.dtype], list[int]] = defaultdict(list)
    for index, p in enumerate(params):
        groups[(p.grad.device, p.grad.dtype)].append(index)
    first_device = params[0].grad.device
    if len(groups) == 1:
        with torch.no_grad():
            return torch.stack(torch._foreach_norm([p.grad for p in params])).float()
    norms = torch.empty(len(params), dtype=torch.float32, device=first_device)
    with torch.no_grad():
        for indices in groups.values():
            values = torch._foreach_norm([params[i].grad for i in indices])
            stacked = torch.stack(values).to(device=first_device, dtype=torch.float32)
            norms[torch.tensor(indices, device=first_device)] = stacked
    return norms


def total_norm(norms: torch.Tensor) -> torch.Tensor:
    return torch.linalg.vector_norm(norms)
