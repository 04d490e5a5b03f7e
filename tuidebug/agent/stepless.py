"""Loss values of a loop that trains without backward() or an optimizer the agent can see.

A hand-written backward that updates plain tensors under ``torch.no_grad()`` (makemore's), or a step
computed with ``torch.func.grad`` and applied by hand, never calls ``backward()`` nor ``optimizer.step()``:
the agent counts no step. Its loss calls are still seen. Where the values one line computes fall as clearly
as a healthy run's, the loop trains; where they do not, nothing is said (a loop that never updates stays
"no training step").
"""

from __future__ import annotations

import collections
import statistics

# Values kept per line (the latest): enough for the trend of a few thousand iterations.
KEPT = 2048
# At least this many values from one line before its trend is read (the run's own trend needs as many steps).
TREND_CALLS = 12
# Fallen when the median of the last fifth is at most this share of the first fifth's: the run's own
# trend calls a loss that ends above 0.9 of its start "not falling" (triage.NOT_FALLING, chosen on the
# corpus); a loss recomputed on weights that never change varies with the batch only, its fifths' medians
# within a few percent of each other.
FALLEN = 0.9


# A live run's trend is read every this many values (the end of the script reads it once more).
READ_EVERY = 100
# Once the trend is reported, one loss value in this many is read (a host sync on a GPU), for a loss that goes
# non-finite later: the loop is not watched otherwise, having no step.
READ_AFTER = 10


class SteplessLosses:
    def __init__(self) -> None:
        self._by_site: dict[str, collections.deque[float]] = {}
        self.calls = 0
        self.offered = 0  # loss values offered, read or not
        self.reported = False
        self.broken = ""  # a value was non-finite, in words: the loop does not train
        self.broken_reported = False

    def observe(self, site: str, value: float) -> None:
        values = self._by_site.get(site)
        if values is None:
            values = self._by_site[site] = collections.deque(maxlen=KEPT)
        values.append(value)
        self.calls += 1

    def read_now(self) -> bool:
        """Whether this value is read: every one until the trend is reported, then one in READ_AFTER."""
        self.offered += 1
        return not self.reported or self.offered % READ_AFTER == 0

    def due(self) -> bool:
        """Time to read a live run's trend: every READ_EVERY values, until it has been reported."""
        return not self.reported and self.calls % READ_EVERY == 0

    def fallen(self) -> str | None:
        """The line whose losses fell, in words, or None (too few values, or no clear fall)."""
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
