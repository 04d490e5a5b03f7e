"""The decision tree: loaded from ``assets/tree.json``, walked over a Session's probe results.

Plain Python with no Textual: ``tuidebug diagnose`` walks it automatically, the tree screen walks
it with the keyboard, and tests walk it directly. The walk never runs a probe itself; it says
which node is next given the results it was handed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from typing import TYPE_CHECKING

from tuidebug.protocol import Event, ProbeResult

if TYPE_CHECKING:
    from tuidebug.session import Session

KINDS = {"check", "select", "decide", "observe", "verdict"}
OOM_PATTERNS = re.compile(r"out of memory|OutOfMemoryError|can't allocate memory|CUBLAS_STATUS_ALLOC_FAILED", re.I)
SHAPE_PATTERNS = re.compile(
    r"shape|size mismatch|mat1 and mat2|must match the size|dimension|Expected input batch_size|"
    r"doesn't match the broadcast|cannot be multiplied|Target size", re.I)


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
    next: dict[str, str] = field(default_factory=dict)
    order: dict[str, str] = field(default_factory=dict)
    otherwise: str | None = None
    failure_class: str | None = None
    cause: str | None = None
    fix: str = ""


@dataclass
class Tree:
    root: str
    nodes: dict[str, Node]
    verification: list[dict[str, Any]]

    def __getitem__(self, node_id: str) -> Node:
        return self.nodes[node_id]

    def checks(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.kind == "check"]


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
        targets = list(node.next.values()) + list(node.order.values()) + ([node.otherwise] if node.otherwise else [])
        for target in targets:
            if target not in tree.nodes:
                raise TreeError(f"node {node.id}: next node {target!r} does not exist")
        if node.kind == "check" and not node.probe:
            raise TreeError(f"check {node.id} names no probe")
        if node.kind == "verdict" and not (node.failure_class and node.cause):
            raise TreeError(f"verdict {node.id} has no failure class or cause")
        if node.kind != "verdict" and not targets:
            raise TreeError(f"node {node.id} leads nowhere")


def preselect(session: Session) -> tuple[str, str]:
    """The branch the live run points to, and why."""
    with session.lock:
        events = list(session.events)
        first_nonfinite = session.counters.first_nonfinite_step
        steps = session.step
    exception = next((e for e in reversed(events) if e.kind == "exception"), None)
    nonfinite = next((e for e in events if e.kind in ("nonfinite_loss", "nonfinite_grad")), None)
    if nonfinite is not None or first_nonfinite is not None:
        step = nonfinite.step if nonfinite is not None else first_nonfinite
        return "nan", f"non-finite value at step {step}: {nonfinite.message if nonfinite else ''}".rstrip(": ")
    if exception is not None:
        return _classify(exception)
    end = next((e for e in reversed(events) if e.kind == "script_end"), None)
    if end is not None and not end.message.endswith(" 0"):
        return "crash", end.message
    if steps == 0:
        return "no_step", "the script ran no optimizer step" + (" before it ended" if end else " in the window")
    return "healthy", "no non-finite value, no exception in the run so far"


def _classify(exception: Event) -> tuple[str, str]:
    if OOM_PATTERNS.search(exception.message):
        return "oom", f"the script ran out of memory: {exception.message}"
    if SHAPE_PATTERNS.search(exception.message):
        return "shape", f"shape error: {exception.message}"
    return "crash", f"the script raised {exception.message}"


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

    def status(self, node_id: str) -> str:
        """not run, pass, fail, inconclusive... for a check; visited / not visited for the rest."""
        if node_id in self.results:
            return self.results[node_id].status
        return "visited" if node_id in self.path else "not run"

    def suggested_next(self) -> str | None:
        """The node after the current one, given the results so far; None at a verdict or while
        the current check has no result yet."""
        node = self.node
        if node.kind == "verdict":
            return None
        if node.kind == "check":
            result = self.results.get(node.id)
            if result is None:
                return None
            outcome = result.data.get("outcome", result.status)
            return node.next.get(outcome) or node.next.get(result.status) or node.next.get("*")
        if node.kind == "select":
            return node.next.get(self.branch) or node.next.get("*")
        if node.kind == "decide":
            failed = [check for check in node.order if self.status(check) == "fail"]
            return node.order[failed[0]] if failed else node.otherwise
        return node.next.get("*")

    def advance(self) -> str | None:
        target = self.suggested_next()
        if target is not None:
            self.current = target
            self.path.append(target)
        return target

    def verification(self) -> list[tuple[str, bool | None]]:
        """The protocol's verification items: True done, False not done, None not applicable."""
        items = []
        for item in self.tree.verification:
            if item.get("branch") and item["branch"] != self.branch:
                items.append((item["text"], None))
            elif item.get("validated"):
                items.append((item["text"], any(r.data.get("validated") for r in self.results.values())))
            else:
                items.append((item["text"], all(c in self.results for c in item["checks"])))
        return items
