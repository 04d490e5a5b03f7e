"""The agent in a real child process over the real socket: metrics, pause, step, breakpoints."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import psutil
import pytest
import torch

from conftest import SCRIPTS, wait_for

from tuidebug import protocol
from tuidebug.agent import check_schedule
from tuidebug.agent.check_schedule import CheckSchedule
from tuidebug.launcher import BOOTSTRAP
from tuidebug.session import Session

STEPS = SCRIPTS / "pat_steps.py"
PRINTED = re.compile(r"^step (\d+) loss (\S+) weights (\S+)$")


def printed(session) -> dict[int, tuple[float, float]]:
    """The script's own lines: step -> (loss, checksum of the weights after the step)."""
    with session.lock:
        lines = list(session.output)
    return {int(m[1]): (float(m[2]), float(m[3])) for m in map(PRINTED.match, lines) if m}


def weights_now(run, session) -> float:
    """Ask the script itself (its SIGUSR1 handler) for the checksum of the weights at this moment."""
    before = len(session.output)
    os.kill(run.process.pid, signal.SIGUSR1)
    wait_for(lambda: any(line.startswith("weights now") for line in list(session.output)[before:]),
             what="the script's answer to SIGUSR1")
    line = next(line for line in list(session.output)[before:] if line.startswith("weights now"))
    return float(line.split()[-1])


def paused(session) -> bool:
    return session.state == "paused"


def test_every_step_arrives_with_the_loss_the_script_printed(start_run):
    run, session = start_run(STEPS, "--steps", "30", post_mortem=False)
    wait_for(lambda: session.ended, what="the script to end")

    losses = {int(step): loss for step, loss in session.loss.recent}
    assert losses == {step: loss for step, (loss, _) in printed(session).items()}
    assert sorted(losses) == list(range(1, 31))
    assert len(session.grad_norm) == 30 and all(norm > 0 for _, norm in session.grad_norm.recent)
    assert session.last_step.batch_size == 8 and session.last_step.epoch == 4
    assert session.last_step.lrs == [0.05]
    assert session.exit_code == 0 and session.state == "finished"
    assert session.counters.dropped == 0
    assert [e.kind for e in session.events if e.kind in ("model", "optimizer", "script_end", "exit")] == [
        "model", "optimizer", "script_end", "exit"]


def test_pause_step_and_resume(start_run):
    run, session = start_run(STEPS, "--steps", "3000", "--sleep", "0.01")
    wait_for(lambda: session.step >= 3, what="the first steps")

    run.command("pause")
    wait_for(lambda: paused(session), what="the pause")
    step = session.step
    lines = len(session.output)
    assert session.where in ("batch", "step_end")
    time.sleep(0.5)
    assert session.step == step and len(session.output) == lines and paused(session)

    run.command("step")
    wait_for(lambda: session.step == step + 1 and paused(session), what="one step, then the pause again")
    assert session.reason == f"stepped to step {step + 1}"
    time.sleep(0.3)
    assert session.step == step + 1

    run.command("resume")
    wait_for(lambda: session.step >= step + 5 and session.state == "running", what="training to go on")


def test_break_at_step_pauses_after_that_step(start_run):
    run, session = start_run(STEPS, "--steps", "12", break_at=5, post_mortem=False)
    wait_for(lambda: paused(session), what="the break at step 5")

    assert session.step == 5 and session.reason == "break at step 5" and session.where == "step_end"
    checksum_after_step_5 = weights_now(run, session)
    time.sleep(0.3)
    assert session.step == 5 and max(printed(session)) == 4  # paused inside step 5's optimizer.step()

    run.command("resume")
    wait_for(lambda: session.ended, what="the script to end")
    assert printed(session)[5][1] == checksum_after_step_5
    assert session.step == 12 and session.exit_code == 0


@pytest.mark.parametrize("script, reason, where", [
    (STEPS, "non-finite loss before backward", "backward"),
    # On a GPU the loss is not read at backward (a device sync): it is read with the gradient norms, one
    # transfer, and a non-finite one still stops the run before the optimizer applies its gradients.
    (SCRIPTS / "pat_steps_gpu_loss.py", "non-finite loss (read before the optimizer step)", "before_step"),
], ids=["cpu", "gpu-like"])
def test_break_on_nan_loss_pauses_before_the_weights_change(start_run, script, reason, where):
    run, session = start_run(script, "--steps", "8", "--nan-at", "6", "--nan-in", "loss", post_mortem=False)
    wait_for(lambda: paused(session), what="the break on the NaN loss")

    assert session.reason == reason and session.where == where
    assert session.step == 5
    assert weights_now(run, session) == printed(session)[5][1]
    assert any(e.kind == "nonfinite_loss" for e in session.events)

    run.command("resume")
    wait_for(lambda: session.ended, what="the script to end")
    assert session.step == 8 and session.exit_code == 0


def test_break_on_nan_gradient_pauses_before_the_weights_change(start_run):
    run, session = start_run(STEPS, "--steps", "8", "--nan-at", "6", "--nan-in", "grad", post_mortem=False)
    wait_for(lambda: paused(session), what="the break on the NaN gradient")

    assert session.reason == "non-finite gradient before the optimizer step" and session.where == "before_step"
    assert session.step == 5
    assert weights_now(run, session) == printed(session)[5][1]  # NaN gradients, untouched weights

    run.command("resume")
    wait_for(lambda: session.ended, what="the script to end")
    after = printed(session)
    assert str(after[6][1]) == "nan"  # the script's own step then spoils the weights
    assert session.step == 8 and session.counters.nonfinite_grad >= 1


def test_without_break_on_nan_the_run_goes_through(start_run):
    run, session = start_run(STEPS, "--steps", "8", "--nan-at", "3", break_on_nan=False, post_mortem=False)
    wait_for(lambda: session.ended, what="the script to end")

    assert session.step == 8 and session.exit_code == 0
    assert session.counters.first_nonfinite_step == 3


@pytest.mark.fault("the screen's connection drops",
                   'the run trains on')
def test_the_run_goes_on_when_the_tui_goes_away(start_run):
    run, session = start_run(STEPS, "--steps", "40", "--sleep", "0.02", post_mortem=False)
    wait_for(lambda: session.step >= 2, what="the first steps")

    run.server.close()

    assert run.wait(30) == 0
    assert max(printed(session)) == 40


def test_a_diagnostic_rerun_writes_into_its_scratch_folder_and_leaves_the_users_files(start_run, tmp_path):
    work, scratch = tmp_path / "work", tmp_path / "scratch"
    work.mkdir()
    (work / "model.pt").write_bytes(b"the user's checkpoint")
    (work / "train.log").write_text("first run\n")
    script = work / "saves_checkpoint.py"
    script.write_text((SCRIPTS / "saves_checkpoint.py").read_text())
    cwd = os.getcwd()
    os.chdir(work)
    try:
        run, session = start_run(script, scratch_writes=str(scratch), post_mortem=False)
        run.wait(60)
    finally:
        os.chdir(cwd)

    assert any("reloaded True 2" in line for line in session.output), list(session.output)
    assert (work / "model.pt").read_bytes() == b"the user's checkpoint"
    assert (work / "train.log").read_text() == "first run\n"
    assert sorted(p.name for p in work.iterdir()) == ["model.pt", "saves_checkpoint.py", "train.log"]
    copies = {p.name for p in scratch.rglob("*") if p.is_file()}
    assert {"model.pt", "weights.pt", "state.pt", "train.log"} <= copies


PRINTS_AFTER_GO = """
import pathlib, sys, time
folder = pathlib.Path(sys.argv[1])
print("started", flush=True)
while not (folder / "go").exists():
    time.sleep(0.02)
for i in range(20):
    print(f"line {i}", flush=True)
(folder / "done").write_text("trained to the end")
"""


@pytest.mark.fault('the pipe to the screen closes while the script prints',
                   'the run trains on, its output in the private log file')
def test_the_run_goes_on_printing_when_the_pipe_to_the_screen_closes(tmp_path):
    """The screen died: the script's next print meets a closed pipe, and the run goes on into a log file."""
    script = tmp_path / "prints.py"
    script.write_text(PRINTS_AFTER_GO)
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "PYTHONUNBUFFERED": "1",
           protocol.ENV_CONFIG: json.dumps({"target": str(script), "args": [str(tmp_path)], "module": False})}
    child = subprocess.Popen([sys.executable, "-c", BOOTSTRAP], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    while "started" not in child.stdout.readline():
        pass
    child.stdout.close()
    (tmp_path / "go").touch()

    assert child.wait(60) == 0
    assert (tmp_path / "done").read_text() == "trained to the end"
    [log] = (tmp_path / "cache" / "tuidebug" / "logs").glob("prints-*.log")
    assert "line 19" in log.read_text() and oct(log.stat().st_mode & 0o777) == "0o600"


def test_the_gradient_norm_shown_is_the_one_before_the_scripts_clipping(start_run):
    run, session = start_run(SCRIPTS / "pat_clip.py")
    wait_for(lambda: session.state == "ended", 60, "the script's end")

    printed = {int(m[1]): float(m[2]) for m in re.finditer(r"step (\d+) clip returned (\S+)", "\n".join(session.output))}
    last = session.last_step
    assert last.grad_norm <= 0.25 + 1e-6  # what the optimizer applied
    assert last.norm_before_clip == pytest.approx(printed[last.step], rel=1e-5) and last.clip_at == 0.25
    assert session.grad_norm.latest == pytest.approx(printed[last.step], rel=1e-5) and session.clip_at == 0.25


def test_the_child_process_is_named_after_the_script(start_run):
    """ps, htop and nvidia-smi show which script trains, not the bootstrap's ``python -c ...``."""
    run, session = start_run(STEPS, "--steps", "500", "--sleep", "0.01")
    wait_for(lambda: session.step >= 2, 60, "the first steps")

    title = " ".join(psutil.Process(session.pid).cmdline()).strip()  # padded to the original length
    assert title == "tuidebug: pat_steps.py --steps 500 --sleep 0.01"


def test_the_gradient_norms_are_sampled_only_beyond_their_budget():
    """Norms that cost 6% of the step are taken every 3rd step (2% budget); cheap ones at every step; the
    interval never grows beyond MAX_NORM_EVERY, and follows the step time as it changes."""
    from tuidebug.agent.gradients import MAX_NORM_EVERY, NormSampler

    sampler = NormSampler()
    sampler.measured(60e-6)
    sampler.step_took(1e-3)
    assert sampler.every == 3 and [step for step in range(1, 10) if sampler.due(step)] == [3, 6, 9]

    cheap = NormSampler()
    cheap.measured(10e-6)
    cheap.step_took(10e-3)
    assert cheap.every == 1 and all(cheap.due(step) for step in range(1, 10))

    tiny = NormSampler()
    tiny.measured(1e-3)
    tiny.step_took(1e-5)
    assert tiny.every == MAX_NORM_EVERY

    for _ in range(100):  # the steps grow tenfold: the norms are taken at every step again
        sampler.step_took(10e-3)
    assert sampler.every == 1


def test_the_agent_reads_tensor_values_once_a_step_as_on_a_gpu(start_run):
    """On a GPU each read of a value waits for the device. With break-on-NaN armed the agent reads once a
    step (losses and gradient norms together), and the checks of the sampled steps (the loss's input
    range, all-zero gradients) ride along in that one read, yet still find what they look for."""
    run, session = start_run(SCRIPTS / "reads_as_on_a_gpu.py", "60", post_mortem=False)
    wait_for(lambda: session.ended, what="the script to end")
    with session.lock:
        lines = [line.split() for line in session.output if line.startswith("step ")]
    reads = {int(words[1]): int(words[-1]) for words in lines}
    assert sorted(reads) == list(range(1, 61))
    assert max(reads.values()) == 1 and min(reads.values()) == 1
    findings = " ".join(e.message for e in session.events if e.kind == "finding")
    assert "loss_input" in findings and "gets probabilities made by Net (Net) (DivBackward0)" in findings
    assert "no gradient reached any of the 2 trainable parameter(s)" in findings
    assert session.exit_code == 0


def test_the_norms_of_many_small_gradients_are_torchs_one_by_one():
    """On a CPU the small gradients are normed flattened in chunks: the same norms, in order, as one
    norm per tensor, with NaN and Inf where they are; values near 1e-30 do not underflow to 0; a plan
    kept for another list under the same ids (a parameter's id reused) is not used."""
    from tuidebug.agent import gradients

    torch.manual_seed(0)
    layers = [torch.nn.Linear(4, 3) for _ in range(40)] + [torch.nn.Linear(100, 100)] + \
             [torch.nn.Linear(4, 3, dtype=torch.float64) for _ in range(5)]
    params = [p for layer in layers for p in layer.parameters()]
    for p in params:
        p.grad = torch.randn_like(p)
    params[3].grad[0] = float("nan")
    params[6].grad[1, 1] = float("inf")
    params[9].grad.fill_(1e-30)
    params[11].grad.zero_()
    expected = [float(torch.linalg.vector_norm(p.grad.double())) for p in params]

    def same(got: torch.Tensor) -> bool:
        return all(math.isclose(a, b, rel_tol=1e-6) or (math.isnan(a) and math.isnan(b))
                   for a, b in zip(got.tolist(), expected, strict=True))

    assert same(gradients.stacked_norms(params))
    assert gradients.stacked_norms(params)[9] > 0 and gradients.stacked_norms(params)[11] == 0
    others = [torch.nn.Parameter(torch.zeros(2)) for _ in params]
    gradients._plans[tuple(map(id, params))] = gradients._CpuNormPlan(others)
    assert same(gradients.stacked_norms(params))


def test_a_clip_through_the_total_norm_api_is_seen_once() -> None:
    """accelerate clips with get_total_norm and clip_grads_with_norm_, never through clip_grad_norm_."""
    from tuidebug.agent.hooks import _install_clip_hook

    class Seen:
        def __init__(self) -> None:
            self.clips: list[float] = []

        def active(self) -> bool:
            return True

        def on_clip(self, total: torch.Tensor, max_norm: float) -> None:
            self.clips.append(float(total))

    seen = Seen()
    undo = _install_clip_hook(seen)
    try:
        weight = torch.nn.Parameter(torch.ones(3))
        weight.grad = torch.full((3,), 4.0)
        total = torch.nn.utils.get_total_norm([weight.grad])
        torch.nn.utils.clip_grads_with_norm_([weight], 1.0, total)
        torch.nn.utils.clip_grad_norm_([weight], 1.0)
    finally:
        undo()
    assert seen.clips == pytest.approx([math.sqrt(48.0), 1.0], rel=1e-4)


def _schedule_after(steps: int, plain: float, extra: float) -> CheckSchedule:
    """A schedule fed ``steps`` steps of ``plain`` seconds, the sampled ones ``extra`` seconds longer."""
    schedule = CheckSchedule()
    for step in range(1, steps + 1):
        sampled = schedule.sampled(step)
        schedule.step_took(step, plain + (extra if sampled else 0.0), 0.0)
    return schedule


def test_the_sampled_checks_stretch_apart_only_on_a_long_run_of_very_short_steps() -> None:
    """0.4 ms steps whose sampled ones cost 1 ms more: every 125th step keeps the checks at 2% of the time,
    once the first FULL_SCHEDULE_STEPS have run at the default period; 3 ms steps keep the default."""
    assert _schedule_after(check_schedule.FULL_SCHEDULE_STEPS - 1, 0.0004, 0.001).every == check_schedule.SAMPLE_EVERY
    tiny = _schedule_after(3000, 0.0004, 0.001)
    assert tiny.every == pytest.approx(0.001 / (check_schedule.CHECK_BUDGET * 0.0004), abs=2) and tiny.stretched
    assert _schedule_after(3000, 0.003, 0.001).every == check_schedule.SAMPLE_EVERY
    assert _schedule_after(3000, 0.00001, 0.001).every == check_schedule.MAX_SAMPLE_EVERY
    early = CheckSchedule()
    assert all(early.sampled(step) for step in range(1, check_schedule.EARLY_STEPS + 1))


def test_the_header_says_when_the_checks_or_the_norms_are_sampled() -> None:
    session = Session("train.py", [])
    session.ingest(protocol.Step(step=600, time=1.0, loss=0.5, step_seconds=0.0004))
    assert session.sampling_text() is None
    session.ingest(protocol.Step(step=601, time=1.1, loss=0.5, step_seconds=0.0004, norm_every=4, check_every=125))
    assert session.sampling_text() == "grad norm every 4 steps, checks every 125 steps"


def _loop_under_the_agent(steps: Callable[[Any], None]) -> Any:
    """The agent's hooks installed in this process while ``steps(agent)`` runs a loop; the agent is returned."""
    from tuidebug.agent import core, hooks
    from tuidebug.agent.core import Agent, AgentConfig

    agent = Agent(AgentConfig(break_on_nan=False), None)
    previous, core.CURRENT = core.CURRENT, agent
    modes = torch._C._len_torch_function_stack()
    undo = hooks.install(agent)
    try:
        steps(agent)
    finally:
        agent.loop_ended()  # as when the script ends: the watched iteration's mode leaves the stack
        for remove in undo:
            remove()
        core.CURRENT = previous
    assert torch._C._len_torch_function_stack() == modes  # nothing left behind for the next test in this process
    return agent


def _train(model: torch.nn.Module, optimizer: torch.optim.Optimizer,
           loss_of: Callable[[torch.Tensor], torch.Tensor] = lambda out: out) -> None:
    loss = loss_of(model(torch.randn(5, 4))).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def test_a_trainable_module_beside_the_model_that_no_optimizer_holds_does_not_become_the_model() -> None:
    """A learned metric whose layers the loss calls one by one (its .forward called directly): each layer is an
    outermost call with trainable weights, but the optimizer trains the denoiser, which stays the model."""
    denoiser = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
    metric = torch.nn.ModuleList([torch.nn.Linear(4, 4), torch.nn.Linear(4, 2)])  # trainable, in no optimizer
    optimizer = torch.optim.SGD(denoiser.parameters(), lr=0.1)
    models = []

    def metric_of(out: torch.Tensor) -> torch.Tensor:
        features = torch.as_tensor(out.detach().numpy())
        for layer in metric:
            features = layer(features)
        return features

    def steps(agent: Any) -> None:
        for _ in range(3):
            _train(denoiser, optimizer, metric_of)
            models.append(agent.model)

    _loop_under_the_agent(steps)
    assert models[1:] == [denoiser, denoiser]  # at the first step no backward has run yet when the metric is called


def test_the_module_trained_is_the_model_even_when_the_optimizer_holds_another() -> None:
    """An optimizer built over a model that is then built again (called once before, in a test), or over the previous
    stage's model: the module the loop trains is the model, and the optimizer is the one in the wrong."""
    old, new, second = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)
    optimizer, second_optimizer = torch.optim.SGD(old.parameters(), lr=0.1), torch.optim.SGD(old.parameters(), lr=0.1)
    models = []

    def steps(agent: Any) -> None:
        old(torch.randn(1, 4))  # a test call before training
        for _ in range(2):
            _train(new, optimizer)
        models.append(agent.model)
        for _ in range(2):  # the next stage, its optimizer built over the first stage's model
            _train(second, second_optimizer)
        models.append(agent.model)

    _loop_under_the_agent(steps)
    assert models == [new, second]


def _stepless_loop(rate: float) -> list[Any]:
    """makemore's hand-written backward: plain tensors, the loss under no_grad, no backward() and no optimizer, a
    fresh noisy batch each iteration; the agent's events about it, at the given rate (0: the weights never move)."""
    events: list[Any] = []
    torch.manual_seed(0)
    w = torch.zeros(8, 2)
    printed = []

    def loop(agent: Any) -> None:
        agent.send = events.append
        for _ in range(300):
            x = torch.randn(64, 8)
            y = (x[:, 0] + 0.3 * torch.randn(64) > 0).long()
            with torch.no_grad():
                logits = x @ w
                loss = torch.nn.functional.cross_entropy(logits, y)
                printed.append(loss.item())
                grad = x.t() @ (torch.softmax(logits, 1) - torch.nn.functional.one_hot(y, 2)) / len(x)
                w.sub_(rate * grad)

    _loop_under_the_agent(loop)
    return [e for e in events if getattr(e, "kind", None) in ("stepless_training", "nonfinite_loss")]


def test_a_loop_that_trains_without_backward_is_seen_by_its_falling_loss_and_one_that_does_not_is_not() -> None:
    trained = _stepless_loop(rate=0.5)
    assert [e.kind for e in trained] == ["stepless_training"] and "test_agent.py:" in trained[0].message
    assert re.search(r"fell from 0\.\d+ to 0\.\d+ over 100 calls without backward\(\)", trained[0].message)
    assert _stepless_loop(rate=0.0) == []  # noisy batches, weights that never move: no trend
    diverged = _stepless_loop(rate=1e38)  # the weights overflow: the loss goes non-finite, never "trains"
    assert [e.kind for e in diverged] == ["nonfinite_loss"]


class _Decoder(torch.nn.Module):
    """Tacotron's decoder: a list of the attention maps of every decoder step, a local of its forward."""

    def forward(self, memory: torch.Tensor) -> torch.Tensor:
        alignments = [memory.softmax(-1) for _ in range(4)]
        raise MemoryError(f"{len(alignments)} maps")


def test_the_locals_searched_at_an_out_of_memory_error_stop_at_the_models_forward() -> None:
    """A forward's locals are the step's working memory, gone when it returns: at the failure only the loop's
    frames are searched for what the steps keep."""
    from tuidebug.agent.core import _outside_forward
    from tuidebug.sites import user_frames

    def training_loop() -> None:
        kept = []
        kept.append(_Decoder()(torch.randn(2, 3)))

    with pytest.raises(MemoryError) as raised:
        training_loop()
    names = [frame.f_code.co_name for frame in _outside_forward(user_frames(raised.value.__traceback__))]
    assert names[-1] == "training_loop" and "forward" not in names


def test_a_nan_loss_before_the_first_backward_of_an_ordinary_loop_is_left_to_the_backward_hook() -> None:
    """CTPN's zero-height boxes make the very first loss NaN: the loss-value watch of loops without backward()
    must not speak for it (its event came before the backward and the break the checks wait at)."""
    events: list[Any] = []
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def loop(agent: Any) -> None:
        agent.send = events.append
        for step in range(3):
            target = torch.full((8, 1), float("nan") if step == 0 else 1.0)
            loss = torch.nn.functional.mse_loss(model(torch.randn(8, 4)), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    _loop_under_the_agent(loop)
    assert not any("without backward()" in getattr(e, "message", "") for e in events)
