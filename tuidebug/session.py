"""The model of one debugging session on the TUI side: plain Python, no Textual.

The server's reader thread feeds it messages; the screens, the headless printer and the tests read
it. Memory stays bounded however long the run: each series keeps its recent points at full
resolution and the whole run in buckets that double in width when full.
"""

from __future__ import annotations

import collections
import math
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tuidebug.tree import Walk
from tuidebug.protocol import (
    BatchReport, Device, Event, Hello, Memory, Message, ProbeProgress, ProbeResult, State, Step,
)

RECENT_STEPS = 10_000
COARSE_POINTS = 2_048
EVENT_LOG = 2_000
OUTPUT_LINES = 5_000


class Downsampled:
    """The whole series at a coarse resolution: at most ``capacity`` bucket means."""

    def __init__(self, capacity: int = COARSE_POINTS) -> None:
        self.capacity = capacity
        self.width = 1
        self.points: list[tuple[float, float]] = []
        self._open: list[float] = []  # x of the bucket, sum, count

    def add(self, x: float, y: float) -> None:
        if not self._open:
            self._open = [x, 0.0, 0]
        self._open[1] += y
        self._open[2] += 1
        if self._open[2] == self.width:
            self.points.append((self._open[0], self._open[1] / self.width))
            self._open = []
            if len(self.points) >= self.capacity:
                self._halve()

    def _halve(self) -> None:
        pairs = zip(self.points[0::2], self.points[1::2])
        self.points = [(a[0], (a[1] + b[1]) / 2) for a, b in pairs]
        self.width *= 2


class Series:
    """One metric over steps (or seconds): recent points exactly, the whole run coarsely."""

    def __init__(self, recent: int = RECENT_STEPS) -> None:
        self.recent: collections.deque[tuple[float, float]] = collections.deque(maxlen=recent)
        self.coarse = Downsampled()

    def add(self, x: float, y: float | None) -> None:
        if y is None:
            return
        self.recent.append((x, y))
        self.coarse.add(x, y)

    @property
    def latest(self) -> float | None:
        return self.recent[-1][1] if self.recent else None

    def __len__(self) -> int:
        return len(self.recent)


@dataclass
class Counters:
    nonfinite_loss: int = 0
    nonfinite_grad: int = 0
    skipped_steps: int = 0
    dropped: int = 0
    first_nonfinite_step: int | None = None


Listener = Callable[[str, Any], None]


class Session:
    def __init__(self, target: str, args: list[str]) -> None:
        self.target = target
        self.args = list(args)
        self.lock = threading.RLock()
        self.version = 0
        self.state = "starting"
        self.state_changes = 0
        self.reason = ""
        self.where = ""
        self.hello: Hello | None = None
        self.pid: int | None = None
        self.connected = False
        self.device: Device | None = None
        self.started = time.monotonic()
        self.ended_at: float | None = None
        self.exit_code: int | None = None
        self.step = 0
        self.epoch: int | None = None
        self.last_step: Step | None = None
        self.memory: Memory | None = None
        self.loss = Series()
        self.grad_norm = Series()
        self.step_seconds = Series()
        self.lr = Series()
        self.rss = Series()
        self.cuda_allocated = Series()
        self.cuda_reserved = Series()
        self.nvml_used = Series()
        self.layer_norms: dict[str, float] = {}
        self.layer_norms_step: int | None = None
        self.counters = Counters()
        self.probe_results: dict[str, ProbeResult] = {}
        self.probe_progress: ProbeProgress | None = None
        self.batch_report: BatchReport | None = None
        self.walk: Walk | None = None
        self.events: collections.deque[Event] = collections.deque(maxlen=EVENT_LOG)
        self.output: collections.deque[str] = collections.deque(maxlen=OUTPUT_LINES)
        self._listeners: list[Listener] = []
        self._derived: list[Event] = []

    def subscribe(self, listener: Listener) -> None:
        """Call ``listener(kind, message)`` for every change, on the thread that made it."""
        self._listeners.append(listener)

    # --- inputs ---------------------------------------------------------------------------

    def ingest(self, message: Message) -> None:
        with self.lock:
            handler = self._handlers.get(type(message))
            if handler is not None:
                handler(self, message)
            self.version += 1
            derived, self._derived = self._derived, []
        self._notify(message.TYPE, message)
        for event in derived:
            self._notify(event.TYPE, event)

    def add_output(self, line: str) -> None:
        with self.lock:
            self.output.append(line)
            self.version += 1
        self._notify("output", line)

    def note(self, kind: str, message: str, details: list[str] | None = None) -> None:
        """An event that the TUI side saw itself (a rejected connection, the child's exit)."""
        self.ingest(Event(kind=kind, message=message, time=time.time(), step=self.step, details=details or []))

    def agent_disconnected(self) -> None:
        """The connection closed: expected after the script ended, news if it was still running."""
        with self.lock:
            self.connected = False
            expected = any(e.kind == "script_end" for e in self.events)
        if not expected:
            self.note("disconnected", "lost the connection to the agent before the script ended")

    def child_exited(self, returncode: int) -> None:
        with self.lock:
            self.exit_code = returncode
            self.ended_at = time.monotonic()
            crashed = any(e.kind == "exception" for e in self.events) or returncode < 0
            self.state = "crashed" if crashed else "finished"
        self.note("exit", describe_exit(returncode))

    # --- reads ----------------------------------------------------------------------------

    @property
    def elapsed(self) -> float:
        return (self.ended_at or time.monotonic()) - self.started

    def steps_per_second(self, window: int = 20) -> float | None:
        recent = list(self.step_seconds.recent)[-window:]
        total = sum(y for _, y in recent)
        return len(recent) / total if recent and total > 0 else None

    def samples_per_second(self) -> float | None:
        rate = self.steps_per_second()
        last = self.last_step
        if rate is None or last is None or last.batch_size is None:
            return None
        return rate * last.batch_size

    @property
    def ended(self) -> bool:
        return self.exit_code is not None

    # --- message handlers -------------------------------------------------------------------

    def _on_hello(self, hello: Hello) -> None:
        self.hello = hello
        self.connected = True
        self.pid = hello.pid

    def _on_device(self, device: Device) -> None:
        self.device = device

    def _on_state(self, state: State) -> None:
        self.state_changes += 1
        if self.exit_code is None:
            self.state, self.reason, self.where = state.state, state.reason, state.where

    def _on_step(self, step: Step) -> None:
        self.step, self.last_step = step.step, step
        if step.epoch is not None:
            self.epoch = step.epoch
        self.loss.add(step.step, step.loss)
        self.grad_norm.add(step.step, step.grad_norm)
        self.step_seconds.add(step.step, step.step_seconds)
        self.lr.add(step.step, step.lrs[0] if step.lrs else None)
        if step.layer_norms:
            self.layer_norms, self.layer_norms_step = step.layer_norms, step.step
        self.counters.dropped += step.dropped
        self.counters.skipped_steps += step.skipped
        self._check_finite(step)

    def _check_finite(self, step: Step) -> None:
        for kind, value in (("nonfinite_loss", step.loss), ("nonfinite_grad", step.grad_norm)):
            if value is None or math.isfinite(value) or (kind == "nonfinite_grad" and step.skipped):
                continue
            count = getattr(self.counters, kind) + 1
            setattr(self.counters, kind, count)
            if self.counters.first_nonfinite_step is None:
                self.counters.first_nonfinite_step = step.step
            if count == 1 and not any(e.kind == kind for e in self.events):
                what = "loss" if kind == "nonfinite_loss" else "gradient norm"
                event = Event(kind=kind, message=f"{what} is {value}",
                              time=time.time(), step=step.step)
                self.events.append(event)
                self._derived.append(event)

    def _on_memory(self, memory: Memory) -> None:
        self.memory = memory
        x = memory.time
        self.rss.add(x, memory.rss)
        self.cuda_allocated.add(x, memory.cuda_allocated)
        self.cuda_reserved.add(x, memory.cuda_reserved)
        self.nvml_used.add(x, memory.nvml_used)

    def _on_event(self, event: Event) -> None:
        self.events.append(event)
        if event.kind == "script_end" and self.ended_at is None:
            self.ended_at = time.monotonic()  # the clock stops with the script, not with post-mortem

    def _on_probe_progress(self, progress: ProbeProgress) -> None:
        self.probe_progress = progress

    def _on_probe_result(self, result: ProbeResult) -> None:
        self.probe_results[result.probe] = result
        if self.walk is not None:
            self.walk.record_probe(result)
        if self.probe_progress is not None and self.probe_progress.run_id == result.run_id:
            self.probe_progress = None
        self.events.append(Event(kind="probe", message=f"{result.probe}: {result.status}: {result.summary}",
                                 time=time.time(), step=self.step))

    def _on_batch_report(self, report: BatchReport) -> None:
        self.batch_report = report

    _handlers: dict[type, Callable[[Session, Any], None]] = {
        Hello: _on_hello, Device: _on_device, State: _on_state, Step: _on_step,
        Memory: _on_memory, Event: _on_event, ProbeProgress: _on_probe_progress,
        ProbeResult: _on_probe_result, BatchReport: _on_batch_report,
    }

    def _notify(self, kind: str, payload: Any) -> None:
        for listener in self._listeners:
            listener(kind, payload)


def describe_exit(returncode: int) -> str:
    how = exit_text(returncode)
    return f"script {how}" if returncode < 0 else f"script exited with {how}"


def exit_text(returncode: int) -> str:
    """``code 1``, or ``killed by SIGSEGV`` for a process a signal ended (never ``code -11``)."""
    if returncode >= 0:
        return f"code {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    return f"killed by {name}"
