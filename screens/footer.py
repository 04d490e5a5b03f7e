"""The footer every screen uses: Textual's, fitted to the terminal's width instead of cut off.

A key that does not fit is left out whole, never shown cut (``q Q``); help, back and quit always
stay, and help (?) lists every key that was left out. Below COMPACT_COLUMNS the keys stand closer.
"""

from __future__ import annotations

from rich.cells import cell_len
from textual import events
from textual.app import ComposeResult
from textual.widget import Widget
from textual.widgets import Footer

COMPACT_COLUMNS = 120
ALWAYS_SHOWN = ("help", "quit", "app.quit", "app.pop_screen")


class KeysFooter(Footer):
    def __init__(self) -> None:
        super().__init__(show_command_palette=False)  # ctrl+p still opens it: the footer needs the room
        self._fitted_to = 0

    def compose(self) -> ComposeResult:
        width = self.app.size.width
        self._fitted_to = width
        self.compact = width < COMPACT_COLUMNS
        keys = list(super().compose())
        yield from fitted(keys, width, self.compact)

    def on_resize(self, event: events.Resize) -> None:
        if event.size.width != self._fitted_to:
            self.call_after_refresh(self.recompose)


def fitted(keys: list[Widget], width: int, compact: bool) -> list[Widget]:
    """The keys that fit in ``width`` columns, in their order: first those always shown, then the
    others as long as there is room (a long one left out may make room for a shorter one after it)."""
    room = width - sum(key_width(key, compact) for key in keys if _always_shown(key))
    shown = []
    for key in keys:
        if not _always_shown(key):
            needed = key_width(key, compact)
            if needed > room:
                continue
            room -= needed
        shown.append(key)
    return shown


def key_width(key: Widget, compact: bool) -> int:
    """Columns a footer key takes: its key and description, their padding, and the gap after it.
    (Footer keys are told apart by their attributes: Textual's FooterKey class is not public.)"""
    if not hasattr(key, "key_display"):
        return 0
    return cell_len(key.key_display) + cell_len(key.description) + (2 if compact else 3)


def _always_shown(key: Widget) -> bool:
    return getattr(key, "action", None) in ALWAYS_SHOWN
