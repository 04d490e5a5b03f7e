"""Per-layer gradient norms from the latest step that reported them: sortable, the outliers marked."""

from __future__ import annotations

import math

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Static

from tuidebug.format import number
from tuidebug.screens.footer import KeysFooter
from tuidebug.session import Session

# Rebuilding a DataTable is costly (about 25% CPU when done every frame): twice a second at most.
REFRESH_SECONDS = 0.5
SORTS = ("norm", "name", "model order")


def layer_rows(norms: dict[str, float], sort: str) -> list[tuple[str, str, str, str, str]]:
    """(order, name, norm, share of the total, flag) per parameter, in the order asked for."""
    finite = [v for v in norms.values() if math.isfinite(v)]
    total = math.sqrt(sum(v * v for v in finite))
    largest = max(finite, default=None)
    rows = []
    for order, (name, value) in enumerate(norms.items(), start=1):
        share = f"{100 * value * value / (total * total):.1f}%" if total and math.isfinite(value) else "-"
        flag = "NON-FINITE" if not math.isfinite(value) else ("largest" if value == largest else "")
        rows.append((str(order), name, number(value), share, flag))
    if sort == "norm":
        rows.sort(key=lambda row: _norm_key(norms[row[1]]), reverse=True)
    elif sort == "name":
        rows.sort(key=lambda row: row[1])
    return rows


def _norm_key(value: float) -> float:
    """Non-finite norms sort above every finite one: they are what the user is looking for."""
    return math.inf if not math.isfinite(value) else value


class LayerTableScreen(Screen[None]):
    TITLE = "per-layer gradient norms"
    BINDINGS = [
        Binding("o", "cycle_sort", "Sort", id="layers.sort", tooltip="Sort by norm, by name, or in model order"),
        Binding("t,escape", "app.pop_screen", "Back", id="layers.back", tooltip="Back to the dashboard"),
    ]

    def __init__(self, session: Session) -> None:
        super().__init__()
        self.session = session
        self.sort = SORTS[0]
        self._shown: tuple[int | None, str] | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="layers-title")
        yield DataTable(id="layers", cursor_type="row", zebra_stripes=True)
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one(DataTable).add_columns("#", "parameter", "grad norm", "share", "flag")
        self.refresh_table()
        self.set_interval(REFRESH_SECONDS, self.refresh_table)

    def action_cycle_sort(self) -> None:
        self.sort = SORTS[(SORTS.index(self.sort) + 1) % len(SORTS)]
        self.refresh_table()

    def refresh_table(self) -> None:
        with self.session.lock:
            step, norms = self.session.layer_norms_step, dict(self.session.layer_norms)
        if self._shown == (step, self.sort):
            return
        self._shown = (step, self.sort)
        title = f"Per-layer gradient norms at step {step}" if step is not None else "No per-layer gradient norms yet"
        self.query_one("#layers-title", Static).update(f"{title}   sorted by {self.sort}   (o: sort, t: back)")
        table = self.query_one(DataTable)
        table.clear()
        for row in layer_rows(norms, self.sort):
            table.add_row(*_styled(row))


def _styled(row: tuple[str, ...]) -> list[Text]:
    """The largest row bold, a non-finite one bold red; the flag column says it in words too."""
    flag = row[-1]
    style = "bold red" if flag == "NON-FINITE" else ("bold" if flag == "largest" else "")
    return [Text(cell, style=style) for cell in row]
