"""The decision tree file and its walk, and the Session's bounded memory: plain Python, no child."""

from __future__ import annotations

import json
import time
from importlib import resources

import pytest

from tuidebug.protocol import Event, ProbeResult, Step
from tuidebug.session import Downsampled, Session
from tuidebug.tree import TreeError, Walk, load_tree
from tuidebug.triage import preselect

def result(probe: str, status: str, **data) -> ProbeResult:
    return ProbeResult(run_id=1, probe=probe, status=status, summary=f"{probe} {status}", data=data)


PROTOCOL_CHECKS = {"overfit", "nan.lr", "nan.inputs", "nan.unsafe_math", "nan.grad_explosion", "oom.batch_size",
                   "oom.leak", "shape.operands"}


def _reachable(tree) -> set[str]:
    reachable, todo = set(), [tree.root]
    while todo:
        node = tree[todo.pop()]
        if node.id not in reachable:
            reachable.add(node.id)
            todo += node.targets()
    return reachable


def test_the_bundled_tree_encodes_the_protocol():
    tree = load_tree()

    assert tree.root == "overfit" and tree[tree.root].probe == "overfit"
    assert PROTOCOL_CHECKS <= {n.probe for n in tree.checks()}
    assert _reachable(tree) == set(tree.nodes)
    assert {n.probe for n in tree.checks()} <= set(_registered_probes())


def _registered_probes() -> list[str]:
    """The probes the agent registers, read in a child process: this process never imports torch."""
    import subprocess
    import sys

    code = "import tuidebug.probes; from tuidebug.probe_api import PROBES; print(' '.join(PROBES))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()


@pytest.mark.parametrize("change, message", [
    (lambda raw: raw["nodes"]["overfit"]["next"].update(fits="nowhere"), "does not exist"),
    (lambda raw: raw["nodes"]["nan.lr"].pop("probe"), "names no probe"),
    (lambda raw: raw["nodes"]["verdict.healthy"].pop("cause"), "no failure class or cause"),
    (lambda raw: raw["nodes"]["branch"].update(kind="maybe"), "unknown kind"),
    (lambda raw: raw["nodes"]["nan.lr"].update(next={"pass": "nan.inputs"}), "no edge for fail"),
    (lambda raw: raw["nodes"]["branch"]["next"].pop("*"), "no edge for"),
    (lambda raw: raw["nodes"]["nan.decide"].pop("otherwise"), "has no 'otherwise'"),
])
def test_a_broken_tree_file_is_refused_with_the_place(change, message):
    raw = json.loads(resources.files("tuidebug.assets").joinpath("tree.json").read_text())
    if message == "no edge for":
        for branch in ("nan", "oom"):
            raw["nodes"]["branch"]["next"].pop(branch)
    change(raw)

    with pytest.raises(TreeError, match=message):
        load_tree(json.dumps(raw))


STATUSES = ("pass", "fail", "inconclusive", "error", "cancelled", "skipped")
BRANCHES = ("nan", "oom", "shape", "learning", "crash", "stall", "no_step", "healthy", "unknown")
OUTCOMES = ("fits", "slow", "still_improving", "nonfinite", "cannot_fit", "frozen", "inconclusive")


@pytest.mark.parametrize("branch", BRANCHES)
@pytest.mark.parametrize("status", STATUSES)
def test_every_walk_ends_at_a_verdict_whatever_each_probe_returns(branch, status):
    """Every branch, every status from every probe (and every overfit outcome): the walk reaches a
    verdict in a bounded number of moves, never stuck at a node without an edge."""
    for outcome in OUTCOMES:
        walk = Walk(load_tree(), branch=branch)
        for _ in range(100):
            if walk.verdict is not None:
                break
            if walk.node.kind == "check" and walk.current not in walk.results:
                data = {"outcome": outcome} if walk.current == "overfit" else {"cause": "not a known cause"}
                walk.record(walk.current, result(walk.node.probe, status, **data))
            assert walk.advance() is not None, f"stuck at {walk.current}"
        assert walk.verdict is not None, walk.path


def test_the_nan_walk_checks_all_four_and_the_first_failure_names_the_cause():
    walk = Walk(load_tree(), branch="nan", reason="loss is nan")
    outcomes = {"overfit": result("overfit", "fail", outcome="nonfinite"), "nan.lr": result("nan.lr", "fail"),
                "nan.inputs": result("nan.inputs", "pass"), "nan.unsafe_math": result("nan.unsafe_math", "fail"),
                "nan.precision": result("nan.precision", "pass"),
                "nan.grad_explosion": result("nan.grad_explosion", "fail")}
    while walk.verdict is None:
        if walk.node.kind == "check":
            walk.record(walk.current, outcomes[walk.current])
        walk.advance()

    assert walk.verdict.cause == "unsafe_math"
    assert [n for n in walk.path if n in outcomes] == ["overfit", "nan.lr", "nan.inputs", "nan.unsafe_math",
                                                       "nan.precision", "nan.grad_explosion"]
    assert dict(walk.verification())["For NaN: learning rate, input NaNs, unsafe math, and gradient explosion all checked"]


def test_a_check_that_covers_several_causes_names_the_one_it_found():
    walk = Walk(load_tree(), branch="learning")
    while walk.verdict is None:
        if walk.node.kind == "check":
            cause = {"cause": "lr_schedule_decay"} if walk.current == "learning.rate" else {}
            walk.record(walk.current, result(walk.node.probe, "fail" if cause else "pass", **cause))
        walk.advance()

    assert (walk.verdict.failure_class, walk.verdict.cause) == ("no_learning", "lr_schedule_decay")


def test_a_single_batch_that_cannot_be_fitted_opens_the_learning_checks_on_a_healthy_looking_run():
    walk = Walk(load_tree(), branch="healthy")
    walk.record("overfit", result("overfit", "fail", outcome="cannot_fit"))
    walk.advance()
    walk.advance()

    assert walk.current == "learning.graph"
    while walk.verdict is None:
        if walk.node.kind == "check":
            walk.record(walk.current, result(walk.node.probe, "pass"))
        walk.advance()
    assert walk.verdict.cause == "cannot_overfit_single_batch"


@pytest.mark.parametrize("label_check, verdict", [("pass", "healthy"), ("fail", "labels_misaligned")])
def test_a_healthy_looking_run_whose_batch_fits_slowly_has_its_labels_checked(label_check, verdict):
    walk = Walk(load_tree(), branch="healthy")
    walk.record("overfit", result("overfit", "inconclusive", outcome="still_improving"))
    walk.advance()
    walk.advance()

    assert walk.current == "healthy.labels"
    walk.record(walk.current, result(walk.node.probe, label_check))
    walk.advance()
    assert walk.current == "healthy.held_frozen"
    walk.record(walk.current, result(walk.node.probe, "pass"))
    while walk.verdict is None:
        walk.advance()
    assert walk.verdict.cause == verdict


@pytest.mark.parametrize("frozen_check, verdict", [("pass", "healthy"), ("fail", "frozen_parameters")])
def test_a_healthy_looking_run_that_fits_only_at_ten_times_its_rate_has_its_frozen_groups_checked(frozen_check,
                                                                                                  verdict):
    walk = Walk(load_tree(), branch="healthy")
    walk.record("overfit", result("overfit", "pass", outcome="slow"))
    walk.advance()
    walk.advance()

    assert walk.current == "healthy.held_frozen"
    walk.record(walk.current, result(walk.node.probe, frozen_check))
    while walk.verdict is None:
        walk.advance()
    assert walk.verdict.cause == verdict


def test_a_shape_error_goes_to_the_shape_checks_even_when_the_batch_cannot_be_fitted():
    walk = Walk(load_tree(), branch="shape")
    walk.record("overfit", result("overfit", "fail", outcome="cannot_fit"))
    walk.advance()
    walk.advance()

    assert walk.current == "shape.operands"


def _session_with(*events: Event, steps: int = 5) -> Session:
    session = Session("train.py", [])
    for step in range(1, steps + 1):
        session.ingest(Step(step=step, time=time.time(), loss=1.0, grad_norm=1.0))
    for event in events:
        session.ingest(event)
    return session


@pytest.mark.parametrize("analysis, branch", [
    ("oom out_of_memory", "oom"),
    ("shape shape_mismatch", "shape"),
    ("no_graph no_gradient_to_weights", "learning"),
    ("other exception", "crash"),
])
def test_the_run_preselects_the_branch_from_the_analysed_exception(analysis, branch):
    session = _session_with(Event(kind="exception", message="SomeError: text", time=time.time()),
                            Event(kind="crash", message=analysis, time=time.time()))

    assert preselect(session)[0] == branch


def test_a_nan_preselects_the_nan_branch_and_a_quiet_run_the_healthy_one():
    assert preselect(_session_with())[0] == "healthy"
    session = _session_with()
    session.ingest(Step(step=6, time=time.time(), loss=float("nan")))
    assert preselect(session)[0] == "nan"
    assert preselect(_session_with(steps=0))[0] == "no_step"


@pytest.mark.parametrize("finding, branch", [
    ("stale_grads: the gradients were already non-zero", "learning"),
    ("loss_broadcast: mse_loss at train.py:3 compares (8, 1) with (8,)", "shape"),
    ("graphs_kept: the autograd graphs of 3 earlier steps", "oom"),
])
def test_a_finding_of_the_agent_opens_its_branch(finding, branch):
    assert preselect(_session_with(Event(kind="finding", message=finding, time=time.time())))[0] == branch


@pytest.mark.parametrize("learning_finding, branch", [
    ("idle_optimizer: the Adam created at train.py:57 never steps: its 6 parameter tensors get gradients", "learning"),
    ("loss_input: cross_entropy at train.py:40 is given probabilities", "oom"),
])
def test_weights_that_never_change_outrank_memory_that_only_grows_and_other_learning_findings_do_not(
        learning_finding, branch):
    """RSS that grows with no holder named (a run that builds a second model mid-way) is weaker evidence than an
    optimizer that never steps while its parameters get gradients; a learning finding of another kind waits."""
    growth = Event(kind="finding", message="memory_growth: resident memory (CPU) grows 1.16 MiB a step, steadily",
                   time=time.time())
    assert preselect(_session_with(growth, Event(kind="finding", message=learning_finding, time=time.time())))[0] == branch


@pytest.mark.parametrize("losses, branch", [
    ([1.0] * 20, "learning"),
    ([1.0 + 0.5 * i for i in range(20)], "learning"),
    ([1.0 * 2 ** i for i in range(20)], "nan"),
    ([1.0 / (1 + i) for i in range(20)], "healthy"),
    ([0.1 * (-1) ** i * (1 + i) for i in range(20)], "healthy"),  # a policy-gradient loss: signed, no ratio
])
def test_the_loss_trend_opens_the_learning_or_divergence_branch(losses, branch):
    session = Session("train.py", [])
    for step, loss in enumerate(losses, 1):
        session.ingest(Step(step=step, time=time.time(), loss=loss, grad_norm=1.0))

    assert preselect(session)[0] == branch


def test_an_exit_without_an_exception_is_a_crash_with_the_signal():
    session = _session_with()
    session.child_exited(-9)

    branch, reason = preselect(session)
    assert branch == "crash" and "SIGKILL" in reason and "step 5" in reason


def test_a_stall_is_its_own_branch():
    session = _session_with(Event(kind="stall", message="the run made no step for 12s", time=time.time()))

    assert preselect(session) == ("stall", "the run made no step for 12s")


def test_a_stall_before_any_step_waiting_for_worker_processes_is_no_step_of_this_process_not_a_crash():
    waiting = "the run made no step for 5s after step 0; the training thread is at train.py:118 `p.join()` in <module>"
    session = _session_with(Event(kind="stall", message=waiting, time=time.time()), steps=0)

    branch, reason = preselect(session)
    assert branch == "no_step" and "waits for processes it started" in reason
    looping = "the run made no step for 5s after step 0; the training thread is at train.py:40 `for x in loader:`"
    assert preselect(_session_with(Event(kind="stall", message=looping, time=time.time()), steps=0))[0] == "stall"


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


def test_a_shape_finding_outranks_memory_that_only_grows_but_not_graphs_kept_across_steps():
    growth = Event(kind="finding", message="memory_growth: resident memory grows 0.45 MiB a step", time=0.0, step=5)
    broadcast = Event(kind="finding", message="loss_broadcast: mse_loss compares (8, 1) with (8,)", time=0.0, step=5)
    graphs = Event(kind="finding", message="graphs_kept: the autograd graphs of 4 earlier steps", time=0.0, step=5)
    assert preselect(_session_with(growth, broadcast))[0] == "shape"
    assert preselect(_session_with(graphs, broadcast))[0] == "oom"
    assert preselect(_session_with(growth))[0] == "oom"


def test_several_proven_nan_fixes_are_ranked_by_their_final_loss_unless_the_objective_goes_below_zero():
    def chosen(lr_loss: float, math_loss: float) -> str:
        walk = Walk(load_tree(), branch="nan")
        walk.record("nan.unsafe_math", result("nan.unsafe_math", "fail", fixed_loss=math_loss))
        walk.record("nan.lr", result("nan.lr", "fail", fixed_loss=lr_loss))
        return walk.decided_by(walk.tree["nan.decide"])

    assert chosen(lr_loss=0.2, math_loss=0.6) == "nan.lr"  # the one that learns best
    assert chosen(lr_loss=0.286, math_loss=0.296) == "nan.unsafe_math"  # within TRIAL_TIE: a tie, the order decides
    assert chosen(lr_loss=0.27, math_loss=0.296) == "nan.lr"
    assert chosen(lr_loss=-1.6, math_loss=-0.6) == "nan.unsafe_math"  # no floor: the most specific change


def test_a_rate_that_only_holds_the_loss_ranks_below_a_change_that_lets_it_fall():
    """The rate check searches down until the loss stops rising: a rate that only holds it level is no fix
    where clipping at the script's own rate let it fall, whatever their final losses."""
    def chosen(clip_learns: bool) -> str:
        walk = Walk(load_tree(), branch="nan")
        walk.record("nan.grad_explosion",
                    result("nan.grad_explosion", "fail", fixed_loss=1.4, fixed_learns=clip_learns))
        walk.record("nan.lr", result("nan.lr", "fail", fixed_loss=1.1, fixed_learns=False, holds_only=True))
        return walk.decided_by(walk.tree["nan.decide"])

    assert chosen(clip_learns=True) == "nan.grad_explosion"
    assert chosen(clip_learns=False) == "nan.lr"  # neither lets it fall: the lower loss


def test_the_report_says_why_a_rate_that_only_held_the_loss_ranks_below_a_clip_that_let_it_fall():
    from tuidebug.report import _other_fixes
    walk = Walk(load_tree(), branch="nan")
    walk.record("nan.grad_explosion", result("nan.grad_explosion", "fail", fixed_loss=1.4, fixed_learns=True))
    walk.record("nan.lr", result("nan.lr", "fail", fixed_loss=1.1, fixed_learns=False, holds_only=True))
    chosen = walk.decided_by(walk.tree["nan.decide"])

    lines = _other_fixes(walk, chosen)
    assert chosen == "nan.grad_explosion"
    assert lines[0] == "other changes that also removed it: nan.lr (its trial ended at loss 1.1)"
    assert lines[1] == "nan.grad_explosion's trial let the loss fall; a lower rate that only held it level ranks below it"


def test_a_run_without_steps_whose_loss_falls_is_healthy_and_one_without_that_is_no_step():
    fell = Event(kind="stepless_training", message="the loss computed at train.py:9 fell from 3 to 2.5 over 300 calls",
                 time=time.time())
    assert preselect(_session_with(fell, steps=0)) == ("healthy", fell.message)
    assert preselect(_session_with(steps=0))[0] == "no_step"
