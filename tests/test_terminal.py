"""End to end in a real terminal: the installed ``tuidebug`` command inside tmux, read off the screen."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from conftest import EXAMPLES, ROOT, SCRIPTS

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
TUIDEBUG = Path(sys.executable).parent / "tuidebug"


class Terminal:
    """One tmux pane on a private tmux server, so the tests never touch the user's sessions."""

    def __init__(self, name: str) -> None:
        self.base = ["tmux", "-L", name, "-f", os.devnull]

    def start(self, command: str, width: int = 100, height: int = 30) -> None:
        # The pane outlives tuidebug so that its exit code can be read after the screen is gone. The
        # shell may export COLUMNS and LINES from the pane's first size, and they beat the real one.
        shell = (f"cd {shlex.quote(str(ROOT))} && unset COLUMNS LINES && {command}; "
                 f"echo \"tuidebug exited $?\"; sleep 60")
        self._tmux("new-session", "-d", "-x", str(width), "-y", str(height), "-s", "t", shell)

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-t", "t").stdout

    def press(self, *keys: str) -> None:
        self._tmux("send-keys", "-t", "t", *keys)

    def wait_for(self, *texts: str, timeout: float = 30.0) -> str:
        """The screen, once every text is on it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen()
            if all(text in screen for text in texts):
                return screen
            time.sleep(0.05)
        raise AssertionError(f"timed out after {timeout}s waiting for {texts!r}; the screen:\n{self.screen()}")

    def processes(self) -> list[psutil.Process]:
        """What runs in the pane, below its shell (not another terminal's run of the same command)."""
        shell = int(self._tmux("display-message", "-p", "-t", "t", "#{pane_pid}").stdout)
        return psutil.Process(shell).children(recursive=True)

    def close(self) -> None:
        subprocess.run([*self.base, "kill-server"], capture_output=True)

    def _tmux(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*self.base, *args], capture_output=True, text=True, check=True)


@pytest.fixture
def terminal(request: pytest.FixtureRequest) -> Iterator[Terminal]:
    term = Terminal(f"tuidebug-test-{os.getpid()}-{request.node.name[:40]}")
    yield term
    term.close()  # kills the pane's shell; tuidebug's child dies with its process group closed


def test_the_dashboard_in_a_real_terminal(terminal):
    terminal.start(f"{TUIDEBUG} {EXAMPLES / 'healthy_mlp.py'} --epochs 1")
    terminal.wait_for("FINISHED, CODE 0", "step 16 loss", "healthy_mlp.py --epochs 1", "loss  ⡇ raw  • smoothed",
                      "gradient norm", "RSS (CPU)", "script_end", "d Diagnose", "q Quit", "? Help")
    terminal.press("q")
    terminal.wait_for("tuidebug exited 0")


def test_a_crash_at_80x24_without_colour_exits_with_the_script_code(terminal):
    terminal.start(f"NO_COLOR=1 {TUIDEBUG} --no-mouse {SCRIPTS / 'dash_crash.py'}", width=80, height=24)
    terminal.wait_for("CRASHED, CODE 1", "ValueError: boom", "⡇ raw", "c Chart")
    terminal.press("q")
    terminal.wait_for("tuidebug exited 1")


def run_then_hang_up(terminal: Terminal, cache: Path, args: str) -> psutil.Process:
    """pat_steps.py under tuidebug in ``terminal`` until it prints, then the terminal's hang-up
    (SIGHUP to tuidebug); the script's process, left to train."""
    script = SCRIPTS / "pat_steps.py"
    terminal.start(f"XDG_CACHE_HOME={cache} {TUIDEBUG} {script} {args}")
    terminal.wait_for("step 3 loss")
    [screen] = [p for p in terminal.processes() if str(TUIDEBUG) in p.cmdline()[1:2]]
    [child] = screen.children()
    screen.send_signal(signal.SIGHUP)
    terminal.wait_for(f"tuidebug exited {128 + signal.SIGHUP}")
    return child


@pytest.mark.fault('the terminal closes (SIGHUP) while the script prints',
                   'the screen goes, the run trains to its end, its output in the log')
def test_a_hangup_closes_the_screen_and_the_run_trains_on(terminal, tmp_path):
    """The terminal closed (SIGHUP): tuidebug leaves, the script trains to its end, its output in the log."""
    child = run_then_hang_up(terminal, tmp_path, "--steps 150 --sleep 0.05")

    assert child.is_running()
    child.wait(60)  # not tuidebug's own child any more: no exit code to read, the log says how it ended
    [log] = (tmp_path / "tuidebug" / "logs").glob("pat_steps-*.log")
    assert "step 150 loss" in log.read_text()


@pytest.mark.fault('a new terminal after a hangup',
                   '`tuidebug ls` lists the run, `tuidebug attach` shows it with its output, q stops it')
def test_after_a_hangup_attach_shows_the_run_again_with_its_output(terminal, tmp_path):
    """The terminal closed; a new one lists the run, attaches to it, sees it train and print, and quits it."""
    child = run_then_hang_up(terminal, tmp_path, "--steps 3000 --sleep 0.02")

    listed = subprocess.run([str(TUIDEBUG), "ls"], capture_output=True, text=True, env={**os.environ,
                            "XDG_CACHE_HOME": str(tmp_path)}, timeout=60)
    assert f"{child.pid}" in listed.stdout and "detached" in listed.stdout

    second = Terminal(f"tuidebug-test-{os.getpid()}-attach")  # a new terminal, as after logging in again
    try:
        second.start(f"XDG_CACHE_HOME={tmp_path} {TUIDEBUG} attach {child.pid}")
        screen = second.wait_for(f"pid {child.pid}", "RUNNING", "attached to run", timeout=90)
        printed = [int(step) for step in re.findall(r"step (\d+) loss", screen)]
        assert printed and max(printed) > 3  # printed after the hangup: read back from the run's log
        second.press("q")
        second.wait_for("Stop and quit")
        second.press("y")
        second.wait_for("tuidebug exited")
        child.wait(30)
    finally:
        second.close()
