"""The batch inspector's figures: every tensor of a captured batch, summarised for the screen.

Runs on the training thread while paused. Figures are computed in float64 on a host copy, over the
finite values only, with NaN and Inf counted and located apart.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

from tuidebug.batches import tensors_in
from tuidebug.protocol import BatchReport

MAX_LOCATIONS = 8
EXAMPLE_VALUES = 16
MAX_CLASSES = 64
IMAGE_ROWS, IMAGE_COLUMNS = 16, 32


def summarise(path: str, tensor: torch.Tensor, example: int) -> dict[str, Any]:
    t = tensor.detach().to("cpu")
    info: dict[str, Any] = {
        "path": path, "shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", ""),
        "device": str(tensor.device), "numel": t.numel(),
    }
    if t.numel() == 0 or t.dtype == torch.bool or t.is_complex():
        return info
    values = t.to(torch.float64)
    nan, inf = torch.isnan(values), torch.isinf(values)
    info["nan"], info["inf"] = int(nan.sum()), int(inf.sum())
    info["nan_at"] = _locations(nan)
    info["inf_at"] = _locations(inf)
    finite = values[~(nan | inf)]
    if finite.numel():
        info.update(min=float(finite.min()), max=float(finite.max()), mean=float(finite.mean()),
                    std=float(finite.std()) if finite.numel() > 1 else 0.0)
    if t.dim() > 0 and t.shape[0] > 0:
        row = values[min(example, t.shape[0] - 1)].flatten()
        info["example"] = row[:EXAMPLE_VALUES].tolist()
    if not t.is_floating_point() and t.dim() <= 1:
        info["labels"] = _label_counts(t)
    image = _image(values, example)
    if image is not None:
        info["image"] = image
    return info


def _locations(mask: torch.Tensor) -> list[list[int]]:
    return mask.nonzero()[:MAX_LOCATIONS].tolist()


def _label_counts(t: torch.Tensor) -> dict[str, int] | None:
    classes, counts = torch.unique(t.flatten(), return_counts=True)
    if classes.numel() > MAX_CLASSES:
        return None
    return {str(int(c)): int(n) for c, n in zip(classes, counts)}


def _image(values: torch.Tensor, example: int) -> list[list[float]] | None:
    """One example as a small grey image in [0, 1], if the tensor looks like images (N,C,H,W) or (N,H,W)."""
    if values.dim() == 4 and values.shape[1] in (1, 3):
        picture = values[min(example, values.shape[0] - 1)].mean(dim=0)
    elif values.dim() == 3 and min(values.shape[1:]) >= 8:
        picture = values[min(example, values.shape[0] - 1)]
    else:
        return None
    picture = torch.nan_to_num(picture, nan=0.0, posinf=0.0, neginf=0.0)
    rows, columns = min(IMAGE_ROWS, picture.shape[0]), min(IMAGE_COLUMNS, picture.shape[1])
    small = torch.nn.functional.adaptive_avg_pool2d(picture[None, None], (rows, columns))[0, 0]
    low, high = float(small.min()), float(small.max())
    scaled = (small - low) / (high - low) if high > low else torch.zeros_like(small)
    return [[round(v, 3) for v in row] for row in scaled.tolist()]


def batch_report(captured: Iterable[Any], step: int | None, example: int = 0) -> BatchReport:
    """The report for the captured batch of ``step`` (the latest when None)."""
    batches = list(captured)
    available = [c.step for c in batches]
    if not batches:
        return BatchReport(step=None, available=[], note="no batch captured yet: the script has not used "
                                                         "a DataLoader (so far)")
    chosen = next((c for c in batches if c.step == step), batches[-1])
    note = "" if step is None or chosen.step == step else f"step {step} is no longer kept; showing {chosen.step}"
    tensors = [summarise(path, t, example) for path, t in tensors_in(chosen.batch)]
    return BatchReport(step=chosen.step, available=available, tensors=tensors, note=note)
