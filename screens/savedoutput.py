"""Every line of the script's output, written to a private log file as it arrives.

The session and the screens keep only the latest lines (bounded deques); this file keeps them all, so
the output and a traceback can be read after the screen is gone. It goes into the working directory,
beside the reports and reproduction bundles the verdict screen saves there (``tuidebug-repro-...``):
one ``ls tuidebug-*`` lists what a session left. Opened 0600, since a script's output may hold what
its user does not share; line-buffered, so a tuidebug that is killed loses no line already read.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from tuidebug.session import Session

ATTEMPTS = 100  # names tried when a session started in the same second already took the first


class OutputFile:
    def __init__(self, session: Session, path: Path, file: TextIO) -> None:
        self.path = path
        self._file: TextIO | None = file
        self._lock = threading.Lock()  # lines come on the reader thread; close on the main one
        with session.lock:  # what arrived before, then everything after
            for line in session.output:
                self._write(line)
            session.subscribe(self._on_change)

    @classmethod
    def create(cls, session: Session, script: str, folder: Path | None = None) -> OutputFile:
        """A new file ``tuidebug-output-<script>-<time>.log`` in ``folder`` (the working directory);
        OSError when none can be made there."""
        stem = f"tuidebug-output-{Path(script).stem}-{time.strftime('%Y%m%d-%H%M%S')}"
        folder = folder or Path.cwd()
        for attempt in range(ATTEMPTS):
            path = folder / (f"{stem}.log" if attempt == 0 else f"{stem}-{attempt + 1}.log")
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
            except FileExistsError:
                continue
            return cls(session, path, os.fdopen(fd, "w", encoding="utf-8", errors="replace", buffering=1))
        raise FileExistsError(f"{folder / stem}.log and {ATTEMPTS - 1} more exist")

    def _on_change(self, kind: str, payload: Any) -> None:
        if kind == "output":
            self._write(payload.text)

    def _write(self, line: str) -> None:
        with self._lock:
            if self._file is None:
                return
            try:
                self._file.write(line + "\n")
            except OSError:  # a full disk: the run goes on, the file stops where it could
                self._file = None

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
