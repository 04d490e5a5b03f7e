"""Shared fixtures: real child processes running the bundled example scripts under the agent."""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
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


# --- the reliability matrix -----------------------------------------------------------------------
# Tests marked ``fault`` are the rows of the README's reliability table: the fault, what tuidebug
# must do, and what the test saw (``record_property("observed", ...)``). A full run of the suite
# rewrites the table between the README's markers; a partial run (files named, ``-k``, ``-x``)
# leaves it alone.

README = ROOT / "README.md"
TABLE_START, TABLE_END = "<!-- reliability matrix: written by make test -->", "<!-- end of the reliability matrix -->"
_ROWS: dict[str, tuple[str, str, str]] = {}
_FAULT_TESTS: list[str] = []  # in collection order: the table's order


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "fault(fault, expected): a row of the README's reliability matrix; "
                                       "{id} in the fault is the test's parameter id")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    _FAULT_TESTS[:] = [item.nodeid for item in items if item.get_closest_marker("fault")]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    marker = item.get_closest_marker("fault")
    if marker is not None and (report.when == "call" or report.failed or report.skipped):
        param = getattr(getattr(item, "callspec", None), "id", "")
        fault, expected = marker.args[0].format(id=param), marker.args[1]
        observed = dict(item.user_properties).get("observed", "as expected")
        if report.failed:
            observed = f"**FAILED** ({report.when}): {str(report.longrepr).splitlines()[-1][:120]}"
        elif report.skipped:
            observed = "not run here (skipped)"
        if item.nodeid not in _ROWS or report.when == "call" or report.failed:
            _ROWS[item.nodeid] = (fault, expected, observed)
    return report


def pytest_sessionfinish(session: pytest.Session) -> None:
    whole_suite = session.config.args_source != pytest.Config.ArgsSource.ARGS and not session.config.option.keyword
    if not _FAULT_TESTS or set(_ROWS) != set(_FAULT_TESTS) or not whole_suite:
        return
    rows = ["| fault | expected | observed |", "|---|---|---|"]
    rows += [f"| {fault} | {expected} | {observed} |".replace("\n", " ") for fault, expected, observed in
             (_ROWS[nodeid] for nodeid in _FAULT_TESTS)]
    text = README.read_text(encoding="utf-8")
    if TABLE_START in text and TABLE_END in text:
        head, rest = text.split(TABLE_START, 1)
        _, tail = rest.split(TABLE_END, 1)
        README.write_text(f"{head}{TABLE_START}\n{chr(10).join(rows)}\n{TABLE_END}{tail}", encoding="utf-8")


@pytest.fixture(autouse=True)
def nothing_left_behind(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                        monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """After a fault row: no process of the test's left alive, no private socket folder left (the
    test's temporary folder is its own, here and in every process it starts)."""
    if request.node.get_closest_marker("fault") is None:
        yield
        return
    own = tmp_path_factory.mktemp("tmpdir")
    monkeypatch.setenv("TMPDIR", str(own))
    monkeypatch.setattr(tempfile, "tempdir", str(own))
    yield
    me = psutil.Process()
    wait_for(lambda: not [c for c in me.children(recursive=True) if c.status() != psutil.STATUS_ZOMBIE], 20,
             "every process the test started to end")
    left = sorted(str(path) for path in own.glob("tuidebug-*"))
    assert not left, f"private folders left behind: {left}"
