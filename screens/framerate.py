"""How often the dashboard draws a new frame: as often as FRAME_SECONDS allows while the screen's
process stays within its CPU budget, less often when it does not.

The screen shares the machine with the training it watches (on a 2-core box, with its data loader
and the agent's writer thread too). Every core-second it spends is taken from the training, so its
own use is measured (the process's CPU time over wall time, between frames: drawing, the terminal
output and the socket reader together) and the interval stretches to keep it under SCREEN_BUDGET.
"""

from __future__ import annotations

import time

# 10% of one core: the training loses at most a few percent of a 2-core box to its screen. Measured
# with make bench (the screen in a tmux terminal beside a 15 ms-step run): a frame of three charts,
# the header and the logs at 120x40 costs 10 to 25 ms, so 4 frames a second fit, 10 do not.
SCREEN_BUDGET = 0.10
MAX_FRAME_SECONDS = 1.0  # the slowest the charts move, however busy the machine
# The share is measured over windows this long, from the first frame on: the screen's start (the first
# layout and render of every widget) and a single slow frame do not slow the frames that follow.
WINDOW_SECONDS = 2.0


class FramePacer:
    """Says when the next frame is due, from the share of a core the process used in the last window."""

    def __init__(self, frame_seconds: float) -> None:
        self.base = frame_seconds
        self.interval = frame_seconds
        self.share = 0.0  # of one core, over the last whole window
        self._window: tuple[float, float] | None = None  # (CPU time, wall time) at its start
        self._next = 0.0

    def due(self) -> bool:
        # A timer tick may come a little early: half a base frame of slack keeps the base rate exact.
        return time.monotonic() >= self._next - self.base / 2

    def drawn(self) -> None:
        """A frame was drawn: at the end of a window, its share of a core sets the interval."""
        cpu, wall = time.process_time(), time.monotonic()
        if self._window is None:
            self._window = (cpu, wall)
        elif wall - self._window[1] >= WINDOW_SECONDS:
            self.share = (cpu - self._window[0]) / (wall - self._window[1])
            self._window = (cpu, wall)
            if self.share > SCREEN_BUDGET:
                self.interval = min(MAX_FRAME_SECONDS, self.interval * self.share / SCREEN_BUDGET)
            elif self.share < SCREEN_BUDGET / 2:
                self.interval = max(self.base, self.interval / 2)
        self._next = wall + self.interval

    def text(self) -> str:
        """The screen's own cost, for the header: its share of a core and its frames a second."""
        return f"screen {self.share:.0%} CPU, {1 / self.interval:.1f} frames/s"
