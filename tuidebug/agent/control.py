"""Pause, resume, step once and breakpoints, executed on the training thread at safe points.

Commands from the TUI wait in the client's queue until the training thread reaches a safe point
(batch fetched, loss about to go backward, gradients ready, step done). ``hold`` blocks the
training thread there while it keeps serving commands; it returns on resume, on step, or when the
TUI goes away, so a lost TUI never leaves training hung.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tuidebug.agent.bundle import BundleError, save_bundle
from tuidebug.agent.inspector import batch_report
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
        self.holding: str | None = None  # the state of the hold the training thread is in
        self.held_seconds = 0.0  # spent in holds (pauses, probes): not part of any step's duration
        self._pending_probe: dict[str, Any] | None = None
        self._leave = False
        self.handlers: dict[str, Handler] = {
            "pause": self._pause,
            "resume": self._resume,
            "step": self._step,
            "break_at": self._break_at,
            "break_on_nan": self._break_on_nan,
            "quit": self._quit,
            "probe": self._probe,
            "inspect": self._inspect,
            "save_bundle": self._save_bundle,
            "_replay_iteration": lambda args: self.agent.probes.request_iteration(),
            "_probe_done": lambda args: self.agent.probes.finish(),
        }

    def safe_point(self, where: str) -> None:
        client = self.agent.client
        if client is not None and client.has_commands():
            self._drain()
        if self.pause_requested and (where in PAUSABLE or self._no_other_point(where)):
            self.pause_requested = False
            self.hold("paused", where)

    def _no_other_point(self, where: str) -> bool:
        """A loop with no DataLoader and no step yet (a missing optimizer.step()) pauses at backward."""
        return where == "backward" and self.agent.step == 0 and not self.agent.batches

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
        self.agent.event("control", "break on NaN/Inf: off after this first hit (n arms it again)")
        self.agent.remember_failure(reason)
        self.hold(reason, where)

    def hold(self, reason: str, where: str, state: str = "paused") -> None:
        """Block the training thread, serving commands, until resumed or disconnected."""
        client = self.agent.client
        if client is None or not client.connected:
            return
        outer, self.holding, self._leave = self.holding, state, False
        started = time.perf_counter()
        self.agent.send(State(state=state, step=self.agent.step, reason=reason, where=where))
        if self._pending_probe is not None:
            pending, self._pending_probe = self._pending_probe, None
            self._probe(pending)
        while not self._leave and client.connected:
            command = client.next_command(timeout=0.5)
            if command is not None:
                self._run(command)
        self.holding, self._leave = outer, False
        if outer is None:  # a nested hold's time is in the outer one's
            self.held_seconds += time.perf_counter() - started
        if state == "paused":
            self.agent.send(State(state="running", step=self.agent.step))

    def leave(self) -> None:
        """End the current hold: the training thread goes on."""
        self._leave = True

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
        if self.holding is None:
            self.pause_requested = True

    def _resume(self, args: dict[str, Any]) -> None:
        if not self._probe_running():
            self._leave = True

    def _quit(self, args: dict[str, Any]) -> None:
        self.agent.probes.cancel.set()
        self._leave = True

    def _step(self, args: dict[str, Any]) -> None:
        if self._probe_running():
            return
        self.step_once = True
        self._leave = True
        if self.holding is None:
            self.pause_requested = False

    def _probe_running(self) -> bool:
        """Training must not go on under a probe: it would be rolled back when the probe ends."""
        if self.agent.probes.active is None:
            return False
        self.agent.event("error", f"probe {self.agent.probes.active.probe} is running: wait or cancel it (c)")
        return True

    def _probe(self, args: dict[str, Any]) -> None:
        if self.holding is None:  # asked while running: pause at the next safe point, then run it
            self._pending_probe, self.pause_requested = args, True
            return
        live = self.agent.script_running and self.holding != "ended"
        self.agent.probes.start(str(args["name"]), dict(args.get("params") or {}), live_loop=live)

    def _save_bundle(self, args: dict[str, Any]) -> None:
        try:
            path = save_bundle(self.agent, str(args["path"]), dict(args.get("meta") or {}))
        except BundleError as exc:
            self.agent.event("bundle_error", f"no reproduction saved: {exc}")
            return
        self.agent.event("bundle", path)

    def _inspect(self, args: dict[str, Any]) -> None:
        self.agent.send(batch_report(self.agent.batches, args.get("step"), args.get("example", 0)))

    def _break_at(self, args: dict[str, Any]) -> None:
        step = args.get("step")
        self.agent.config.break_at = int(step) if step is not None else None
        self.agent.event("control", f"break at step {step}" if step is not None else "break at step: off")

    def _break_on_nan(self, args: dict[str, Any]) -> None:
        self.agent.config.break_on_nan = bool(args.get("enabled", True))
        self.agent.event("control", f"break on NaN/Inf: {'on' if self.agent.config.break_on_nan else 'off'}")
