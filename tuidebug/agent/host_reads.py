"""The values the agent reads from tensors, gathered into one transfer a step.

On a GPU every read of a tensor's value (``item``, ``tolist``, ``float``) waits for the device to finish
its queued work. The checks that look at values (a loss's input range, which gradients are all zero)
queue what they need here as small tensors; the step reads them once, together with its own
(the gradient norms and losses while break-on-NaN is armed), or, when nothing else is read, just
before the findings are evaluated. MAX_PENDING bounds what waits when neither comes (a script that
never steps an optimizer).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

MAX_PENDING = 64


class HostReads:
    def __init__(self) -> None:
        self._pending: list[tuple[list[torch.Tensor], Callable[[list[float]], None]]] = []

    def later(self, values: list[torch.Tensor], then: Callable[[list[float]], None]) -> None:
        """Read ``values`` (0-dim or 1-D tensors) at the next transfer and call ``then`` with their
        numbers, in order."""
        self._pending.append((values, then))
        if len(self._pending) >= MAX_PENDING:
            self.flush()

    def read_with(self, tensors: list[torch.Tensor]) -> list[float]:
        """The numbers of ``tensors`` (0-dim or 1-D), read in one transfer per device together with what
        is pending; the pending callbacks run before this returns."""
        pending, self._pending = self._pending, []
        queued = [tensor for values, _ in pending for tensor in values]
        numbers = read_all([*tensors, *queued])
        ours, rest = numbers[:_count(tensors)], numbers[_count(tensors):]
        for values, then in pending:
            size = _count(values)
            then(rest[:size])
            rest = rest[size:]
        return ours

    def flush(self) -> None:
        if self._pending:
            self.read_with([])


def _count(tensors: list[torch.Tensor]) -> int:
    return sum(tensor.numel() for tensor in tensors)


def read_all(tensors: list[torch.Tensor]) -> list[float]:
    """The numbers of 0-dim and 1-D tensors, in order: one host transfer per device among them."""
    if not tensors:
        return []
    if len(tensors) == 1 and tensors[0].dim() == 1:  # the usual step on a CPU: its norms alone
        return tensors[0].tolist()
    flat = [tensor.detach().reshape(-1).float() for tensor in tensors]  # float32: MPS has no float64
    devices = {tensor.device for tensor in flat}
    if len(devices) == 1:
        return torch.cat(flat).tolist()
    by_device = {device: torch.cat([t for t in flat if t.device == device]).tolist() for device in devices}
    taken = dict.fromkeys(devices, 0)
    numbers = []
    for tensor in flat:
        start = taken[tensor.device]
        numbers += by_device[tensor.device][start:start + tensor.numel()]
        taken[tensor.device] = start + tensor.numel()
    return numbers
