"""The shape trace: one forward pass as a table of module calls in call order (nested calls
indented), with their input and output shapes, dtype and parameter count; the call that raised is
marked, and the cursor starts on the innermost one (where the shapes stop fitting)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Static

from tuidebug.launcher import ChildRun
from tuidebug.screens.footer import KeysFooter

PROBE = "shape.trace"
REFRESH_SECONDS = 0.3
COLUMNS = ("#", "module", "type", "input", "output", "dtype", "params")
FAILED = "FAILED"


def trace_row(index: int, row: dict) -> tuple[str | Text, ...]:
    failed = row.get("output") is None
    style = "bold red" if failed else ""
    module = "  " * int(row.get("depth", 0)) + str(row["module"])
    return (str(index), Text(module, style=style), row["type"], row["input"], Text(row.get("output") or FAILED, style=style),
            row.get("dtype", "-"), f"{row['params']:,}" if row.get("params") else "")


def culprit(rows: list[dict]) -> int | None:
    """The innermost call that raised: the last failed row (its callers failed with it, before it)."""
    failed = [index for index, row in enumerate(rows) if row.get("output") is None]
    return failed[-1] if failed else None


class ShapeTraceScreen(Screen[None]):
    TITLE = "shape trace"
    BINDINGS = [
        Binding("r", "retrace", "Trace again", id="shapes.retrace", tooltip="Run the shape trace again"),
        Binding("escape,t", "app.pop_screen", "Back", id="shapes.back", tooltip="Back to the decision tree"),
    ]

    def __init__(self, run: ChildRun) -> None:
        super().__init__()
        self.run = run
        self._shown: object = None
        self._ended = False

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(id="shapes-title")
            yield DataTable(id="shapes-table", cursor_type="row", zebra_stripes=True)
            yield Static(id="shapes-summary")
        yield KeysFooter()

    def on_mount(self) -> None:
        if PROBE not in self.run.session.probe_results:
            self.action_retrace()
        self.set_interval(REFRESH_SECONDS, self._refresh)
        self._refresh()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return action != "retrace" or not self.run.session.ended  # a trace needs the training process

    def action_retrace(self) -> None:
        session = self.run.session
        session.probe_results.pop(PROBE, None)  # before the command: the new trace may come back at once
        if session.ended or not self.run.command("probe", name=PROBE, params={}):
            self.query_one("#shapes-title", Static).update("The training process is gone: no forward pass to trace.")
            return
        self.query_one("#shapes-title", Static).update("Tracing one forward pass of the model on the paused batch...")

    def _refresh(self) -> None:
        if self.run.session.ended != self._ended:
            self._ended = self.run.session.ended
            self.refresh_bindings()  # the training process is gone: nothing to trace again
        result = self.run.session.probe_results.get(PROBE)
        if result is None or result is self._shown:
            return
        self._shown = result
        rows = list(result.data.get("rows") or [])
        self.query_one("#shapes-title", Static).update(
            f"Shape trace: {len(rows)} module call(s) of one forward pass, in call order (nested calls indented)")
        table = self.query_one(DataTable)
        table.clear(columns=True)
        cells = [trace_row(index, row) for index, row in enumerate(rows)]
        for column, label in enumerate(COLUMNS):
            table.add_column(label, width=max([len(label)] + [len(str(cell[column])) for cell in cells]))
        for cell in cells:
            table.add_row(*cell)
        failed = culprit(rows)
        if failed is not None:
            table.move_cursor(row=failed)
        self.query_one("#shapes-summary", Static).update(Text(f"[{result.status}] {result.summary}"))
