"""The batch inspector: every tensor of a captured batch, its figures, NaN/Inf locations, one
example's values, the label distribution, and image-like tensors drawn as a picture."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from tuidebug.format import number
from tuidebug.launcher import ChildRun

REFRESH_SECONDS = 0.5
SHADES = " .:-=+*#%@"
COLUMNS = ("tensor", "shape", "dtype", "device", "min", "max", "mean", "std", "NaN", "Inf")


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
    BINDINGS = [
        Binding("left_square_bracket", "other_batch(-1)", "Older batch", id="inspect.older",
                tooltip="The batch of an earlier step (the agent keeps the last few)"),
        Binding("right_square_bracket", "other_batch(1)", "Newer batch", id="inspect.newer",
                tooltip="The batch of a later step"),
        Binding("e", "example(1)", "Next example", id="inspect.example", tooltip="Show the next example's values"),
        Binding("E", "example(-1)", "Prev example", id="inspect.example_back", show=False),
        Binding("escape,i", "app.pop_screen", "Back", id="inspect.back", tooltip="Back to the dashboard"),
    ]

    def __init__(self, run: ChildRun) -> None:
        super().__init__()
        self.run = run
        self.step: int | None = None
        self.example = 0
        self._shown: object = None

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(id="inspect-title")
            yield DataTable(id="inspect-table", cursor_type="row", zebra_stripes=True)
            yield Static(id="inspect-details")
        yield Footer(show_command_palette=False)

    def on_mount(self) -> None:
        self._ask()
        self.set_interval(REFRESH_SECONDS, self._refresh)

    def _ask(self) -> None:
        title = self.query_one("#inspect-title", Static)
        if self.run.session.state not in ("paused", "ended"):
            title.update("Pause the run (space) to inspect its batches: they are read on the paused process.")
            return
        self.run.command("inspect", step=self.step, example=self.example)

    def _refresh(self) -> None:
        report = self.run.session.batch_report
        if report is None or report is self._shown:
            return
        self._shown = report
        self.step = report.step
        title = f"batch of step {report.step}   kept: {report.available}   example {self.example}"
        self.query_one("#inspect-title", Static).update(title + (f"   ({report.note})" if report.note else ""))
        table = self.query_one(DataTable)
        table.clear(columns=True)
        rows = [tensor_row(info) for info in report.tensors]
        for index, label in enumerate(COLUMNS):  # widths from the content: paths can be long
            table.add_column(label, width=max([len(label)] + [len(row[index]) for row in rows]))
        for row in rows:
            table.add_row(*row)
        self._show_selected()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_selected()

    def _show_selected(self) -> None:
        report = self.run.session.batch_report
        table = self.query_one(DataTable)
        if report is None or not report.tensors:
            self.query_one("#inspect-details", Static).update(report.note if report else "")
            return
        info = report.tensors[min(table.cursor_row, len(report.tensors) - 1)]
        self.query_one("#inspect-details", Static).update(tensor_details(info, self.example))

    def action_other_batch(self, offset: int) -> None:
        report = self.run.session.batch_report
        if report is None or report.step not in report.available:
            return
        index = report.available.index(report.step) + offset
        if 0 <= index < len(report.available):
            self.step = report.available[index]
            self._ask()

    def action_example(self, offset: int) -> None:
        self.example = max(0, self.example + offset)
        self._ask()
