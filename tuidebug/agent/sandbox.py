"""Writes of a diagnostic re-run go to a scratch folder, never over the user's files.

``diagnose`` runs the script a second time when a probe needs a live loop: that run is stopped at a
step of diagnose's choosing and killed afterwards, so whatever it writes is a half-trained model or a
file cut short (pytorch/examples' word_language_model opens ``model.pt`` for writing at each epoch's
end: a killed re-run left it at 0 bytes). In such a run the Python-level ways a script writes files
(``open``/``io.open``/``Path.open`` for writing, ``torch.save`` to a path, ``os.replace``/``os.rename``)
are redirected into the scratch folder, and reads of a file the run wrote there read its copy, so
that a script that saves and reloads a checkpoint still works. Writes into the scratch folder, to
devices and from tuidebug's own code pass through. Writes from native code that opens paths itself
(a C extension's logger) are not seen.
"""

from __future__ import annotations

import builtins
import io
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import torch

_OWN = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_PASS_THROUGH = ("/dev/", "/proc/", "/sys/")


class WriteSandbox:
    def __init__(self, scratch: str) -> None:
        self.scratch = Path(scratch)
        self.redirected: dict[str, Path] = {}  # the user's path -> its copy in the scratch folder
        self._originals: list[tuple[Any, str, Any]] = []
        self._inside = os.path.realpath(scratch) + os.sep

    def install(self) -> None:
        self.scratch.mkdir(parents=True, exist_ok=True)
        self._replace(builtins, "open", self._open(builtins.open))
        self._replace(io, "open", self._open(io.open))
        self._replace(torch, "save", self._save(torch.save))
        self._replace(torch, "load", self._load(torch.load))
        self._replace(os, "replace", self._move(os.replace))
        self._replace(os, "rename", self._move(os.rename))

    def uninstall(self) -> None:
        for owner, name, original in reversed(self._originals):
            setattr(owner, name, original)
        self._originals.clear()

    def _replace(self, owner: Any, name: str, wrapper: Any) -> None:
        self._originals.append((owner, name, getattr(owner, name)))
        setattr(owner, name, wrapper)

    def path_for(self, path: Any, writing: bool) -> Any:
        """Where the run reads or writes ``path``: its scratch copy once it writes there."""
        if not isinstance(path, (str, os.PathLike)) or isinstance(path, int):
            return path
        real = os.path.realpath(os.fspath(path))
        if real in self.redirected:
            return str(self.redirected[real])
        if not writing or real.startswith(_PASS_THROUGH) or real.startswith(self._inside):
            return path
        copy = self.scratch / real.lstrip(os.sep)
        copy.parent.mkdir(parents=True, exist_ok=True)
        if os.path.isfile(real):  # appended to or updated in place: start from the user's content
            shutil.copyfile(real, copy)
        self.redirected[real] = copy
        return str(copy)

    def _open(self, original: Any) -> Any:
        def sandboxed_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
            if _from_tuidebug():
                return original(file, mode, *args, **kwargs)
            writing = any(flag in mode for flag in "wax+")
            return original(self.path_for(file, writing), mode, *args, **kwargs)

        return sandboxed_open

    def _save(self, original: Any) -> Any:
        def sandboxed_save(obj: Any, f: Any, *args: Any, **kwargs: Any) -> Any:
            return original(obj, self.path_for(f, writing=True), *args, **kwargs)

        return sandboxed_save

    def _load(self, original: Any) -> Any:
        def sandboxed_load(f: Any, *args: Any, **kwargs: Any) -> Any:
            return original(self.path_for(f, writing=False), *args, **kwargs)

        return sandboxed_load

    def _move(self, original: Any) -> Any:
        def sandboxed_move(src: Any, dst: Any, *args: Any, **kwargs: Any) -> Any:
            if _from_tuidebug():
                return original(src, dst, *args, **kwargs)
            return original(self.path_for(src, writing=False), self.path_for(dst, writing=True), *args, **kwargs)

        return sandboxed_move


def _from_tuidebug() -> bool:
    """The wrapped call comes from tuidebug's own code (the bundle, the stack file): not redirected."""
    return sys._getframe(2).f_code.co_filename.startswith(_OWN)
