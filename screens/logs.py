"""The event log and the script's own output, both appended to as lines arrive."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text
from textual.widgets import Log, RichLog

from tuidebug.protocol import Event

if TYPE_CHECKING:
    from tuidebug.screens.feed import OutputLine

MAX_LINES = 2_000
STEP_WIDTH = 6
# Colour, cursor and title sequences (CSI and OSC), then any control character left over.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-_]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
EVENT_STYLES = {
    "exception": "bold red", "nonfinite_loss": "bold red", "nonfinite_grad": "bold red",
    "error": "red", "disconnected": "red", "rejected": "red",
    "warning": "yellow", "amp_skip": "yellow", "exit": "bold", "script_end": "bold",
}


def clean_line(raw: str) -> str:
    """What a terminal would leave on screen for one output line, without any control codes.

    A progress bar redraws itself with carriage returns: only the last segment is kept.
    """
    segments = [s for s in raw.split("\r") if s.strip()]
    line = segments[-1] if segments else ""
    return _CONTROL.sub("", _ANSI.sub("", line)).expandtabs()


def event_row(event: Event) -> Table:
    """Step, then kind and message wrapped beside it, then the details (an exception's frames; of the
    exception's analysis, only what it found: its other lines repeat the exception)."""
    text = Text.assemble((event.kind, EVENT_STYLES.get(event.kind, "bold")), " ", clean_line(event.message))
    details = event.details
    if event.kind == "crash":
        details = [line for line in details if line.startswith(("finding:", "fix:"))]
    for line in details:
        text.append("\n" + clean_line(line), style="dim")
    row = Table.grid(padding=(0, 1))
    row.add_column(justify="right", width=STEP_WIDTH, no_wrap=True)
    row.add_column(ratio=1)
    row.add_row(str(event.step) if event.step is not None else "", text)
    return row


class EventLog(RichLog):
    """Non-finite values, warnings, the script's exception with its frames, the exit."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(max_lines=MAX_LINES, min_width=20, wrap=True, markup=False, highlight=False, **kwargs)

    def add(self, events: list[Event]) -> None:
        for event in events:
            self.write(event_row(event))


class FollowsTail:
    """A scrolling widget that stays at its end while new lines come, until the user scrolls up; at
    the end again (End, G, the wheel), it follows again. Its own flag, not "is it at the end now":
    a resize or a flood moves the end away from a pane that was following it."""

    following = True

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)  # type: ignore[misc]
        self.following = new >= self.max_scroll_y  # type: ignore[attr-defined]

    def keep_at_tail(self) -> None:
        """Call after new lines, a resize or a relayout: back to the end, if following."""
        if self.following:
            self.scroll_end(animate=False, immediate=True, x_axis=False)  # type: ignore[attr-defined]


PROBE_MARK = "probe│ "  # the dashboard's pane marks the lines a probe's borrowed iterations printed


class OutputPane(FollowsTail, Log):
    """The script's stdout and stderr, scrollable, never interpreted as terminal codes."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(max_lines=MAX_LINES, highlight=False, auto_scroll=False, **kwargs)

    def add(self, lines: list[OutputLine]) -> None:
        if lines:
            self.write_lines([PROBE_MARK + line.text if line.probe else line.text for line in lines])
        self.keep_at_tail()

    def on_resize(self) -> None:
        self.call_after_refresh(self.keep_at_tail)
