"""The decision tree screen: every node with its status, the selected node explained, Enter runs it.

The walk itself (which node is next, what the results mean) is ``tuidebug.tree.Walk`` on the
Session; this screen only shows it, sends probe commands, and moves the walk on when asked.
"""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import ProgressBar, Static, Tree
from textual.widgets.tree import TreeNode

from tuidebug.launcher import ChildRun
from tuidebug.screens.charts import ChartPane, GradPane, LossPane, MemoryPane
from tuidebug.screens.footer import KeysFooter
from tuidebug.screens.inspector import InspectorScreen
from tuidebug.screens.shapes import PROBE as PROBE_SHAPES
from tuidebug.screens.shapes import ShapeTraceScreen
from tuidebug.screens.verdict import VerdictScreen
from tuidebug.session import Session
from tuidebug.tree import Node, Walk
from tuidebug.triage import start_walk

REFRESH_SECONDS = 0.25
NARROW_COLUMNS = 100  # below this the tree stands above its explanation
# From this width the run's three charts stay above the tree, as a row of sparklines with their figures
# (a break is when they matter); below it they are one key away (d or esc: the dashboard).
CHARTS_COLUMNS = 120
GROUPS = (("nan.", "NaN / divergence"), ("oom.", "Out of memory"), ("shape.", "Shape mismatch"))
MARKS = {"pass": "[pass]", "fail": "[FAIL]", "inconclusive": "[ ?? ]", "cancelled": "[cncl]", "error": "[ERR!]",
         "skipped": "[skip]", "running": "[....]", "not run": "[    ]", "visited": "[ -> ]"}
# A check fails when the cause it looks for is present: its status, read as what it found.
FINDINGS = {"pass": "ruled out", "fail": "cause confirmed", "inconclusive": "could not tell", "cancelled": "cancelled",
            "error": "the probe failed", "skipped": "skipped", "running": "running", "not run": "not run yet",
            "visited": "here"}
LEGEND = "  ".join(f"{MARKS[status]} {FINDINGS[status]}" for status in ("fail", "pass", "inconclusive", "visited"))


def node_label(walk: Walk, node: Node, running: str | None) -> Text:
    status = "running" if running == node.probe and node.probe else walk.status(node.id)
    text = Text(f"{MARKS.get(status, '[    ]')} ", style="bold" if status == "fail" else "")
    text.append(node.title, style="reverse" if node.id == walk.current else "")
    if node.kind == "select" and node.id in walk.path:
        text.append(f"  -> {walk.branch}")
    return text


def explain(walk: Walk, node: Node) -> Text:
    """The details pane: why this node, what it does, what it found (plain text: no markup parsing
    of evidence that may hold brackets)."""
    text = Text()
    text.append(f"{node.title}\n\n", style="bold")
    text.append(f"{node.question}\n\n")
    if node.why:
        text.append(f"{node.why}\n", style="italic")
    if node.kind == "check":
        text.append(f"\nprobe: {node.probe}   found: {finding(walk.status(node.id))}\n")
        if node.takes:
            text.append(f"enter runs it on the paused process; it takes {node.takes}\n")
    if node.kind == "select":
        text.append(f"\nthe run points to: {walk.branch} ({walk.reason})\n")
    result = walk.results.get(node.id)
    if result is not None:
        text.append(f"\n{finding(result.status)}", style="bold")
        text.append(f": {result.summary}\n")
        if result.method:
            text.append(f"method: {result.method}\n")
        text.append("\nevidence:\n" + "".join(f"  - {line}\n" for line in result.evidence))
        if result.fix:
            text.append("\nfix: ", style="bold")
            text.append(f"{result.fix}\n")
    if node.kind == "verdict":
        text.append(f"\nfailure class: {node.failure_class}   cause: {node.cause}\n\nfix: {node.fix}\n")
    return text


def finding(status: str) -> str:
    return FINDINGS.get(status, status)


def checklist(walk: Walk) -> str:
    rows = []
    for text, done in walk.verification():
        mark = "n/a" if done is None else ("[x]" if done else "[ ]")
        rows.append(f"{mark} {text}")
    return "\n".join(rows)


class TreeScreen(Screen[None]):
    TITLE = "decision tree"
    BINDINGS = [
        # priority: the Tree widget's own (hidden) enter would otherwise hide this one from the footer
        Binding("enter", "run_selected", "Run", id="tree.run", tooltip="Run the selected check's probe",
                priority=True),
        Binding("n", "next_node", "Next", id="tree.next", tooltip="Go to the node the results point to"),
        Binding("a", "autopilot", "Auto", id="tree.auto", tooltip="Run every check of the walk in turn"),
        Binding("c", "cancel", "Cancel", id="tree.cancel", tooltip="Cancel the running probe"),
        Binding("v", "verdict", "Verdict", id="tree.verdict", tooltip="The verdict, the report and the reproduction"),
        Binding("i", "inspect", "Inspect", id="tree.inspect", tooltip="The paused batch, tensor by tensor"),
        Binding("t", "shapes", "Shapes", id="tree.shapes", tooltip="One forward pass traced: every module's shapes"),
        Binding("escape,d", "app.pop_screen", "Back", id="tree.back", tooltip="Back to the dashboard"),
    ]

    def __init__(self, run: ChildRun) -> None:
        super().__init__()
        self.run = run
        self.session: Session = run.session
        self.walk = self.session.walk or start_walk(self.session)
        self.running: str | None = None
        self.autopilot = False
        self._items: dict[str, TreeNode] = {}
        self._shown = -1
        self._keys_for: tuple[object, ...] = ()

    def compose(self) -> ComposeResult:
        yield Static(id="tree-state")
        yield Static(Text(LEGEND), id="tree-legend")  # Text: the marks are not markup
        with Horizontal(id="tree-charts"):
            yield LossPane(classes="chart compact")
            yield GradPane(classes="chart compact")
            yield MemoryPane(classes="chart compact")
        with Horizontal(id="tree-main"):
            yield Tree("Debugging protocol", id="tree")
            with VerticalScroll(id="tree-details"):
                yield Static(id="tree-explain")
                yield ProgressBar(total=1.0, show_eta=False, id="tree-progress")
                yield Static(id="tree-checklist")
        yield KeysFooter()

    def on_mount(self) -> None:
        tree = self.query_one("#tree", Tree)
        tree.show_root = False
        groups: dict[str, TreeNode] = {}
        for node in self.walk.tree.nodes.values():  # in the file's order: the protocol's order
            if node.kind == "verdict":
                continue
            prefix, title = next(((p, t) for p, t in GROUPS if node.id.startswith(p)), (None, None))
            if prefix is not None and prefix not in groups:
                groups[prefix] = tree.root.add(title, expand=True)
            self._items[node.id] = (groups[prefix] if prefix else tree.root).add_leaf(node.title, data=node.id)
        self._items["verdict"] = tree.root.add_leaf("Verdict", data=None)
        tree.focus()
        tree.move_cursor(self._items[self.walk.current])
        self.set_interval(REFRESH_SECONDS, self._refresh)
        self._refresh()

    def _refresh(self) -> None:
        if self._shown == self.session.version and not self.autopilot:
            return
        self._shown = self.session.version
        progress = self.session.probe_progress
        if self.running and self.running in self.session.probe_results and progress is None:
            self.running = None
        if self.autopilot:
            self._drive()
        for node_id, item in self._items.items():
            if node_id != "verdict":
                item.set_label(node_label(self.walk, self.walk.tree[node_id], self.running))
        verdict = self.walk.verdict
        self._items["verdict"].set_label(f"Verdict: {verdict.title} ({verdict.cause})" if verdict else "Verdict: -")
        self._show_details()
        bar = self.query_one("#tree-progress", ProgressBar)
        bar.display = progress is not None
        if progress is not None:
            bar.update(progress=progress.fraction)
        self.query_one("#tree-checklist", Static).update("Protocol verification\n" + checklist(self.walk))
        if not self.has_class("no-charts"):
            for pane in self.query(ChartPane):
                pane.refresh_from(self.session)
        session = self.session
        where = "" if f"step {session.step}" in session.reason else f"step {session.step}  "
        self.query_one("#tree-state", Static).update(Text(
            f"{session.state.upper()}  branch: {self.walk.branch}  {where}{session.reason}"))
        self._refresh_keys()

    def _refresh_keys(self) -> None:
        """The footer follows what the keys can do; redrawn only when that changes."""
        keys_for = (self.session.state, self.session.ended, self.running, self.walk.verdict is None)
        if keys_for != self._keys_for:
            self._keys_for = keys_for
            self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Only the keys that do something now: the footer and the help list no others."""
        if action == "cancel":
            return self.running is not None
        if action == "verdict":
            return self.walk.verdict is not None
        if action == "autopilot":
            return not self.session.ended
        if action == "inspect":  # the batches are read on the paused (or post-mortem) process
            return self.session.state in ("paused", "ended")
        if action == "shapes":
            return not self.session.ended or PROBE_SHAPES in self.session.probe_results
        return True

    def _show_details(self) -> None:
        tree = self.query_one("#tree", Tree)
        node_id = tree.cursor_node.data if tree.cursor_node is not None else None
        node = self.walk.tree[node_id] if node_id else self.walk.verdict or self.walk.node
        self.query_one("#tree-explain", Static).update(explain(self.walk, node))

    def on_resize(self, event: events.Resize) -> None:
        self.set_class(event.size.width < NARROW_COLUMNS, "narrow")
        self.set_class(event.size.width < CHARTS_COLUMNS, "no-charts")
        self._shown = -1  # the charts redraw at their new size

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted) -> None:
        self.query_one("#tree-details").scroll_home(animate=False)  # a new node's explanation from its start
        self._shown = -1
        self._refresh()

    def action_run_selected(self) -> None:
        """Enter: the tree selects its cursor's node (a group opens or closes), and the selection runs."""
        self.query_one("#tree", Tree).action_select_cursor()

    def on_tree_node_selected(self, event: Tree.NodeSelected) -> None:
        if event.node is self._items["verdict"]:
            self.action_verdict()
            return
        node_id = event.node.data
        if node_id is None:  # a group's title: the tree has opened or closed it
            return
        node = self.walk.tree[node_id]
        if node.kind == "check":
            self._run_probe(node)
        elif node_id == self.walk.current:
            self.action_next_node()

    def _run_probe(self, node: Node) -> None:
        if self.running is not None:
            self.notify(f"{self.running} is still running: wait or cancel it (c)")
            return
        # The old result goes before the command: a quick probe's new one can arrive on the reader
        # thread before the next line here runs, and must not be the one removed.
        previous = self.session.probe_results.pop(node.probe, None)
        if self.session.ended or not self.run.command("probe", name=node.probe, params={}):
            if previous is not None:
                self.session.probe_results[node.probe] = previous
            self.notify("the training process is gone: nothing to probe", severity="warning")
            return
        self.walk.results.pop(node.id, None)
        self.running = node.probe
        self._shown = -1

    def action_next_node(self) -> None:
        target = self.walk.advance()
        if target is None:
            self.notify("run the current check first" if self.walk.verdict is None else "the walk is at its verdict")
        elif target in self._items:
            self.query_one("#tree", Tree).move_cursor(self._items[target])
        self._shown = -1
        self._refresh()

    def action_autopilot(self) -> None:
        self.autopilot = not self.autopilot
        self.notify("autopilot on: every check in turn" if self.autopilot else "autopilot off")
        self._refresh()

    def _drive(self) -> None:
        """Autopilot: run the current check, move on when it has a result, stop at the verdict."""
        if self.walk.verdict is not None:
            self.autopilot = False
            self.action_verdict()
            return
        node = self.walk.node
        if node.kind == "check" and node.id not in self.walk.results:
            if self.running is None:
                self._run_probe(node)
            return
        self.walk.advance()

    def action_cancel(self) -> None:
        if self.running is None:
            self.notify("no probe is running")
            return
        self.run.command("cancel")

    def action_inspect(self) -> None:
        self.app.push_screen(InspectorScreen(self.run))

    def action_shapes(self) -> None:
        self.app.push_screen(ShapeTraceScreen(self.run))

    def action_verdict(self) -> None:
        if self.walk.verdict is None:
            self.notify("no verdict yet: run the checks (Enter, n, or a for all)")
            return
        self.app.push_screen(VerdictScreen(self.run, self.walk))
