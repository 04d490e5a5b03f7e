"""Where in the user's own code something happened: the innermost frame that is theirs.

Evidence names the user's line (``train.py:42 `loss = criterion(out, y)```), never a frame of
torch, of a framework (Lightning, accelerate, ...), of the standard library or of tuidebug.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import linecache
import os
import sys
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from types import FrameType, TracebackType
from typing import Any

_TUIDEBUG = os.path.dirname(os.path.abspath(__file__)) + os.sep
_LIBRARY_DIRS = tuple(
    os.path.abspath(path) + os.sep
    for name in ("stdlib", "platstdlib", "purelib", "platlib")
    if (path := sysconfig.get_paths().get(name))
)


@dataclass(frozen=True)
class Site:
    path: str
    line: int
    function: str

    @property
    def text(self) -> str:
        return linecache.getline(self.path, self.line).strip()

    @property
    def short(self) -> str:
        """``train.py:42``"""
        return f"{os.path.basename(self.path)}:{self.line}"

    def __str__(self) -> str:
        text = self.text
        return f"{self.short} `{text}`" if text else self.short


def frame_locals(frame: FrameType) -> dict[str, Any]:
    """A frame's local variables, as ``f_locals`` gives them, without what reading it leaves behind. Before Python
    3.13, reading ``f_locals`` of a running function leaves a snapshot dict on its frame that holds every local
    until they are read again: the script's ``main()`` read once at step 25 would keep that step's losses, and
    their graphs, alive for the rest of the run (a leak of tuidebug's own making). A function's locals are
    copied and the snapshot emptied: CPython fills it again before any code could write it back (a tracer's
    call). A module's or a class body's f_locals is its namespace itself, returned as it is."""
    scope = frame.f_locals
    if not frame.f_code.co_flags & inspect.CO_OPTIMIZED or scope is frame.f_globals:
        return scope
    values = dict(scope)
    if sys.version_info < (3, 13):
        scope.clear()
    return values


@functools.lru_cache(maxsize=4096)
def is_user_file(path: str) -> bool:
    """A file of the user's: not torch's, a library's, the standard library's or tuidebug's."""
    if not path or path.startswith("<"):
        return False
    path = os.path.abspath(path)
    if path.startswith(_TUIDEBUG) or "site-packages" in path or "dist-packages" in path:
        return False
    return not path.startswith(_LIBRARY_DIRS)


def user_site(frame: FrameType | None = None) -> Site | None:
    """The innermost frame of the user's code at or above ``frame`` (the caller's by default)."""
    found = user_frame(frame if frame is not None else sys._getframe(1))
    return Site(found.f_code.co_filename, found.f_lineno, found.f_code.co_name) if found is not None else None


def user_site_text() -> str:
    """The caller's ``user_site()`` as text, or "?" outside the user's code (a fact noted where it was seen)."""
    site = user_site(sys._getframe(1))
    return str(site) if site else "?"


def user_frame(frame: FrameType | None = None) -> FrameType | None:
    """The innermost frame of the user's code at or above ``frame`` (the caller's by default)."""
    frame = frame if frame is not None else sys._getframe(1)
    while frame is not None and not is_user_file(frame.f_code.co_filename):
        frame = frame.f_back
    return frame


def user_callers(limit: int, frame: FrameType | None = None) -> list[Site]:
    """The innermost ``limit`` frames of the user's code at or above ``frame`` (the caller's by default),
    innermost first: a line and the lines of the user's code that called it."""
    found = user_frame(frame if frame is not None else sys._getframe(1))
    sites = []
    while found is not None and len(sites) < limit:
        sites.append(Site(found.f_code.co_filename, found.f_lineno, found.f_code.co_name))
        found = user_frame(found.f_back) if found.f_back is not None else None
    return sites


def user_frames(tb: TracebackType | None) -> list[FrameType]:
    """The user's frames of a traceback, outermost first."""
    frames = []
    while tb is not None:
        if is_user_file(tb.tb_frame.f_code.co_filename):
            frames.append(tb.tb_frame)
        tb = tb.tb_next
    return frames


def innermost_user_site(tb: TracebackType | None) -> tuple[Site, FrameType] | None:
    """The innermost user frame of a traceback, with its line at the time of the exception."""
    found = None
    while tb is not None:
        frame = tb.tb_frame
        if is_user_file(frame.f_code.co_filename):
            found = (Site(frame.f_code.co_filename, tb.tb_lineno, frame.f_code.co_name), frame)
        tb = tb.tb_next
    return found


_ON_BEHALF: contextvars.ContextVar[Site | None] = contextvars.ContextVar("tuidebug_on_behalf", default=None)


@contextlib.contextmanager
def on_behalf_of(site: Site | None) -> Iterator[None]:
    """tuidebug calls the user's loss on their behalf (a replay on a copy): the ops it runs belong to
    ``site``, the line where the script itself computes that loss."""
    token = _ON_BEHALF.set(site)
    try:
        yield
    finally:
        _ON_BEHALF.reset(token)


def behalf_site() -> Site | None:
    """The user's line a replayed call stands for (see ``on_behalf_of``), or None."""
    return _ON_BEHALF.get()
