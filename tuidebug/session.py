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
import dataclasses
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from tuidebug import ranks
from tuidebug.format import bytes_text, seconds_text
from tuidebug.tree import Walk
from tuidebug.protocol import (
    BatchReport, Device, Event, Hello, Memory, Message, ProbeProgress, ProbeResult, State, Step,
)

RECENT_STEPS = 10_000
COARSE_POINTS = 2_048
EVENT_LOG = 2_000
OUTPUT_LINES = 5_000


class PrintedLine(NamedTuple):
    """A line of the script's output, as listeners get it."""

    text: str
    by_probe: bool  # printed by an iteration of the script's loop that a probe borrowed
    stream: str = "stdout"  # or "stderr"


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
    first_nonfinite_rank: int | None = None  # in a multi-process job, the rank that went wrong first


@dataclass
class RankView:
    """One worker of a torchrun job, as its own agent reports it (a single process is rank 0)."""

    rank: int
    pid: int
    state: str = "running"
    step: int = 0
    loss: Series = field(default_factory=Series)
    grad_norm: Series = field(default_factory=Series)
    step_seconds: Series = field(default_factory=Series)
    compute_seconds: Series = field(default_factory=Series)  # data + forward, before DDP's all-reduce
    rss: int | None = None
    memory_at_start: int | None = None  # the first reading once training began (CUDA allocated, else RSS)
    memory_now: int | None = None
    connected: bool = True
    ended: bool = False  # its script reported its end

    def observe(self, message: Message) -> None:
        if isinstance(message, Step):
            self.step = message.step
            self.loss.add(message.step, message.loss)
            self.grad_norm.add(message.step, shown_grad_norm(message))
            self.step_seconds.add(message.step, message.step_seconds)
            self.compute_seconds.add(message.step, message.compute_seconds)
        elif isinstance(message, State):
            self.state = message.state
        elif isinstance(message, Memory):
            self.rss = message.rss
            self.memory_now = message.cuda_allocated if message.cuda_allocated is not None else message.rss
            if self.memory_at_start is None and self.step > 0:
                self.memory_at_start = self.memory_now
        elif isinstance(message, Event) and message.kind == "script_end":
            self.ended = True


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
        self.world_size = 1
        self.ranks: dict[int, RankView] = {}
        self.rank_flags: dict[str, int] = {}  # "straggler" / "memory" -> the torchrun rank that stands out
        self._rank_from_loss = False  # the first non-finite rank was named by its loss, not a gradient
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
        self.grad_norm = Series()  # before the script's clipping, where it clips (shown_grad_norm)
        self.clip_at: float | None = None  # the script's clip_grad_norm_ threshold, once seen
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
        self.output_marks: collections.deque[tuple[bool, str]] = collections.deque(maxlen=OUTPUT_LINES)  # by_probe, stream
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

    def ingest_from(self, rank: int, message: Message) -> None:
        """A message from the agent of ``rank``: rank 0 is the run the screens show; the other ranks'
        figures are kept per rank, their non-finite values counted, their events logged with their rank."""
        with self.lock:
            if isinstance(message, Hello) and message.world_size > 1:  # one process: no per-rank copies
                self.ranks[rank] = RankView(rank, message.pid)
                self.world_size = max(self.world_size, message.world_size)
            if rank in self.ranks:
                self.ranks[rank].observe(message)
                if isinstance(message, (Step, Memory)):
                    self._compare_ranks()
        if rank == 0:
            self.ingest(message)
        elif isinstance(message, Step):
            self._other_rank_step(rank, message)
        elif isinstance(message, Event):
            self.ingest(dataclasses.replace(message, message=f"rank {rank}: {message.message}"))
        elif isinstance(message, (ProbeResult, ProbeProgress, BatchReport)):  # a held rank answers a command
            self.ingest(message)

    def _other_rank_step(self, rank: int, step: Step) -> None:
        with self.lock:
            self._check_finite(step, rank)
            self.counters.dropped += step.dropped
            self.version += 1
            derived, self._derived = self._derived, []
        self._notify("rank_step", (rank, step))
        for event in derived:
            self._notify(event.TYPE, event)

    def _compare_ranks(self) -> None:
        """Flag, once each, the straggler and the rank whose memory grows (see ranks.py)."""
        views = self.ranks.values()
        if "straggler" not in self.rank_flags:
            slow = ranks.straggler({v.rank: [y for _, y in v.compute_seconds.recent] for v in views})
            if slow is not None:
                self._flag_rank(slow.rank, "straggler", f"rank {slow.rank} is the straggler: loading its batch and "
                                f"the forward take {slow.seconds * 1000:.1f} ms a step against "
                                f"{slow.others * 1000:.1f} ms on the other ranks, which wait for it in every all-reduce")
        if "memory" not in self.rank_flags:
            grown = ranks.memory_outlier({v.rank: v.memory_now - v.memory_at_start for v in views
                                          if v.memory_at_start is not None and v.memory_now is not None})
            if grown is not None:
                rank, mine, others = grown
                self._flag_rank(rank, "memory", f"rank {rank}'s memory grew by {bytes_text(mine)} since training "
                                f"began, the other ranks' by {bytes_text(max(others, 0))} at most")

    def rank_label(self, rank: int) -> str:
        """``rank 1``, with what stands out about it: ``rank 1 (straggler, first NaN)``."""
        flags = [flag for flag, flagged in self.rank_flags.items() if flagged == rank]
        if self.counters.first_nonfinite_rank == rank:
            flags.append("first NaN")
        return f"rank {rank} ({', '.join(flags)})" if flags else f"rank {rank}"

    def _flag_rank(self, rank: int, flag: str, message: str) -> None:
        self.rank_flags[flag] = rank
        event = Event(kind=f"rank_{flag}", message=message, time=time.time(), step=self.ranks[rank].step)
        self.events.append(event)
        self._derived.append(event)

    def any_rank_held(self) -> bool:
        """In a multi-process job, a rank that holds (paused at a break, in post-mortem) stops every
        other at its next collective: the job is stopped although rank 0 still reads as running."""
        with self.lock:
            return any(view.state in ("paused", "probing", "ended") for view in self.ranks.values())

    def collective_stop_step(self, reach_seconds: float = 0.5) -> int:
        """A step every rank can still stop after: the furthest one reported, plus the steps a rank may
        make before the command reaches it (its reports trail by up to a flush, and it runs on meanwhile)."""
        with self.lock:
            furthest = max((view.step for view in self.ranks.values()), default=self.step)
        rate = self.steps_per_second() or 0.0
        return furthest + max(2, math.ceil(rate * reach_seconds))

    def add_output(self, line: str, by_probe: bool = False, stream: str = "stdout") -> None:
        """A line the script printed to ``stream``; ``by_probe`` when a probe's borrowed iteration of its
        loop did."""
        with self.lock:
            self.output.append(line)
            self.output_marks.append((by_probe, stream))
            self.version += 1
        self._notify("output", PrintedLine(line, by_probe, stream))

    def printed_lines(self) -> list[PrintedLine]:
        with self.lock:
            return [PrintedLine(line, *marks) for line, marks in zip(self.output, self.output_marks)]

    def note(self, kind: str, message: str, details: list[str] | None = None) -> None:
        """An event that the TUI side saw itself (a rejected connection, the child's exit)."""
        self.ingest(Event(kind=kind, message=message, time=time.time(), step=self.step, details=details or []))

    def agent_disconnected(self, rank: int = 0) -> None:
        """The connection closed: expected after the script ended, news if it was still running."""
        with self.lock:
            view = self.ranks.get(rank)
            if view is not None:
                view.connected = False
            self.connected = any(v.connected for v in self.ranks.values())
            expected = view.ended if view is not None else any(e.kind == "script_end" for e in self.events)
        if not expected:
            whose = f" of rank {rank}" if self.world_size > 1 else ""
            self.note("disconnected", f"lost the connection to the agent{whose} before the script ended")

    def child_exited(self, returncode: int) -> None:
        event = Event(kind="exit", message=describe_exit(returncode), time=time.time(), step=self.step)
        with self.lock:  # one change: whoever sees the exit code (``ended``) sees the exit event too
            self.exit_code = returncode
            self.ended_at = time.monotonic()
            crashed = any(e.kind == "exception" for e in self.events) or returncode < 0
            self.state = "crashed" if crashed else "finished"
            self.events.append(event)
            self.version += 1
        self._notify(event.TYPE, event)

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

    def time_left(self) -> tuple[str, float] | None:
        """What ends next and in how many seconds at the recent rate: the run, where the script states its
        length, else the DataLoader's pass (batches, not steps: an accumulating loop takes several a step)."""
        rate, last = self.steps_per_second(), self.last_step
        if rate is None or last is None or self.state != "running":
            return None
        if last.planned_steps is not None and last.planned_steps > last.step:
            return "run", (last.planned_steps - last.step) / rate
        if last.epoch_batches is not None and last.epoch_batch is not None and last.epoch_batches >= last.epoch_batch:
            batches_per_second = rate * max(last.backward_calls, 1)
            return "epoch", (last.epoch_batches - last.epoch_batch) / batches_per_second
        return None

    def time_left_text(self) -> str | None:
        left = self.time_left()
        if left is None:
            return None
        return f"{'ETA' if left[0] == 'run' else 'epoch ends in'} {seconds_text(left[1])}"

    def sampling_text(self) -> str | None:
        """Said while the agent takes the gradient norms, or runs its sampled checks, less often than by
        default (their cost on short steps)."""
        last = self.last_step
        if last is None:
            return None
        parts = ([f"grad norm every {last.norm_every} steps"] if last.norm_every > 1 else []) + \
            ([f"checks every {last.check_every} steps"] if last.check_every else [])
        return ", ".join(parts) or None

    def busy_text(self) -> str | None:
        """How busy the device is, labelled with what was measured: the GPU's utilisation (NVML), else the
        training process's CPU use."""
        memory = self.memory
        if memory is None:
            return None
        if memory.gpu_percent is not None:
            return f"GPU {memory.gpu_percent}%"
        return f"CPU {memory.cpu_percent:.0f}%" if memory.cpu_percent is not None else None

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
        self.grad_norm.add(step.step, shown_grad_norm(step))
        self.clip_at = step.clip_at if step.clip_at is not None else self.clip_at
        self.step_seconds.add(step.step, step.step_seconds)
        self.lr.add(step.step, step.lrs[0] if step.lrs else None)
        if step.layer_norms:
            self.layer_norms, self.layer_norms_step = step.layer_norms, step.step
        self.counters.dropped += step.dropped
        self.counters.skipped_steps += step.skipped
        self._check_finite(step)

    def _check_finite(self, step: Step, rank: int = 0) -> None:
        for kind, value in (("nonfinite_loss", step.loss), ("nonfinite_grad", step.grad_norm)):
            if value is None or math.isfinite(value) or (kind == "nonfinite_grad" and step.skipped):
                continue
            count = getattr(self.counters, kind) + 1
            setattr(self.counters, kind, count)
            if self.counters.first_nonfinite_step is None:
                self.counters.first_nonfinite_step = step.step
            self._attribute_rank(kind, step.step, rank)
            if count == 1 and not any(e.kind == kind for e in self.events):
                what = "loss" if kind == "nonfinite_loss" else "gradient norm"
                whose = f"rank {rank}: " if self.world_size > 1 else ""
                event = Event(kind=kind, message=f"{whose}{what} is {value}",
                              time=time.time(), step=step.step)
                self.events.append(event)
                self._derived.append(event)

    def _attribute_rank(self, kind: str, step: int, rank: int) -> None:
        """The rank that went wrong first. DDP averages the gradients of every rank, so one rank's
        non-finite loss turns every rank's gradients non-finite in the same step: a non-finite loss
        names the rank, before a gradient reported a moment earlier from another one."""
        counters = self.counters
        if self.world_size < 2 or (counters.first_nonfinite_rank is not None and (
                self._rank_from_loss or kind != "nonfinite_loss" or step > counters.first_nonfinite_step)):
            return
        counters.first_nonfinite_rank, self._rank_from_loss = rank, kind == "nonfinite_loss"

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


def shown_grad_norm(step: Step) -> float | None:
    """The gradient norm a user means: before the script's own clipping, where it clips (after it,
    the norm is at most the threshold and a clipped run's chart is a flat line at it)."""
    return step.norm_before_clip if step.norm_before_clip is not None else step.grad_norm


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
