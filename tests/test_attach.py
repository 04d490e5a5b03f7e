"""A run outlives its screen and is shown again: ``tuidebug ls`` and ``tuidebug attach``.

Real child processes and real sockets; the runs folder is the test's own (``XDG_CACHE_HOME``).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import psutil
import pytest

from conftest import SCRIPTS, tuidebug_command, wait_for
from tuidebug import runs
from tuidebug.attach import AttachedRun, AttachError, choose, listing
from tuidebug.session import Session


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # the child inherits it
    return tmp_path


def detached_run(start_run, steps: int = 400):
    """A run under the agent whose screen went away after a few steps."""
    run, session = start_run(SCRIPTS / "pat_steps.py", "--steps", str(steps), "--sleep", "0.02", attachable=True)
    wait_for(lambda: session.step >= 5, 60, "five steps")
    run.server.close()  # the screen is gone: its socket and private folder with it
    wait_for(lambda: any(not r.watched for r in runs.live_runs()), 10, "the run to list itself as detached")
    return run, session


def test_a_run_lists_itself_privately_and_leaves_no_record(start_run, own_cache: Path) -> None:
    run, session = start_run(SCRIPTS / "pat_steps.py", "--steps", "3", attachable=True)
    wait_for(lambda: bool(runs.live_runs()) or session.ended, 60, "the run's record")
    [record] = runs.live_runs() or [None]
    assert record is not None and record.pid == run.process.pid and record.watched
    assert (own_cache / "tuidebug" / "runs").stat().st_mode & 0o777 == 0o700
    assert (own_cache / "tuidebug" / "runs" / f"{record.pid}.json").stat().st_mode & 0o777 == 0o600

    wait_for(lambda: session.state == "ended", 60, "the post-mortem hold")
    run.command("quit")
    run.wait(60)
    assert runs.live_runs() == []
    assert not list((own_cache / "tuidebug" / "runs").glob("*"))


@pytest.mark.fault('the screen goes away; `tuidebug attach`',
                   'the history and the new steps shown, pause works, quitting stops the run')
def test_attach_shows_the_history_and_what_happened_while_nobody_watched(start_run) -> None:
    run, first = detached_run(start_run)
    seen_before = first.step
    listed = subprocess.run([*tuidebug_command(), "ls"], capture_output=True, text=True, timeout=60)
    assert f"{run.process.pid}" in listed.stdout and "detached" in listed.stdout

    second = Session("pat_steps.py", [])
    attached = AttachedRun(choose(None), second)
    try:
        attached.attach()
        wait_for(lambda: second.step > seen_before + 20, 60, "steps made after the attach")
        assert second.loss.recent[0][0] <= seen_before  # the history from before the screen went away
        assert any(e.kind == "attached" for e in second.events)
        assert attached.command("pause")
        wait_for(lambda: second.state == "paused", 30, "the attached screen to pause the run")
        assert next(r for r in runs.live_runs() if r.pid == run.process.pid).watched
        with pytest.raises(AttachError, match="still shown by another"):
            choose(run.process.pid)
    finally:
        attached.close()  # the user quit the attached screen: the run stops, as under its own screen
    wait_for(lambda: not psutil.pid_exists(run.process.pid) or run.process.poll() is not None, 30, "the run to stop")
    assert runs.live_runs() == []


@pytest.mark.fault('attached screens come and go twice',
                   'the run trains on, attachable each time')
def test_a_second_detach_and_attach(start_run) -> None:
    run, _ = detached_run(start_run, steps=2000)
    for _ in range(2):
        session = Session("pat_steps.py", [])
        attached = AttachedRun(choose(run.process.pid), session)
        attached.attach()
        before = session.step
        wait_for(lambda: session.step > before + 5, 60, "steps after the attach")
        attached.server.close()  # this screen goes away too
        wait_for(lambda: not runs.live_runs()[0].watched, 10, "the run to be detached again")
    assert run.running


def test_attach_without_a_run_is_one_line_and_exit_1() -> None:
    result = subprocess.run([*tuidebug_command(), "attach"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert result.stderr.strip() == "tuidebug: error: no run to attach to: no run of yours is alive"
    assert listing() == "no tuidebug run of yours is alive"


def test_records_of_dead_runs_are_pruned(own_cache: Path) -> None:
    process = subprocess.Popen(["sleep", "0"])
    process.wait()
    runs.save(runs.RunRecord(pid=process.pid, script="gone.py", started=0.0))
    reused = runs.RunRecord(pid=os.getpid(), script="old.py", started=0.0)  # a live pid, a record far older
    runs.save(reused)

    assert runs.live_runs() == []
    assert not list((own_cache / "tuidebug" / "runs").glob("*.json"))
