"""The decision tree: loaded from ``assets/tree.json``, walked over probe results.

Plain data and plain Python, with no Textual and no session: ``tuidebug diagnose`` walks it
automatically, the tree screen walks it with the keyboard, and tests walk it directly. The walk
never runs a probe itself; it says which node is next given the results it was handed. Every path
ends: a check has an edge for every status its probe can return, a decide node always has an
``otherwise``, and the file is refused when it does not hold together.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from tuidebug.protocol import ProbeResult

KINDS = {"check", "select", "decide", "verdict"}
# What a probe can come back with: its own three, or the runtime's (a probe that raised, was cancelled,
# or could not run because the training process was gone).
STATUSES = ("pass", "fail", "inconclusive", "error", "cancelled", "skipped")
BRANCHES = ("nan", "oom", "shape", "learning", "crash", "stall", "no_step", "healthy")
# Trials of several changes that each removed a failure are ranked by the loss each ended at; within
# TRIAL_TIE of the lowest they are a tie, and the node's order (the most specific change first) decides.
# Replays of one trial from checkpoints a few steps apart ended 3% apart (a weighted BCE whose loop
# borrows its own iterations: 0.288 and 0.296), so closer than that is noise. Over the corpus's NaN
# verdicts with two or more proven trials the closest pairs ranked apart are 1.17x (an fp16 attention
# pool) and 1.35x; the pairs within 5% were 1.004-1.035: 5% holds them all as ties.
TRIAL_TIE = 0.05


class TreeError(Exception):
    """The tree file is malformed: the message says where."""


@dataclass
class Node:
    id: str
    kind: str
    title: str
    question: str = ""
    why: str = ""
    probe: str | None = None
    takes: str = ""  # a check's cost in words (how many replays, passes or steps): shown before it runs
    next: dict[str, str] = field(default_factory=dict)
    order: dict[str, str] = field(default_factory=dict)
    causes: dict[str, str] = field(default_factory=dict)
    rank: bool = False
    otherwise: str | None = None
    failure_class: str | None = None
    cause: str | None = None
    fix: str = ""

    def targets(self) -> list[str]:
        return [*self.next.values(), *self.order.values(), *self.causes.values(),
                *([self.otherwise] if self.otherwise else [])]


@dataclass
class Tree:
    root: str
    nodes: dict[str, Node]
    verification: list[dict[str, Any]]

    def __getitem__(self, node_id: str) -> Node:
        return self.nodes[node_id]

    def checks(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.kind == "check"]

    def verdicts(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.kind == "verdict"]


def load_tree(text: str | None = None) -> Tree:
    """The tree in ``text`` (JSON), or the bundled one; TreeError when it does not hold together."""
    if text is None:
        text = resources.files("tuidebug.assets").joinpath("tree.json").read_text(encoding="utf-8")
    raw = json.loads(text)
    nodes = {}
    for node_id, spec in raw["nodes"].items():
        if spec.get("kind") not in KINDS:
            raise TreeError(f"node {node_id}: unknown kind {spec.get('kind')!r}")
        known = {k: v for k, v in spec.items() if k in Node.__dataclass_fields__}
        nodes[node_id] = Node(id=node_id, **known)
    tree = Tree(raw["root"], nodes, raw.get("verification", []))
    _validate(tree)
    return tree


def _validate(tree: Tree) -> None:
    if tree.root not in tree.nodes:
        raise TreeError(f"root {tree.root!r} is not a node")
    for node in tree.nodes.values():
        for target in node.targets():
            if target not in tree.nodes:
                raise TreeError(f"node {node.id}: next node {target!r} does not exist")
        if node.kind == "check":
            if not node.probe:
                raise TreeError(f"check {node.id} names no probe")
            missing = [s for s in STATUSES if s not in node.next] if "*" not in node.next else []
            if missing:
                raise TreeError(f"check {node.id} has no edge for {', '.join(missing)} (add them or '*')")
        if node.kind == "select" and "*" not in node.next:
            missing = [b for b in BRANCHES if b not in node.next]
            if missing:
                raise TreeError(f"select {node.id} has no edge for {', '.join(missing)} (add them or '*')")
        if node.kind == "decide" and not node.otherwise:
            raise TreeError(f"decide {node.id} has no 'otherwise'")
        if node.kind == "verdict" and not (node.failure_class and node.cause):
            raise TreeError(f"verdict {node.id} has no failure class or cause")
        if node.kind != "verdict" and not node.targets():
            raise TreeError(f"node {node.id} leads nowhere")


@dataclass
class Walk:
    """One walk through the tree: where it is, what each check found, and where it ends."""

    tree: Tree
    branch: str = "healthy"
    reason: str = ""
    current: str = ""
    path: list[str] = field(default_factory=list)
    results: dict[str, ProbeResult] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.current = self.current or self.tree.root
        self.path = self.path or [self.current]

    @property
    def node(self) -> Node:
        return self.tree[self.current]

    @property
    def verdict(self) -> Node | None:
        return self.node if self.node.kind == "verdict" else None

    def record(self, node_id: str, result: ProbeResult) -> None:
        self.results[node_id] = result

    def record_probe(self, result: ProbeResult) -> None:
        """A probe's result, recorded for every check that runs that probe."""
        for node in self.tree.checks():
            if node.probe == result.probe:
                self.record(node.id, result)

    def status(self, node_id: str) -> str:
        """not run, pass, fail, inconclusive... for a check; visited / not visited for the rest."""
        if node_id in self.results:
            return self.results[node_id].status
        return "visited" if node_id in self.path else "not run"

    def suggested_next(self) -> str | None:
        """The node after the current one, given the results so far; None at a verdict or while
        the current check has no result yet. Every other node has a next one (see _validate)."""
        node = self.node
        if node.kind == "verdict":
            return None
        if node.kind == "check":
            result = self.results.get(node.id)
            if result is None:
                return None
            outcome = result.data.get("outcome", result.status)
            return node.next.get(outcome) or node.next.get(result.status) or node.next["*"]
        if node.kind == "select":
            return node.next.get(self.branch) or node.next["*"]
        return self._decide(node)

    def _decide(self, node: Node) -> str:
        chosen = self.decided_by(node)
        if chosen is None:
            return node.otherwise
        cause = self.results[chosen].data.get("cause")
        return node.causes.get(cause) or node.order[chosen]

    def decided_by(self, node: Node) -> str | None:
        """The check that names a decide node's verdict: a failed check that is ``definitive`` (bad data, the
        script's own safeguard found switched off, an optimizer measured never to step), else the first failed
        one in its order. With ``rank``, after the definitive ones: among the failed checks whose trial of
        their fix removed the failure and let the loss fall (``fixed_loss``), the one whose trial ended lowest
        (several changes each remove the NaN: the one that learns best names the cause), the first in order
        among those within TRIAL_TIE of it, leaving out a trial that only held the loss level (``holds_only``:
        a rate searched down until the loss stopped rising) where another's let it fall; then the first
        failed one. A trial
        that ended below 0 is an objective with no floor (a policy gradient's): lower is not better there,
        and the first proven check in the node's order (the most specific change) names the cause."""
        failed = [check for check in node.order if self.status(check) == "fail"]
        data = {check: self.results[check].data for check in failed}
        definitive = [c for c in failed if data[c].get("definitive")]
        if definitive:
            return definitive[0]
        if not failed or not node.rank:
            return failed[0] if failed else None
        proven = [c for c in failed if isinstance(data[c].get("fixed_loss"), (int, float))]
        if any(data[c].get("fixed_learns") for c in proven):
            proven = [c for c in proven if not data[c].get("holds_only")]
        if proven and any(data[c]["fixed_loss"] < 0 for c in proven):
            return proven[0]
        if proven:
            lowest = min(data[c]["fixed_loss"] for c in proven)
            return next(c for c in proven if data[c]["fixed_loss"] <= lowest * (1 + TRIAL_TIE))
        return failed[0]

    def advance(self) -> str | None:
        target = self.suggested_next()
        if target is not None:
            self.current = target
            self.path.append(target)
        return target

    def skip(self, node_id: str, why: str) -> None:
        """Record a check that could not run (the process is gone, the deadline passed)."""
        probe = self.tree[node_id].probe or node_id
        self.record(node_id, ProbeResult(run_id=0, probe=probe, status="skipped", summary=why))

    def verification(self) -> list[tuple[str, bool | None]]:
        """The protocol's verification items: True done, False not done, None not applicable.
        A check counts as done only when it produced a finding (pass or fail)."""
        items = []
        for item in self.tree.verification:
            if item.get("branch") and item["branch"] != self.branch:
                items.append((item["text"], None))
            elif item.get("confirmed"):
                items.append((item["text"], any(r.data.get("confirmed") for r in self.results.values())))
            elif item.get("validated"):
                items.append((item["text"], any(r.data.get("validated") for r in self.results.values())))
            else:
                items.append((item["text"], all(self.status(c) in ("pass", "fail") for c in item["checks"])))
        return items
