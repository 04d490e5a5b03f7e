"""``tuidebug --headless``: the run's figures as lines on stderr, the script's output untouched.

The script keeps the terminal (stdin, stdout and stderr are its own); tuidebug's lines start with
``[tuidebug]`` and go to stderr, a compact line every N steps, every event, and a summary.
"""

from __future__ import annotations

import signal
import sys
from typing import Any, TextIO

from tuidebug.format import bytes_text, number, seconds_text
from tuidebug.launcher import ChildRun, Target, exit_status
from tuidebug.protocol import Event, Step
from tuidebug.session import Session, shown_grad_norm

PREFIX = "[tuidebug]"
SUMMARISED_EVENTS = {"exit"}  # the summary line gives the exit code
# After a Ctrl-C the script gets this long to unwind (its own handlers, the agent's report) before it is
# terminated. A plain python run never force-kills on Ctrl-C; a loaded machine took over 10 s here, and a
# second Ctrl-C still stops it at once.
INTERRUPT_GRACE = 30.0


class HeadlessPrinter:
    def __init__(self, session: Session, every: int, stream: TextIO) -> None:
        self.session = session
        self.every = max(1, every)
        self.stream = stream
        session.subscribe(self._on_change)

    def _on_change(self, kind: str, payload: Any) -> None:
        if kind == "step" and payload.step % self.every == 0:
            self._print(self._rank(0) + step_line(self.session, payload))
        elif kind == "rank_step" and payload[1].step % self.every == 0:
            rank, step = payload
            self._print(self._rank(rank) + step_line(self.session, step, with_run_figures=False))
        elif kind == "event" and payload.kind not in SUMMARISED_EVENTS:
            self._print(event_line(payload))

    def _rank(self, rank: int) -> str:
        """``rank 1  `` in a multi-process job, so that each rank's lines can be told apart."""
        return f"rank {rank}  " if self.session.world_size > 1 else ""

    def summary(self) -> None:
        s = self.session
        best = min((y for _, y in s.loss.recent), default=None)
        c = s.counters
        self._print(
            f"summary: {s.step} steps in {seconds_text(s.elapsed)}, final loss {number(s.loss.latest)}, "
            f"lowest {number(best)}, non-finite loss steps {c.nonfinite_loss}, non-finite gradient steps "
            f"{c.nonfinite_grad}, AMP-skipped steps {c.skipped_steps}, dropped records {c.dropped}, "
            f"exit code {s.exit_code}"
        )

    def _print(self, text: str) -> None:
        print(f"{PREFIX} {text}", file=self.stream, flush=True)


def step_line(session: Session, step: Step, with_run_figures: bool = True) -> str:
    """One step's figures; ``with_run_figures``: also the throughput and memory the session holds
    (rank 0's, in a multi-process job)."""
    parts = [f"step {step.step}"]
    if step.epoch is not None:
        parts.append(f"epoch {step.epoch}")
    if step.epoch_batch is not None and step.epoch_batches is not None:
        parts.append(f"batch {step.epoch_batch}/{step.epoch_batches}")
    parts.append(f"loss {number(step.loss)}")
    parts.append(f"grad {number(shown_grad_norm(step))}")
    if step.clip_at is not None:
        parts.append(f"(clip at {number(step.clip_at)})")
    if step.lrs:
        parts.append(f"lr {step.lrs[0]:.3g}")
    if step.step_seconds is not None:
        parts.append(f"{step.step_seconds * 1000:.1f} ms/step")
    rate = session.samples_per_second() if with_run_figures else None
    if rate is not None:
        parts.append(f"{rate:,.0f} samples/s")
    if with_run_figures:
        parts.append(memory_text(session))
        parts.extend(fact for fact in (session.time_left_text(), session.busy_text(), session.sampling_text())
                     if fact is not None)
    if step.skipped:
        parts.append("(AMP skipped)")
    return "  ".join(parts)


def memory_text(session: Session) -> str:
    m = session.memory
    if m is None:
        return "mem ?"
    if m.cuda_allocated is not None:
        return f"cuda alloc {bytes_text(m.cuda_allocated)} reserved {bytes_text(m.cuda_reserved)}"
    return f"rss {bytes_text(m.rss)} (CPU)"


def event_line(event: Event) -> str:
    """One line; the details (an exception's frames) are the script's own stderr already."""
    where = f" at step {event.step}" if event.step else ""
    return f"{event.kind}{where}: {event.message}"


class _Terminated(Exception):
    """tuidebug itself was told to stop (SIGTERM, SIGHUP): the script stops with it."""


def _terminate(signum: int, frame: Any) -> None:
    raise _Terminated(signum)


def run_headless(target: Target, agent_options: dict[str, Any], every: int) -> int:
    session = Session(target.name, target.args)
    printer = HeadlessPrinter(session, every, sys.stderr)
    run = ChildRun(target, session, {**agent_options, "post_mortem": False}, capture_output=False)
    previous = {signum: signal.signal(signum, _terminate) for signum in (signal.SIGTERM, signal.SIGHUP)}
    try:
        run.start()
        code = _wait(run)
    finally:
        run.close()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if session.exit_code is None:
        session.child_exited(code)
    printer.summary()
    return exit_status(code)


def _wait(run: ChildRun) -> int:
    """Wait for the child; a Ctrl-C goes to the script, a second one (or SIGTERM, SIGHUP) stops it."""
    try:
        try:
            return run.wait()
        except KeyboardInterrupt:
            run.interrupt()
        code = run.wait(INTERRUPT_GRACE)
    except (KeyboardInterrupt, _Terminated):
        code = None
    if code is None:
        run.stop()
        code = run.process.returncode
    return code
