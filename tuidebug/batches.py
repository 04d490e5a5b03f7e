"""Batches of any structure: the tensors in tuples, lists, dicts, named tuples and dataclasses.

What a DataLoader yields (or a model is called with) is walked the same way by the agent (batch
sizes, captures), the probes (slices, cleaned copies) and the inspector (per-tensor figures).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import torch

MAX_DEPTH = 6


def map_tensors(value: Any, fn: Callable[[torch.Tensor], Any], depth: int = 0) -> Any:
    """``value`` with ``fn`` applied to every tensor, through tuples, lists, dicts and dataclasses."""
    if isinstance(value, torch.Tensor):
        return fn(value)
    if depth > MAX_DEPTH:
        return value
    if isinstance(value, dict):
        return type(value)({k: map_tensors(v, fn, depth + 1) for k, v in value.items()})
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(map_tensors(v, fn, depth + 1) for v in value))
    if isinstance(value, (list, tuple)):
        return type(value)(map_tensors(v, fn, depth + 1) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: map_tensors(getattr(value, f.name), fn, depth + 1) for f in dataclasses.fields(value)}
        return dataclasses.replace(value, **changes)
    return value


def tensors_in(value: Any, path: str = "batch") -> Iterator[tuple[str, torch.Tensor]]:
    """Every tensor in a batch of any nesting, with a path like ``batch['input_ids']``."""
    found: list[tuple[str | None, torch.Tensor]] = []
    _collect(value, path, found, 0)
    return iter(found)


def holds_nonfinite(tensor: torch.Tensor) -> bool:
    """A dense floating-point or complex tensor with a NaN or an infinity among its values (a sparse one is not
    read: ``isfinite`` takes no sparse tensor)."""
    return tensor.layout == torch.strided and (tensor.is_floating_point() or tensor.is_complex()) \
        and not bool(torch.isfinite(tensor.detach()).all())


def tensors_of(value: Any) -> list[torch.Tensor]:
    """The tensors ``tensors_in`` finds, in the same order, without their paths: the per-step hooks walk every
    batch and model call, and a path string per item costs more than the walk."""
    found: list[tuple[str | None, torch.Tensor]] = []
    _collect(value, None, found, 0)
    return [tensor for _, tensor in found]


def _collect(value: Any, path: str | None, found: list[tuple[str | None, torch.Tensor]], depth: int) -> None:
    """The walk of both: (path, tensor) pairs into ``found``; no path is built where ``path`` is None."""
    if isinstance(value, torch.Tensor):
        found.append((path, value))
    elif depth > MAX_DEPTH:
        return
    elif isinstance(value, dict):
        for key, item in value.items():
            _collect(item, None if path is None else f"{path}[{key!r}]", found, depth + 1)
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _collect(item, None if path is None else f"{path}[{index}]", found, depth + 1)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            _collect(getattr(value, f.name), None if path is None else f"{path}.{f.name}", found, depth + 1)


def tensor_at(batch: Any, path: str) -> torch.Tensor | None:
    """The tensor at ``path`` (as ``tensors_in`` names it) in a batch of the same structure."""
    return next((tensor for found, tensor in tensors_in(batch) if found == path), None)


def batch_size_of(batch: Any) -> int | None:
    """The leading dimension of the first tensor in a batch of any nesting."""
    return first_dim(tensors_of(batch))


def first_dim(tensors: list[torch.Tensor]) -> int | None:
    """The leading dimension of the first of ``tensors`` that has one."""
    for tensor in tensors:
        if tensor.dim() > 0:
            return int(tensor.shape[0])
    return None


def cut_whole(batch: Any, size: int | None) -> bool:
    """Every tensor of the batch has ``size`` rows first, so that its first rows are a batch of their own.
    A batch that also holds other tensors (pairs of row indices, a graph's edges, a count) ties them to
    its rows in ways a cut would break."""
    return size is not None and all(t.dim() > 0 and t.shape[0] == size for t in tensors_of(batch))


def slice_batch(batch: Any, count: int, size: int | None) -> Any:
    """The first ``count`` examples: every tensor whose leading dimension is the batch size is cut."""
    if size is None:
        return batch
    return map_tensors(batch, lambda t: t[:count].clone() if t.dim() > 0 and t.shape[0] == size else t)
