"""Pause, resume, step once and breakpoints, executed on the training thread at safe points.

Commands from the TUI wait in the client's queue until the training thread reaches a safe point
(batch fetched, loss about to go backward, gradients ready, step done). ``hold`` blocks the
training thread there while it keeps serving commands; it returns on resume, on step, or when the
TUI goes away, so a lost TUI never leaves training hung.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tuidebug.protocol import Command, State

if TYPE_CHECKING:
    from tuidebug.agent.core import Agent

PAUSABLE = ("batch", "step_end")
Handler = Callable[[dict[str, Any]], None]


class Control:
    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.pause_requested = False
        self.step_once = False
        self._holding = False
        self._leave = False
        self.handlers: dict[str, Handler] = {
            "pause": self._pause,
            "resume": self._resume,
            "step": self._step,
            "break_at": self._break_at,
            "break_on_nan": self._break_on_nan,
            "quit": self._resume,
        }

    def safe_point(self, where: str) -> None:
        client = self.agent.client
        if client is not None and client.has_commands():
            self._drain()
        if self.pause_requested and where in PAUSABLE:
            self.pause_requested = False
            self.hold("paused", where)

    def after_step(self, step: int) -> None:
        config = self.agent.config
        if config.break_at is not None and step >= config.break_at:
            config.break_at = None
            self.hold(f"break at step {step}", "step_end")
        elif self.step_once:
            self.step_once = False
            self.hold(f"stepped to step {step}", "step_end")
        else:
            self.safe_point("step_end")

    def break_on_nonfinite(self, reason: str, where: str) -> None:
        """Pause at the first non-finite value only: a run that goes on after it would stop every step."""
        self.agent.config.break_on_nan = False
        self.hold(reason, where)

    def hold(self, reason: str, where: str, state: str = "paused") -> None:
        """Block the training thread, serving commands, until resumed or disconnected."""
        client = self.agent.client
        if client is None or not client.connected:
            return
        self._holding, self._leave = True, False
        self.agent.send(State(state=state, step=self.agent.step, reason=reason, where=where))
        while not self._leave and client.connected:
            command = client.next_command(timeout=0.5)
            if command is not None:
                self._run(command)
        self._holding = False
        if state == "paused":
            self.agent.send(State(state="running", step=self.agent.step))

    def _drain(self) -> None:
        client = self.agent.client
        while (command := client.next_command()) is not None:
            self._run(command)

    def _run(self, command: Command) -> None:
        handler = self.handlers.get(command.name)
        if handler is None:
            self.agent.event("error", f"unknown command {command.name!r}")
            return
        try:
            handler(command.args)
        except Exception as exc:  # a bad command must never take the user's run down
            self.agent.event("error", f"command {command.name} failed: {type(exc).__name__}: {exc}")

    def _pause(self, args: dict[str, Any]) -> None:
        if not self._holding:
            self.pause_requested = True

    def _resume(self, args: dict[str, Any]) -> None:
        self._leave = True

    def _step(self, args: dict[str, Any]) -> None:
        self.step_once = True
        self._leave = True
        if not self._holding:
            self.pause_requested = False

    def _break_at(self, args: dict[str, Any]) -> None:
        step = args.get("step")
        self.agent.config.break_at = int(step) if step is not None else None
        self.agent.event("control", f"break at step {step}" if step is not None else "break at step: off")

    def _break_on_nan(self, args: dict[str, Any]) -> None:
        self.agent.config.break_on_nan = bool(args.get("enabled", True))
        self.agent.event("control", f"break on NaN/Inf: {'on' if self.agent.config.break_on_nan else 'off'}")
