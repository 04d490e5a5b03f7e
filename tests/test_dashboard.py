"""Pilot tests of the dashboard on real runs: what a user would read on the screen, and what the keys do."""

from __future__ import annotations

import math
import re

import pytest
from textual.app import App, ComposeResult

from conftest import EXAMPLES, SCRIPTS
from pilot import footer_keys, keys_cut, reads, screen_text, shows, until
from tuidebug.app import TuidebugApp
from tuidebug.format import number
from tuidebug.protocol import Device, Memory, State, Step
from tuidebug.screens import plotdata
from tuidebug.screens.charts import GradPane, MemoryPane
from tuidebug.screens.dialogs import QuitScreen, RunToStepScreen
from tuidebug.screens.header import device_text, header_text
from tuidebug.screens.layers import LayerTableScreen, layer_rows
from tuidebug.screens.tree import TreeScreen
from tuidebug.screens.logs import OutputPane, clean_line
from tuidebug.session import Series, Session

WIDE = (100, 30)
WIDER = (140, 30)  # room on the header's first line for the NaN flag after the fixture's absolute paths


async def test_a_finished_run_shows_its_loss_output_and_events(start_run):
    run, session = start_run(EXAMPLES / "healthy_mlp.py", "--epochs", "1")
    app = TuidebugApp(run)
    async with app.run_test(size=WIDE) as pilot:
        await shows(pilot, "FINISHED, CODE 0")
        printed = [line for line in session.output if line.startswith("step ")]
        assert printed[-1].startswith("step 16 loss")
        loss = float(printed[-1].split()[-1])
        await shows(pilot, printed[-1], "script_end script ended with")  # the output pane, the event log
        await reads(pilot, rf"loss\s+{re.escape(number(loss))}\b")  # the figure beside the chart
        screen = screen_text(app)
        assert "healthy_mlp.py --epochs 1" in screen and f"pid {session.pid}" in screen and "CPU" in screen
        assert "step 16" in screen and f"epoch {session.epoch}" in screen
        assert "post-mortem" in screen and "RSS (CPU)" in screen


async def test_pause_step_resume_change_the_state_on_screen(start_run):
    run, session = start_run(EXAMPLES / "nan_after_warmup.py", "--sleep", "0.02", break_on_nan=False)
    app = TuidebugApp(run)
    async with app.run_test(size=WIDE) as pilot:
        await until(pilot, lambda: session.step >= 3, "a few steps")
        await shows(pilot, "RUNNING")
        await pilot.press("space")
        await shows(pilot, "PAUSED")
        await shows(pilot, "space Resume")
        paused_at = session.step
        await pilot.press("s")
        await shows(pilot, f"stepped to step {paused_at + 1}")
        assert session.state == "paused" and session.step == paused_at + 1
        await pilot.press("p")
        await shows(pilot, "RUNNING")
        await until(pilot, lambda: session.step > paused_at + 2, "training to go on")
        await shows(pilot, "space Pause")


async def test_run_to_step_pauses_there(start_run):
    run, session = start_run(EXAMPLES / "nan_after_warmup.py", "--sleep", "0", break_at=3, break_on_nan=False)
    app = TuidebugApp(run)
    async with app.run_test(size=WIDE) as pilot:
        await shows(pilot, "break at step 3")
        await pilot.press("g")
        await until(pilot, lambda: isinstance(app.screen, RunToStepScreen), "the run-to-step dialog")
        await pilot.press("ctrl+a", "ctrl+k", "2")  # too early: the dialog says so and stays
        await pilot.press("enter")
        await shows(pilot, "Enter a step after 3.")
        await pilot.press("backspace", "1", "2", "enter")
        await until(pilot, lambda: session.state == "paused" and session.step == 12, "the pause at step 12")
        await until(pilot, lambda: "PAUSED  step 12" in screen_text(app), "the header to follow")
        assert "break at step 12" in screen_text(app)


async def test_break_on_nan_toggle_reaches_the_agent(start_run):
    run, session = start_run(EXAMPLES / "nan_after_warmup.py", "--sleep", "0.02")
    app = TuidebugApp(run)
    async with app.run_test(size=WIDER) as pilot:
        await shows(pilot, "NaN break on")
        await until(pilot, lambda: session.state == "running", "the run")
        await pilot.press("n")
        await shows(pilot, "NaN break off")
        await shows(pilot, "break on NaN/Inf: off")  # the agent's answer, in the event log


async def test_a_nan_pauses_and_the_layer_table_shows_the_norms(start_run):
    run, session = start_run(EXAMPLES / "nan_after_warmup.py", "--sleep", "0", norm_stride=1)
    app = TuidebugApp(run)
    async with app.run_test(size=WIDER) as pilot:
        await until(pilot, lambda: isinstance(app.screen, TreeScreen), "the tree, opened by the NaN break")
        await shows(pilot, "PAUSED", "branch: nan")
        assert "non-finite" in session.reason
        await pilot.press("escape")
        await shows(pilot, "nonfinite_", "NaN break off")  # the agent breaks at the first non-finite value only
        await reads(pilot, r"NaN/Inf\s+1 \(step \d+\)")  # the step it paused on counts
        await pilot.press("t")
        await until(pilot, lambda: isinstance(app.screen, LayerTableScreen), "the layer table")
        await shows(pilot, f"at step {session.layer_norms_step}", "sorted by norm", "largest", *session.layer_norms)
        await pilot.press("o")
        await shows(pilot, "sorted by name")
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, LayerTableScreen), "the dashboard again")


async def test_log_scale_toggle(start_run):
    run, session = start_run(EXAMPLES / "healthy_mlp.py", "--epochs", "1")
    app = TuidebugApp(run)
    async with app.run_test(size=WIDE) as pilot:
        await shows(pilot, "FINISHED")
        await reads(pilot, r"scale\s+linear")
        await pilot.press("l")
        await reads(pilot, r"scale\s+log")


async def test_a_crash_stays_on_screen_until_quit(start_run):
    run, session = start_run(SCRIPTS / "dash_crash.py")
    app = TuidebugApp(run)
    async with app.run_test(size=WIDE) as pilot:
        await shows(pilot, "CRASHED, CODE 1")
        await shows(pilot, "ValueError: boom after step 3", "dash_crash.py", "in check")  # the script's own frames
        output = app.screen.query_one(OutputPane).lines  # scrolled past by the traceback below it
        assert any(line.startswith("step 3 loss") for line in output)
        assert "Traceback (most recent call last):" in output
        await pilot.press("q")  # the script is over: no question
        await until(pilot, lambda: app.return_code is not None, "the app to exit")
    assert run.wait(15) == 1  # the quit command let the child leave with the script's exit code


async def test_quit_asks_while_the_script_runs(start_run):
    run, session = start_run(EXAMPLES / "nan_after_warmup.py", "--sleep", "0.02", break_on_nan=False)
    app = TuidebugApp(run)
    async with app.run_test(size=WIDE) as pilot:
        await until(pilot, lambda: session.state == "running", "the run")
        await pilot.press("q")
        await shows(pilot, "Stop it and quit?")
        await pilot.press("n")
        await until(pilot, lambda: not isinstance(app.screen, QuitScreen), "the dialog to close")
        assert app.return_code is None and run.running
        await pilot.press("q")
        await until(pilot, lambda: isinstance(app.screen, QuitScreen), "the dialog")
        await pilot.press("y")
        await until(pilot, lambda: app.return_code is not None, "the app to exit")


SIZES = [(80, 24), (100, 30), (120, 40), (200, 50)]


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
async def test_every_size_shows_loss_gradient_norm_and_memory_at_once(start_run, size):
    run, session = start_run(EXAMPLES / "healthy_mlp.py", "--epochs", "1")
    app = TuidebugApp(run)
    async with app.run_test(size=size) as pilot:
        await shows(pilot, "FINISHED, CODE 0")
        await until(pilot, lambda: session.memory is not None, "a memory reading")
        # The latest of each figure, by its name: the loss, the gradient norm (in its chart's figures or
        # its compact row), the memory.
        await reads(pilot, rf"\bloss\s+{re.escape(number(session.loss.latest))}\b")
        await reads(pilot, rf"\bnorm\s+{re.escape(number(session.grad_norm.latest))}\b")
        await reads(pilot, r"RSS \(CPU\)\s+\d+\.\d MiB")
        header = screen_text(app).splitlines()[:3]
        assert "…" not in "".join(header), header
        for fact in (f"step {session.step}", f"epoch {session.epoch}", "steps/s",
                     f"lr {number(session.lr.latest)}", "healthy_mlp.py", f"pid {session.pid}"):
            assert fact in "".join(header), (fact, header)
        # The footer recomposes when the run ends: wait for it to show its keys, every one whole.
        await until(pilot, lambda: "q Quit" in footer_keys(app) and keys_cut(app) == [], "a footer with no key cut")


async def test_a_short_screen_draws_one_chart_in_full_and_c_picks_the_next(start_run):
    run, session = start_run(EXAMPLES / "healthy_mlp.py", "--epochs", "1")
    app = TuidebugApp(run)
    async with app.run_test(size=(80, 24)) as pilot:
        await shows(pilot, "FINISHED")
        assert app.screen.has_class("narrow") and app.screen.has_class("short")
        # The script is over: no step, run-to or NaN break; the post-mortem process can still be inspected.
        await shows(pilot, "d Diagnose i Inspect c Chart l Log t Layers o Output q Quit ? Help")
        await shows(pilot, "⡇ raw", "gradient norm  ", "events", "script output", "step 16 loss")
        assert "largest" not in screen_text(app)  # the gradient norm is a compact row: no full figures
        await pilot.press("c")
        await shows(pilot, "largest", "AMP skips")  # the gradient norm's chart, in full
        await reads(pilot, rf"loss  {re.escape(number(session.loss.latest))}  min ")  # the loss, compact
        assert "smoothed" not in screen_text(app)
        await pilot.resize_terminal(120, 40)
        await shows(pilot, "smoothed", "largest", "RSS (CPU), MiB")  # tall enough: three charts in full
        assert "c Chart" not in footer_keys(app)


async def test_no_color_keeps_the_lines_apart(start_run, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    run, session = start_run(EXAMPLES / "healthy_mlp.py", "--epochs", "1")
    app = TuidebugApp(run)
    assert app.no_color
    async with app.run_test(size=WIDE) as pilot:
        await shows(pilot, "FINISHED")
        screen = screen_text(app)
        assert "⡇ raw" in screen and "• smoothed" in screen  # told apart by marker, not by colour


# --- the pure helpers behind the panes -----------------------------------------------------------

def test_charts_plot_at_most_the_limit_and_keep_the_last_point():
    points = [(float(x), float(x % 7)) for x in range(10_000)]
    shown = plotdata.downsample(points, 200)
    assert len(shown) <= 200 and shown[-1] == points[-1] and shown[0][0] == 0.0
    assert plotdata.downsample(points[:50], 200) == points[:50]


def test_whole_run_switches_to_the_coarse_buckets_once_the_recent_window_is_full():
    series = Series(recent=100)
    for x in range(100):
        series.add(x, 1.0)
    assert plotdata.whole_run(series) == list(series.recent)
    series.add(100, 1.0)
    assert plotdata.whole_run(series) == series.coarse.points


def test_non_finite_and_non_positive_values_are_left_out_of_a_chart():
    points = [(1, 0.5), (2, math.nan), (3, math.inf), (4, 0.0), (5, -1.0)]
    assert plotdata.finite(points) == [(1, 0.5), (4, 0.0), (5, -1.0)]
    assert plotdata.finite(points, positive=True) == [(1, 0.5)]


def test_one_spike_does_not_flatten_the_sparkline():
    healthy = [(float(x), 0.5 + 0.3 * math.sin(x / 3)) for x in range(60)]
    spark = plotdata.sparkline([*healthy, (60.0, 1.6e19)], width=61)
    line = spark.line
    assert spark.spikes == [60] and line[-1] == plotdata.SPIKE and not spark.log
    assert len(set(line[:-1])) >= 6  # the healthy history keeps its shape: most of the 8 levels in use


def test_a_range_of_decades_is_drawn_on_a_log_scale():
    decaying = [(float(x), 2.5 * 10 ** (-x / 20)) for x in range(80)]  # 2.5 down to 2.5e-4
    spark = plotdata.sparkline(decaying, width=80)
    assert spark.log and spark.spikes == []
    steps = [plotdata.BLOCKS.index(c) for c in spark.line]
    assert steps == sorted(steps, reverse=True) and len(set(steps)) == 8  # evenly down the levels, not a cliff


def test_the_header_fits_80_columns_without_cutting_a_fact():
    session = Session("train.py", [])
    session.ingest(Device(kind="cpu", name="cpu"))
    for step in range(1, 30):
        session.ingest(Step(step=step, time=step, loss=0.5, lrs=[3e-4], step_seconds=0.01, batch_size=64, epoch=2))
    session.ingest(State(state="paused", step=29, reason="non-finite gradient before the optimizer step"))
    script = "/home/user/projects/very/long/folder/name/train.py --epochs 3 --lr 3e-4"
    lines = header_text(session, script, True, width=78).plain.splitlines()
    assert all(len(line) <= 78 for line in lines) and "…" not in "".join(lines)
    assert "train.py --epochs 3 --lr 3e-4" in lines[0] and "NaN break on" in lines[0]
    for fact in ("PAUSED", "step 29", "epoch 2", "100.0 steps/s", "lr 0.0003"):
        assert fact in lines[1]
    assert lines[2] == "non-finite gradient before the optimizer step"
    wide = header_text(session, script, True, width=160).plain.splitlines()
    assert len(wide) == 2 and wide[1].endswith("6400 samples/s  10 ms/step  non-finite gradient before the optimizer step")


def test_the_header_gives_time_left_the_pass_and_how_busy_the_device_is():
    """At 20 steps/s: 37 of 100 batches, two batches a step (accumulation), so the pass ends in 63 / 40 s;
    with the run's length stated (600 steps), the ETA is to the run's end instead."""
    session = Session("train.py", [])
    session.ingest(State(state="running", step=0))
    for step in range(1, 30):
        session.ingest(Step(step=step, time=step, loss=0.5, lrs=[0.1], step_seconds=0.05, backward_calls=2,
                            epoch=1, epoch_batch=37, epoch_batches=100))
    session.ingest(Memory(time=1.0, rss=1, cpu_percent=180.4))
    line = header_text(session, "train.py", True, width=200).plain.splitlines()[1]
    for fact in ("epoch ends in 1.6s", "batch 37/100", "50 ms/step", "CPU 180%"):
        assert fact in line
    session.ingest(Step(step=30, time=30, loss=0.5, step_seconds=0.05, planned_steps=630, epoch_batch=38,
                        epoch_batches=100))
    session.ingest(Memory(time=2.0, rss=1, gpu_percent=87, cpu_percent=100.0))
    line = header_text(session, "train.py", True, width=200).plain.splitlines()[1]
    assert "ETA 30.0s" in line and "GPU 87%" in line and "CPU" not in line
    session.ingest(State(state="paused", step=30, reason="paused"))
    assert "ETA" not in header_text(session, "train.py", True, width=200).plain  # no time passes while paused


def test_script_output_cannot_drive_the_terminal():
    assert clean_line("\x1b[31mred\x1b[0m \x1b]0;title\x07text") == "red text"
    assert clean_line(" 10%|#  \r 50%|#####  \r100%|##########|") == "100%|##########|"
    assert clean_line("a\tb\x07\x08") == "a       b"


def test_layer_rows_flag_the_largest_and_the_non_finite():
    rows = layer_rows({"0.weight": 3.0, "0.bias": math.nan, "2.weight": 4.0}, "norm")
    assert [(row[1], row[-1]) for row in rows] == [("0.bias", "NON-FINITE"), ("2.weight", "largest"), ("0.weight", "")]
    assert [row[1] for row in layer_rows({"b": 1.0, "a": 2.0}, "name")] == ["a", "b"]
    assert [row[3] for row in layer_rows({"a": 3.0, "b": 4.0}, "model order")] == ["36.0%", "64.0%"]


async def test_the_memory_chart_on_a_gpu_shows_cuda_and_nvml_against_the_device_total():
    """No GPU here: the session is fed the readings a CUDA run's agent sends, and the pane drawn from them."""
    session = Session("train.py", [])
    gib = 1024**3
    session.ingest(Device(kind="cuda", name="NVIDIA H200", total_bytes=140 * gib))
    for second in range(5):
        session.ingest(Memory(time=1000.0 + second, rss=2 * gib, cuda_allocated=(10 + second) * gib,
                              cuda_reserved=20 * gib, cuda_peak=30 * gib, nvml_used=22 * gib, nvml_total=140 * gib))

    class MemoryOnly(App[None]):
        CSS = TuidebugApp.CSS

        def compose(self) -> ComposeResult:
            yield MemoryPane(classes="chart")

    app = MemoryOnly()
    async with app.run_test(size=(100, 20)) as pilot:
        app.query_one(MemoryPane).refresh_from(session)
        await pilot.pause()
        screen = screen_text(app)
    assert "CUDA memory, GiB  ⡇ allocated  • reserved  + NVML  ─ total" in screen
    for figure in ("allocated    14.0 GiB", "reserved     20.0 GiB", "peak         30.0 GiB",
                   "NVML used    22.0 GiB", "device total 140.0 GiB", "RSS (CPU)    2.0 GiB"):
        assert figure in screen
    assert device_text(session) == "NVIDIA H200 (140.0 GiB)"


async def test_the_gradient_chart_draws_the_scripts_clip_threshold_beside_the_norm_before_clipping():
    """A script that clips at 0.25: the chart shows the norms clip_grad_norm_ returned (3 to 5), the
    threshold as a labelled line, and the threshold among the figures, in full and in the compact row."""
    session = Session("train.py", [])
    for step in range(1, 31):
        session.ingest(Step(step=step, time=step, loss=1.0, grad_norm=0.25, norm_before_clip=3.0 + step % 3,
                            clip_at=0.25))

    class GradOnly(App[None]):
        CSS = TuidebugApp.CSS

        def compose(self) -> ComposeResult:
            yield GradPane(classes="chart")
            yield GradPane(classes="chart compact")

    app = GradOnly()
    async with app.run_test(size=(100, 24)) as pilot:
        for pane in app.query(GradPane):
            pane.refresh_from(session)
        await pilot.pause()
        screen = screen_text(app)
    assert "gradient norm  ⡇ norm  ─ clip 0.25" in screen
    assert "clipped at 0.25" in screen and "largest    5" in screen
    assert "gradient norm  3  min 3  max 5  clip 0.25" in screen  # the compact row


async def test_the_memory_chart_marks_the_leak_slope_once_the_agent_finds_growth():
    """RSS rising 2 MiB a reading: after the agent's memory_growth finding the pane draws the fitted line and
    gives the rate the finding measured."""
    from tuidebug.protocol import Event

    session = Session("train.py", [])
    mib = 1024**2
    for second in range(12):
        session.ingest(Memory(time=1000.0 + second, rss=(300 + 2 * second) * mib))

    class MemoryOnly(App[None]):
        CSS = TuidebugApp.CSS

        def compose(self) -> ComposeResult:
            yield MemoryPane(classes="chart")

    app = MemoryOnly()
    async with app.run_test(size=(100, 20)) as pilot:
        pane = app.query_one(MemoryPane)
        pane.refresh_from(session)
        await pilot.pause()
        before = screen_text(app)
        session.ingest(Event(kind="finding", message="memory_growth: resident memory (CPU) grows 2.00 MiB a step, "
                                                     "steadily, 24 MiB over the last 12 steps", time=0.0, step=12))
        session.ingest(Memory(time=1012.0, rss=324 * mib))
        pane.refresh_from(session)
        await pilot.pause()
        after = screen_text(app)
    assert "leak" not in before
    assert "RSS (CPU), MiB  ⡇ RSS  • leak" in after
    assert "leak/step +2.00 MiB" in after


async def test_f_shows_the_screens_own_cost_in_the_header(start_run):
    run, session = start_run(EXAMPLES / "healthy_mlp.py", "--epochs", "1")
    app = TuidebugApp(run)
    async with app.run_test(size=WIDER) as pilot:
        await shows(pilot, "FINISHED, CODE 0")
        assert "frames/s" not in screen_text(app)
        await pilot.press("f")
        await reads(pilot, r"screen \d+% CPU, \d+\.\d frames/s")
        await pilot.press("f")
        await until(pilot, lambda: "frames/s" not in screen_text(app), "the cost to leave the header")


def test_frames_slow_down_while_the_screen_uses_more_than_its_budget(monkeypatch):
    """A frame that costs half a core-second in each quarter second stretches the interval until the
    screen's share is within SCREEN_BUDGET; an idle screen comes back to the base rate."""
    from tuidebug.screens import framerate

    clock = {"cpu": 0.0, "wall": 0.0}
    monkeypatch.setattr(framerate.time, "process_time", lambda: clock["cpu"])
    monkeypatch.setattr(framerate.time, "monotonic", lambda: clock["wall"])
    pacer = framerate.FramePacer(0.25)
    for _ in range(4):  # the first window: the base rate, whatever the start cost
        clock["wall"] += pacer.interval
        clock["cpu"] += 0.05  # 50 ms of work a frame
        pacer.drawn()
    assert pacer.interval == 0.25
    for _ in range(100):
        clock["wall"] += pacer.interval
        clock["cpu"] += 0.05
        pacer.drawn()
    within = 0.05 / framerate.SCREEN_BUDGET  # the interval at which 50 ms a frame is the budget exactly
    assert within <= pacer.interval <= 2 * within and pacer.share <= framerate.SCREEN_BUDGET
    assert not pacer.due()
    for _ in range(100):
        clock["wall"] += pacer.interval
        clock["cpu"] += 0.001
        pacer.drawn()
    assert pacer.interval == 0.25
    clock["wall"] += 0.25
    assert pacer.due()
