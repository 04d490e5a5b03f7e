"""Start the training script as a child process under the agent, and own its lifecycle.

The child runs in its own session (process group) so that tuidebug can stop it and everything
it started, and so that a Ctrl-C meant for the TUI does not reach it unasked.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import IO, Any

from tuidebug import protocol
from tuidebug.protocol import Command
from tuidebug.server import AgentServer
from tuidebug.session import Session
from tuidebug.sites import Site, is_user_file


# The child imports torch and the agent; this process never imports torch, so the screen is up at once.
BOOTSTRAP = "from tuidebug.agent.runner import main; main()"


class TargetError(Exception):
    """The script cannot be run: the message is the one-line error for the user."""


@dataclass
class Target:
    """What to run: a script path, or a module as with ``python -m``."""

    name: str
    args: list[str] = field(default_factory=list)
    module: bool = False
    # torchrun's options (--nproc-per-node 2 ...): the job is started by torch.distributed.run, with
    # the agent in every worker; empty for a single process.
    launch: list[str] = field(default_factory=list)

    def check(self) -> None:
        """Raise TargetError for a script that python could not even start."""
        if self.module:
            return
        if not os.path.exists(self.name):
            raise TargetError(f"no such script: {self.name}")
        if os.path.isdir(self.name):
            raise TargetError(f"{self.name} is a directory, not a script")
        try:
            with open(self.name, "rb") as source:
                compile(source.read(), self.name, "exec")
        except SyntaxError as exc:  # null bytes are one too, with no line
            where = f" line {exc.lineno}" if exc.lineno else ""
            raise TargetError(f"syntax error in {self.name}{where}: {exc.msg}") from None
        except (OSError, ValueError) as exc:
            raise TargetError(f"cannot read {self.name}: {exc}") from None

    @property
    def display(self) -> str:
        return " ".join([*self.launch] + (["-m"] if self.module else []) + [self.name, *self.args])


class ChildRun:
    def __init__(self, target: Target, session: Session, agent_options: dict[str, Any],
                 capture_output: bool) -> None:
        self.target = target
        self.session = session
        self.agent_options = agent_options
        self.capture_output = capture_output
        self.server = AgentServer(session)
        self.process: subprocess.Popen | None = None
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        self.server.start()
        env = dict(os.environ)
        env[protocol.ENV_ADDRESS] = self.server.address
        env[protocol.ENV_TOKEN] = self.server.token
        env[protocol.ENV_CONFIG] = json.dumps({
            "target": self.target.name, "args": self.target.args, "module": self.target.module,
            "agent": self.agent_options, "stack_file": self.server.stack_file,
            "marks_probe_output": self.capture_output,
        })
        pipe = subprocess.PIPE if self.capture_output else None
        if self.capture_output:
            env["PYTHONUNBUFFERED"] = "1"
        self.process = subprocess.Popen(
            self._command(), env=env, start_new_session=True,
            stdin=subprocess.DEVNULL if self.capture_output else None,
            stdout=pipe, stderr=pipe,
        )
        self.session.pid = self.process.pid
        if self.capture_output:
            self._spawn(self._read_output, self.process.stdout, "stdout")
            self._spawn(self._read_output, self.process.stderr, "stderr")
        self._spawn(self._watch)

    def _command(self) -> list[str]:
        if not self.target.launch:
            return [sys.executable, "-c", BOOTSTRAP]
        return [sys.executable, "-m", "torch.distributed.run", *self.target.launch, "-m", "tuidebug.agent"]

    def command(self, command: str, /, **args: Any) -> bool:
        """Send ``command`` with keyword arguments to the agent (every rank's, see ``collective``); False
        when it is not connected."""
        return self.server.send(collective(self.session, command, args))

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def wait(self, timeout: float | None = None) -> int | None:
        """The child's return code, once it and everything it reported have been taken in."""
        if self.process is None:
            return None
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        for thread in self._threads:
            thread.join(timeout=5)
        return code

    def stack_sample(self, wait: float = 1.0) -> str | None:
        """Where the training thread is now, in the user's code (``train.py:12 in load_data `...```):
        the agent dumps every thread's stack on SIGUSR1 (faulthandler, which works even while native
        code holds the GIL). None when the child is gone or its stack holds no frame of the user's."""
        path = self.server.stack_file
        if not self.running:
            return None
        before = os.path.getsize(path) if os.path.exists(path) else 0
        hello = self.session.hello  # the training process (rank 0's worker under torchrun, not torchrun)
        if hello is None:  # still starting (importing torch): SIGUSR1 would kill it before its handler exists
            return None
        try:
            os.kill(hello.pid, signal.SIGUSR1)
        except (ProcessLookupError, PermissionError):
            return None
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and (not os.path.exists(path) or os.path.getsize(path) == before):
            time.sleep(0.05)
        time.sleep(0.05)
        try:
            with open(path, encoding="utf-8", errors="replace") as dump:
                dump.seek(before)
                return innermost_user_frame(dump.read())
        except OSError:
            return None

    def interrupt(self) -> None:
        """What Ctrl-C does to a plain python run: SIGINT to the script's process group."""
        self._signal(signal.SIGINT)

    def stop(self, grace: float = 3.0) -> None:
        """Terminate the child and its process group: SIGTERM, then SIGKILL after ``grace`` seconds."""
        if not self.running:
            return
        self._signal(signal.SIGTERM)
        if self.wait(grace) is None:
            self._signal(signal.SIGKILL)
            self.wait(grace)

    def close(self) -> None:
        self.stop()
        self.server.close()

    def _signal(self, signum: int) -> None:
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass

    def _spawn(self, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _read_output(self, stream: IO[bytes], name: str) -> None:
        """One of the script's streams, line by line (the agent writes its probe markers to both)."""
        by_probe = False  # between the agent's markers: a probe's borrowed iterations print
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            text, marker = split_probe_marker(line)
            if text is not None:
                self.session.add_output(text, by_probe=by_probe, stream=name)
            if marker is not None:
                by_probe = marker == protocol.PROBE_OUTPUT_BEGINS
        stream.close()

    def _watch(self) -> None:
        code = self.process.wait()
        self.server.join(timeout=5)
        self.session.child_exited(code)


def split_probe_marker(line: str) -> tuple[str | None, str | None]:
    """A line of the child's output as (the script's text, the agent's marker that ended it): a marker
    comes on a line of its own, or after what the script printed without a newline; either may be None."""
    for marker in (protocol.PROBE_OUTPUT_BEGINS, protocol.PROBE_OUTPUT_ENDS):
        if line.endswith(marker):
            text = line[: -len(marker)]
            return (text or None), marker
    return line, None


_FRAME = re.compile(r'File "(?P<path>[^"]+)", line (?P<line>\d+) in (?P<function>\S+)')


def collective(session: Session, name: str, args: dict[str, Any]) -> Command:
    """The command every rank gets: in a multi-process job a pause becomes a break after the same step
    on every rank, so that none waits in a collective for one that stopped earlier."""
    if name == "pause" and session.world_size > 1:
        return Command(name="break_at", args={"step": session.collective_stop_step()})
    return Command(name=name, args=args)


def innermost_user_frame(dump: str) -> str | None:
    """From a faulthandler dump (most recent call first in each thread): the innermost frame of the
    user's code in the first thread that has one."""
    for block in re.split(r"\n(?=(?:Current thread|Thread) 0x)", dump):
        for match in _FRAME.finditer(block):
            if is_user_file(match["path"]):
                site = Site(match["path"], int(match["line"]), match["function"])
                return f"{site} in {site.function}"
    return None


def exit_status(returncode: int) -> int:
    """tuidebug's own exit code for the child's: a signal N becomes 128 + N, as shells report it."""
    return 128 - returncode if returncode < 0 else returncode
