"""Reading a Textual app's screen in pilot tests: the text a user would see, and waiting for it."""

from __future__ import annotations

import io
import re
import time
from collections.abc import Callable

from rich.console import Console
from textual.app import App
from textual.pilot import Pilot

from tuidebug.screens.footer import KeysFooter


def screen_text(app: App) -> str:
    """The screen as plain text, rendered the way App.export_screenshot renders it."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), record=True, color_system=None,
                      legacy_windows=False, safe_box=False)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return console.export_text()


async def until(pilot: Pilot, predicate: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}; the screen:\n{screen_text(pilot.app)}")
        await pilot.pause(0.05)


async def shows(pilot: Pilot, *texts: str, timeout: float = 30.0) -> None:
    """Wait until every text is on screen: panes may catch up with the header a frame later."""
    await until(pilot, lambda: all(text in screen_text(pilot.app) for text in texts), repr(texts), timeout)


async def reads(pilot: Pilot, pattern: str) -> None:
    await until(pilot, lambda: re.search(pattern, screen_text(pilot.app)) is not None, repr(pattern))


def footer_keys(app: App) -> list[str]:
    """The keys the screen's footer shows, each as a whole key reads: "space Resume"."""
    keys = app.screen.query_one(KeysFooter).query("FooterKey")
    return [f"{key.key_display} {key.description}" for key in keys]


def keys_cut(app: App) -> list[str]:
    """The footer's keys that its last line does not show whole (none, in a footer that fits)."""
    last = screen_text(app).splitlines()[-1]
    return [key for key in footer_keys(app) if key not in last] + (["…"] if "…" in last else [])
