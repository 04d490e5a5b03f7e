"""The decision tree file and its walk, and the Session's bounded memory: plain Python, no child."""

from __future__ import annotations

import json
import time
from importlib import resources

import pytest

from tuidebug.protocol import Event, ProbeResult, Step
from tuidebug.session import Downsampled, Session
from tuidebug.tree import TreeError, Walk, load_tree, preselect

PROTOCOL_CHECKS = {"overfit", "nan.lr", "nan.inputs", "nan.unsafe_math", "nan.grad_explosion"}


def result(probe: str, status: str, **data) -> ProbeResult:
    return ProbeResult(run_id=1, probe=probe, status=status, summary=f"{probe} {status}", data=data)


def test_the_bundled_tree_encodes_the_protocol():
    tree = load_tree()

    assert tree.root == "overfit" and tree[tree.root].probe == "overfit"
    assert {n.probe for n in tree.checks()} == PROTOCOL_CHECKS
    reachable, todo = set(), [tree.root]
    while todo:
        node = tree[todo.pop()]
        if node.id not in reachable:
            reachable.add(node.id)
            todo += list(node.next.values()) + list(node.order.values()) + [n for n in [node.otherwise] if n]
    assert reachable == set(tree.nodes)


@pytest.mark.parametrize("change, message", [
    (lambda raw: raw["nodes"]["overfit"]["next"].update(fits="nowhere"), "does not exist"),
    (lambda raw: raw["nodes"]["nan.lr"].pop("probe"), "names no probe"),
    (lambda raw: raw["nodes"]["verdict.healthy"].pop("cause"), "no failure class or cause"),
    (lambda raw: raw["nodes"]["branch"].update(kind="maybe"), "unknown kind"),
])
def test_a_broken_tree_file_is_refused_with_the_place(change, message):
    raw = json.loads(resources.files("tuidebug.assets").joinpath("tree.json").read_text())
    change(raw)

    with pytest.raises(TreeError, match=message):
        load_tree(json.dumps(raw))


def test_the_nan_walk_checks_all_four_and_the_first_failure_names_the_cause():
    walk = Walk(load_tree(), branch="nan", reason="loss is nan")
    outcomes = {"overfit": result("overfit", "fail", outcome="nonfinite"), "nan.lr": result("nan.lr", "pass"),
                "nan.inputs": result("nan.inputs", "pass"), "nan.unsafe_math": result("nan.unsafe_math", "fail"),
                "nan.grad_explosion": result("nan.grad_explosion", "fail")}
    while walk.verdict is None:
        if walk.node.kind == "check":
            walk.record(walk.current, outcomes[walk.current])
        walk.advance()

    assert walk.verdict.cause == "unsafe_math"
    assert [n for n in walk.path if n in PROTOCOL_CHECKS] == ["overfit", "nan.lr", "nan.inputs",
                                                            "nan.unsafe_math", "nan.grad_explosion"]
    assert dict(walk.verification())["For NaN: learning rate, input NaNs, unsafe math, and gradient explosion all checked"]


def test_a_single_batch_that_cannot_be_fitted_ends_the_walk_before_the_branch():
    walk = Walk(load_tree(), branch="nan")
    walk.record("overfit", result("overfit", "fail", outcome="frozen"))

    assert walk.advance() == "verdict.no_gradient"
    assert walk.verdict.failure_class == "no_learning"


def _session_with(*events: Event, steps: int = 5) -> Session:
    session = Session("train.py", [])
    for step in range(1, steps + 1):
        session.ingest(Step(step=step, time=time.time(), loss=1.0, grad_norm=1.0))
    for event in events:
        session.ingest(event)
    return session


@pytest.mark.parametrize("message, branch", [
    ("OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "oom"),
    ("RuntimeError: DefaultCPUAllocator: can't allocate memory: you tried to allocate 10 bytes", "oom"),
    ("RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x3 and 5x2)", "shape"),
    ("ValueError: Target size (torch.Size([4])) must be the same as input size", "shape"),
    ("KeyError: 'label'", "crash"),
])
def test_the_run_preselects_the_branch_from_the_exception(message, branch):
    session = _session_with(Event(kind="exception", message=message, time=time.time()))

    assert preselect(session)[0] == branch


def test_a_nan_preselects_the_nan_branch_and_a_quiet_run_the_healthy_one():
    assert preselect(_session_with())[0] == "healthy"
    session = _session_with()
    session.ingest(Step(step=6, time=time.time(), loss=float("nan")))
    assert preselect(session)[0] == "nan"
    assert preselect(_session_with(steps=0))[0] == "no_step"


def test_session_memory_is_bounded_for_a_million_steps():
    session = Session("train.py", [])
    for step in range(1, 1_000_001):
        session.loss.add(step, 1.0 / step)

    assert len(session.loss.recent) == 10_000
    assert len(session.loss.coarse.points) < 2_048
    assert session.loss.coarse.points[0][0] == 1
    assert session.loss.coarse.points[-1][0] > 900_000


def test_downsampled_means_preserve_the_average():
    series = Downsampled(capacity=8)
    for x in range(64):
        series.add(x, float(x))

    assert len(series.points) < 8
    assert sum(y for _, y in series.points) / len(series.points) == pytest.approx(31.5, rel=0.05)
