"""``tuidebug ls``, ``tuidebug attach`` and ``tuidebug listen``: runs this screen did not start.

A run that outlived its screen is shown again (attach); a job another launcher starts connects to a
screen that listens for it (listen).

The screen that started a run is its parent; a screen that attaches later is not, so it knows the
run by its pid: it asks the agent to connect (``tuidebug/runs.py``), follows the run's log file for
its output, and learns that the run ended when the pid goes away.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from collections.abc import Callable
from typing import IO

import psutil

from tuidebug import protocol, runs
from tuidebug.launcher import Target, collective
from tuidebug.server import AgentServer
from tuidebug.session import Session

CONNECT_SECONDS = 10.0  # the agent looks for a request twice a second; a paused or busy one answers late
POLL_SECONDS = 0.2
_ENDED = re.compile(r"script ended with code (-?\d+)")


class AttachError(Exception):
    """No run to attach to, or it did not answer: the message is the one-line error for the user."""


class AttachedRun:
    """A run started under an earlier screen, taken over: the surface the screens use (as ChildRun)."""

    def __init__(self, record: runs.RunRecord, session: Session) -> None:
        self.record = record
        self.target = Target(record.script, record.args)
        self.session = session
        self.server = AgentServer(session)
        self.process = None  # not our child: no Popen, no exit code but the one the agent reports
        self._attached = False
        self._closed = threading.Event()

    def attach(self, timeout: float = CONNECT_SECONDS) -> None:
        """Ask the agent to connect here and wait for it; AttachError when it does not."""
        self.server.start()
        runs.request_attach(self.record.pid, self.server.address, self.server.token)
        deadline = time.monotonic() + timeout
        while not self.server.connected and time.monotonic() < deadline and self.running:
            time.sleep(0.05)
        if not self.server.connected:
            (runs.runs_dir() / f"{self.record.pid}.attach").unlink(missing_ok=True)
            self.server.close()
            why = "it ended" if not self.running else f"its agent did not answer within {timeout:.0f}s"
            raise AttachError(f"cannot attach to run {self.record.pid} ({self.record.command}): {why}")
        self.session.pid = self.record.pid
        self._attached = True
        self.session.note("attached", f"attached to run {self.record.pid}; its screen went away "
                                      f"{runs.age(self.record.since)} ago, its output since then: {self.record.log}")
        for loop in (self._follow_log, self._watch):
            threading.Thread(target=loop, daemon=True).start()

    def start(self) -> None:
        """The app starts its run once the screen is up; this one was attached before."""
        if not self._attached:
            self.attach()

    def command(self, command: str, /, **args: object) -> bool:
        return self.server.send(collective(self.session, command, args))

    @property
    def running(self) -> bool:
        try:
            return psutil.Process(self.record.pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    def wait(self, timeout: float | None = None) -> int | None:
        _wait_while(lambda: self.running, timeout)
        return None if self.running else self._reported_code()

    def stop(self, grace: float = 3.0) -> None:
        """Stop the run and what it started, as its own screen would: SIGTERM to its process group
        (the launcher started it in a session of its own), SIGKILL after ``grace``."""
        for signum in (signal.SIGTERM, signal.SIGKILL):
            if not self.running:
                return
            try:
                os.killpg(self.record.pid, signum)
            except (ProcessLookupError, PermissionError):
                return
            self.wait(grace)

    def close(self) -> None:
        self.stop()
        self._closed.set()
        self.server.close()

    def _reported_code(self) -> int | None:
        ended = next((e for e in reversed(self.session.events) if e.kind == "script_end"), None)
        match = _ENDED.search(ended.message) if ended is not None else None
        return int(match[1]) if match else None

    def _watch(self) -> None:
        while self.running and not self._closed.is_set():
            time.sleep(POLL_SECONDS)
        if self._closed.is_set():
            return
        self.server.join(timeout=5)
        code = self._reported_code()
        self.session.child_exited(-signal.SIGKILL if code is None else code)  # gone without a word: killed

    def _follow_log(self) -> None:
        """The script's output since the first screen went away, as it is written."""
        log: IO[str] | None = None
        while not self._closed.is_set():
            if log is None and self.record.log.exists():
                log = open(self.record.log, encoding="utf-8", errors="replace")
            for line in (log.readlines() if log is not None else []):
                self.session.add_output(line.rstrip("\r\n"))
            if not self.running and log is not None:
                break
            time.sleep(POLL_SECONDS)
        if log is not None:
            log.close()


def _wait_while(running: Callable[[], bool], timeout: float | None) -> None:
    """Poll until ``running()`` is false or ``timeout`` seconds passed: a run that is not our child."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while running() and (deadline is None or time.monotonic() < deadline):
        time.sleep(POLL_SECONDS)


def choose(pid: int | None) -> runs.RunRecord:
    """The run to attach to: the given pid, or the most recent one that no screen watches."""
    live = runs.live_runs()
    if pid is not None:
        record = next((r for r in live if r.pid == pid), None)
        if record is None:
            raise AttachError(f"no run {pid} of yours can be attached (tuidebug ls lists them)")
        if record.watched:
            raise AttachError(f"run {pid} is still shown by another tuidebug screen")
        return record
    detached = [r for r in live if not r.watched]
    if not detached:
        raise AttachError("no run to attach to: every run of yours is shown by its screen, or none is left"
                          if live else "no run to attach to: no run of yours is alive")
    return detached[0]


def listing() -> str:
    """``tuidebug ls``: this user's runs that are alive, most recent first."""
    live = runs.live_runs()
    if not live:
        return "no tuidebug run of yours is alive"
    rows = [("PID", "STARTED", "SCREEN", "COMMAND", "LOG")]
    for record in live:
        screen = f"{'shown' if record.watched else 'detached'} {runs.age(record.since)}"
        log = str(record.log) if record.log.exists() else "-"
        rows.append((str(record.pid), f"{runs.age(record.started)} ago", screen, record.command, log))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row[:4], widths)) + "  " + row[4]
                     for row in rows)


class ListenedRun:
    """A job another launcher starts (SLURM, a scheduler, torchrun by hand): the screen listens, and
    each worker, run as ``python -m tuidebug.agent train.py ARGS`` with the address and token this
    prints, connects to it. The screen starts nothing and stops nothing: quitting it leaves the job."""

    def __init__(self, session: Session, host: str, port: int) -> None:
        self.session = session
        self.server = AgentServer(session, tcp=(host, port))
        self.target = Target("listen", [f"on {self.server.address}"])  # the header shows where it listens
        self.process = None
        self._started = False

    @property
    def environment(self) -> str:
        return f"{protocol.ENV_ADDRESS}={self.server.address} {protocol.ENV_TOKEN}={self.server.token}"

    def start(self) -> None:
        if not self._started:
            self._started = True
            self.server.start()
            self.session.note("listening", f"start each worker with: {self.environment} "
                                           "python -m tuidebug.agent train.py ARGS")

    def command(self, command: str, /, **args: object) -> bool:
        return self.server.send(collective(self.session, command, args))

    @property
    def running(self) -> bool:
        """Until every worker that connected has gone again."""
        return (not self.session.ranks and self.session.hello is None) or self.server.connected

    def wait(self, timeout: float | None = None) -> int | None:
        _wait_while(lambda: self.running, timeout)
        return None

    def stop(self, grace: float = 3.0) -> None:
        """Nothing to stop: the job is its launcher's."""

    def close(self) -> None:
        self.server.close()
