"""``make corpus``: run ``tuidebug diagnose`` on every corpus case and score the verdicts.

Each case is a script with one planted bug (or none) and a manifest entry: the failure class, the
cause, and regexes for the evidence a good diagnosis must contain (see corpus/README.md). A case
scores on three counts: the class, the cause, and the evidence (every regex found, ignoring case,
in the report's summary, fix and evidence lines). "Right" means all three.

Cases run as a user runs them: ``tuidebug diagnose --json OUT SCRIPT ARGS`` with the default
window, from a fresh temporary directory, two at a time on the two-core machines, each with one
intra-op thread (OMP_NUM_THREADS=1: two processes of two threads each on two cores slow torch's small
ops tenfold and would measure the machine, not the tool). A case with ``memory_limit_mb`` runs with
that address-space cap (RLIMIT_AS) on the whole process tree.

    python corpus/run.py                 # every case; writes CORPUS.md and .bench/corpus.json
    python corpus/run.py --fast          # the quick subset (what `make test` runs)
    python corpus/run.py -k math_ -k nan_lr --no-write
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "corpus"
RESULTS = ROOT / ".bench" / "corpus.json"
REPORTS = ROOT / ".bench" / "corpus"  # each case's report, for reading what was said
CLASSES = ("nan", "shape", "no_learning", "oom", "healthy", "crash")
# A case that takes longer than this is killed and scored as a hang: diagnose's own deadline is far below it.
HARD_LIMIT = 180.0
MiB = 1024 * 1024


@dataclass
class Case:
    id: str
    script: Path
    expected_class: str
    cause: str
    framework: str = "plain"
    source: str = ""
    report: str = ""
    evidence: list[str] = field(default_factory=list)
    args: list[str] = field(default_factory=list)
    memory_limit_mb: int = 0
    fast: bool = False


@dataclass
class Outcome:
    id: str
    expected_class: str
    expected_cause: str
    framework: str
    failure_class: str | None = None
    cause: str | None = None
    summary: str = ""
    missing_evidence: list[str] = field(default_factory=list)
    exit_code: int | None = None
    seconds: float = 0.0
    error: str = ""

    @property
    def class_ok(self) -> bool:
        return self.failure_class == self.expected_class

    @property
    def cause_ok(self) -> bool:
        return self.class_ok and self.cause == self.expected_cause

    @property
    def evidence_ok(self) -> bool:
        return self.failure_class is not None and not self.missing_evidence

    @property
    def right(self) -> bool:
        return self.cause_ok and self.evidence_ok


def load_cases() -> list[Case]:
    cases = []
    for manifest in sorted(CORPUS.glob("*/manifest*.toml")):
        for entry in tomllib.loads(manifest.read_text(encoding="utf-8"))["case"]:
            script = manifest.parent / f"{entry['id']}.py"
            if not script.is_file():
                raise SystemExit(f"corpus: {manifest}: no script for case {entry['id']}")
            if entry["class"] not in CLASSES:
                raise SystemExit(f"corpus: {entry['id']}: unknown class {entry['class']!r}")
            for pattern in entry.get("evidence", []):
                re.compile(pattern)
            cases.append(Case(
                id=entry["id"], script=script, expected_class=entry["class"], cause=entry["cause"],
                framework=entry.get("framework", "plain"), source=entry.get("source", ""),
                report=entry.get("report", ""), evidence=list(entry.get("evidence", [])),
                args=[str(a) for a in entry.get("args", [])], memory_limit_mb=int(entry.get("memory_limit_mb", 0)),
                fast=bool(entry.get("fast", False))))
    return cases


def report_text(report: dict[str, Any]) -> str:
    """What the evidence regexes are searched in: the summary, the fix and the evidence lines."""
    return "\n".join([report.get("summary", ""), report.get("fix", ""), *report.get("evidence", [])])


def run_case(case: Case, tuidebug: list[str]) -> Outcome:
    outcome = Outcome(case.id, case.expected_class, case.cause, case.framework)
    with tempfile.TemporaryDirectory(prefix=f"corpus-{case.id}-") as work:
        out = Path(work) / "report.json"
        command = [*tuidebug, "diagnose", "--json", str(out), str(case.script), *case.args]
        started = time.monotonic()
        try:
            result = subprocess.run(command, cwd=work, capture_output=True, text=True, timeout=HARD_LIMIT,
                                    env={**os.environ, "OMP_NUM_THREADS": "1"},
                                    preexec_fn=_address_space_cap(case.memory_limit_mb), start_new_session=True)
        except subprocess.TimeoutExpired:
            outcome.seconds, outcome.error = HARD_LIMIT, f"no verdict after {HARD_LIMIT:.0f}s"
            return outcome
        outcome.seconds = time.monotonic() - started
        outcome.exit_code = result.returncode
        try:
            report = json.loads(out.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            tail = (result.stderr or result.stdout).strip().splitlines()[-1:] or [""]
            outcome.error = f"no JSON report ({type(exc).__name__}); exit {result.returncode}: {tail[0][:200]}"
            return outcome
    REPORTS.mkdir(parents=True, exist_ok=True)
    (REPORTS / f"{case.id}.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    outcome.failure_class, outcome.cause = report.get("failure_class"), report.get("cause")
    outcome.summary = report.get("summary", "")
    text = report_text(report)
    outcome.missing_evidence = [p for p in case.evidence if not re.search(p, text, re.IGNORECASE)]
    return outcome


def _address_space_cap(megabytes: int) -> Any:
    if not megabytes:
        return None

    def cap() -> None:
        limit = megabytes * MiB
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return cap


def share(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100 * part / whole:.0f}%)" if whole else "-"


def class_table(outcomes: list[Outcome]) -> list[str]:
    lines = ["| class | cases | class right | cause right | evidence right | right | median s | max s |",
             "|---|---|---|---|---|---|---|---|"]
    groups = [(name, [o for o in outcomes if o.expected_class == name]) for name in CLASSES]
    groups.append(("**all**", outcomes))
    for name, group in groups:
        if not group:
            continue
        times = [o.seconds for o in group]
        lines.append(
            f"| {name} | {len(group)} | {share(sum(o.class_ok for o in group), len(group))} | "
            f"{share(sum(o.cause_ok for o in group), len(group))} | "
            f"{share(sum(o.evidence_ok for o in group), len(group))} | "
            f"{share(sum(o.right for o in group), len(group))} | {statistics.median(times):.1f} | {max(times):.1f} |")
    return lines


def case_table(outcomes: list[Outcome], cases: dict[str, Case]) -> list[str]:
    lines = ["| case | expected | got | evidence missing | s | what it said |", "|---|---|---|---|---|---|"]
    for o in sorted(outcomes, key=lambda o: (CLASSES.index(o.expected_class), o.id)):
        mark = "ok" if o.right else "**miss**"
        got = f"{o.failure_class}/{o.cause}" if o.failure_class else o.error
        missing = ", ".join(f"`{p}`" for p in o.missing_evidence).replace("|", "\\|")
        said = o.summary.replace("|", "/").replace("\n", " ")[:140]
        framework = "" if cases[o.id].framework == "plain" else f" ({cases[o.id].framework})"
        lines.append(f"| {o.id}{framework} {mark} | {o.expected_class}/{o.expected_cause} | {got} | {missing} | "
                     f"{o.seconds:.1f} | {said} |")
    return lines


def markdown(outcomes: list[Outcome], cases: dict[str, Case], wall: float) -> str:
    healthy = [o for o in outcomes if o.expected_class == "healthy"]
    alarms = [o.id for o in healthy if o.failure_class != "healthy"]
    frameworks = sum(c.framework != "plain" for c in cases.values())
    lines = [
        "# Corpus results", "",
        "Generated by `make corpus` (`corpus/run.py`): do not edit by hand. The cases, their reports and what a",
        "good diagnosis must name are in `corpus/*/manifest*.toml`; how a case is written: `corpus/README.md`.", "",
        f"Run of {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {os.cpu_count()} cores "
        f"({platform.machine()}, Python {platform.python_version()}), {len(outcomes)} cases "
        f"({frameworks} with Lightning or accelerate), two at a time, {wall:.0f} s in all.", "",
        "A case is **right** when the failure class, the cause and every evidence regex match.", "",
        *class_table(outcomes), "",
        f"False alarms on healthy scripts: {len(alarms)} of {len(healthy)}" + (f" ({', '.join(alarms)})" if alarms else ""),
        "", "## Every case", "", *case_table(outcomes, cases), "",
    ]
    return "\n".join(lines)


def select(cases: list[Case], patterns: list[str], fast: bool) -> list[Case]:
    chosen = [c for c in cases if c.fast] if fast else cases
    if patterns:
        chosen = [c for c in chosen if any(p in c.id for p in patterns)]
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run tuidebug diagnose over the bug corpus and score it.")
    parser.add_argument("-k", dest="patterns", action="append", default=[], help="only cases whose id contains this")
    parser.add_argument("--fast", action="store_true", help="only the quick subset (fast = true)")
    parser.add_argument("--jobs", type=int, default=2, help="cases run at once (default 2)")
    parser.add_argument("--no-write", action="store_true", help="print the tables, write neither CORPUS.md nor JSON")
    parser.add_argument("--json", type=Path, default=RESULTS, help=f"raw results (default {RESULTS.relative_to(ROOT)})")
    parser.add_argument("--python", default=sys.executable,
                        help="the interpreter whose tuidebug runs the cases (to score another checkout)")
    args = parser.parse_args(argv)

    cases = select(load_cases(), args.patterns, args.fast)
    tuidebug = [args.python, "-m", "tuidebug"]
    started = time.monotonic()
    outcomes: list[Outcome] = []
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for outcome in pool.map(lambda c: run_case(c, tuidebug), cases):
            outcomes.append(outcome)
            got = f"{outcome.failure_class}/{outcome.cause}" if outcome.failure_class else outcome.error
            print(f"{'ok  ' if outcome.right else 'MISS'} {outcome.id:42s} {outcome.seconds:5.1f}s  {got}"
                  + (f"  missing {outcome.missing_evidence}" if outcome.missing_evidence else ""), flush=True)
    wall = time.monotonic() - started
    by_id = {c.id: c for c in cases}
    text = markdown(outcomes, by_id, wall)
    print("\n".join(class_table(outcomes)))
    if not args.no_write:
        if not args.patterns and not args.fast:
            (ROOT / "CORPUS.md").write_text(text, encoding="utf-8")
        args.json.parent.mkdir(parents=True, exist_ok=True)
        rows = [{**asdict(o), "right": o.right, "class_ok": o.class_ok, "cause_ok": o.cause_ok} for o in outcomes]
        args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 0 if all(o.right for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
