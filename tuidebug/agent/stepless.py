"""Loss values of a loop that trains without backward() or an optimizer the agent can see.

A hand-written backward that updates plain tensors under ``torch.no_grad()`` (makemore's), or a step
computed with ``torch.func.grad`` and applied by hand, never calls ``backward()`` nor ``optimizer.step()``:
the agent counts no step. Its loss calls are still seen. Where the values one line computes fall as clearly
as a healthy run's, the loop trains; where they do not, nothing is said (a loop that never updates stays
"no training step"); where they go non-finite, that is a NaN. The values are kept as tensors and read in one
transfer every READ_EVERY calls: an ordinary loop, whose first backward comes after a call or two, reads none.
"""

from __future__ import annotations

import collections
import math
import statistics

import torch

# Values kept per line (the latest): enough for the trend of a few thousand iterations.
KEPT = 2048
# At least this many values from one line before its trend is read (the run's own trend needs as many steps).
TREND_CALLS = 12
# Fallen when the median of the last fifth is at most this share of the first fifth's: the run's own
# trend calls a loss that ends above 0.9 of its start "not falling" (triage.NOT_FALLING, chosen on the
# corpus); a loss recomputed on weights that never change varies with the batch only, its fifths' medians
# within a few percent of each other.
FALLEN = 0.9
# The values waiting are read (one host transfer; a device sync on a GPU) every this many calls, and at the end.
READ_EVERY = 100


class SteplessLosses:
    def __init__(self) -> None:
        self._by_site: dict[str, collections.deque[float]] = {}
        self._waiting: list[tuple[str, torch.Tensor]] = []
        self.reported = False
        self.broken = ""  # a value was non-finite, in words: the loop does not train
        self.broken_said = False

    def observe(self, site: str, value: torch.Tensor) -> bool:
        """Keep a loss value (a detached scalar, not read yet); True when the values waiting are due to be read."""
        self._waiting.append((site, value))
        return len(self._waiting) >= READ_EVERY

    def read(self) -> None:
        """The values waiting, read in one transfer, by line; the first non-finite one breaks the trend."""
        waiting, self._waiting = self._waiting, []
        if not waiting:
            return
        try:
            numbers = torch.stack([value.reshape(()).float() for _, value in waiting]).tolist()
        except RuntimeError:  # values on different devices
            numbers = [float(value) for _, value in waiting]
        for (site, _), number in zip(waiting, numbers):
            if not math.isfinite(number):
                self.broken = self.broken or (f"non-finite loss ({number:g}) at {site}, in a loop without backward() "
                                              "or an optimizer step")
                continue
            values = self._by_site.get(site)
            if values is None:
                values = self._by_site[site] = collections.deque(maxlen=KEPT)
            values.append(number)

    def fallen(self) -> str | None:
        """The line whose losses fell, in words, or None (too few values, no clear fall, or a non-finite one)."""
        if not self._by_site or self.broken:
            return None
        site, values = max(self._by_site.items(), key=lambda item: len(item[1]))
        if len(values) < TREND_CALLS:
            return None
        fifth = max(3, len(values) // 5)
        first, last = statistics.median(list(values)[:fifth]), statistics.median(list(values)[-fifth:])
        if not first > 0 or last > FALLEN * first:
            return None
        return (f"the loss computed at {site} fell from {first:.4g} to {last:.4g} over {len(values)} calls without "
                "backward() or an optimizer step: the loop updates its weights another way (a hand-written "
                "backward, torch.func's grad)")
