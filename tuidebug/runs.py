"""This user's runs that a new screen can attach to, like tmux sessions.

A training process started under the screen writes one record, ``<pid>.json``, in a private folder
(``$XDG_CACHE_HOME/tuidebug/runs``, 0700; files 0600) and removes it when it exits. When the screen
goes away the agent keeps training and watches for ``<pid>.attach``: ``tuidebug attach`` starts a
new listening socket, writes its address and token there, and the agent connects to it. Both sides
import this module, so it holds no torch and no Textual.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil

# A record whose process started more than this long before the record was written belongs to
# another process that reused the pid: the agent writes its record in its first second.
PID_REUSE_SLACK_SECONDS = 120.0


def cache_dir() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "tuidebug"


def runs_dir() -> Path:
    return cache_dir() / "runs"


def log_dir() -> Path:
    return cache_dir() / "logs"


def log_path(script: str, pid: int) -> Path:
    """Where a run's output goes once the pipe to the screen broke (agent/output.py)."""
    return log_dir() / f"{Path(script).stem}-{pid}.log"


@dataclass
class RunRecord:
    pid: int
    script: str
    args: list[str] = field(default_factory=list)
    cwd: str = ""
    started: float = 0.0
    watched: bool = True  # a screen is connected now
    since: float = 0.0  # when ``watched`` last changed

    @property
    def log(self) -> Path:
        return log_path(self.script, self.pid)

    @property
    def command(self) -> str:
        return " ".join([self.script, *self.args])


def private_folder(path: Path) -> Path:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path, 0o700)  # an older folder made under a looser umask
    return path


def _write_private(path: Path, text: str) -> None:
    """Write to a temporary file beside ``path`` and rename: a reader never sees half a record."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:  # mkstemp's file is already 0600
            out.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def save(record: RunRecord) -> None:
    folder = private_folder(runs_dir())
    _write_private(folder / f"{record.pid}.json", json.dumps(asdict(record)))


def remove(pid: int) -> None:
    for suffix in (".json", ".attach"):
        (runs_dir() / f"{pid}{suffix}").unlink(missing_ok=True)


def _alive(record: RunRecord) -> bool:
    try:
        process = psutil.Process(record.pid)
        return (process.status() != psutil.STATUS_ZOMBIE
                and process.create_time() <= record.started + PID_REUSE_SLACK_SECONDS)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def live_runs() -> list[RunRecord]:
    """This user's runs still alive, the most recent first; records of runs that died are removed."""
    records = []
    for path in runs_dir().glob("*.json"):
        try:
            record = RunRecord(**json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError):
            continue
        if _alive(record):
            records.append(record)
        else:
            remove(record.pid)
    return sorted(records, key=lambda r: r.started, reverse=True)


def request_attach(pid: int, address: str, token: str) -> None:
    _write_private(private_folder(runs_dir()) / f"{pid}.attach", json.dumps({"address": address, "token": token}))


def take_attach_request(pid: int) -> tuple[str, str] | None:
    """The address and token a new screen left for this run, removed once read."""
    path = runs_dir() / f"{pid}.attach"
    try:
        request = json.loads(path.read_text(encoding="utf-8"))
        path.unlink(missing_ok=True)
        return str(request["address"]), str(request["token"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def age(seconds: float) -> str:
    """``3s``, ``4m``, ``2h05m``: how long ago, for a listing."""
    seconds = max(0, int(time.time() - seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
