"""Which steps run the agent's sampled checks (the looks at tensors in facts.py: the loss input's range,
stale and missing gradients, kept graphs, the weights that move): the first EARLY_STEPS steps, then every
``every``-th step. ``every`` starts at SAMPLE_EVERY; on a long run of very short steps it stretches, so
that the checks cost at most CHECK_BUDGET of the training time (issue 16: the agent's cost on tiny steps).
"""

from __future__ import annotations

import math

EARLY_STEPS = 5
SAMPLE_EVERY = 25
# A sampled step's extra work is fixed (a few hundred microseconds to a millisecond on a CPU: the loss
# input's range, the findings' scan), so it weighs only on short steps: at 25 it is about 10% of a 0.4 ms
# step and under 2% from steps of about 2-3 ms, which keep the default period.
CHECK_BUDGET = 0.02
MAX_SAMPLE_EVERY = 200  # at most this far apart: a 0.4 ms step still runs its checks every 80 ms
# The first FULL_SCHEDULE_STEPS steps keep the default period: 20 checks, enough for the findings that
# need repeated evidence (several checks in a row, graphs of two checks alive at once), and steps short
# enough to stretch it run 500 in about a second, so the full schedule costs nothing noticeable there.
FULL_SCHEDULE_STEPS = 500
SMOOTHING = 0.1  # weight of the newest measurement in the running step times


class CheckSchedule:
    """The sampled steps. ``every`` changes only at the end of a sampled step, so that a step's hooks
    before its end and its end itself agree on whether it is sampled."""

    def __init__(self) -> None:
        self.every = SAMPLE_EVERY
        self._plain: float | None = None  # running time of a step without checks
        self._extra: float | None = None  # running extra time of a sampled step
        self._after_sampled = False

    def sampled(self, step: int) -> bool:
        return step <= EARLY_STEPS or step % self.every == 0

    @property
    def stretched(self) -> bool:
        return self.every > SAMPLE_EVERY

    def step_took(self, step: int, seconds: float | None, checks_after: float = 0.0) -> None:
        """Step ``step`` took ``seconds`` (from the previous step's end to its own), and the checks run at
        its end another ``checks_after``. The step after a sampled one is not a plain step: its time holds
        whatever the checks left for it (the collector, a findings report sent)."""
        if seconds is None or seconds <= 0:
            return
        was_sampled = self.sampled(step)
        if not was_sampled and not self._after_sampled:
            self._plain = _smoothed(self._plain, seconds)
        elif was_sampled and step > EARLY_STEPS and self._plain is not None:
            self._extra = _smoothed(self._extra, max(0.0, seconds - self._plain) + checks_after)
        self._after_sampled = was_sampled
        if was_sampled and step >= FULL_SCHEDULE_STEPS and self._extra is not None:
            wanted = math.ceil(self._extra / (CHECK_BUDGET * self._plain))
            self.every = max(SAMPLE_EVERY, min(MAX_SAMPLE_EVERY, wanted))


def _smoothed(running: float | None, value: float) -> float:
    return value if running is None else running + SMOOTHING * (value - running)
