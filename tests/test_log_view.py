"""The script's output on real runs: the dashboard's pane and the full-screen log view follow the tail
(under a flood, across a resize), the log view searches, wraps and says when new output is below; the
whole output is written to a private log file whose path tuidebug prints on exit."""

from __future__ import annotations

import re
import stat

from textual.widgets import Input

from conftest import EXAMPLES, SCRIPTS, wait_for
from pilot import screen_text, shows, until
from test_terminal import TUIDEBUG, Terminal
from tuidebug.app import TuidebugApp
from tuidebug import protocol
from tuidebug.launcher import ChildRun, Target, split_probe_marker
from tuidebug.screens.dashboard import DashboardScreen
from tuidebug.screens.logs import OutputPane
from tuidebug.screens.logview import LogViewScreen, OutputView
from tuidebug.screens.savedoutput import OutputFile
from tuidebug.screens.tree import TreeScreen
from tuidebug.session import OUTPUT_LINES, Session

FLOOD = SCRIPTS / "flood.py"


def at_tail(widget) -> bool:
    return widget.following and widget.scroll_y == widget.max_scroll_y


async def type_text(pilot, text: str) -> None:
    await pilot.press(*("space" if char == " " else char for char in text))


async def test_the_output_pane_follows_a_flood_across_resizes(start_run):
    run, session = start_run(FLOOD, "--steps", "60", "--sleep", "0.03")
    app = TuidebugApp(run)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: len(session.output) > 200, "the flood")
        await pilot.resize_terminal(80, 24)  # a round trip while the lines pour in
        await pilot.pause(0.3)
        await pilot.resize_terminal(120, 40)
        await shows(pilot, "FLOOD DONE")  # still following: the last line, without Tab+End
        pane = app.screen.query_one(OutputPane)
        assert at_tail(pane)
        assert "progress 60: 100%" in pane.lines  # a progress bar's carriage returns collapsed
        await pilot.resize_terminal(80, 24)  # and a round trip after the end
        await pilot.pause(0.3)
        await pilot.resize_terminal(120, 40)
        await pilot.pause(0.3)
        await shows(pilot, "FLOOD DONE")
        assert at_tail(pane)


async def test_the_log_view_follows_searches_wraps_and_marks_new_output(start_run, tmp_path):
    gate = tmp_path / "go-on"
    run, session = start_run(FLOOD, "--steps", "100", "--gate", str(gate), "--gate-after", "5")
    app = TuidebugApp(run)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: any(line.startswith("long line 5 ") for line in session.output), "the flood")
        await pilot.press("o")
        await until(pilot, lambda: isinstance(app.screen, LogViewScreen), "the log view on o")
        view = app.screen.query_one(OutputView)
        await pilot.press("pageup")
        await until(pilot, lambda: not view.following, "pageup to leave the tail")
        gate.touch()  # the flood goes on while the view is scrolled up: it stays, a marker says what came
        await shows(pilot, "new output ↓")
        top = view.scroll_y
        await pilot.pause(0.5)
        assert not view.following and view.scroll_y == top
        await pilot.press("end")
        await until(pilot, lambda: "new output ↓" not in screen_text(app), "the marker to go at the end")
        await shows(pilot, "FLOOD DONE", timeout=60)  # followed to the last line
        assert at_tail(view)

        await pilot.press("slash")
        await type_text(pilot, "step 7 line 33 ")
        await pilot.press("enter")
        await shows(pilot, "search 'step 7 line 33 ': 1 of 1", "flood step 7 line 33 loss")
        assert not app.screen.query_one(Input).display and not view.following
        await pilot.press("n")  # the only match: next finds it again
        await shows(pilot, "1 of 1")
        await pilot.press("slash")
        await type_text(pilot, "LINE 44 loss")  # case-insensitive, from the last match on
        await pilot.press("enter")
        await shows(pilot, "search 'LINE 44 loss': 7 of 100", "flood step 7 line 44 loss")
        await pilot.press("N", "N")
        await shows(pilot, "5 of 100", "flood step 5 line 44 loss")

        await pilot.press("G")
        await until(pilot, lambda: at_tail(view), "G back to the end")
        assert "end of long line" not in screen_text(app)  # cut at the width
        await pilot.press("w")
        await shows(pilot, "wrap on", "end of long line")  # the rest of it, on the next row
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, DashboardScreen), "esc back to the dashboard")


async def test_lines_a_probe_printed_are_marked(start_run):
    run, session = start_run(EXAMPLES / "nan_after_warmup.py", "--sleep", "0")
    wait_for(lambda: session.state == "paused", 60, "the break on the first NaN")
    printed_before = len(session.output)
    app = TuidebugApp(run)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, TreeScreen), "the tree, opened by the NaN break")
        assert run.command("probe", name="nan.lr", params={})  # replays the script's own loop, which prints
        await until(pilot, lambda: "nan.lr" in session.probe_results, "the probe's result", timeout=60)
        assert len(session.output) > printed_before  # the borrowed iterations printed
        await pilot.press("escape", "o")
        await until(pilot, lambda: isinstance(app.screen, LogViewScreen), "the log view")
        await shows(pilot, "┃ printed by a probe", f"┃ {session.output[-1]}")
        view = app.screen.query_one(OutputView)
        marked = [line.probe for line in view.lines]
        assert not any(marked[:printed_before]) and all(marked[printed_before:])
        await pilot.press("escape")
        await shows(pilot, f"probe│ {session.output[-1]}"[:30])  # the dashboard's pane marks them too


async def test_stderr_lines_are_told_apart_from_stdout(start_run, tmp_path):
    script = tmp_path / "both_streams.py"
    script.write_text("import sys\nfor i in range(3):\n    print(f'out {i}')\n    print(f'err {i}', file=sys.stderr)\n")
    run, session = start_run(script)
    wait_for(lambda: len(session.output) == 6, 60, "both streams' lines")

    assert {(line.text, line.stream) for line in session.printed_lines()} == {
        *((f"out {i}", "stdout") for i in range(3)), *((f"err {i}", "stderr") for i in range(3))}
    app = TuidebugApp(run)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("o")
        await until(pilot, lambda: isinstance(app.screen, LogViewScreen), "the log view")
        await shows(pilot, "╎ stderr", "╎ err 2", "  out 2")


def test_the_agents_markers_are_split_from_the_scripts_text():
    begins, ends = protocol.PROBE_OUTPUT_BEGINS, protocol.PROBE_OUTPUT_ENDS
    assert split_probe_marker(begins) == (None, begins)  # on a line of its own
    assert split_probe_marker("progress 3: 50%" + ends) == ("progress 3: 50%", ends)  # after an open line
    assert split_probe_marker("step 10 loss 0.5") == ("step 10 loss 0.5", None)
    assert split_probe_marker(begins + " and more") == (begins + " and more", None)  # only at a line's end


def test_the_log_file_holds_every_line_and_is_private(tmp_path):
    target = Target(str(FLOOD), ["--steps", "120"])
    session = Session(target.name, target.args)
    run = ChildRun(target, session, {}, capture_output=True)
    saved = OutputFile.create(session, target.name, tmp_path)
    try:
        run.start()
        wait_for(lambda: session.state == "ended", 60, "the flood to end (its process held for the post-mortem)")
        run.command("quit")
        assert run.wait(15) == 0  # every line read before the child is reaped
    finally:
        run.close()
        saved.close()
    assert re.fullmatch(r"tuidebug-output-flood-\d{8}-\d{6}\.log", saved.path.name)
    assert stat.S_IMODE(saved.path.stat().st_mode) == 0o600
    lines = saved.path.read_bytes().decode().split("\n")[:-1]  # a progress bar's \r kept in its line
    assert len(lines) == 120 * 52 + 1 > OUTPUT_LINES  # more than the session keeps
    assert lines[0] == "flood step 1 line 1 loss " + lines[0].split()[-1] and lines[-1] == "FLOOD DONE"
    assert lines[50] == "progress 1: 0%\rprogress 1: 50%\rprogress 1: 100%"  # as the script wrote it
    assert OutputFile.create(session, target.name, tmp_path).path != saved.path  # the same second: a new name


def test_tuidebug_prints_where_the_output_went_when_it_exits(tmp_path):
    terminal = Terminal("tuidebug-logfile")
    try:
        terminal.start(f"cd {tmp_path} && {TUIDEBUG} {FLOOD} --steps 3", width=100, height=30)
        terminal.wait_for("FLOOD DONE", "FINISHED")
        terminal.press("q")
        screen = terminal.wait_for("tuidebug exited 0")
    finally:
        terminal.close()
    logs = list(tmp_path.glob("tuidebug-output-flood-*.log"))
    assert len(logs) == 1 and f"tuidebug: the script's output: {logs[0]}" in screen.replace("\n", "")
    assert logs[0].read_text(encoding="utf-8").splitlines()[-1] == "FLOOD DONE"
