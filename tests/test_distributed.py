"""A torchrun job under tuidebug: two CPU workers (gloo), each with the agent, one screen for both.

Real processes all the way: tuidebug starts torch.distributed.run, which starts the workers."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SCRIPTS, tuidebug_command, wait_for
from tuidebug import protocol
from tuidebug.attach import ListenedRun
from tuidebug.launcher import ChildRun, Target
from tuidebug.session import Session

# torchrun's workers meet on one fixed port (29500): two jobs at once on one box would collide, so
# under pytest-xdist every test of this file runs on the same worker, one after another.
pytestmark = pytest.mark.xdist_group("torchrun")

DDP = SCRIPTS / "ddp_steps.py"
TWO = ["--nproc-per-node", "2"]


def headless(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*tuidebug_command(), "--headless", "--print-every", "5", *TWO, str(DDP), *args],
                          capture_output=True, text=True, timeout=180)


def test_both_ranks_report_their_figures(record_property) -> None:
    result = headless("--steps", "20")

    assert result.returncode == 0, result.stderr[-2000:]
    for rank in (0, 1):
        assert re.search(rf"\[tuidebug\] rank {rank}  step 20  .*loss \S+  grad \S+", result.stderr), result.stderr
        assert f"rank {rank} step 20 loss" in result.stdout
    assert "straggler" not in result.stderr  # equal shards on equal workers: no rank stands out


def test_a_rank_that_loads_its_batches_late_is_named_the_straggler() -> None:
    """DDP makes every rank's step as long as the slowest's: the time compared is the data and forward."""
    result = headless("--steps", "40", "--slow-rank", "1")

    assert result.returncode == 0, result.stderr[-2000:]
    assert re.search(r"rank 1 is the straggler: loading its batch and the forward take 3\d\.\d ms a step",
                     result.stderr), result.stderr[-3000:]


def test_pause_is_collective_and_resume_lets_every_rank_go_on() -> None:
    session = Session(str(DDP), [])
    run = ChildRun(Target(str(DDP), ["--steps", "100", "--sleep", "0.02"], launch=TWO), session, {},
                   capture_output=True)
    run.start()
    try:
        wait_for(lambda: len(session.ranks) == 2 and min(v.step for v in session.ranks.values()) >= 5, 90,
                 "both ranks to step")
        assert run.command("pause")
        wait_for(lambda: all(v.state == "paused" for v in session.ranks.values()), 30, "both ranks to pause")
        steps = {rank: view.step for rank, view in session.ranks.items()}
        assert steps[0] == steps[1]  # the same step boundary on every rank

        assert run.command("resume")
        wait_for(lambda: all(v.ended for v in session.ranks.values()), 120, "both ranks to finish")
        assert all(view.step == 100 for view in session.ranks.values())
    finally:
        run.close()


@pytest.mark.fault("a NaN on one rank of a torchrun job (rank 1 only)",
                   "`diagnose`: class nan, the rank named, probes refused with the reason, exit 1")
def test_a_nan_on_rank_1_is_attributed_to_rank_1(tmp_path: Path, record_property) -> None:
    out = tmp_path / "report.json"
    result = subprocess.run([*tuidebug_command(), "diagnose", *TWO, "--json", str(out), str(DDP), "--nan-rank", "1",
                             "--nan-at", "10"], capture_output=True, text=True, timeout=240, cwd=tmp_path)
    report = json.loads(out.read_text())

    assert result.returncode == 1 and report["failure_class"] == "nan", report["summary"]
    assert "rank 1: non-finite loss" in report["summary"]
    assert all("multi-process job" in c["summary"] for c in report["checks"] if c["status"] == "inconclusive")
    record_property("observed", f"nan, exit 1: {report['summary'][:80]}")


@pytest.mark.fault("a worker of a torchrun job is killed (SIGKILL on rank 1)",
                   "the job stops, the lost rank is reported, exit non-zero, no process left")
def test_a_killed_rank_is_reported_and_the_job_stops(record_property) -> None:
    result = headless("--steps", "200", "--kill-rank", "1", "--kill-at", "10")

    assert result.returncode != 0
    assert "lost the connection to the agent of rank 1 before the script ended" in result.stderr, result.stderr[-3000:]
    record_property("observed", f"exit {result.returncode}; `lost the connection to the agent of rank 1`")


def test_workers_another_launcher_starts_connect_to_a_listening_screen() -> None:
    session = Session("listen", [])
    screen = ListenedRun(session, "127.0.0.1", 0)
    screen.start()
    env = {**os.environ, protocol.ENV_ADDRESS: screen.server.address, protocol.ENV_TOKEN: screen.server.token}
    job = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", *TWO, "-m", "tuidebug.agent", str(DDP),
                            "--steps", "20"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: len(session.ranks) == 2 and all(v.step == 20 for v in session.ranks.values()), 120,
                 "both workers' steps on the listening screen")
        assert screen.server.address.startswith("tcp:127.0.0.1:")
        assert any(e.kind == "listening" and "python -m tuidebug.agent" in e.message for e in session.events)
        wait_for(lambda: all(v.state == "ended" for v in session.ranks.values()), 60, "the post-mortem hold")
        assert screen.command("quit")
        assert job.wait(60) == 0
        wait_for(lambda: not screen.running, 30, "the screen to see the job gone")
    finally:
        job.kill()
        screen.close()


def test_a_worker_with_the_wrong_token_is_refused_and_runs_without_the_agent() -> None:
    session = Session("listen", [])
    screen = ListenedRun(session, "127.0.0.1", 0)
    screen.start()
    env = {**os.environ, protocol.ENV_ADDRESS: screen.server.address, protocol.ENV_TOKEN: "0" * 32}
    try:
        result = subprocess.run([sys.executable, "-m", "tuidebug.agent", str(SCRIPTS / "pat_steps.py"), "--steps", "3"],
                                env=env, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0 and "step 3 loss" in result.stdout
        assert "refused the agent: wrong token; running the script without the agent" in result.stderr
        assert session.hello is None and any("wrong token" in e.message for e in session.events)
    finally:
        screen.close()


async def test_r_shows_every_ranks_charts_then_each_rank_alone() -> None:
    from pilot import shows
    from tuidebug.app import TuidebugApp

    session = Session(str(DDP), [])
    run = ChildRun(Target(str(DDP), ["--steps", "400", "--sleep", "0.02"], launch=TWO), session, {},
                   capture_output=True)
    run.start()
    try:
        wait_for(lambda: len(session.ranks) == 2 and min(v.step for v in session.ranks.values()) >= 5, 90,
                 "both ranks to step")
        app = TuidebugApp(run)
        async with app.run_test(size=(120, 40)) as pilot:
            await shows(pilot, "r Rank")
            await pilot.press("r")
            await shows(pilot, "loss  ⡇ rank 0  • rank 1", "gradient norm  ⡇ rank 0  • rank 1")
            await pilot.press("r")
            await shows(pilot, "loss (rank 0)", "gradient norm (rank 0)")
            await pilot.press("r")
            await shows(pilot, "loss (rank 1)")
            await pilot.press("r")
            await shows(pilot, "loss  ⡇ raw  • smoothed")  # round again: the job's own chart
    finally:
        run.close()


def test_the_rank_whose_memory_grows_is_flagged_and_labelled() -> None:
    """Both ranks start at 1 GiB once training began; rank 1 then keeps 64 MiB a reading, rank 0 stays."""
    session = Session("train.py", [])
    mib = 1024**2
    for rank in (0, 1):
        session.ingest_from(rank, protocol.Hello(version=1, token="", pid=100 + rank, argv=[], python="3",
                                                 torch_version="2", rank=rank, world_size=2))
    for reading in range(8):
        for rank in (0, 1):
            session.ingest_from(rank, protocol.Step(step=reading + 1, time=reading, loss=1.0))
            grown = 64 * mib * reading if rank == 1 else 0
            session.ingest_from(rank, protocol.Memory(time=reading, rss=1024 * mib + grown))
    assert session.rank_flags == {"memory": 1}
    assert any(event.kind == "rank_memory" and "rank 1's memory grew by 256.0 MiB" in event.message
               for event in session.events)
    assert session.rank_label(1) == "rank 1 (memory)" and session.rank_label(0) == "rank 0"
