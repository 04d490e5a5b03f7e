"""How figures are written, the same in the headless lines, the dashboard and the reports."""

from __future__ import annotations

import math


def number(value: float | None) -> str:
    """Four significant digits, plain for non-finite values, '-' for unknown."""
    if value is None:
        return "-"
    if not math.isfinite(value):
        return str(value)
    return f"{value:.4g}"


def bytes_text(value: int | float | None) -> str:
    if value is None:
        return "-"
    if abs(value) < 1024:
        return f"{value:.0f} B"
    for unit in ("KiB", "MiB"):
        value /= 1024
        if abs(value) < 1024:
            return f"{value:.1f} {unit}"
    return f"{value / 1024:.1f} GiB"


def seconds_text(value: float | None) -> str:
    if value is None:
        return "-"
    if value < 60:
        return f"{value:.1f}s"
    minutes, secs = divmod(int(value), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"
