"""Small modal questions: stop the running script and quit? which step, batch or example?"""

from __future__ import annotations

from collections.abc import Callable

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.markup import escape
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label

from tuidebug.screens.footer import KeysFooter


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
                # Escaped: a button's label is markup, where "[y]" would be a style and vanish.
                yield Button(escape("Stop and quit [y]"), variant="error", id="yes")
                yield Button(escape("Cancel [n]"), id="no")
        yield KeysFooter()

    def action_answer(self, stop: bool) -> None:
        self.dismiss(stop)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")


class NumberScreen(ModalScreen[int | None]):
    """Ask for a whole number; ``problem`` says what is wrong with one it does not take (None when it
    takes it). Dismissed with the number, or None when cancelled."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="number.cancel", tooltip="Close without a change")]

    def __init__(self, question: str, initial: int, problem: Callable[[int], str | None]) -> None:
        super().__init__()
        self.question = question
        self.initial = initial
        self.problem = problem

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.question)
            yield Input(str(self.initial), type="integer", id="number")
            yield Label("", id="problem")
        yield KeysFooter()

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        problem = self.problem(int(text)) if text.lstrip("-").isdigit() else "Enter a whole number."
        if problem is not None:
            self.query_one("#problem", Label).update(problem)
            return
        self.dismiss(int(text))

    def action_cancel(self) -> None:
        self.dismiss(None)


class RunToStepScreen(NumberScreen):
    """Ask for a step beyond the current one."""

    def __init__(self, current: int) -> None:
        super().__init__(f"Run until after step (now at step {current}):", current + 100,
                         lambda step: None if step > current else f"Enter a step after {current}.")
