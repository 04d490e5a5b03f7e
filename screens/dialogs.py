"""Small modal questions: stop the running script and quit? run to which step?"""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label


class QuitScreen(ModalScreen[bool]):
    """Asked only while the script still runs: quitting stops it."""

    BINDINGS = [
        Binding("y", "answer(True)", "Stop and quit", id="quit.yes", tooltip="Stop the script and leave"),
        Binding("n,escape", "answer(False)", "Cancel", id="quit.no", tooltip="Keep the script running"),
    ]

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label("The script is still running. Stop it and quit?")
            with Horizontal(classes="buttons"):
                yield Button("Stop and quit [y]", variant="error", id="yes")
                yield Button("Cancel [n]", id="no")

    def action_answer(self, stop: bool) -> None:
        self.dismiss(stop)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")


class RunToStepScreen(ModalScreen[int | None]):
    """Ask for a step beyond the current one; None when cancelled."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="run_to.cancel", tooltip="Close without a breakpoint")]

    def __init__(self, current: int) -> None:
        super().__init__()
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(f"Run until after step (now at step {self.current}):")
            yield Input(str(self.current + 100), type="integer", id="step")
            yield Label("", id="problem")

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if not text.isdigit() or int(text) <= self.current:
            self.query_one("#problem", Label).update(f"Enter a step after {self.current}.")
            return
        self.dismiss(int(text))

    def action_cancel(self) -> None:
        self.dismiss(None)
