"""The script's output outlives the screen, and says which of its lines a probe printed.

Under the TUI and ``diagnose`` the script's stdout and stderr are a pipe to tuidebug. When tuidebug
goes away (the terminal closes, the SSH connection drops, the screen is killed), the next ``print``
raises ``BrokenPipeError`` and would end a run that is otherwise fine. The streams are wrapped so
that a broken pipe switches them to a log file (``$XDG_CACHE_HOME/tuidebug/logs``, private to the
user, see ``tuidebug/runs.py``) and the run trains on; the log's first line says when and why.

When tuidebug reads the pipe, the iterations a probe borrows from the script's loop are framed by
the marker lines of ``protocol`` (PROBE_OUTPUT_BEGINS/ENDS): what the script prints then is not the
run's progress, and the screens mark it.
"""

from __future__ import annotations

import errno
import os
import sys
import threading
import time
from typing import Any, TextIO

from tuidebug import protocol, runs

_LOCK = threading.Lock()
_LOG: list[TextIO] = []  # the one log both streams share, once a pipe broke
_MARKS = {"enabled": False, "inside": False}  # whether tuidebug reads the pipe; whether a frame is open


def _open_log(script: str) -> TextIO:
    with _LOCK:
        if not _LOG:
            path = runs.log_path(script, os.getpid())
            runs.private_folder(path.parent)
            handle = open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "a", buffering=1,
                          encoding="utf-8", errors="replace")
            handle.write(f"tuidebug: the pipe to tuidebug closed at {time.strftime('%Y-%m-%d %H:%M:%S')}; "
                         "the script's output goes on here\n")
            _LOG.append(handle)
        return _LOG[0]


def _broken(exc: OSError) -> bool:
    return isinstance(exc, BrokenPipeError) or exc.errno in (errno.EPIPE, errno.ECONNRESET)


class SurvivingStream:
    """A text stream that moves to the log file when its pipe breaks; everything else is the stream's."""

    def __init__(self, stream: TextIO, script: str) -> None:
        self._stream = stream
        self._script = script
        self._moved = False

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as exc:
            if not _broken(exc):
                raise
            self._move()
            return self._stream.write(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            if not _broken(exc):
                raise
            self._move()

    def _move(self) -> None:
        if self._moved:
            raise BrokenPipeError(errno.EPIPE, "the log file's stream broke too")
        broken, self._stream, self._moved = self._stream, _open_log(self._script), True
        try:
            broken.close()  # its buffer holds the text that did not get through: dropped, not retried
        except OSError:
            pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def survive_closed_pipes(script: str) -> None:
    """Wrap ``sys.stdout`` and ``sys.stderr`` (both pipes or not: a terminal never raises EPIPE)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, SurvivingStream):
            setattr(sys, name, SurvivingStream(stream, script))


def mark_probe_output() -> None:
    """Frame the iterations probes borrow (only where tuidebug reads the output: the markers would be
    noise in a terminal or a file)."""
    _MARKS["enabled"] = True


def probe_output(inside: bool) -> None:
    """Open (``inside``) or close the frame around a probe's borrowed iterations; a no-op when it is
    already so. The streams are flushed first, so that what was printed before falls on its side."""
    if not _MARKS["enabled"] or _MARKS["inside"] == inside:
        return
    _MARKS["inside"] = inside
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # a stream the script replaced may not flush; the marker still goes out
            pass
    marker = protocol.PROBE_OUTPUT_BEGINS if inside else protocol.PROBE_OUTPUT_ENDS
    try:
        for fd in (1, 2):  # each stream is its own pipe, read apart: both are framed
            os.write(fd, f"{marker}\n".encode())  # ends a line the script left open: the reader splits it off
    except OSError:  # the pipe is gone (its output went to the log file): nobody to mark lines for
        _MARKS["enabled"] = False
