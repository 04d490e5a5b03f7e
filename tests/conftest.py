"""Shared fixtures: real child processes running the bundled example scripts under the agent."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tuidebug.launcher import ChildRun, Target
from tuidebug.session import Session

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "assets" / "examples"
SCRIPTS = Path(__file__).resolve().parent / "scripts"


def wait_for(predicate: Callable[[], bool], timeout: float = 30.0, what: str = "condition") -> None:
    """Poll until ``predicate()`` holds; fail the test with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


@pytest.fixture
def start_run() -> Iterator[Callable[..., tuple[ChildRun, Session]]]:
    """Start a script under the agent; every run is stopped and cleaned up after the test."""
    runs: list[ChildRun] = []

    def start(script: str | Path, *args: str, capture_output: bool = True, **agent_options) -> tuple[ChildRun, Session]:
        target = Target(str(script), list(args))
        session = Session(target.name, target.args)
        run = ChildRun(target, session, agent_options, capture_output=capture_output)
        run.start()
        runs.append(run)
        return run, session

    yield start
    for run in runs:
        run.close()


def tuidebug_command() -> list[str]:
    return [sys.executable, "-m", "tuidebug"]
