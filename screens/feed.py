"""Hand the script's output lines and the events from the reader thread to the next frame.

The session keeps only the latest lines, so a frame cannot tell from it alone which ones are new;
a listener queues each one as it arrives (a deque append, cheap on the reader thread) and the
dashboard's timer drains the queue. No Textual message is posted per line.
"""

from __future__ import annotations

import collections
from typing import Any

from tuidebug.protocol import Event
from tuidebug.session import Session

KEEP = 2_000


class Feed:
    def __init__(self, session: Session, keep: int = KEEP) -> None:
        self._output: collections.deque[str] = collections.deque(maxlen=keep)
        self._events: collections.deque[Event] = collections.deque(maxlen=keep)
        with session.lock:  # what arrived before the app existed, then everything after
            self._output.extend(session.output)
            self._events.extend(session.events)
            session.subscribe(self._on_change)

    def _on_change(self, kind: str, payload: Any) -> None:
        if kind == "output":
            self._output.append(payload)
        elif kind == "event":
            self._events.append(payload)

    def take_output(self) -> list[str]:
        return _drain(self._output)

    def take_events(self) -> list[Event]:
        return _drain(self._events)


def _drain(queue: collections.deque) -> list:
    """Everything queued so far; popleft is atomic, so the reader thread may keep appending."""
    items = []
    while True:
        try:
            items.append(queue.popleft())
        except IndexError:
            return items
