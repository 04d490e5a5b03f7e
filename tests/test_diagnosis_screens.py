"""Pilot tests of the diagnosis screens on real runs: the tree walked with the keyboard, the
verdict and its saved report, the batch inspector."""

from __future__ import annotations


from textual.widgets import DataTable

from conftest import EXAMPLES, ROOT, SCRIPTS, wait_for
from pilot import screen_text, shows, until
from tuidebug.app import TuidebugApp
from tuidebug.screens.dialogs import QuitScreen
from tuidebug.screens.help import HelpScreen
from tuidebug.screens.inspector import InspectorScreen, picture
from tuidebug.screens.shapes import ShapeTraceScreen
from tuidebug.screens.tree import TreeScreen
from tuidebug.screens.verdict import VerdictScreen

SIZE = (120, 40)


async def test_the_tree_walks_a_nan_run_to_its_verdict_with_the_keyboard(start_run, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run, session = start_run(EXAMPLES / "nan_divide_by_zero.py")
    wait_for(lambda: session.state == "paused", 60, "the break on the first NaN")
    app = TuidebugApp(run)
    async with app.run_test(size=SIZE) as pilot:
        app.push_screen(TreeScreen(run))
        await shows(pilot, "Single-batch overfit test", "NaN: unsafe log / exp / divide?", "Protocol verification")

        await pilot.press("a")  # autopilot: every check in turn, then the verdict
        await until(pilot, lambda: isinstance(app.screen, VerdictScreen), "the verdict screen", timeout=120)
        await shows(pilot, "nan / unsafe_math", "torch.div at nan_divide_by_zero.py:22",
                    "[x] For NaN: learning rate, input NaNs, unsafe math, and gradient explosion all checked")
        await pilot.press("question_mark")  # the verdict's own keys, and q asks to quit here too
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help")
        await shows(pilot, "Keys: verdict", "Write the Markdown report", "Re-run the deciding check")
        await pilot.press("escape")
        await pilot.press("q")
        await until(pilot, lambda: isinstance(app.screen, QuitScreen), "the quit question")
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, VerdictScreen), "the verdict again")

        await pilot.press("s")
        await until(pilot, lambda: list(tmp_path.glob("tuidebug-report-*.md")), "the saved report", timeout=60)
        await until(pilot, lambda: list(tmp_path.glob("tuidebug-repro-*/bundle.json")), "the bundle", timeout=60)
        report = next(tmp_path.glob("tuidebug-report-*.md")).read_text()
        assert "`unsafe_math`" in report

        await pilot.press("escape")
        assert isinstance(app.screen, TreeScreen)
        assert "[FAIL] NaN: unsafe log / exp / divide?" in screen_text(app)
        assert "[pass] NaN: NaN or Inf in the inputs?" in screen_text(app)


async def test_the_charts_stay_beside_the_tree_from_120_columns(start_run):
    """At a break the charts matter: beside the tree where there is room, one key away below that."""
    run, session = start_run(EXAMPLES / "nan_divide_by_zero.py")
    wait_for(lambda: session.state == "paused", 60, "the break on the first NaN")
    app = TuidebugApp(run)
    async with app.run_test(size=(120, 40)) as pilot:
        app.push_screen(TreeScreen(run))
        await shows(pilot, "Single-batch overfit test", "loss ", "gradient norm ", "RSS (CPU) ")
        await pilot.resize_terminal(100, 30)
        await until(pilot, lambda: "gradient norm" not in screen_text(app), "the charts to make room")
        await shows(pilot, "Single-batch overfit test", "esc Back")


async def test_enter_runs_the_selected_check_and_its_evidence_is_shown(start_run):
    run, session = start_run(EXAMPLES / "no_grad_reaches_weights.py", break_at=3)
    wait_for(lambda: session.state == "paused", 60, "the break at step 3")
    app = TuidebugApp(run)
    async with app.run_test(size=SIZE) as pilot:
        app.push_screen(TreeScreen(run))
        await shows(pilot, "Single-batch overfit test")
        await pilot.press("enter")
        await shows(pilot, "[FAIL] Single-batch overfit test", "cannot fit one batch", timeout=60)
        await pilot.press("n")
        await shows(pilot, "Which failure? (one batch cannot be fitted)")
        await pilot.press("a")  # the learning checks in turn, then the verdict
        await until(pilot, lambda: isinstance(app.screen, VerdictScreen), "the verdict screen", timeout=60)
        await shows(pilot, "no_learning / no_gradient_to_weights", "the graph is cut by")


async def test_the_inspector_shows_the_paused_batch(start_run):
    run, session = start_run(SCRIPTS / "probe_batches.py", "dict", break_at=2)
    wait_for(lambda: session.state == "paused", 60, "the break at step 2")
    app = TuidebugApp(run)
    async with app.run_test(size=SIZE) as pilot:
        app.push_screen(InspectorScreen(run))
        await shows(pilot, "batch of step 2", "batch['features']", "16x6", "batch['label']")
        await pilot.press("down")
        await shows(pilot, "labels: 0:")
        await pilot.press("left_square_bracket")
        await shows(pilot, "batch of step 1")


def test_pictures_go_dark_to_light_without_colour():
    assert picture([[0.0, 0.5, 1.0]]) == "  ++@@"


async def test_the_shape_trace_screen_marks_the_call_that_raised(start_run):
    run, session = start_run(ROOT / "corpus" / "shape" / "shape_vgg_blocks_mnist_28px.py")
    wait_for(lambda: session.state in ("paused", "ended", "crashed"), 90, "the shape error")
    app = TuidebugApp(run)
    async with app.run_test(size=SIZE) as pilot:
        app.push_screen(TreeScreen(run))
        await shows(pilot, "Single-batch overfit test")
        await pilot.press("t")
        await until(pilot, lambda: isinstance(app.screen, ShapeTraceScreen), "the shape trace screen")
        await shows(pilot, "Shape trace:", "classifier.0", "FAILED", "(64, 128)", timeout=60)
        table = app.screen.query_one(DataTable)
        assert "classifier.0" in str(table.get_row_at(table.cursor_row)[1])  # the cursor on the culprit
        await pilot.press("escape")
        assert isinstance(app.screen, TreeScreen)
