"""The batch inspector's figures: every tensor of a captured batch, summarised for the screen.

Runs on the training thread while paused. The figures are over the finite values only, with NaN and
Inf counted and located apart. They are accumulated chunk by chunk on the tensor's own device, in its
own dtype (float32 for half precision and integers): a batch of hundreds of MiB gets neither a whole
float64 copy nor a filtered one, only chunk-sized temporaries.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from tuidebug.batches import tensors_in
from tuidebug.protocol import BatchReport

if TYPE_CHECKING:
    from tuidebug.agent.core import Captured
    from tuidebug.agent.kept_batches import KeptBatches

MAX_LOCATIONS = 8
EXAMPLE_VALUES = 16
MAX_CLASSES = 64
IMAGE_ROWS, IMAGE_COLUMNS = 16, 32
# 16 MiB of float32 a chunk: its temporaries (a mask, a float32 copy of an integer chunk) stay small,
# and a 512 MiB batch is 32 chunks, so the Python work per chunk is noise next to the arithmetic.
CHUNK_ELEMENTS = 2**22
# Above this magnitude the squares of float32 values overflow in the variance: such a chunk is
# summarised in float64 (a chunk-sized copy).
FLOAT32_SAFE = 1e18


@dataclass
class Figures:
    """Min, max, count, mean and sum of squared deviations of the finite values seen so far; chunks
    are merged with the pairwise update of Chan, Golub and LeVeque (exact in exact arithmetic)."""

    count: int = 0
    mean: float = 0.0
    squares: float = 0.0
    low: float = math.inf
    high: float = -math.inf

    def add(self, values: torch.Tensor, low: float, high: float) -> None:
        """Fold in one chunk of finite values (any dtype but bool and complex), its min and max known.
        ``var`` and ``mean`` apart: ``var_mean`` takes several times as long on the CPU."""
        count = values.numel()
        if count == 0:
            return
        self.low, self.high = min(self.low, low), max(self.high, high)
        wide = torch.float64 if max(-low, high) > FLOAT32_SAFE else torch.float32
        exact = values if values.dtype in (torch.float64, wide) else values.to(wide)
        variance, mean = float(torch.var(exact, correction=0)), float(exact.mean())
        total = self.count + count
        delta = mean - self.mean
        self.squares += variance * count + delta * delta * self.count * count / total
        self.mean += delta * count / total
        self.count = total

    def as_info(self) -> dict[str, float]:
        if not self.count:
            return {}
        std = math.sqrt(self.squares / (self.count - 1)) if self.count > 1 else 0.0
        return {"min": self.low, "max": self.high, "mean": self.mean, "std": std}


def summarise(path: str, tensor: torch.Tensor, example: int) -> dict[str, Any]:
    t = tensor.detach()
    info: dict[str, Any] = {
        "path": path, "shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", ""),
        "device": str(tensor.device), "numel": t.numel(),
    }
    if t.numel() == 0 or t.dtype == torch.bool or t.is_complex() or t.layout != torch.strided:
        return info
    figures, nan_at, inf_at = Figures(), [], []
    info["nan"] = info["inf"] = 0
    for offset, chunk in _chunks(t):
        low, high = _bounds(chunk)  # a NaN makes both NaN, an Inf is one of them
        if not (math.isfinite(low) and math.isfinite(high)):
            chunk = _without_nonfinite(chunk, offset, t.shape, info, nan_at, inf_at)
            low, high = _bounds(chunk) if chunk.numel() else (low, high)
        figures.add(chunk, low, high)
    info["nan_at"], info["inf_at"] = nan_at, inf_at
    info.update(figures.as_info())
    if t.dim() > 0 and t.shape[0] > 0:
        row = t[min(example, t.shape[0] - 1)]
        info["example"] = _first_values(row, EXAMPLE_VALUES).to(torch.float64).tolist()
    if not t.is_floating_point() and t.dim() <= 1:
        info["labels"] = _label_counts(t)
    image = _image(t, example)
    if image is not None:
        info["image"] = image
    return info


def _chunks(t: torch.Tensor) -> Iterator[tuple[int, torch.Tensor]]:
    """(offset, flat values) of ``t`` in row-major order, about CHUNK_ELEMENTS at a time: views of a
    contiguous tensor, else copies of a few leading rows at a time."""
    if t.is_contiguous():
        flat = t.view(-1)
        for start in range(0, flat.numel(), CHUNK_ELEMENTS):
            yield start, flat[start:start + CHUNK_ELEMENTS]
        return
    per_row = t[0].numel()  # a non-contiguous tensor has at least one dimension
    rows = max(1, CHUNK_ELEMENTS // max(1, per_row))
    for first in range(0, t.shape[0], rows):
        yield first * per_row, t[first:first + rows].reshape(-1)


def _bounds(chunk: torch.Tensor) -> tuple[float, float]:
    low, high = torch.aminmax(chunk)
    return float(low), float(high)


def _without_nonfinite(chunk: torch.Tensor, offset: int, shape: torch.Size, info: dict[str, Any],
                       nan_at: list[list[int]], inf_at: list[list[int]]) -> torch.Tensor:
    """Count and locate the chunk's NaN and Inf into ``info`` and the location lists; its finite values."""
    nan, finite = torch.isnan(chunk), torch.isfinite(chunk)
    inf = ~(nan | finite)
    info["nan"] += int(nan.sum())
    info["inf"] += int(inf.sum())
    for mask, found in ((nan, nan_at), (inf, inf_at)):
        if len(found) < MAX_LOCATIONS:
            flat = mask.nonzero()[:MAX_LOCATIONS - len(found), 0].tolist()
            found.extend(_unravel(offset + index, shape) for index in flat)
    return chunk[finite]


def _unravel(index: int, shape: torch.Size) -> list[int]:
    """The row-major position ``index`` as one index per dimension."""
    position = []
    for size in reversed(shape):
        index, rest = divmod(index, size)
        position.append(rest)
    return position[::-1]


def _first_values(t: torch.Tensor, count: int) -> torch.Tensor:
    """The first ``count`` values of ``t`` in row-major order, copying only the leading rows they are in."""
    if t.dim() == 0 or t.is_contiguous():
        return t.reshape(-1)[:count]
    rows = -(-count // max(1, t[0].numel()))
    return t[:rows].reshape(-1)[:count]


def _label_counts(t: torch.Tensor) -> dict[str, int] | None:
    """Examples per class of an integer tensor, counted chunk by chunk; None past MAX_CLASSES classes."""
    counts: dict[int, int] = {}
    for _, chunk in _chunks(t):
        classes, found = torch.unique(chunk, return_counts=True)
        for label, number in zip(classes.tolist(), found.tolist()):
            counts[label] = counts.get(label, 0) + number
        if len(counts) > MAX_CLASSES:
            return None
    return {str(label): counts[label] for label in sorted(counts)}


def _image(t: torch.Tensor, example: int) -> list[list[float]] | None:
    """One example as a small grey image in [0, 1], if the tensor looks like images (N,C,H,W) or (N,H,W).
    Only that example is copied to float64."""
    if t.dim() == 4 and t.shape[1] in (1, 3):
        picture = t[min(example, t.shape[0] - 1)].to(torch.float64).mean(dim=0)
    elif t.dim() == 3 and min(t.shape[1:]) >= 8:
        picture = t[min(example, t.shape[0] - 1)].to(torch.float64)
    else:
        return None
    picture = torch.nan_to_num(picture, nan=0.0, posinf=0.0, neginf=0.0)
    rows, columns = min(IMAGE_ROWS, picture.shape[0]), min(IMAGE_COLUMNS, picture.shape[1])
    small = torch.nn.functional.adaptive_avg_pool2d(picture[None, None], (rows, columns))[0, 0]
    low, high = float(small.min()), float(small.max())
    scaled = (small - low) / (high - low) if high > low else torch.zeros_like(small)
    return [[round(v, 3) for v in row] for row in scaled.tolist()]


def batch_report(captured: KeptBatches[Captured], step: int | None, example: int = 0) -> BatchReport:
    """The report for the captured batch of ``step`` (the latest when None); its note says when the
    batch is no longer kept, and when older batches were let go for their byte budget."""
    batches = list(captured)
    available = [c.step for c in batches]
    if not batches:
        return BatchReport(step=None, available=[], note="no batch captured yet: the script has not used "
                                                         "a DataLoader (so far)")
    chosen = next((c for c in batches if c.step == step), batches[-1])
    gone = "" if step is None or chosen.step == step else f"step {step} is no longer kept; showing {chosen.step}"
    tensors = [summarise(path, t, example) for path, t in tensors_in(chosen.batch)]
    note = "; ".join(part for part in (gone, captured.not_kept) if part)
    return BatchReport(step=chosen.step, available=available, tensors=tensors, note=note)
