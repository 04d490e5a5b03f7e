"""Turn a session's series into the few points a terminal chart can show: plain Python, no Textual.

plotext costs about 67 ms for 2,000 points and 17 ms for 200, so every chart plots at most about
two points per column of its width, whatever the length of the run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from tuidebug.session import Series

Points = list[tuple[float, float]]


def whole_run(series: Series) -> Points:
    """Every point of the run: exact while the recent window still holds it all, else the coarse buckets.

    Call with the session's lock held: the reader thread appends to these deques.
    """
    recent = series.recent
    if recent.maxlen is None or len(recent) < recent.maxlen:
        return list(recent)
    return list(series.coarse.points)


def finite(points: Points, positive: bool = False) -> Points:
    """Drop points a chart cannot place: NaN and Inf, and with ``positive`` (log scale) y <= 0."""
    return [(x, y) for x, y in points if math.isfinite(y) and (y > 0 or not positive)]


def downsample(points: Points, limit: int) -> Points:
    """At most ``limit`` points: consecutive buckets averaged, the last point kept exactly."""
    if limit < 1:
        return []
    if len(points) <= limit:
        return points
    size = math.ceil(len(points) / limit)
    buckets = [points[i : i + size] for i in range(0, len(points), size)]
    means = [(b[0][0], sum(y for _, y in b) / len(b)) for b in buckets]
    means[-1] = points[-1]
    return means


def smooth(points: Points, span: int | None = None) -> Points:
    """An exponential moving average; by default its span is a twentieth of the points shown."""
    if not points:
        return []
    span = span or max(2, len(points) // 20)
    alpha = 2 / (span + 1)
    average = points[0][1]
    out = []
    for x, y in points:
        average += alpha * (y - average)
        out.append((x, average))
    return out


def columns(points: Points) -> tuple[list[float], list[float]]:
    """The x and y lists plotext takes."""
    return [x for x, _ in points], [y for _, y in points]


def shift(points: Points, origin: float) -> Points:
    """x measured from ``origin`` (memory readings carry wall-clock times)."""
    return [(x - origin, y) for x, y in points]


def scale(points: Points, divisor: float) -> Points:
    return [(x, y / divisor) for x, y in points]


def byte_unit(values: Sequence[float]) -> tuple[str, float]:
    """The unit that keeps the largest of ``values`` readable on an axis: (name, bytes per unit)."""
    top = max(values, default=0)
    for name, size in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if top >= size:
            return name, float(size)
    return "B", 1.0


def linear_ticks(low: float, high: float, count: int) -> list[float]:
    """``count`` evenly spaced values from ``low`` to ``high`` (one when they are equal)."""
    if high <= low or count < 2:
        return [low]
    step = (high - low) / (count - 1)
    return [low + i * step for i in range(count)]


def log_ticks(low: float, high: float, count: int) -> list[float]:
    """Powers of ten spanning ``low`` to ``high`` (both positive), every k-th so at most ``count``."""
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    stride = max(1, math.ceil((last - first + 1) / max(count, 1)))
    return [10.0**k for k in range(first, last + 1, stride)]
