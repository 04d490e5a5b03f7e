"""The four NaN checks on real failing scripts: each fails for its own cause with the right evidence
and passes for the others, so that together they single out the cause."""

from __future__ import annotations

import pytest
import torch

from conftest import EXAMPLES, SCRIPTS, wait_for
from tuidebug.launcher import ChildRun, Target
from tuidebug.session import Session
from tuidebug.tree import Walk, load_tree

CHECKS = ("nan.lr", "nan.inputs", "nan.unsafe_math", "nan.grad_explosion")
ARGS = {"nan_after_warmup.py": ("--sleep", "0")}


def run_checks(script: str, break_at: int | None = None, folder=EXAMPLES, checks=CHECKS, **config) -> dict:
    """Run the script to its first non-finite value (or ``break_at``) and ``checks`` (all four) there."""
    target = Target(str(folder / script), list(ARGS.get(script, ())))
    session = Session(target.name, target.args)
    run = ChildRun(target, session, {"break_on_nan": True, "break_at": break_at, **config}, capture_output=True)
    run.start()
    try:
        wait_for(lambda: session.state == "paused", 60, "the break")
        for check in checks:
            run.command("probe", name=check, params={})
            wait_for(lambda: check in session.probe_results, 60, f"{check}'s result")
    finally:
        run.close()
    return session.probe_results


@pytest.fixture(scope="module")
def checks():
    """The four checks' results per script, each script run once for the whole module."""
    cache: dict[str, dict] = {}

    def results(script: str) -> dict:
        if script not in cache:
            cache[script] = run_checks(script)
        return cache[script]

    return results


@pytest.mark.parametrize("script, cause", [
    ("nan_after_warmup.py", "nan.lr"),
    ("nan_inputs.py", "nan.inputs"),
    ("nan_log_zero.py", "nan.unsafe_math"),
    ("nan_divide_by_zero.py", "nan.unsafe_math"),
    ("nan_rnn_explode.py", "nan.grad_explosion"),
])
def test_the_four_checks_single_out_the_cause(checks, script, cause):
    """The cause's check fails with a fix; another check may fail too only where its own trial also
    removed the NaN (a lower rate often does), and then the ranking still names the cause."""
    results = checks(script)
    summaries = {check: results[check].summary for check in CHECKS}

    assert results[cause].status == "fail" and results[cause].fix, summaries
    for check in CHECKS:
        if check != cause and results[check].status == "fail":
            assert results[check].data.get("confirmed"), summaries
    walk = Walk(load_tree(), branch="nan")
    for check in CHECKS:
        walk.record_probe(results[check])
    assert walk.decided_by(walk.tree["nan.decide"]) == cause, summaries


def test_learning_rate_verdict_names_the_stable_rate(checks):
    result = checks("nan_after_warmup.py")["nan.lr"]

    assert "learning rate too high" in result.summary and result.data["stable_scale"] == 0.1
    assert "keeps the loss falling" in result.summary
    assert result.data["confirmed"] is True
    assert any("diverging" in line for line in result.evidence)


def test_nan_inputs_names_the_rows_and_the_samples(checks):
    result = checks("nan_inputs.py")["nan.inputs"]

    assert any(line.startswith("batch[0]: 1 NaN/Inf") for line in result.evidence)
    assert result.data["samples"] == ["sample 37", "sample 301", "sample 777"]
    assert result.data["confirmed"] is True


def test_the_rate_and_clip_replays_leave_out_a_kept_batch_with_nan_and_clear_both_on_bad_data(checks):
    """No rate or clip makes a step on a batch holding NaN finite: the replays leave it out, and on the data's
    own NaN the run as written then stays finite, so neither the rate nor the clip is blamed."""
    results = checks("nan_inputs.py")

    for check in ("nan.lr", "nan.grad_explosion"):
        assert results[check].status == "pass", results[check].summary
    assert any("the failing batch, which holds NaN/Inf, left out" in line for line in results["nan.lr"].evidence), \
        results["nan.lr"].evidence


@pytest.mark.parametrize("script, op, line", [
    ("nan_log_zero.py", "torch.log", "nan_log_zero.py:21"),
    ("nan_divide_by_zero.py", "torch.div", "nan_divide_by_zero.py:22"),
])
def test_unsafe_math_names_the_op_and_the_source_line_and_confirms_the_safe_form(checks, script, op, line):
    result = checks(script)["nan.unsafe_math"]

    assert f"{op} at {line}" in result.summary
    assert any("at or near 0" in risk or "near 0" in risk for risk in result.data["risky"])
    assert result.data["confirmed"] is True
    assert any("made safe" in line and ("falling" in line or "holding" in line) for line in result.evidence)


def test_exploding_gradients_suggests_a_clip_value_that_keeps_the_replay_finite(checks):
    result = checks("nan_rnn_explode.py")["nan.grad_explosion"]

    assert result.data["clip"] > 0
    assert f"max_norm={result.data['clip']:g}" in result.fix
    assert result.data["confirmed"] is True


def test_a_clip_the_script_switched_off_is_named_with_its_condition_when_clipping_removes_the_nan():
    result = run_checks("nan_clip_switched_off.py", folder=SCRIPTS, checks=("nan.grad_explosion",))["nan.grad_explosion"]

    assert result.status == "fail" and result.data["confirmed"] is True and result.data["definitive"] is True
    assert "nan_clip_switched_off.py:29" in result.summary
    assert any("nan_clip_switched_off.py:28 `if args.clip > 0:`, which never held" in line for line in result.evidence)
    assert result.fix.startswith("turn on the script's clipping at nan_clip_switched_off.py:29 (its condition at "
                                 "nan_clip_switched_off.py:28 never held)")


def test_a_clip_given_a_spent_filter_of_the_parameters_is_named_with_the_line_that_made_it():
    result = run_checks("nan_clip_spent_filter.py", folder=SCRIPTS, checks=("nan.grad_explosion",))["nan.grad_explosion"]

    assert result.status == "fail" and result.data["confirmed"] is True and result.data["definitive"] is True
    assert "nan_clip_spent_filter.py:25 is given `trainable`, a spent filter" in result.summary
    assert result.data["clip"] == 1.0  # the script's own max_grad_norm, read from its frame
    assert "`trainable = list(...)` at nan_clip_spent_filter.py:16" in result.fix


def test_a_float16_overflow_before_the_first_optimizer_step_is_proven_in_float32():
    """The run fails at step 0, before its Adam ever stepped; the replays step it. The probes' snapshot holds
    every optimizer the script made, so each replay starts from its empty state (before, the float16 moments
    of one replay stayed, the float32 trial's step raised in the script's own loop, and the loop ended)."""
    results = run_checks("fp16_first_step_adam.py", folder=SCRIPTS, checks=("nan.unsafe_math", "nan.precision"))
    result = results["nan.precision"]

    assert result.status == "fail" and result.data["confirmed"] is True, (result.summary, result.evidence)
    assert "exp at fp16_first_step_adam.py:17 goes past 65504" in result.summary
    assert any(line.startswith("... computed in float32: finite") for line in result.evidence)


def test_nan_inputs_of_a_loop_without_a_loader_are_read_from_the_model_call_and_named():
    """No DataLoader and a loss on indexed outputs: the inputs the model got at the failing step are read."""
    result = run_checks("nan_rownorm_fullbatch.py", folder=SCRIPTS, checks=("nan.inputs",))["nan.inputs"]

    assert result.status == "fail" and "nan_rownorm_fullbatch.py:15" in result.summary
    assert "batch.args[0] is `x` in main()" in result.evidence
    assert any("in 2 of 120 rows [5, 77]" in line for line in result.evidence)


def test_a_healthy_run_passes_all_four_checks_when_paused():
    results = run_checks("healthy_mlp.py", break_at=30)

    assert {c: results[c].status for c in CHECKS} == {c: "pass" for c in CHECKS}


def test_a_loss_non_finite_before_backward_is_computed_again_on_the_failing_values():
    """No DataLoader: a replay gets the loop's next batches, which lack the one soft label with zeros.
    The statement that computed the failing loss, run again on the values its frame held, names the
    op, its line in the user's loss function and the variable at the edge; the op made safe gives a
    finite loss on those same values; the operand depends on no weight, so that decides the verdict."""
    results = run_checks("nan_soft_target_kl.py", folder=SCRIPTS)
    result = results["nan.unsafe_math"]

    assert result.status == "fail" and "torch.log at nan_soft_target_kl.py:19" in result.summary, result.evidence
    assert any("computed again on its own values (`loss = soft_kl(model(xb), yb)` at nan_soft_target_kl.py:27): "
               "nan, non-finite as in the run" in line for line in result.evidence), result.evidence
    assert any("`soft` = 0 at 3 of 128 entries" in line for line in result.evidence), result.evidence
    assert result.data["confirmed"] and result.data["definitive"]
    walk = Walk(load_tree(), branch="nan")
    for check in CHECKS:
        walk.record_probe(results[check])
    assert walk.decided_by(walk.tree["nan.decide"]) == "nan.unsafe_math"


def inputs_check_at_the_break(script: str):
    """The nan.inputs check's result on ``script``, run at its break on the first non-finite value."""
    target = Target(str(SCRIPTS / script), [])
    session = Session(target.name, target.args)
    run = ChildRun(target, session, {"break_on_nan": True}, capture_output=True)
    run.start()
    try:
        wait_for(lambda: session.state == "paused", 60, "the break")
        run.command("probe", name="nan.inputs", params={})
        wait_for(lambda: "nan.inputs" in session.probe_results, 60, "the check's result")
    finally:
        run.close()
    return session.probe_results["nan.inputs"]


def test_nan_inputs_made_by_numpy_in_preprocessing_name_the_line_numpy_warned_at():
    """The NaN/Inf in a batch came from a numpy division by zero before training: numpy's own
    RuntimeWarning names the line, and the fix points at it."""
    result = inputs_check_at_the_break("numpy_ratio_inputs.py")

    assert result.status == "fail"
    assert 'numpy warned "divide by zero encountered in divide" at numpy_ratio_inputs.py:10' in result.summary
    assert result.fix.startswith("at numpy_ratio_inputs.py:10 `ratios = prices[:, 1:] / prices[:, :1]`")


def test_nan_inputs_kept_by_a_windowed_dataset_name_the_array_they_were_read_into():
    """The Dataset copies the whole series (more rows than windows): the series the script holds with the
    same gaps is found, with the lines that assign it, and the fix names it."""
    result = inputs_check_at_the_break("series_windows_nan.py")

    assert result.status == "fail"
    assert any(line.startswith("dataset.values: ") for line in result.evidence)
    assert any(line.startswith("`readings` is assigned at series_windows_nan.py:11 `readings = np.genfromtxt(log)")
               for line in result.evidence)
    assert result.fix.startswith("drop or fill the NaN/Inf rows of `readings` where it is made "
                                 "(series_windows_nan.py:11)")


def test_a_bfloat16_value_rounded_onto_a_log_boundary_is_caught_and_float32_keeps_it_finite():
    from tuidebug.probes.nan import Float32, Overflow
    logits = torch.tensor([14.0, 0.5]).bfloat16()

    def survival() -> torch.Tensor:
        return torch.log1p(-torch.sigmoid(logits).clamp(max=1.0 - 1e-6))

    watch = Overflow()
    with watch:
        survival()
    with Float32():
        kept = survival()

    assert watch.first is not None and watch.first[0].endswith("log1p") and watch.first[3] == torch.bfloat16
    assert bool(torch.isfinite(kept).all())


class RunningStats:
    def __init__(self, data: torch.Tensor) -> None:
        self.mean = data.sum(dim=0) / len(data)


def test_a_float16_statistic_that_overflowed_before_the_step_is_found_with_what_holds_it():
    import sys

    from tuidebug.probes.nan import Overflow, _assigned_in_class, _holders_of
    stats = RunningStats(torch.full((8, 3), 30000.0, dtype=torch.float16))  # the sum passes 65504: inf
    batch = torch.ones(4, 3, dtype=torch.float16)

    watch = Overflow()
    with watch:
        centred = batch - stats.mean
    holders = _holders_of(watch.entered[2], [sys._getframe()])

    assert watch.first is None and watch.entered is not None and watch.entered[2] is stats.mean
    assert not bool(torch.isfinite(centred).all())
    assert holders[0][0] == "stats.mean"
    assert [site.text for site in _assigned_in_class(stats, "mean")] == ["self.mean = data.sum(dim=0) / len(data)"]


@pytest.mark.parametrize("optimizer_class", [torch.optim.SGD, torch.optim.Adam])
def test_the_float32_trial_trains_float32_weights_and_gives_the_run_back_its_float16_ones(optimizer_class):
    """The trial of a run without .half(): weights, gradients and optimizer state in float32 while it trains;
    afterwards the run's own dtypes again, and the snapshot restores every value bit for bit."""
    from tuidebug.agent.snapshot import Snapshot
    from tuidebug.probes.nan import Float32, WeightsInFloat32
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 1)).half()
    options = {"momentum": 0.9} if optimizer_class is torch.optim.SGD else {"eps": 1e-4}
    optimizer = optimizer_class(model.parameters(), lr=0.1, **options)
    x = torch.randn(16, 4).half()

    def train_step() -> None:
        optimizer.zero_grad()
        model(x).float().pow(2).mean().backward()
        optimizer.step()

    train_step()
    before = Snapshot.take([model], [optimizer], [])
    values = {k: v.clone() for k, v in model.state_dict().items()}
    weights = WeightsInFloat32([optimizer, None])
    weights(model)
    with Float32():
        train_step()
    trained = {p.dtype for p in model.parameters()} | {s.dtype for state in optimizer.state.values()
                                                       for key, s in state.items() if key != "step"}
    weights.put_back()
    before.restore()

    assert trained == {torch.float32}
    assert {p.dtype for p in model.parameters()} == {p.grad.dtype for p in model.parameters()} == {torch.float16}
    assert {s.dtype for state in optimizer.state.values() for key, s in state.items() if key != "step"} == \
        {torch.float16}
    assert all(torch.equal(values[k], v) and values[k].dtype == v.dtype for k, v in model.state_dict().items())


def test_a_logdet_of_a_matrix_with_a_negative_determinant_is_named_with_the_parameter_and_made_safe():
    """torch.logdet is NaN where the determinant is negative (a QR init without its sign flip): the op, its line,
    the parameter by its attribute name and the determinant's sign; log |det| keeps the replay finite."""
    result = run_checks("logdet_negative_determinant.py", folder=SCRIPTS, checks=("nan.unsafe_math",))["nan.unsafe_math"]

    assert result.status == "fail", (result.summary, result.evidence)
    assert "torch.logdet at logdet_negative_determinant.py:17" in result.summary
    assert any("`self.weight` with a negative determinant at 1 of 1 matrices" in line for line in result.evidence), \
        result.evidence
    assert "torch.linalg.slogdet" in result.fix and result.data["confirmed"]


def test_a_float16_overflow_in_an_unpacked_loss_is_proven_on_the_failing_values_when_the_loop_runs_out():
    """`loss, acc = proto_loss(...)` in a loop without a DataLoader with one iteration left: the replay runs out
    of the script's loop, and the failing statement, run again on its own values, shows the float16 op that
    passed 65504 and a finite loss with its operands in float32."""
    result = run_checks("fp16_distance_unpacked_loss.py", folder=SCRIPTS, checks=("nan.precision",))["nan.precision"]

    assert result.status == "fail", (result.summary, result.evidence)
    assert "fp16_distance_unpacked_loss.py:12 goes past 65504" in result.summary
    assert any("(`loss, acc = proto_loss(encoder, x, labels)` at fp16_distance_unpacked_loss.py:24): not finite"
               in line for line in result.evidence), result.evidence
    assert any(line.startswith("... the same statement with every float16 operand in float32: ") for line in
               result.evidence)
    assert result.data["confirmed"] is True


def test_trials_start_before_the_climb_where_the_checkpoint_near_the_failure_is_already_inside_it():
    """The rolling checkpoints a few steps before the NaN hold weights the climb already wrecked (the loss
    1e4 times its usual level): the trials start from the checkpoint before the climb, which fails again
    as written, and a lower rate from there lets the loss fall."""
    # a checkpoint every 4 steps whatever it costs: the calm one is then at most 40 steps before the failure
    result = run_checks("nan_rate_raised_mid_run.py", folder=SCRIPTS, checks=("nan.lr",), checkpoint_every=4,
                        checkpoint_budget=1.0)["nan.lr"]

    replay = next(line for line in result.evidence if line.startswith("replay from"))
    assert "(before the loss climbed)" in replay and ("non-finite" in replay or "diverging" in replay), result.evidence
    step = int(replay.split("the checkpoint of step ")[1].split(" ")[0])
    assert step <= 61  # the rate is raised at step 61, and the loss leaves its level at step 62
    assert result.status == "fail" and "keeps the loss falling" in result.summary, result.summary


def test_gradient_spikes_while_the_loss_stays_level_are_found_before_the_climb():
    """A point cloud's stray returns (corpus r48a): the gradient norm jumps 100-800x its usual level on a
    few batches whose loss is still ordinary, then the loss climbs. The spikes under the calm loss are what
    tells an explosion from a rate too high, whose norm rises with the loss."""
    from tuidebug.probes.nan import spikes_under_calm_loss
    from tuidebug.protocol import Step

    norms = [0.1] * 100 + [0.12, 12.6, 0.13, 31.9, 0.2, 80.7, 1.2, 1.0, 352.0, 433.0, 6809.0]
    losses = [1.6] * 100 + [1.3, 1.3, 1.2, 1.3, 1.0, 3.2, 1.1, 1.1, 55.8, 32.9, 718.0]
    history = [Step(step=i + 1, time=0.0, loss=loss, grad_norm=norm)
               for i, (loss, norm) in enumerate(zip(losses, norms))]

    spikes = spikes_under_calm_loss(history, healthy=0.1)
    assert [step for step, _, _ in spikes] == [102, 104, 106]  # not 109-111: the loss had left its level

    rising = [Step(step=i + 1, time=0.0, loss=1.6 * 1.5 ** max(0, i - 100), grad_norm=0.1 * 1.5 ** max(0, i - 100))
              for i in range(115)]
    assert spikes_under_calm_loss(rising, healthy=0.1) == []  # the norm rose with the loss: no spike under a calm one


def test_targets_built_from_the_models_own_overflowing_output_are_not_blamed_on_the_data():
    """A value-iteration target (reward + the model's own prediction for the next state) overflows once the
    network diverges: the model's output on the finite states is itself non-finite (and was finite from the
    checkpoint before), so the NaN/Inf the targets hold are not data. Targets with missing readings in a loop of
    the same shape still are, and so are missing rewards where the target's call comes after the training call."""
    bootstrapped = inputs_check_at_the_break("nan_bootstrapped_targets.py")
    assert bootstrapped.status == "pass", bootstrapped.summary
    assert "the model's own output holds NaN/+inf on finite inputs" in bootstrapped.summary
    assert "finite on the same inputs from the checkpoint of step" in bootstrapped.summary
    assert any("NaN/Inf value(s)" in line for line in bootstrapped.evidence), bootstrapped.evidence

    for script in ("nan_missing_targets_fullbatch.py", "nan_rewards_qlearning.py"):
        missing = inputs_check_at_the_break(script)
        assert missing.status == "fail", (script, missing.summary)
        assert not any("the model's own output" in line for line in missing.evidence)
        assert any("NaN/Inf value(s)" in line for line in missing.evidence), (script, missing.evidence)


def test_weights_made_float16_tensor_by_tensor_are_traced_to_the_scripts_half_call_not_an_inputs(tmp_path):
    """CLIP's convert_weights sets each layer's weight.data to its .half(): no module's .half() to hook, so the
    script's own lines are read, and an input's .half() is not the weights'."""
    from types import SimpleNamespace

    from tuidebug.probes.nan import _half_call

    script = tmp_path / "train.py"
    script.write_text("def convert_weights(model):\n"
                      "    images = images.half()\n"
                      "    for l in model.modules():\n"
                      "        l.weight.data = l.weight.data.half()\n")
    model = torch.nn.Linear(2, 2)
    ctx = SimpleNamespace(run=SimpleNamespace(model=model, facts=SimpleNamespace(source_files={str(script)})))
    assert _half_call(ctx) is None  # the model's weights are float32: whatever the line does, it did not run on them
    model.weight.data = model.weight.data.half()
    origin = _half_call(ctx)
    assert origin is not None
    assert origin.evidence == "the weights are made float16 by .half() at train.py:4 `l.weight.data = l.weight.data.half()`"
    assert "remove the .half() at train.py:4" in origin.fix
    inputs_only = tmp_path / "inputs_only.py"
    inputs_only.write_text("images = images.half()\n")
    assert _half_call(SimpleNamespace(run=SimpleNamespace(model=model, facts=SimpleNamespace(
        source_files={str(inputs_only)})))) is None
