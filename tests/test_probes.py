"""Probes on real child processes: the overfit test, the batch inspector, and the proof that a
probe leaves the run exactly as it was."""

from __future__ import annotations

import re
import subprocess
import sys
import types
from concurrent.futures import Future, ThreadPoolExecutor

import pytest
import torch

from conftest import EXAMPLES, ROOT, SCRIPTS, wait_for


def _plain_output(script, *args: str) -> Future:
    """The script's last line under plain python, run beside the test's own run (two cores)."""
    def last_line() -> str:
        result = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=60)
        return result.stdout.strip().splitlines()[-1]

    return _PLAIN.submit(last_line)


_PLAIN = ThreadPoolExecutor(max_workers=1)


def _run_probe(run, session, name: str = "overfit", timeout: float = 60, **params):
    run.command("probe", name=name, params=params)
    wait_for(lambda: name in session.probe_results, timeout, f"the {name} probe's result")
    return session.probe_results[name]


def _finish(run, session) -> str:
    """Resume to the end of the script, leave post-mortem, and return the script's last line on stdout (its
    stderr, a warning's source line, is read apart and may come in later)."""
    run.command("resume")
    wait_for(lambda: session.state == "ended", 60, "the script to end")
    run.command("quit")
    run.wait(10)
    return [line.text for line in session.printed_lines() if line.stream == "stdout" and line.text.strip()][-1]


@pytest.mark.parametrize("replay, method", [
    ("loop", "replay through the script's own loop"),
    ("copy", "copy of model and optimizer with the observed inputs and loss module"),
])
def test_overfit_passes_and_the_run_ends_bit_identical(start_run, replay, method):
    expected = _plain_output(SCRIPTS / "probe_checksum.py")
    run, session = start_run(SCRIPTS / "probe_checksum.py", break_at=10)
    wait_for(lambda: session.state == "paused", what="the break at step 10")

    result = _run_probe(run, session, replay=replay)

    assert result.status == "pass", result.summary
    assert result.method == method
    assert len(result.curve) >= 2 and result.curve[-1] < result.curve[0]
    assert session.state == "paused"
    assert _finish(run, session) == expected.result()


def test_after_the_end_a_copy_trains_at_the_last_steps_rate_on_a_training_batch(start_run):
    """The schedule stepped the rate to 0 as the script ended, and its last model call was an evaluation
    in inference mode: the copy trains at the rate of the run's last step, on a batch the run trained on."""
    run, session = start_run(SCRIPTS / "cosine_to_zero.py", post_mortem=True, copy_post_mortem=True)
    wait_for(lambda: session.state == "ended", 60, "the script's end (held for post-mortem checks)")

    result = _run_probe(run, session)

    assert result.status == "pass", (result.summary, result.evidence)
    assert any("at the rate of the run's last step (0.125), not the optimizer's after the script ended (0)" in line
               for line in result.evidence), result.evidence


def test_one_batch_of_a_gan_that_does_not_fit_is_not_a_broken_pipeline(start_run):
    """A toy GAN (a corpus control: R1 penalty every 16 steps, two Adams in turns): its summed loss on one
    batch does not fall to a share of its start, as a game's does not; with two optimizers stepping in
    turns the test says so instead of failing the pipeline."""
    run, session = start_run(ROOT / "corpus" / "healthy" / "r33dok_stylegan2_r1_lazy_regularization_toy.py",
                             break_at=40)
    wait_for(lambda: session.state == "paused", 60, "the break at step 40")

    result = _run_probe(run, session)

    assert result.status == "inconclusive", (result.summary, result.evidence)
    assert "optimizers in turns" in result.summary and result.data["outcome"] == "still_improving"


def test_overfit_fails_when_no_gradient_reaches_the_weights(start_run):
    run, session = start_run(EXAMPLES / "no_grad_reaches_weights.py", break_at=3)
    wait_for(lambda: session.state == "paused", what="the break at step 3")

    result = _run_probe(run, session, steps=40)

    assert result.status == "fail"
    assert "cannot fit one batch" in result.summary
    assert any("the weights are not being updated" in line for line in result.evidence)
    assert any("no gradient reached" in line and "0.weight" in line for line in result.evidence)
    assert "debug this single batch" in result.fix


@pytest.mark.parametrize("kind", ["dict", "nested"])
def test_overfit_replays_dict_and_nested_batches(start_run, kind):
    expected = _plain_output(SCRIPTS / "probe_batches.py", kind)
    run, session = start_run(SCRIPTS / "probe_batches.py", kind, break_at=4)
    wait_for(lambda: session.state == "paused", what="the break")

    result = _run_probe(run, session, replay="loop")

    assert result.status == "pass", result.summary
    assert result.method == "replay through the script's own loop"
    assert _finish(run, session) == expected.result()


def test_without_a_dataloader_the_probe_trains_a_copy_with_the_observed_loss(start_run):
    expected = _plain_output(SCRIPTS / "probe_batches.py", "loop")
    run, session = start_run(SCRIPTS / "probe_batches.py", "loop", break_at=4)
    wait_for(lambda: session.state == "paused", what="the break")

    result = _run_probe(run, session)

    assert result.status == "pass", result.summary
    assert result.method == "copy of model and optimizer with the observed inputs and loss module"
    assert _finish(run, session) == expected.result()


def test_a_functional_loss_without_dataloader_says_what_to_add(start_run):
    run, session = start_run(SCRIPTS / "probe_batches.py", "functional", break_at=4)
    wait_for(lambda: session.state == "paused", what="the break")

    result = _run_probe(run, session)

    assert result.status == "inconclusive"
    assert "tuidebug.watch(model, optimizer, loss_fn=" in result.summary


def test_post_mortem_probe_runs_on_a_copy_after_the_script_ended(start_run):
    run, session = start_run(SCRIPTS / "probe_checksum.py", "1")
    wait_for(lambda: session.state == "ended", 60, "the script to end")

    result = _run_probe(run, session)

    assert result.status == "pass", result.summary
    assert result.method.startswith("copy of model and optimizer")


@pytest.mark.fault('a probe cancelled mid-run',
                   'result cancelled, the run ends bit-identical')
def test_a_cancelled_probe_still_restores_the_run(start_run):
    """Each forward waits 0.05 s, so the probe is still running when the cancel lands (a batch that fits
    in a few fast steps would end the probe first)."""
    expected = _plain_output(SCRIPTS / "probe_checksum.py", "3", "0.05")
    run, session = start_run(SCRIPTS / "probe_checksum.py", "3", "0.05", break_at=10)
    wait_for(lambda: session.state == "paused", what="the break")
    run.command("probe", name="overfit", params={"steps": 100000, "examples": 32})
    wait_for(lambda: session.probe_progress is not None or "overfit" in session.probe_results,
             what="progress from the probe")
    run.command("cancel")
    wait_for(lambda: "overfit" in session.probe_results, what="the cancelled result")

    assert session.probe_results["overfit"].status == "cancelled"
    assert _finish(run, session) == expected.result()


def test_inspector_figures_equal_those_computed_directly(start_run):
    run, session = start_run(SCRIPTS / "probe_batches.py", "dict", break_at=2)
    wait_for(lambda: session.state == "paused", what="the break")

    run.command("inspect", step=2)
    wait_for(lambda: session.batch_report is not None, what="the batch report")

    report = session.batch_report
    torch.manual_seed(0)
    x = torch.randn(128, 6)
    y = (x[:, 0] + x[:, 1] > 0).long()
    features, labels = x[16:32].double(), y[16:32]
    by_path = {t["path"]: t for t in report.tensors}
    assert report.step == 2 and 2 in report.available
    f = by_path["batch['features']"]
    assert f["shape"] == [16, 6] and f["dtype"] == "float32" and f["nan"] == 0
    assert f["min"] == pytest.approx(float(features.min()))
    assert f["max"] == pytest.approx(float(features.max()))
    assert f["mean"] == pytest.approx(float(features.mean()))
    assert f["std"] == pytest.approx(float(features.std()))
    assert f["example"] == pytest.approx(features[0].tolist())
    counts = {str(int(c)): int(n) for c, n in zip(*torch.unique(labels, return_counts=True))}
    assert by_path["batch['label']"]["labels"] == counts


@pytest.mark.parametrize("rate, status", [("0.05", "pass"), ("5e-5", "fail")])
def test_a_loop_updating_by_hand_is_replayed_iteration_by_iteration_and_its_update_scaled(start_run, rate, status):
    """No optimizer and no DataLoader: a replayed iteration ends at the next forward after its backward
    (the update is in between), and the rate check scales that update in place of a rate. The replays
    borrow the loop's own iterations, and the weights are restored: the script ends where plain python's
    run of that many fewer iterations does (to 1e-3: the first real iteration after the probe pairs its
    held input with a target the loop drew during the probe), not where a 100-fold update leads."""
    run, session = start_run(SCRIPTS / "hand_sgd.py", rate, "300", break_at=20)
    wait_for(lambda: session.state == "paused", what="the break")

    result = _run_probe(run, session, "learning.rate")

    assert result.status == status, result.summary
    borrowed = int(re.search(r"borrowed (\d+) iteration", result.evidence[-1]).group(1))
    if status == "fail":
        assert result.data["cause"] == "learning_rate_too_low" and result.data["confirmed"]
        assert "hand_sgd.py:19" in " ".join(result.evidence)  # p -= lr * p.grad
    final = _finish(run, session).split()
    plain = _plain_output(SCRIPTS / "hand_sgd.py", rate, str(300 - borrowed)).result().split()
    assert [float(v) for v in final] == pytest.approx([float(v) for v in plain], rel=1e-3)


def test_a_single_batch_loss_that_rises_while_the_run_falls_is_read_as_the_objective() -> None:
    """PPO's clipped objective: optimising one batch again and again raises its loss, while the run
    learns. A flat or falling batch curve, or a run that does not fall, keeps the single-batch verdict."""
    from types import SimpleNamespace

    from tuidebug.probes.overfit import rises_while_the_run_falls

    def context(first: float, last: float) -> SimpleNamespace:
        return SimpleNamespace(params={"run_trend": [first, last, 960]}, history=[])

    rising = [23.3, 23.9, 24.2, 24.5, 24.6, 24.8, 24.8]
    assert rises_while_the_run_falls(context(36.3, 29.8), rising)
    assert not rises_while_the_run_falls(context(36.3, 35.5), rising)  # the run does not fall either
    assert not rises_while_the_run_falls(context(36.3, 29.8), [1.39] * 7)  # flat: a frozen model
    assert not rises_while_the_run_falls(context(36.3, 29.8), [1.4, 1.3, 1.2, 1.1, 1.0, 0.9, 0.8])
    assert not rises_while_the_run_falls(context(36.3, 29.8), rising[:3])  # too short to tell


def test_a_second_run_judges_the_slow_fall_of_the_whole_first_run_not_its_own_first_steps() -> None:
    """Bayes by backprop: a loss dominated by its KL term falls slowly over the run; the second run, paused
    at step 10, has seen only its first steps."""
    from types import SimpleNamespace

    from tuidebug.probe_api import ProbeOutcome
    from tuidebug.probes.overfit import weighed_against_the_run
    from tuidebug.probes.trials import run_losses

    first_run = [7400.0 - 4.0 * step for step in range(240)]
    second = SimpleNamespace(params={"run_trend": [7345, 6442, 240], "run_losses": first_run},
                             history=[SimpleNamespace(step=s, loss=7616.0) for s in range(10)],
                             run=SimpleNamespace(facts=SimpleNamespace(reported=set()), optimizers=[object()]))
    assert run_losses(second) == first_run
    unfit = ProbeOutcome("fail", "cannot fit one batch: loss 7294 -> 6277", data={"outcome": "cannot_fit"})
    weighed = weighed_against_the_run(second, unfit)
    assert weighed.status == "inconclusive" and "the run itself learns" in weighed.summary


def test_a_trial_of_an_objective_below_zero_learns_only_when_it_goes_further_down() -> None:
    from tuidebug.probe_api import Adjust
    from tuidebug.probes.trials import Trial

    def trial(losses: list[float]) -> Trial:
        return Trial(Adjust(), losses)

    assert trial([1.0, 0.9, 0.7, 0.5, 0.4, 0.3, 0.25, 0.2]).learns
    assert trial([-1.0, -1.2, -1.5, -1.8, -2.0, -2.2, -2.4, -2.5]).learns
    assert not trial([-1.1] * 4 + [-1.0] * 4).learns  # a ratio of two negatives would call this a fall
    rising = trial([-3.0, -3.1, -2.9, -2.5, -2.0, -1.8, -1.5, -1.4])  # toward 0: the objective got worse
    assert not rising.learns and not rising.holds and rising.final is None


class NoRoomLeft:
    """An agent whose state no longer fits in memory: its snapshot fails as the CPU allocator does."""

    def __init__(self) -> None:
        self.sent: list = []
        self.events: list = []
        self.client = types.SimpleNamespace(post_local=lambda command: None)

    def take_snapshot(self) -> None:
        raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 1024000 bytes")

    def send(self, message) -> None:
        self.sent.append(message)

    def event(self, kind: str, text: str) -> None:
        self.events.append((kind, text))


class NoRoomToRestore(NoRoomLeft):
    """An agent whose snapshot fits, but whose restore finds no room (the script's loop ended at its OOM)."""

    script_running = False

    def __init__(self) -> None:
        super().__init__()
        self.control = types.SimpleNamespace(holding="probing", leave=lambda: None)

    def take_snapshot(self) -> object:
        def restore() -> None:
            raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 2097152 bytes")
        return types.SimpleNamespace(restore=restore)


def test_a_checks_result_is_reported_where_the_state_before_it_cannot_be_put_back() -> None:
    """After an out-of-memory error the check's own forwards can use up what room was left, and putting the
    state back then fails: the result (the cause, found) used to be lost with it, and the check to time out."""
    from tuidebug.agent.probing import ProbeRuntime
    agent = NoRoomToRestore()
    runtime = ProbeRuntime(agent)
    runtime._loop_gone = True
    runtime.start("oom.allocation", {}, live_loop=False)
    runtime.finish()

    assert [m.probe for m in agent.sent] == ["oom.allocation"]
    assert any(kind == "error" and "could not be put back" in text and "loop has ended" in text
               for kind, text in agent.events)


@pytest.mark.parametrize("live", [True, False])
def test_a_check_with_no_room_for_its_snapshot_says_so_at_once_or_runs_on_an_ended_script(live: bool) -> None:
    """After an out-of-memory error the state may not fit a host copy. While the run goes on, the check is not
    run and says why at once (it used to wait out its deadline in silence); once the script's loop has ended,
    a check that only reads (what holds the memory) runs without one."""
    from tuidebug.agent.probing import ProbeRuntime
    agent = NoRoomLeft()
    runtime = ProbeRuntime(agent)
    runtime._loop_gone = not live
    runtime.start("oom.allocation", {}, live_loop=live)

    if live:
        assert [(m.status, m.probe) for m in agent.sent] == [("error", "oom.allocation")]
        assert "no memory left to save the run's state" in agent.sent[0].summary
    else:
        assert runtime.result is not None and runtime.result.probe == "oom.allocation"
        assert any("runs without a snapshot" in text for _, text in agent.events)
