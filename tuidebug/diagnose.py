"""``tuidebug diagnose`` and ``tuidebug replay``: the protocol without a screen.

diagnose runs the script under the agent for a bounded window (``--steps`` optimizer steps or
``--seconds``), stopping at the first non-finite value, at the script's end or exception, or when
the run stalls. Nothing is borrowed from the script's loop while it runs: the verdict rests on the
window's real steps. At the stop, the decision tree is walked, running the probes each node names
on the paused process. A probe that needs the live loop when the script has already ended runs on a
second run of the script, paused at an early step (``Rerun``). A global deadline (``--timeout``)
bounds everything: past it, the checks left are skipped and the verdict the walk reaches is written,
marked partial. The JSON report is always written, whatever the script does.

replay re-runs a bundle's failing case against the (edited) script.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuidebug.launcher import ChildRun, Target
from tuidebug.protocol import Event, ProbeResult
from tuidebug.report import build_report, json_ready, markdown
from tuidebug.session import Session
from tuidebug.tree import Walk, load_tree
from tuidebug.triage import loss_trend, preselect

HEALTHY, DIAGNOSED, TOOL_ERROR, INCONCLUSIVE = 0, 1, 2, 3
# A second run pauses at this step (or at the first one's non-finite value, at most this much later). A loss
# caught before its backward leaves no step record: the second run then pauses here, before the climb, and the
# NaN probes' replays run through it. Pausing at the failure instead was tried: the replays then start from a
# checkpoint inside the climb, where clipping can no longer save an exploding LSTM (a corpus case lost its verdict).
RERUN_AT = 10
# Second runs of the script, in all: a loop without a DataLoader lends its own iterations to the probes, so
# a short one can end under each probe that trains; each probe gets at most one fresh second run.
MAX_RERUNS = 5
RUN_LOSSES = 2048  # the first run's latest losses handed to a probe on a second run (the agent's own history)
DIAGNOSE_CHECKPOINT_BUDGET = 0.02  # of the training time, for replays that start within the kept batches (agent/core.py)
STOPPED = ("paused", "ended", "finished", "crashed")
# A run whose step counter stands still this long (and STALL_FACTOR times its usual step) is stalled.
STALL_SECONDS = 10.0
STALL_FACTOR = 20.0
PAUSE_GRACE = 5.0  # for a pause to reach a safe point at the window's end
BUNDLE_SECONDS = 30.0  # writing a bundle copies the model and a few batches: seconds for a large model
MIN_BUNDLE_SECONDS = 5.0  # what a bundle gets past the deadline: the verdict is there, the bundle is worth a wait
ANSWER_SECONDS = 3.0  # a probe's budget ends this long before its timeout, so that it can still answer
# On the branches their own checks decide (memory, shapes, a crash, a stall) the overfit gate still runs
# first, as the protocol asks, but its outcome does not name their verdict: a model whose steps take a
# second must not hold the answer for the full probe timeout there.
GATE_SECONDS = 8.0
EXTENSION_LEAVES = 30.0  # of the deadline, for the checks, when the window is lengthened (_extension)
GATE_ONLY_BRANCHES = ("oom", "shape", "crash", "stall")
BUNDLE_CHECKS = {"nan_in_inputs": "inputs", "cannot_overfit_single_batch": "overfit",
                 "no_gradient_to_weights": "overfit"}


@dataclass
class DiagnoseOptions:
    steps: int = 1000
    seconds: float = 15.0
    timeout: float = 60.0
    probe_timeout: float = 20.0
    json_path: str | None = None
    report_path: str | None = None
    bundle_dir: str | None = None


class Interrupted(Exception):
    """diagnose itself was told to stop (Ctrl-C, SIGTERM, SIGHUP): write what there is."""


@dataclass
class Deadline:
    seconds: float
    started: float = field(default_factory=time.monotonic)

    def left(self) -> float:
        return max(0.0, self.started + self.seconds - time.monotonic())

    @property
    def passed(self) -> bool:
        return self.left() <= 0.0


def wait_until(session: Session, predicate: Any, timeout: float) -> bool:
    deadline = time.monotonic() + max(0.0, timeout)
    while True:
        with session.lock:
            if predicate():
                return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def run_probe(run: ChildRun, session: Session, probe: str, timeout: float,
              params: dict[str, Any] | None = None) -> ProbeResult:
    """Run one probe in the paused child and wait for its result: the probe is told to answer with what
    it has by then, and is cancelled a little after ``timeout``."""
    session.probe_results.pop(probe, None)
    budget = max(1.0, timeout - ANSWER_SECONDS)
    if session.ended or not run.command("probe", name=probe, params={**(params or {}), "seconds": budget}):
        return ProbeResult(run_id=0, probe=probe, status="skipped", summary="the training process is gone")
    if not wait_until(session, lambda: probe in session.probe_results or session.ended, timeout):
        run.command("cancel")
        wait_until(session, lambda: probe in session.probe_results or session.ended, 10.0)
    return session.probe_results.get(probe) or ProbeResult(
        run_id=0, probe=probe, status="inconclusive",
        summary=f"no result within {timeout:.0f}s: the probe was cancelled" if not session.ended
        else "no result: the training process ended")


def stopped(session: Session) -> bool:
    """Paused, held or over: the checks can run (a multi-process job is stopped by any rank's hold)."""
    return session.state in STOPPED or session.ended or session.any_rank_held()


def observe(run: ChildRun, session: Session, options: DiagnoseOptions, deadline: Deadline) -> None:
    """Let the run go until it stops by itself (a break, the step window, the end, an exception) or
    the window's seconds pass (then pause it), or it stalls (then say where it is)."""
    # The window is the script's own time: python's start and torch's import (seconds on a loaded
    # box) come before the agent's hello and are not counted.
    wait_until(session, lambda: session.hello is not None or stopped(session), deadline.left() - EXTENSION_LEAVES)
    started = time.monotonic()
    window_end = started + min(options.seconds, deadline.left())
    last_step, last_change, first_gap, between = -1, started, 0.0, 0.0
    waiting: set[str] | None = None  # the suspicions the window was lengthened for
    while True:
        now = time.monotonic()
        if now >= window_end or (waiting and not waiting & {e.message for e in _building(session)}):
            if waiting is not None:
                break
            extra, waiting = _extension(session, options, deadline, between or first_gap)
            if extra <= 0:
                break
            window_end = now + extra
            continue
        if wait_until(session, lambda: stopped(session), 0.25):
            return
        now = time.monotonic()
        if session.step != last_step:
            # The wait for the first step (start-up included) stands for a step only until the gaps
            # between two steps are seen; a first reading that already counts several steps (a fast
            # loop) spreads it over them, or a hang right after them would wait 20 times the start-up.
            if last_step >= 1:
                between = max(between, now - last_change)
            elif session.step >= 1:
                first_gap = (now - last_change) / session.step
            last_step, last_change = session.step, now
        elif session.step > 0 and now - last_change > _stall_after(session, between or first_gap):
            _report_stall(run, session, now - last_change)
            return
    before = None
    if session.step == 0 and not session.ended:
        before = run.stack_sample()
        session.note("no_step_yet", f"no optimizer step in the first {options.seconds:.0f}s"
                     + (f": the training thread is at {before}" if before else ""))
    run.command("pause")
    grace = max(PAUSE_GRACE, 2 * _typical_step(session, between or first_gap))  # the pause waits for the step to end
    if not wait_until(session, lambda: stopped(session), grace):
        _report_stall(run, session, grace, pausing=True, before=before)


def _building(session: Session) -> list[Event]:
    """The agent's suspicions (evidence still building) that no finding or settled event has closed."""
    with session.lock:
        events = list(session.events)
    settled = {e.message.split(":", 1)[0] for e in events if e.kind in ("finding", "settled")}
    return [e for e in events if e.kind == "suspect" and e.message.split(":", 1)[0] not in settled]


def _extension(session: Session, options: DiagnoseOptions, deadline: Deadline,
               longest_gap: float) -> tuple[float, set[str]]:
    """Seconds to add to the window while evidence is building: a container of the model that grew at
    every pass so far, or the first epoch's end when it is due within the extension. Up to one more
    window, keeping EXTENSION_LEAVES of the deadline for the checks."""
    extra = min(options.seconds, deadline.left() - EXTENSION_LEAVES)
    if extra <= 0 or session.ended:
        return 0.0, set()
    step_seconds = _typical_step(session, longest_gap)
    waiting = [e for e in _building(session) if not e.message.startswith("epoch_end:")
               or _epoch_end_in(session, e, step_seconds) <= extra]
    if waiting:
        session.note("window_extended", f"the window was extended by up to {extra:.0f}s: {waiting[0].message}")
    return (extra if waiting else 0.0), {e.message for e in waiting}


def _epoch_end_in(session: Session, suspect: Event, step_seconds: float) -> float:
    """Seconds until the first pass over the training data ends, at the run's pace."""
    batches, started = (int(line.rsplit(" ", 1)[-1]) for line in suspect.details[:2])
    return max(0, started + batches - session.step) * step_seconds


def _typical_step(session: Session, longest_gap: float) -> float:
    """How long a step takes: the agent's figure, or the longest wait between steps seen so far (a
    slow optimizer such as LBFGS makes one step of many forward and backward passes)."""
    return max(session.step_seconds.latest or 0.0, longest_gap)


def _stall_after(session: Session, longest_gap: float) -> float:
    return max(STALL_SECONDS, STALL_FACTOR * _typical_step(session, longest_gap))


def _report_stall(run: ChildRun, session: Session, seconds: float, pausing: bool = False,
                  before: str | None = None) -> None:
    """A stall, unless the run has made no step at all and its thread has moved since ``before`` (where it
    was when the window ended): a loop that never calls backward() or an optimizer (gradients by hand,
    torch.func) has no point to pause at, and a thread on another line is computing, not stuck."""
    where = run.stack_sample()
    if session.step == 0 and before and where and where != before:
        session.note("no_step_yet", f"no pause point reached in {seconds:.0f}s more, and the training thread "
                     f"moved from {before} to {where}: it computes without a training step tuidebug can see")
        return
    what = "did not reach a safe point to pause" if pausing else "made no step"
    session.note("stall", f"the run {what} for {seconds:.0f}s after step {session.step}"
                 + (f"; the training thread is at {where}" if where else ""))


class Runs:
    """The observed run, and second runs of the script for the probes that need a live loop: a probe
    whose loop has ended (or that used up what was left of it) runs again on a fresh run, paused where
    the first one stopped (its first non-finite value) or at an early step."""

    def __init__(self, target: Target, first: ChildRun, session: Session, deadline: Deadline) -> None:
        self.target, self.first, self.session, self.deadline = target, first, session, deadline
        self.rerun: ChildRun | None = None
        self.rerun_session: Session | None = None
        self.reruns = 0
        self.rerun_spent = False  # a probe on the second run found its loop ended: the next needs a fresh one
        self.rerun_failed: str | None = None
        self.scratch = tempfile.mkdtemp(prefix="tuidebug-rerun-")  # where second runs write (agent/sandbox.py)

    def probe(self, name: str, timeout: float) -> ProbeResult:
        if stopped(self.session):
            result = run_probe(self.first, self.session, name, timeout)
        else:  # stuck where no pause can reach it: a probe would only wait for its timeout
            result = ProbeResult(run_id=0, probe=name, status="inconclusive",
                                 summary="the first run is mid-step where no pause reaches it (see the evidence), "
                                         "and a check needs it paused",
                                 data={"needs_loop": True})
        fresh_tried = False
        while result.data.get("needs_loop") and not fresh_tried and not self.deadline.passed:
            fresh_tried = self.rerun is None or self.rerun_spent
            if fresh_tried and self.reruns >= MAX_RERUNS:
                result.evidence.append(f"not re-run on a live loop: the {MAX_RERUNS} second runs allowed are used up")
                return result
            rerun = self._rerun(fresh=fresh_tried)
            if rerun is None:
                result.evidence.append(f"not re-run on a live loop: {self.rerun_failed}")
                return result
            result = run_probe(rerun, self.rerun_session, name, min(timeout, self.deadline.left()),
                               {"run_trend": self._trend(), "run_losses": self._losses(),
                                "run_findings": self._finding_codes()})
            result.evidence.append(f"run on a second run of the script, paused at step {self.rerun_session.step} "
                                   "(the first one's loop had ended; its file writes went to a scratch folder)")
            self.rerun_spent = bool(result.data.get("needs_loop"))
        return result

    def _finding_codes(self) -> list[str]:
        """The first run's findings, for a probe on a second run that has not reached them."""
        with self.session.lock:
            return sorted({e.message.split(":", 1)[0] for e in self.session.events if e.kind == "finding"})

    def _trend(self) -> list[float] | None:
        """The first run's loss trend, for a probe on a second run, which has seen only its first steps."""
        trend = loss_trend(self.session)
        return [trend.first, trend.last, trend.steps] if trend is not None else None

    def _losses(self) -> list[float]:
        """The first run's recent losses, for a probe on a second run (a slow fall is told from a flat loss
        over the whole run, not over the second run's first steps)."""
        with self.session.lock:
            return [y for _, y in list(self.session.loss.recent)[-RUN_LOSSES:] if math.isfinite(y)]

    def _rerun(self, fresh: bool) -> ChildRun | None:
        if self.rerun is not None and not fresh:
            return self.rerun
        if self.rerun_failed is not None:  # a second run that did not pause once will not the next time
            return None
        if self.rerun is not None:
            self.rerun.close()
        steps = self.session.step
        failed_at = self.session.counters.first_nonfinite_step
        if steps < 1 and failed_at is None:
            self.rerun_failed = "the script completed no step, so no step of it can be paused at"
            return None
        self.reruns += 1
        session = Session(self.target.name, self.target.args)
        at = failed_at + RERUN_AT if failed_at is not None else min(RERUN_AT, steps)
        run = ChildRun(self.target, session, {**_agent_options(at), "scratch_writes": self.scratch},
                       capture_output=True)
        run.start()
        self.rerun, self.rerun_session = run, session
        if not wait_until(session, lambda: stopped(session), self.deadline.left()) \
                or session.state != "paused":
            self.rerun_failed = f"a second run did not pause at step {at} (state {session.state})"
            run.close()
            self.rerun = None
            return None
        return run

    def close(self) -> None:
        for run in (self.first, self.rerun):
            if run is not None:
                run.command("quit")
                run.close()
        shutil.rmtree(self.scratch, ignore_errors=True)


def _agent_options(break_at: int) -> dict[str, Any]:
    return {"break_on_nan": True, "break_at": break_at, "copy_post_mortem": False, "post_mortem": True,
            "checkpoint_budget": DIAGNOSE_CHECKPOINT_BUDGET}


def walk_tree(runs: Runs, options: DiagnoseOptions, deadline: Deadline) -> tuple[Walk, list[str]]:
    """Walk from the root to a verdict, running each check's probe; checks past the deadline (or
    with the process gone) are skipped, and every path still ends at a verdict."""
    branch, reason = preselect(runs.session)
    walk = Walk(load_tree(), branch=branch, reason=reason)
    skipped: list[str] = []
    while walk.verdict is None:
        node = walk.node
        if node.kind == "check" and node.id not in walk.results:
            if deadline.passed:
                walk.skip(node.id, "not run: the deadline passed")
                skipped.append(node.id)
            else:
                timeout = min(options.probe_timeout, deadline.left())
                if node.id == walk.tree.root and walk.branch in GATE_ONLY_BRANCHES:
                    timeout = min(timeout, GATE_SECONDS)
                started = time.monotonic()
                result = runs.probe(node.probe, timeout)
                result.data["seconds"] = round(time.monotonic() - started, 2)
                walk.record(node.id, result)
        walk.advance()
    return walk, skipped


def save_reproduction(run: ChildRun, session: Session, walk: Walk, folder: str, data: dict,
                      timeout: float = BUNDLE_SECONDS) -> str | None:
    """Ask the agent to write the bundle; its path, or None (the reason is in the session's events).
    Only a stopped run can write one: a stuck one never answers."""
    verdict = walk.verdict
    if verdict is None or verdict.failure_class in ("healthy", "inconclusive") or session.ended or \
            session.state not in STOPPED:
        return None
    meta = {"failure_class": verdict.failure_class, "cause": verdict.cause,
            "check": BUNDLE_CHECKS.get(verdict.cause, "nonfinite"), **data}
    asked = time.time()

    def answers() -> list:
        return [e for e in session.events if e.kind in ("bundle", "bundle_error") and e.time >= asked]

    if not run.command("save_bundle", path=os.path.abspath(folder), meta=meta):
        return None
    wait_until(session, lambda: bool(answers()), timeout)
    saved = next((e for e in answers() if e.kind == "bundle"), None)
    return saved.message if saved is not None else None


def check_writable(path: str | None) -> None:
    """Fail now, not after the run, when a report could not be written there."""
    if path is None:
        return
    folder = os.path.dirname(os.path.abspath(path)) or "."
    if not os.path.isdir(folder):
        raise OSError(f"no such directory: {folder}")
    if not os.access(folder, os.W_OK):
        raise OSError(f"cannot write to {folder}")


def write_atomically(path: str, text: str) -> None:
    """Write to a temporary file beside ``path`` and rename: never a half-written report."""
    folder = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".tuidebug-", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _interrupt(signum: int, frame: Any) -> None:
    raise Interrupted(signal.Signals(signum).name)


def run_diagnose(target: Target, options: DiagnoseOptions) -> int:
    for path in (options.json_path, options.report_path):
        try:
            check_writable(path)
        except OSError as exc:
            print(f"tuidebug: error: {exc}", file=sys.stderr)
            return TOOL_ERROR
    deadline = Deadline(options.timeout)
    session = Session(target.name, target.args)
    first = ChildRun(target, session, _agent_options(options.steps), capture_output=True)
    runs = Runs(target, first, session, deadline)
    previous = {s: signal.signal(s, _interrupt) for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)}
    interrupted = None
    try:
        try:
            first.start()
            observe(first, session, options, deadline)
            walk, skipped = walk_tree(runs, options, deadline)
        except Interrupted as exc:
            interrupted = f"diagnose was interrupted ({exc})"
            walk, skipped = _interrupted_walk(session), []
        folder = options.bundle_dir or f"tuidebug-repro-{Path(target.name).stem}-{time.strftime('%Y%m%d-%H%M%S')}"
        samples = walk.results["nan.inputs"].data.get("samples", []) if "nan.inputs" in walk.results else []
        bundle = None if interrupted else save_reproduction(first, session, walk, folder, {"samples": samples},
                                                            min(BUNDLE_SECONDS, max(MIN_BUNDLE_SECONDS, deadline.left())))
        partial = interrupted or (f"the deadline ({options.timeout:.0f}s) passed before {len(skipped)} check(s) ran: "
                                  + ", ".join(skipped) if skipped else None)
        report = build_report(walk, session, bundle, partial=partial)
        if bundle is None:  # why not: a full or read-only disk, a batch that cannot be saved safely
            report["evidence"] += [e.message for e in session.events if e.kind == "bundle_error"][-1:]
        text = markdown(report, walk, session)
    finally:
        runs.close()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    print(text)
    return _write_reports(report, text, options) or _exit_code(report)


def _interrupted_walk(session: Session) -> Walk:
    """Interrupted before or during the walk: every check left is skipped, so the walk still ends."""
    branch, reason = preselect(session)
    walk = Walk(load_tree(), branch=branch, reason=reason)
    while walk.verdict is None:
        if walk.node.kind == "check" and walk.node.id not in walk.results:
            walk.skip(walk.node.id, "not run: diagnose was interrupted")
        walk.advance()
    return walk


def _write_reports(report: dict, text: str, options: DiagnoseOptions) -> int | None:
    try:
        if options.report_path:
            write_atomically(options.report_path, text)
        if options.json_path:
            write_atomically(options.json_path, json.dumps(json_ready(report), indent=2))
    except OSError as exc:
        print(f"tuidebug: error: cannot write the report: {exc}", file=sys.stderr)
        return TOOL_ERROR
    return None


def _exit_code(report: dict) -> int:
    kind = report["failure_class"]
    return HEALTHY if kind == "healthy" else INCONCLUSIVE if kind == "inconclusive" else DIAGNOSED


def run_replay(bundle: str, target: Target, timeout: float) -> int:
    """Re-run the bundle's failing case: 0 when it no longer fails, 1 when it still does."""
    session = Session(target.name, target.args)
    run = ChildRun(target, session, {"replay": os.path.abspath(bundle), "break_on_nan": False},
                   capture_output=True)
    run.start()
    try:
        done = wait_until(session, lambda: "replay" in session.probe_results or session.ended, timeout)
        result = session.probe_results.get("replay")
    finally:
        run.close()
    if result is None:
        why = "timed out" if not done else "the script ended before its loop fetched two batches"
        print(f"tuidebug: error: the failing case could not be re-run: {why}", file=sys.stderr)
        return TOOL_ERROR
    if result.status not in ("pass", "fail"):
        why = result.summary.strip().splitlines()[0].removeprefix("probe failed: ").removeprefix("BundleError: ")
        print(f"tuidebug: error: the failing case could not be re-run: {why}", file=sys.stderr)
        return TOOL_ERROR
    print(f"{result.status}: {result.summary}")
    for line in result.evidence:
        print(f"  {line}")
    return HEALTHY if result.status == "pass" else DIAGNOSED
