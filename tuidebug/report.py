"""The diagnosis as data (the stable JSON shape) and as a Markdown report."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from tuidebug.format import bytes_text, number
from tuidebug.protocol import ProbeResult
from tuidebug.session import Session, describe_exit
from tuidebug.tree import TRIAL_TIE, Walk

JSON_KEYS = ("failure_class", "cause", "summary", "fix", "evidence", "checks", "reproduction", "confirmed",
             "validated", "steps", "partial")
NO_CAUSE = ("nan_unexplained", "out_of_memory", "cannot_overfit_single_batch", "loss_not_decreasing")


def build_report(walk: Walk, session: Session, reproduction: str | None, partial: str | None = None) -> dict[str, Any]:
    """The report in the shape ``tuidebug diagnose --json`` promises."""
    verdict = walk.verdict
    check = deciding_check(walk)
    deciding = walk.results[check] if check is not None else None
    fix = deciding.fix if deciding is not None and deciding.fix else verdict.fix
    unrun = _why_no_check_ran(walk) if verdict.cause in NO_CAUSE and deciding is None else None
    if unrun is not None:
        fix = f"no check could try a cause, so no trial ran: {unrun}"
    summary = deciding.summary if deciding is not None else walk.reason
    if verdict.failure_class == "healthy":
        summary = _healthy_summary(walk, session)
    evidence = [f"branch: {walk.branch} ({walk.reason})"] + _run_evidence(session, walk.branch)
    if deciding is not None:
        evidence += deciding.evidence
        evidence += _agreeing(walk, check)
        evidence += _other_fixes(walk, check)
    if verdict.cause in NO_CAUSE or deciding is None:
        evidence += _every_check(walk, skip=check)
    evidence = list(dict.fromkeys(evidence))
    return {
        "failure_class": verdict.failure_class,
        "cause": verdict.cause,
        "summary": summary,
        "fix": fix,
        "evidence": evidence,
        "checks": [{"id": node_id, "status": _check_status(walk, node_id),
                    "summary": walk.results[node_id].summary if node_id in walk.results else "",
                    "seconds": walk.results[node_id].data.get("seconds") if node_id in walk.results else None,
                    "evidence": list(walk.results[node_id].evidence) if node_id in walk.results else []}
                   for node_id in _check_ids(walk)],
        "reproduction": reproduction,
        "confirmed": _flag(deciding, "confirmed"),
        "validated": _flag(deciding, "validated"),
        "steps": session.step,
        "partial": partial,
    }


def deciding_check(walk: Walk) -> str | None:
    """The check whose failure named the verdict: the first failed check of the last decide node the
    walk went through, else the last failed check on the path."""
    decides = [walk.tree[n] for n in walk.path if walk.tree[n].kind == "decide"]
    for decide in reversed(decides):
        chosen = walk.decided_by(decide)
        if chosen is not None:
            return chosen
    gate_named_it = walk.verdict is not None and walk.verdict.cause == "cannot_overfit_single_batch"
    failed = [node_id for node_id in walk.path if walk.status(node_id) == "fail"
              and (node_id != "overfit" or gate_named_it)]  # the gate's failure names no other verdict
    return failed[-1] if failed else None


def _agreeing(walk: Walk, chosen: str) -> list[str]:
    """Other failed checks that name the same cause: what each adds (the trace of a folded batch names
    the reshape whose operands the failing loss only implies)."""
    cause = walk.results[chosen].data.get("cause")
    lines = []
    for node_id, result in walk.results.items():
        if node_id != chosen and result.status == "fail" and cause and result.data.get("cause") == cause:
            lines += [f"{node_id}: {result.summary}"] + result.evidence[:6]
    return lines


def _other_fixes(walk: Walk, chosen: str) -> list[str]:
    """Other checks whose own change also removed the failure, ranked: the verdict's comes first."""
    others = [(node_id, r) for node_id, r in walk.results.items() if node_id != chosen and r.status == "fail"
              and isinstance(r.data.get("fixed_loss"), (int, float))]
    if not others:
        return []
    mine = walk.results[chosen].data.get("fixed_loss")
    lines = ["other changes that also removed it: " + "; ".join(
        f"{node_id} (its trial ended at loss {r.data['fixed_loss']:.4g})" for node_id, r in others)]
    if isinstance(mine, (int, float)) and min([mine] + [r.data["fixed_loss"] for _, r in others]) < 0:
        lines.append(f"a trial ended below 0 (an objective with no floor): {chosen}, the most specific change, "
                     "names the cause")
    elif any(r.data.get("holds_only") for _, r in others) and walk.results[chosen].data.get("fixed_learns"):
        lines.append(f"{chosen}'s trial let the loss fall; a lower rate that only held it level ranks below it")
    elif isinstance(mine, (int, float)):
        lowest = min([mine] + [r.data["fixed_loss"] for _, r in others])
        if mine <= lowest:
            lines.append(f"ranked by the loss each trial ended at: {chosen}'s ended lowest, at {mine:.4g}")
        elif mine <= lowest * (1 + TRIAL_TIE):
            lines.append(f"ranked by the loss each trial ended at: {chosen}'s, at {mine:.4g}, is within {TRIAL_TIE:.0%} "
                         f"of the lowest ({lowest:.4g}), a tie, and comes first in the check order")
    return lines


def _flag(result: ProbeResult | None, key: str) -> bool | None:
    if result is None or key not in result.data or result.data[key] is None:
        return None
    return bool(result.data[key])


def _every_check(walk: Walk, skip: str | None) -> list[str]:
    """No single cause: what every check found, so that the verdict lists each trial and outcome."""
    lines = []
    for node_id in walk.path:
        result = walk.results.get(node_id)
        if result is None or node_id == skip:
            continue
        lines.append(f"{node_id} {result.status}: {result.summary}")
        lines += [f"  {line}" for line in result.evidence if "replay" in line or "trial" in line][:6]
    return lines


def _why_no_check_ran(walk: Walk) -> str | None:
    """Where no check on the path passed or failed (each was inconclusive or errored), the reason most of them
    gave: the verdict's fix says that, not that trials were listed."""
    results = [walk.results[n] for n in walk.path if walk.tree[n].kind == "check" and n in walk.results]
    if not results or any(r.status in ("pass", "fail") for r in results):
        return None
    return Counter(r.summary for r in results).most_common(1)[0][0]


def _check_ids(walk: Walk) -> list[str]:
    """Every check on the path, and the checks of the chosen branch that did not run."""
    ids = [n for n in walk.path if walk.tree[n].kind == "check"]
    branch_items = [item for item in walk.tree.verification if item.get("branch") == walk.branch]
    for item in branch_items:
        ids += [c for c in item.get("checks", []) if c not in ids]
    return ids


def _check_status(walk: Walk, node_id: str) -> str:
    return walk.results[node_id].status if node_id in walk.results else "skipped"


def _run_evidence(session: Session, branch: str) -> list[str]:
    """What the run itself showed: the exception's analysis, a stall, how the process ended."""
    events = list(session.events)
    lines = []
    crash = next((e for e in reversed(events) if e.kind == "crash"), None)
    if crash is not None and branch in ("oom", "shape", "crash", "learning"):
        lines += crash.details
    elif branch in ("oom", "shape", "crash"):
        exception = next((e for e in reversed(events) if e.kind == "exception"), None)
        lines += exception.details[-4:] if exception is not None else \
            [f"script output: {line}" for line in list(session.output)[-5:]]
    for event in events:
        if event.kind in ("stall", "no_step_yet", "finding", "manual_updates", "window_extended", "stepless_training"):
            lines.append(f"{event.kind}: {event.message}")
    if session.exit_code is not None and session.exit_code < 0:
        lines.append(f"the process ended: {describe_exit(session.exit_code)}")
    return lines


def _healthy_summary(walk: Walk, session: Session) -> str:
    first = session.loss.recent[0][1] if session.loss.recent else None
    last = session.loss.latest
    trend = f", loss {number(first)} -> {number(last)}" if first is not None else ""
    overfit = walk.results.get("overfit")
    fits = f"; single-batch test: {overfit.summary}" if overfit is not None else ""
    if session.step == 0:  # a loop that trains without backward() or an optimizer: the branch says how it was seen
        return f"healthy: {walk.reason}{fits}"
    return f"healthy: {session.step} steps with finite loss and gradients{trend}{fits}"


def markdown(report: dict[str, Any], walk: Walk, session: Session) -> str:
    """The report for people: verdict, fix, evidence, checks, figures, the protocol's checklist."""
    lines = [f"# tuidebug diagnosis: {session.target}", "",
             f"**{report['failure_class']}** / `{report['cause']}`: {report['summary']}", ""]
    if report["partial"]:
        lines += [f"> partial: {report['partial']}", ""]
    if report["fix"]:
        lines += ["## Fix", "", report["fix"], ""]
    lines += ["## Evidence", ""] + [f"- {line}" for line in report["evidence"]] + [""]
    lines += ["## Checks", "", "| check | status | finding |", "|---|---|---|"]
    lines += [f"| {c['id']} | {c['status']} | {c['summary'].replace('|', '/')} |" for c in report["checks"]]
    lines += ["", "## The run", ""] + [f"- {line}" for line in run_figures(session)] + [""]
    lines += ["## Protocol verification", ""]
    for text, done in walk.verification():
        mark = "n/a" if done is None else ("x" if done else " ")
        lines.append(f"- [{mark}] {text}" if mark != "n/a" else f"- (n/a) {text}")
    reproduction = report["reproduction"]
    lines += ["", f"Reproduction: {reproduction or 'none saved'}"]
    if reproduction:
        lines.append(f"Validate your fix on it: `tuidebug replay {reproduction} {session.target}`")
    lines.append("")
    return "\n".join(lines)


def run_figures(session: Session) -> list[str]:
    """Loss, gradient and memory figures around the end of the window (or the failure)."""
    figures = [f"{session.step} steps in {session.elapsed:.1f}s, state {session.state}"]
    recent = list(session.loss.recent)[-8:]
    if recent:
        figures.append("last losses: " + ", ".join(f"{int(x)}: {number(y)}" for x, y in recent))
    norms = list(session.grad_norm.recent)[-8:]
    if norms:
        figures.append("last gradient norms: " + ", ".join(f"{int(x)}: {number(y)}" for x, y in norms))
    memory = session.memory
    if memory is not None:
        if memory.cuda_allocated is not None:
            figures.append(f"CUDA allocated {bytes_text(memory.cuda_allocated)}, peak {bytes_text(memory.cuda_peak)}")
        figures.append(f"RSS {bytes_text(memory.rss)}")
    if session.counters.first_nonfinite_step is not None:
        figures.append(f"first non-finite value at step {session.counters.first_nonfinite_step}")
    return figures


def json_ready(value: Any) -> Any:
    """NaN and Inf are not JSON: write them as strings."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_ready(v) for v in value]
    return value
