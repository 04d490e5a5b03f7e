"""The verdict: failure class, cause, fix and evidence; save the report and the reproduction; try
the fix again on the failing case."""

from __future__ import annotations

import time
from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from tuidebug.diagnose import save_reproduction
from tuidebug.launcher import ChildRun
from tuidebug.report import build_report, deciding_check, markdown
from tuidebug.screens.footer import KeysFooter
from tuidebug.tree import Walk

REFRESH_SECONDS = 0.5


def verdict_text(report: dict, walk: Walk) -> Text:
    text = Text()
    text.append(f"{report['failure_class']} / {report['cause']}\n", style="bold reverse")
    text.append(f"\n{report['summary']}\n")
    if report["fix"]:
        text.append("\nFix\n", style="bold")
        text.append(f"{report['fix']}\n")
    text.append("\nEvidence\n", style="bold")
    text.append("".join(f"  - {line}\n" for line in report["evidence"]))
    text.append("\nChecks\n", style="bold")
    text.append("".join(f"  {c['status']:<12} {c['id']}: {c['summary']}\n" for c in report["checks"]))
    text.append("\nProtocol verification\n", style="bold")
    for item, done in walk.verification():
        text.append(f"  {'n/a' if done is None else ('[x]' if done else '[ ]')} {item}\n")
    if report["confirmed"] is not None:
        text.append(f"\nfix confirmed in a replay with the change: {'yes' if report['confirmed'] else 'no'}\n")
    if report["validated"] is not None:
        text.append(f"fix validated on the edited script: {'yes' if report['validated'] else 'no'}\n")
    if report["reproduction"]:
        text.append(f"reproduction: {report['reproduction']}\n")
    return text


class VerdictScreen(Screen[None]):
    TITLE = "verdict"
    BINDINGS = [
        Binding("s", "save", "Save report", id="verdict.save",
                tooltip="Write the Markdown report and the reproduction bundle into the working directory"),
        Binding("f", "try_fix", "Try fix", id="verdict.try",
                tooltip="Re-run the deciding check: it replays the failing case with its fix applied"),
        Binding("escape,v", "app.pop_screen", "Back", id="verdict.back", tooltip="Back to the tree"),
    ]

    def __init__(self, run: ChildRun, walk: Walk) -> None:
        super().__init__()
        self.run = run
        self.walk = walk
        self.bundle: str | None = None
        self._shown = -1
        self._ended = False

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="verdict"):
            yield Static(id="verdict-text")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.set_interval(REFRESH_SECONDS, self._refresh)
        self._refresh()

    def report(self) -> dict:
        return build_report(self.walk, self.run.session, self.bundle)

    def _refresh(self) -> None:
        if self._shown != self.run.session.version:
            self._shown = self.run.session.version
            self.query_one("#verdict-text", Static).update(verdict_text(self.report(), self.walk))
        if self.run.session.ended != self._ended:
            self._ended = self.run.session.ended
            self.refresh_bindings()  # f goes with the training process

    def action_save(self) -> None:
        self.notify("saving the report and the reproduction...")
        self._save()

    @work(thread=True, exclusive=True, group="verdict-save")
    def _save(self) -> None:
        """Blocking: the agent writes the bundle; this thread waits for its answer."""
        session = self.run.session
        stamp = time.strftime("%Y%m%d-%H%M%S")
        stem = Path(session.target).stem
        samples = self.walk.results["nan.inputs"].data.get("samples", []) if "nan.inputs" in self.walk.results else []
        self.bundle = save_reproduction(self.run, session, self.walk, f"tuidebug-repro-{stem}-{stamp}",
                                        {"samples": samples})
        path = Path(f"tuidebug-report-{stem}-{stamp}.md")
        path.write_text(markdown(self.report(), self.walk, session), encoding="utf-8")
        saved = f"report: {path}" + (f", reproduction: {self.bundle}" if self.bundle else ", no reproduction")
        self.app.call_from_thread(self.notify, saved)
        self._shown = -1

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Re-running the deciding check needs one, and the training process to run it on."""
        if action == "try_fix":
            return deciding_check(self.walk) is not None and not self.run.session.ended
        return True

    def action_try_fix(self) -> None:
        deciding = deciding_check(self.walk)
        if deciding is None or self.run.session.ended:
            self.notify("no check to re-run here")
            return
        probe = self.walk.tree[deciding].probe
        self.run.command("probe", name=probe, params={})
        self.notify(f"re-running {probe} on the failing case: its evidence shows the run with the fix")
