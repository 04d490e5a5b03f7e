"""Hand the script's output lines and the events from the reader thread to the next frame.

The session keeps only the latest lines, so a frame cannot tell from it alone which ones are new;
a listener queues each one as it arrives (a deque append, cheap on the reader thread) and the
dashboard's timer drains the queue. No Textual message is posted per line.

Each line is cleaned once here (a progress bar's carriage returns collapsed, control codes gone) and
keeps its mark when a probe printed it (a probe borrows iterations of the script's own loop, whose
prints are not the run's progress; the agent frames them in the output stream, see agent/output.py).
"""

from __future__ import annotations

import collections
import threading
from dataclasses import dataclass
from typing import Any

from tuidebug.protocol import Event
from tuidebug.screens.logs import clean_line
from tuidebug.session import PrintedLine, Session

KEEP = 2_000
HISTORY = 20_000  # lines the log view can scroll back through (the log file keeps them all)


@dataclass(frozen=True)
class OutputLine:
    text: str
    probe: bool = False  # printed while a probe borrowed the script's loop
    error: bool = False  # printed to stderr (warnings, tracebacks, logging, progress bars)


class Feed:
    def __init__(self, session: Session, keep: int = KEEP, history: int = HISTORY) -> None:
        self._session = session
        self._output: collections.deque[OutputLine] = collections.deque(maxlen=keep)
        self._events: collections.deque[Event] = collections.deque(maxlen=keep)
        self._history: collections.deque[OutputLine] = collections.deque(maxlen=history)
        self._history_lock = threading.Lock()
        self.total = 0  # lines ever arrived: the log view asks for those after the ones it has
        with session.lock:  # what arrived before the app existed, then everything after
            for printed in session.printed_lines():
                self._on_change("output", printed)
            self._events.extend(session.events)
            session.subscribe(self._on_change)

    def _on_change(self, kind: str, payload: Any) -> None:
        if kind == "output":
            printed: PrintedLine = payload
            line = OutputLine(clean_line(printed.text), printed.by_probe, printed.stream == "stderr")
            self._output.append(line)
            with self._history_lock:
                self._history.append(line)
                self.total += 1
        elif kind == "event":
            self._events.append(payload)

    def take_output(self) -> list[OutputLine]:
        return _drain(self._output)

    def take_events(self) -> list[Event]:
        return _drain(self._events)

    def history_since(self, seen: int) -> tuple[list[OutputLine], int]:
        """The kept lines after the first ``seen`` ever arrived, and the count now: those the log view
        has not shown yet (fewer than arrived, if more than HISTORY came in between)."""
        with self._history_lock:
            new = min(self.total - seen, len(self._history))
            return list(self._history)[len(self._history) - new:], self.total


def _drain(queue: collections.deque) -> list:
    """Everything queued so far; popleft is atomic, so the reader thread may keep appending."""
    items = []
    while True:
        try:
            items.append(queue.popleft())
        except IndexError:
            return items
