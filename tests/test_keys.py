"""Pilot tests of the keys every screen shares on real runs: help on ? and F1, q and esc, ctrl+c, the
exit code of a quit, footers that show only the keys that work; the tree's legend and detail pane;
the batch inspector's way to the failing batch and its NaN row."""

from __future__ import annotations

from textual.widgets import Tree

from conftest import EXAMPLES, wait_for
from pilot import screen_text, shows, until
from tuidebug.app import TuidebugApp, _finish
from tuidebug.protocol import BatchReport, ProbeResult
from tuidebug.screens.dashboard import DashboardScreen
from tuidebug.screens.dialogs import NumberScreen, QuitScreen
from tuidebug.screens.help import HelpScreen
from tuidebug.screens.inspector import InspectorScreen, kept_steps, steps_text
from tuidebug.screens.layers import LayerTableScreen
from tuidebug.screens.shapes import ShapeTraceScreen
from tuidebug.screens.tree import TreeScreen, explain
from tuidebug.session import Session
from tuidebug.triage import start_walk

SMALL = (80, 24)
NAN_ROW = 18  # nan_inputs.py: the batch of step 14 holds the dataset's NaN at example 18, feature 2


def footer(app: TuidebugApp) -> str:
    return screen_text(app).splitlines()[-1]


async def at_the_nan_break(pilot, app) -> None:
    await until(pilot, lambda: isinstance(app.screen, TreeScreen), "the tree, opened by the NaN break")


async def press_until(pilot, key: str, screen_type: type, what: str) -> None:
    await pilot.press(key)
    await until(pilot, lambda: isinstance(pilot.app.screen, screen_type), what)


async def test_help_lists_the_keys_of_every_screen_and_closes_on_its_keys(start_run):
    run, session = start_run(EXAMPLES / "nan_inputs.py")
    wait_for(lambda: session.state == "paused", 60, "the break on the first NaN")
    app = TuidebugApp(run)
    async with app.run_test(size=SMALL) as pilot:
        await at_the_nan_break(pilot, app)
        await press_until(pilot, "question_mark", HelpScreen, "help on ?")
        await shows(pilot, "Keys: decision tree", "Run the selected check's probe", "Go to the node the results point to",
                    "Back to the dashboard", "Quit (asks first")
        assert "Cancel the running probe" not in screen_text(app)  # no probe runs: c does nothing now
        await press_until(pilot, "question_mark", TreeScreen, "? to close the help")

        await press_until(pilot, "escape", DashboardScreen, "esc back to the dashboard")
        await press_until(pilot, "f1", HelpScreen, "help on F1")
        await shows(pilot, "Keys: dashboard", "Let the paused run go on", "The paused batch, tensor by tensor",
                    "Loss chart: log or linear scale")
        assert "Pause at the next safe point" not in screen_text(app)  # paused already
        await press_until(pilot, "q", DashboardScreen, "q to close the help, not to quit")
        assert app.return_code is None

        for key, screen_type, title, own_key in (
                ("i", InspectorScreen, "batch inspector", "The next example (row) that holds NaN or Inf"),
                ("t", LayerTableScreen, "per-layer gradient norms", "Sort by norm, by name, or in model order")):
            await press_until(pilot, key, screen_type, title)
            await press_until(pilot, "question_mark", HelpScreen, f"help on the {title}")
            await shows(pilot, f"Keys: {title}", own_key)
            await press_until(pilot, "escape", screen_type, "esc to close the help")
            await press_until(pilot, "escape", DashboardScreen, "esc back to the dashboard")

        await press_until(pilot, "d", TreeScreen, "the tree")
        await press_until(pilot, "t", ShapeTraceScreen, "the shape trace")
        await press_until(pilot, "f1", HelpScreen, "help on the shape trace")
        await shows(pilot, "Keys: shape trace", "Run the shape trace again")


async def test_q_asks_to_quit_and_esc_goes_back_one_screen_everywhere(start_run):
    run, session = start_run(EXAMPLES / "nan_inputs.py")
    wait_for(lambda: session.state == "paused", 60, "the break on the first NaN")
    app = TuidebugApp(run)
    async with app.run_test(size=SMALL) as pilot:
        await at_the_nan_break(pilot, app)
        await press_until(pilot, "q", QuitScreen, "the quit question from the tree")
        await shows(pilot, "Stop and quit [y]", "Cancel [n]", "y Stop and quit", "n Cancel")  # its keys, said twice
        await press_until(pilot, "n", TreeScreen, "n to stay")
        await press_until(pilot, "i", InspectorScreen, "the inspector from the tree")
        await press_until(pilot, "q", QuitScreen, "the quit question from the inspector")
        await press_until(pilot, "escape", InspectorScreen, "esc to stay")
        await press_until(pilot, "escape", TreeScreen, "esc: back one screen, to the tree")
        await press_until(pilot, "escape", DashboardScreen, "esc: back one screen, to the dashboard")
        await pilot.press("escape")  # nothing to go back to
        await pilot.pause(0.3)
        assert isinstance(app.screen, DashboardScreen) and app.return_code is None

        await press_until(pilot, "ctrl+c", QuitScreen, "ctrl+c asks to quit")
        await pilot.press("y")
        await until(pilot, lambda: app.return_code is not None, "the app to exit")
    assert _finish(run) == 0  # the user stopped a script that was still running: a clean quit, not 143


async def test_quitting_after_the_script_ended_gives_the_script_exit_code(start_run):
    run, session = start_run(EXAMPLES / "healthy_mlp.py", "--epochs", "1")
    app = TuidebugApp(run)
    async with app.run_test(size=SMALL) as pilot:
        await shows(pilot, "FINISHED, CODE 0")
        await pilot.press("q")  # the script is over: no question
        await until(pilot, lambda: app.return_code is not None, "the app to exit")
    assert _finish(run) == 0 and run.process.returncode == 0


async def test_footers_show_only_the_keys_that_work_and_never_cut_one(start_run):
    run, session = start_run(EXAMPLES / "nan_after_warmup.py", "--sleep", "0.02", break_on_nan=False)
    app = TuidebugApp(run)
    async with app.run_test(size=SMALL) as pilot:
        await until(pilot, lambda: session.state == "running", "the run")
        await until(pilot, lambda: "space Pause" in footer(app), "the running footer")
        assert "s Step" in footer(app) and "i Inspect" not in footer(app)  # batches are read while paused
        assert footer(app).rstrip().endswith("q Quit ? Help")  # the last keys whole: nothing cut off
        await pilot.press("space")
        await until(pilot, lambda: "space Resume" in footer(app), "the paused footer")
        assert "i Inspect" in footer(app) and "l Log" in footer(app) and "c Chart" in footer(app)
        assert footer(app).rstrip().endswith("q Quit ? Help")

        await press_until(pilot, "d", TreeScreen, "the tree")
        await until(pilot, lambda: "⏎ Run" in footer(app), "enter in the tree's footer, the tree focused")
        assert app.screen.focused is app.screen.query_one(Tree)
        assert "c Cancel" not in footer(app) and "v Verdict" not in footer(app)  # no probe running, no verdict yet
        assert footer(app).rstrip().endswith("esc Back ? Help")


async def test_the_tree_explains_its_marks_and_resets_the_detail_pane_per_node(start_run):
    run, session = start_run(EXAMPLES / "nan_inputs.py")
    wait_for(lambda: session.state == "paused", 60, "the break on the first NaN")
    app = TuidebugApp(run)
    async with app.run_test(size=SMALL) as pilot:
        await at_the_nan_break(pilot, app)
        await shows(pilot, "[FAIL] cause confirmed  [pass] ruled out  [ ?? ] could not tell  [ -> ] here")
        screen = app.screen
        screen.query_one(Tree).move_cursor(screen._items["nan.lr"])
        # The details follow the cursor, with what the check costs before it runs.
        await shows(pilot, "probe: nan.lr   found: not run yet", "it takes one short replay")
        details = screen.query_one("#tree-details")
        # At 80x24 the explanation is taller than its pane, once laid out: a scroll asked for before that (a loaded
        # machine) has nothing to scroll.
        await until(pilot, lambda: details.max_scroll_y > 0, "the explanation laid out taller than its pane")
        details.scroll_end(animate=False)
        await until(pilot, lambda: details.scroll_y > 0, "the detail pane scrolled down")
        await pilot.press("down")
        await shows(pilot, "NaN: NaN or Inf in the inputs?", "Does the failing batch, or the dataset, hold NaN")
        assert details.scroll_y == 0


def test_check_results_read_as_findings():
    walk = start_walk(Session("train.py", []))
    node = walk.tree["nan.inputs"]
    walk.results[node.id] = ProbeResult(run_id=1, probe="nan.inputs", status="fail", summary="1 NaN in batch[0]", evidence=[])
    assert "cause confirmed: 1 NaN in batch[0]" in explain(walk, node).plain
    walk.results[node.id] = ProbeResult(run_id=1, probe="nan.inputs", status="inconclusive", summary="no batch", evidence=[])
    assert "could not tell: no batch" in explain(walk, node).plain


async def test_the_inspector_opens_on_the_failing_batch_and_one_key_finds_its_nan_row(start_run):
    run, session = start_run(EXAMPLES / "nan_inputs.py")
    wait_for(lambda: session.state == "paused", 60, "the break on the first NaN")
    assert session.step == 13  # the NaN came inside step 14: its batch is the one to see
    app = TuidebugApp(run)
    async with app.run_test(size=SMALL) as pilot:
        await at_the_nan_break(pilot, app)
        await press_until(pilot, "i", InspectorScreen, "the inspector")  # key 1
        await shows(pilot, "batch of step 14  (the step that failed)", f"NaN/Inf in example(s) {NAN_ROW}")
        await pilot.press("n")  # key 2: the bad row, on the tensor that holds it
        await shows(pilot, f"example {NAN_ROW} of 0-31", f"example {NAN_ROW}: [", "NaN 1 at [[18, 2]]")
        assert "nan" in screen_text(app).split(f"example {NAN_ROW}: [")[1].split("]")[0]

        await press_until(pilot, "g", NumberScreen, "the go-to-batch question")
        await pilot.press("ctrl+a", "ctrl+k", "9", "9", "enter")
        await shows(pilot, "Step 99 is not kept: enter one of 1-14.")
        await pilot.press("ctrl+a", "ctrl+k", "3", "enter")
        await shows(pilot, "batch of step 3   kept: 1-14")
        assert "failed" not in screen_text(app).splitlines()[0]

        await press_until(pilot, "G", NumberScreen, "the go-to-example question")
        await pilot.press("ctrl+a", "ctrl+k", "4", "0", "enter")
        await shows(pilot, "Enter an example from 0 to 31.")
        await pilot.press("ctrl+a", "ctrl+k", "3", "1", "enter")
        await shows(pilot, "example 31 of 0-31", "example 31: [")
        assert "e Next" not in footer(app)  # the last example: no next one
        await pilot.press("e")
        await pilot.pause(0.5)
        assert "example 31 of 0-31" in screen_text(app)


def test_kept_steps_are_listed_once_and_as_ranges():
    report = BatchReport(step=15, available=[11, 12, 13, 14, 15, 15, 20])
    assert kept_steps(report) == [11, 12, 13, 14, 15, 20]
    assert steps_text(kept_steps(report)) == "11-15, 20"
