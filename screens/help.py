"""The help overlay (? or F1): every key the screen beneath it answers now, read from its own bindings.

Nothing here is a hand-kept list: the rows come from ``Screen.active_bindings``, which asks each
screen's ``check_action``, so a key that does nothing now is not listed, and one shown greyed out in
the footer is marked "not now".
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.dom import DOMNode
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

from tuidebug.screens.footer import KeysFooter


def key_rows(screen: Screen) -> list[tuple[str, str, str, bool]]:
    """(keys, what it does, more about it, works now) per action of ``screen``: its own keys, then the
    ones every screen shares. tuidebug's keys are the ones with an id: Textual's defaults (focus
    cycling, copy, ctrl+q, the palette) and the widgets' cursor keys are left out."""
    app = screen.app
    rows: dict[tuple[DOMNode, str], tuple[list[str], Binding, bool]] = {}
    for key, active in screen.active_bindings.items():
        binding = active.binding
        if active.node not in (screen, app) or binding.id is None:
            continue
        keys, _, _ = rows.setdefault((active.node, binding.action), ([], binding, active.enabled))
        keys.append(app.get_key_display(Binding(key, binding.action, key_display=binding.key_display)))
    ordered = sorted(rows.items(), key=lambda item: item[0][0] is app)  # stable: each node in its own order
    return [(", ".join(dict.fromkeys(keys)), binding.description, binding.tooltip, enabled)
            for _, (keys, binding, enabled) in ordered]


def keys_table(rows: list[tuple[str, str, str, bool]]) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(no_wrap=True, style="bold")
    table.add_column(no_wrap=True)
    table.add_column(ratio=1)
    for keys, description, tooltip, enabled in rows:
        more = tooltip if enabled else f"{tooltip} (not now)".strip()
        table.add_row(keys, description, Text(more, style="" if enabled else "dim"))
    return table


class HelpScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("question_mark,f1,escape,q", "close", "Close", id="help.close", tooltip="Close the help"),
    ]

    def __init__(self, beneath: Screen) -> None:
        super().__init__()
        self.title_text = f"Keys: {beneath.title or type(beneath).__name__}"
        self.rows = key_rows(beneath)

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="help"):
            yield Static(Text(self.title_text, style="bold"), id="help-title")
            with VerticalScroll(id="help-keys"):
                yield Static(keys_table(self.rows))
        yield KeysFooter()

    def action_close(self) -> None:
        self.dismiss(None)
