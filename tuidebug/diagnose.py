"""``tuidebug diagnose`` and ``tuidebug replay``: the protocol without a screen.

diagnose runs the script under the agent for a bounded window (a number of steps or seconds),
stops at the first non-finite value, at the window's end or at the script's end, walks the decision
tree running the probes it calls for, saves a reproduction bundle, and prints the report.
replay re-runs a bundle's failing case against the (edited) script.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuidebug.launcher import ChildRun, Target
from tuidebug.protocol import ProbeResult
from tuidebug.report import build_report, json_ready, markdown
from tuidebug.session import Session
from tuidebug.tree import Walk, load_tree, preselect

HEALTHY, DIAGNOSED, TOOL_ERROR = 0, 1, 2
OVERFIT_AT = 10  # the overfit test runs early, through the live loop, before the window goes on
STOPPED = ("paused", "ended", "finished", "crashed")
BUNDLE_CHECKS = {"nan_in_inputs": "inputs", "cannot_overfit_single_batch": "overfit",
                 "no_gradient_to_weights": "overfit"}


@dataclass
class DiagnoseOptions:
    max_steps: int = 300
    timeout: float = 120.0
    probe_timeout: float = 120.0
    json_path: str | None = None
    report_path: str | None = None
    bundle_dir: str | None = None


def wait_until(session: Session, predicate: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with session.lock:
            if predicate():
                return True
        time.sleep(0.05)
    return False


def run_probe(run: ChildRun, session: Session, probe: str, timeout: float) -> ProbeResult:
    """Run one probe in the paused child and wait for its result (cancelled after ``timeout``)."""
    session.probe_results.pop(probe, None)
    if not run.command("probe", name=probe, params={}):
        return ProbeResult(run_id=0, probe=probe, status="skipped", summary="the training process is gone")
    if not wait_until(session, lambda: probe in session.probe_results or session.ended, timeout):
        run.command("cancel")
        wait_until(session, lambda: probe in session.probe_results, 15.0)
    return session.probe_results.get(probe) or ProbeResult(
        run_id=0, probe=probe, status="inconclusive", summary="no result: the probe timed out or the process ended")


def stop_for_diagnosis(run: ChildRun, session: Session, options: DiagnoseOptions) -> None:
    """Wait for the run to stop by itself (a break, the step limit, the end); pause it at the timeout."""
    if wait_until(session, lambda: session.state in STOPPED or session.ended, options.timeout):
        return
    run.command("pause")
    wait_until(session, lambda: session.state in STOPPED or session.ended, 30.0)


def overfit_first(run: ChildRun, session: Session, options: DiagnoseOptions) -> ProbeResult | None:
    """The protocol's first rule: at an early step, while the script's loop is live (so the test runs
    its own loss code), fit a single batch; then let the run go on to the window's end."""
    stop_for_diagnosis(run, session, options)
    if session.state != "paused" or session.where != "step_end":
        return None  # an early failure or the end: the tree runs the test where the run stopped
    result = run_probe(run, session, "overfit", options.probe_timeout)
    run.command("break_at", step=options.max_steps)
    changes = session.state_changes
    run.command("resume")
    wait_until(session, lambda: session.state_changes > changes or session.ended, 10.0)
    return result


def walk_tree(run: ChildRun, session: Session, options: DiagnoseOptions, overfit: ProbeResult | None) -> Walk:
    branch, reason = preselect(session)
    walk = Walk(load_tree(), branch=branch, reason=reason)
    if overfit is not None:
        walk.record("overfit", overfit)
    while walk.verdict is None:
        node = walk.node
        if node.kind == "check" and node.id not in walk.results:
            walk.record(node.id, run_probe(run, session, node.probe, options.probe_timeout))
        walk.advance()
    return walk


def save_reproduction(run: ChildRun, session: Session, walk: Walk, folder: str, data: dict) -> str | None:
    verdict = walk.verdict
    if verdict.failure_class == "healthy" or session.ended:
        return None
    meta = {"failure_class": verdict.failure_class, "cause": verdict.cause,
            "check": BUNDLE_CHECKS.get(verdict.cause, "nonfinite"), **data}
    asked = time.time()

    def answers() -> list:
        return [e for e in session.events if e.kind in ("bundle", "bundle_error") and e.time >= asked]

    run.command("save_bundle", path=os.path.abspath(folder), meta=meta)
    wait_until(session, lambda: bool(answers()), 30.0)
    saved = next((e for e in answers() if e.kind == "bundle"), None)
    return saved.message if saved is not None else None


def run_diagnose(target: Target, options: DiagnoseOptions) -> int:
    session = Session(target.name, target.args)
    first_stop = min(OVERFIT_AT, options.max_steps)
    run = ChildRun(target, session, {"break_on_nan": True, "break_at": first_stop}, capture_output=True)
    run.start()
    try:
        overfit = overfit_first(run, session, options)
        if overfit is not None:
            stop_for_diagnosis(run, session, options)
        walk = walk_tree(run, session, options, overfit)
        folder = options.bundle_dir or f"tuidebug-repro-{Path(target.name).stem}-{time.strftime('%Y%m%d-%H%M%S')}"
        samples = (walk.results.get("nan.inputs").data.get("samples", []) if "nan.inputs" in walk.results else [])
        bundle = save_reproduction(run, session, walk, folder, {"samples": samples})
        report = build_report(walk, session, bundle)
        text = markdown(report, walk, session)
    finally:
        run.command("quit")
        run.close()
    print(text)
    if options.report_path:
        Path(options.report_path).write_text(text, encoding="utf-8")
    if options.json_path:
        Path(options.json_path).write_text(json.dumps(json_ready(report), indent=2), encoding="utf-8")
    return HEALTHY if report["failure_class"] == "healthy" else DIAGNOSED


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
        print(f"tuidebug: error: the failing case could not be re-run: {why}")
        return TOOL_ERROR
    print(f"{result.status}: {result.summary}")
    for line in result.evidence:
        print(f"  {line}")
    if result.status not in ("pass", "fail"):
        return TOOL_ERROR
    return HEALTHY if result.status == "pass" else DIAGNOSED
