"""The batch inspector: every tensor of a captured batch, its figures, NaN/Inf locations, one
example's values, the label distribution, and image-like tensors drawn as a picture.

It opens on the batch of the step that failed (or the one the run paused after), goes to any kept
batch and any example of it by number, and jumps to the next example (row) that holds NaN or Inf.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Static

from tuidebug.format import number
from tuidebug.launcher import ChildRun
from tuidebug.protocol import BatchReport
from tuidebug.screens.dialogs import NumberScreen
from tuidebug.screens.footer import KeysFooter
from tuidebug.session import Session

REFRESH_SECONDS = 0.5
SHADES = " .:-=+*#%@"
COLUMNS = ("tensor", "shape", "dtype", "device", "min", "max", "mean", "std", "NaN", "Inf")
NONFINITE_EVENTS = ("nonfinite_loss", "nonfinite_grad")


def failing_step(session: Session) -> int | None:
    """The step whose batch first gave a non-finite loss or gradient. Once that step has completed its
    figures say so (``first_nonfinite_step``); while the run is still stopped inside it, the agent's
    event carries the steps completed so far, so the failing one is the next."""
    if session.counters.first_nonfinite_step is not None:
        return session.counters.first_nonfinite_step
    with session.lock:  # the reader thread appends events
        caught = next((e.step for e in session.events if e.kind in NONFINITE_EVENTS and e.step is not None), None)
    return caught + 1 if caught is not None else None


def opening_step(session: Session) -> int | None:
    """The batch to open on: the failing step's while the run is stopped in it, else the step the run
    paused after; once the script is over, the failing step's if any (the agent says when it is no
    longer kept), else the latest (None)."""
    failing = failing_step(session)
    if session.state == "paused" and failing != session.step + 1:
        return session.step or None
    return failing


def kept_steps(report: BatchReport) -> list[int]:
    """The steps whose batches are kept, each once: a probe's replay captures the loop's next batch
    under the same step number as the one before it."""
    return list(dict.fromkeys(report.available))


def steps_text(steps: list[int]) -> str:
    """``1-14, 20`` rather than fourteen numbers."""
    runs: list[list[int]] = []
    for step in sorted(steps):
        if runs and step == runs[-1][-1] + 1:
            runs[-1].append(step)
        else:
            runs.append([step])
    return ", ".join(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}" for run in runs)


def batch_size(report: BatchReport) -> int | None:
    """The examples in the batch: the leading dimension of its first tensor that has one."""
    return next((info["shape"][0] for info in report.tensors if info["shape"]), None)


def flagged_rows(report: BatchReport) -> list[int]:
    """The examples (rows) where NaN or Inf were located, in order (the agent locates the first few
    per tensor)."""
    rows = {at[0] for info in report.tensors if info["shape"]
            for at in (*info.get("nan_at", []), *info.get("inf_at", []))}
    return sorted(rows)


def flagged_in(info: dict, row: int) -> bool:
    return any(at[0] == row for at in (*info.get("nan_at", []), *info.get("inf_at", []))) if info["shape"] else False


def tensor_row(info: dict) -> tuple[str, ...]:
    flagged = info.get("nan", 0) or info.get("inf", 0)
    return (("! " if flagged else "") + info["path"], "x".join(map(str, info["shape"])) or "scalar",
            info["dtype"], info["device"], number(info.get("min")), number(info.get("max")),
            number(info.get("mean")), number(info.get("std")), str(info.get("nan", "-")), str(info.get("inf", "-")))


def picture(image: list[list[float]]) -> str:
    """A grey image in [0, 1] as characters, dark to light, readable without colour."""
    return "\n".join("".join(SHADES[min(len(SHADES) - 1, int(v * len(SHADES)))] * 2 for v in row) for row in image)


def tensor_details(info: dict, example: int) -> Text:
    text = Text()
    text.append(f"{info['path']}  {info['dtype']} {info['shape']} on {info['device']}\n", style="bold")
    if info.get("nan") or info.get("inf"):
        text.append(f"NaN {info.get('nan', 0)} at {info.get('nan_at', [])}; Inf {info.get('inf', 0)} at "
                    f"{info.get('inf_at', [])}\n", style="bold")
    if "example" in info:
        values = ", ".join(number(v) for v in info["example"])
        text.append(f"example {example}: [{values}{', ...' if len(info['example']) >= 16 else ''}]\n")
    if info.get("labels"):
        total = sum(info["labels"].values())
        text.append("labels: " + ", ".join(f"{k}: {n} ({100 * n / total:.0f}%)" for k, n in info["labels"].items())
                    + "\n")
    if info.get("image"):
        text.append(f"example {example} as an image (dark to light):\n{picture(info['image'])}\n")
    return text


class InspectorScreen(Screen[None]):
    TITLE = "batch inspector"
    BINDINGS = [
        Binding("left_square_bracket", "other_batch(-1)", "Older", id="inspect.older",
                tooltip="The batch of an earlier step (the agent keeps the last few)"),
        Binding("right_square_bracket", "other_batch(1)", "Newer", id="inspect.newer",
                tooltip="The batch of a later step"),
        Binding("n", "next_flagged", "NaN row", id="inspect.flagged",
                tooltip="The next example (row) that holds NaN or Inf"),
        Binding("g", "go_to_batch", "Batch N", id="inspect.go_batch", tooltip="The batch of step N, of those kept"),
        Binding("G", "go_to_example", "Example N", id="inspect.go_example", tooltip="Example N of this batch"),
        Binding("e", "example(1)", "Next example", id="inspect.example", tooltip="Show the next example's values"),
        Binding("E", "example(-1)", "Prev example", id="inspect.example_back",
                tooltip="Show the previous example's values", show=False),
        Binding("escape,i", "app.pop_screen", "Back", id="inspect.back", tooltip="Back to the previous screen"),
    ]

    def __init__(self, run: ChildRun) -> None:
        super().__init__()
        self.run = run
        self.step: int | None = opening_step(run.session)
        self.failing = failing_step(run.session)
        self.example = 0
        self._shown: object = None
        self._to_flagged = False  # after a jump, the cursor goes to the tensor that holds the row's NaN/Inf

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(id="inspect-title")
            yield DataTable(id="inspect-table", cursor_type="row", zebra_stripes=True)
            yield Static(id="inspect-details")
        yield KeysFooter()

    def on_mount(self) -> None:
        self._ask()
        self.set_interval(REFRESH_SECONDS, self._refresh)

    @property
    def report(self) -> BatchReport | None:
        return self.run.session.batch_report

    def _ask(self) -> None:
        title = self.query_one("#inspect-title", Static)
        if self.run.session.state not in ("paused", "ended"):
            title.update("Pause the run (space) to inspect its batches: they are read on the paused process.")
            return
        self.run.command("inspect", step=self.step, example=self.example)

    def _refresh(self) -> None:
        report = self.report
        if report is None or report is self._shown:
            return
        self._shown = report
        self.step = report.step
        size = batch_size(report)
        self.example = min(self.example, size - 1) if size else 0  # a smaller batch (the last of an epoch)
        self.query_one("#inspect-title", Static).update(Text(self._title(report, size)))
        self._fill_table(report)
        self.refresh_bindings()

    def _title(self, report: BatchReport, size: int | None) -> str:
        failed = "  (the step that failed)" if report.step is not None and report.step == self.failing else ""
        parts = [f"batch of step {report.step}{failed}", f"kept: {steps_text(kept_steps(report))}",
                 f"example {self.example}" + (f" of 0-{size - 1}" if size else "")]
        rows = flagged_rows(report)
        if rows:
            parts.append(f"NaN/Inf in example(s) {', '.join(map(str, rows))}")
        if report.note:
            parts.append(f"({report.note})")
        return "   ".join(parts)

    def _fill_table(self, report: BatchReport) -> None:
        table = self.query_one(DataTable)
        cursor = table.cursor_row
        table.clear(columns=True)
        rows = [tensor_row(info) for info in report.tensors]
        for index, label in enumerate(COLUMNS):  # widths from the content: paths can be long
            table.add_column(label, width=max([len(label)] + [len(row[index]) for row in rows]))
        for row in rows:
            table.add_row(*row)
        if self._to_flagged:
            self._to_flagged = False
            cursor = next((i for i, info in enumerate(report.tensors) if flagged_in(info, self.example)), cursor)
        table.move_cursor(row=min(cursor, len(rows) - 1))
        self._show_selected()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_selected()

    def _show_selected(self) -> None:
        report = self.report
        table = self.query_one(DataTable)
        if report is None or not report.tensors:
            self.query_one("#inspect-details", Static).update(report.note if report else "")
            return
        info = report.tensors[min(table.cursor_row, len(report.tensors) - 1)]
        self.query_one("#inspect-details", Static).update(tensor_details(info, self.example))

    # --- keys -------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Only the keys that do something now: the footer and the help list no others."""
        report = self.report
        if report is None:  # nothing to move through until the first report (esc, back, is the app's)
            return False
        if action == "other_batch":
            return self._neighbour(report, int(parameters[0])) is not None
        if action == "example":
            return 0 <= self.example + int(parameters[0]) < (batch_size(report) or 0)
        if action == "go_to_batch":
            return bool(kept_steps(report))
        if action == "go_to_example":
            return bool(batch_size(report))
        if action == "next_flagged":
            return bool(flagged_rows(report))
        return True

    def _neighbour(self, report: BatchReport, offset: int) -> int | None:
        kept = kept_steps(report)
        if report.step not in kept:
            return None
        index = kept.index(report.step) + offset
        return kept[index] if 0 <= index < len(kept) else None

    def action_other_batch(self, offset: int) -> None:
        step = self._neighbour(self.report, offset) if self.report is not None else None
        if step is not None:
            self._show_batch(step)

    def action_go_to_batch(self) -> None:
        kept = kept_steps(self.report)
        question = f"Go to the batch of step ({steps_text(kept)} kept):"

        def problem(step: int) -> str | None:
            return None if step in kept else f"Step {step} is not kept: enter one of {steps_text(kept)}."
        self.app.push_screen(NumberScreen(question, self.step or kept[-1], problem), self._show_batch)

    def _show_batch(self, step: int | None) -> None:
        if step is not None:
            self.step = step
            self._ask()

    def action_go_to_example(self) -> None:
        last = batch_size(self.report) - 1

        def problem(example: int) -> str | None:
            return None if 0 <= example <= last else f"Enter an example from 0 to {last}."
        self.app.push_screen(NumberScreen(f"Go to example (0-{last}):", self.example, problem), self._show_example)

    def _show_example(self, example: int | None) -> None:
        if example is not None:
            self.example = example
            self._ask()

    def action_example(self, offset: int) -> None:
        self._show_example(self.example + offset)

    def action_next_flagged(self) -> None:
        """The next example after this one with NaN or Inf (round to the first after the last)."""
        rows = flagged_rows(self.report)
        self._to_flagged = True
        self._show_example(next((row for row in rows if row > self.example), rows[0]))
