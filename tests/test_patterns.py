"""Real script patterns, each run twice as real processes: with plain ``python`` and with
``tuidebug --headless``. The script's stdout must be identical to the last digit, its exit code and
its own stderr the same, and the ``[tuidebug]`` lines must show every step with the loss the
script printed (to the four digits they carry)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import SCRIPTS, tuidebug_command
from tuidebug.format import number

HEADLESS = [*tuidebug_command(), "--headless", "--print-every", "1"]
PRINTED_STEP = re.compile(r"^step (\d+) loss (\S+)", re.MULTILINE)
REPORTED_STEP = re.compile(r"^\[tuidebug\] step (\d+)  .*?loss (\S+)", re.MULTILINE)
SUMMARY = re.compile(r"^\[tuidebug\] summary: .*AMP-skipped steps (\d+), .*exit code (-?\d+)$", re.MULTILINE)
# Python's own shutdown race with spawned workers, under plain python too: not the script's output.
RESOURCE_TRACKER = re.compile(r"^.*/resource_tracker\.py:\d+: UserWarning: .*\n.*warnings\.warn\(.*\n", re.MULTILINE)


def run_both(args: list[str], cwd: Path | tuple[Path, Path] = SCRIPTS, stdin: str | None = None,
             timeout: float = 300) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    """``python ARGS`` and ``tuidebug --headless ARGS``, side by side (two cores, half the wait)."""
    cwds = cwd if isinstance(cwd, tuple) else (cwd, cwd)
    commands = [[sys.executable, *args], [*HEADLESS, *args]]

    def run(command: list[str], directory: Path) -> subprocess.CompletedProcess:
        return subprocess.run(command, cwd=directory, input=stdin, capture_output=True, text=True, timeout=timeout)

    with ThreadPoolExecutor(2) as pool:
        plain, agent = pool.map(run, commands, cwds)
    return plain, agent


def script_stderr(stderr: str) -> str:
    """The script's own stderr: without tuidebug's lines and Python's resource-tracker noise."""
    own = "".join(line for line in stderr.splitlines(keepends=True) if not line.startswith("[tuidebug]"))
    return RESOURCE_TRACKER.sub("", own)


def printed_losses(stdout: str) -> dict[int, str]:
    return {int(step): number(float(loss)) for step, loss in PRINTED_STEP.findall(stdout)}


def reported_losses(stderr: str) -> dict[int, str]:
    return {int(step): loss for step, loss in REPORTED_STEP.findall(stderr)}


def assert_same_run(plain: subprocess.CompletedProcess, agent: subprocess.CompletedProcess, exit_code: int = 0) -> None:
    assert plain.returncode == exit_code, plain.stderr
    assert agent.stdout == plain.stdout
    assert agent.returncode == plain.returncode
    assert script_stderr(agent.stderr) == script_stderr(plain.stderr)
    assert "Traceback" not in agent.stderr
    summary = SUMMARY.search(agent.stderr)
    assert summary is not None, agent.stderr
    assert int(summary.group(2)) == exit_code


def assert_losses_reported(plain: subprocess.CompletedProcess, agent: subprocess.CompletedProcess) -> None:
    printed = printed_losses(plain.stdout)
    assert printed, plain.stdout
    assert reported_losses(agent.stderr) == printed
    assert agent.stderr.count("[tuidebug] model:") == 1, agent.stderr


@pytest.mark.parametrize("args", [
    pytest.param(["pat_workers.py", "--context", "fork"], id="dataloader-workers-fork"),
    pytest.param(["pat_workers.py", "--context", "spawn"], id="dataloader-workers-spawn"),
    pytest.param(["pat_dict_kwargs.py"], id="dict-batches-keyword-arguments"),
    pytest.param(["pat_grad_accum.py"], id="gradient-accumulation"),
    pytest.param(["pat_no_loader.py"], id="no-dataloader"),
    pytest.param(["pat_checkpoint.py"], id="gradient-checkpointing"),
    pytest.param(["pat_custom_fn.py"], id="custom-function-inplace-ops"),
    pytest.param(["pat_compile.py"], id="torch-compile"),
])
def test_pattern_runs_exactly_as_under_python(args: list[str]) -> None:
    plain, agent = run_both(args)

    assert_same_run(plain, agent)
    assert_losses_reported(plain, agent)


def test_optimizer_steps_that_take_callables_get_them_where_the_script_put_them() -> None:
    plain, agent = run_both(["pat_closures.py"])

    assert_same_run(plain, agent)
    assert len(re.findall(r"^step \d+ ", plain.stdout, re.MULTILINE)) == 9


def test_autocast_and_grad_scaler_report_the_raw_loss_and_skipped_steps() -> None:
    plain, agent = run_both(["pat_amp.py"])

    assert_same_run(plain, agent)
    assert_losses_reported(plain, agent)
    skipped = int(SUMMARY.search(agent.stderr).group(1))
    scales = re.findall(r"scale (\S+)$", plain.stdout, re.MULTILINE)
    assert skipped == len(set(scales)) == 2  # the scale halves once per skipped step
    assert agent.stderr.count("[tuidebug] amp_skip") == 2


def test_several_optimizers_in_one_loop() -> None:
    plain, agent = run_both(["pat_multi_optim.py"])

    assert_same_run(plain, agent)
    iterations = len(re.findall(r"^step \d+ d_loss", plain.stdout, re.MULTILINE))
    reported = reported_losses(agent.stderr)
    assert sorted(reported) == list(range(1, iterations + 1))
    assert all(loss != "-" for loss in reported.values())
    assert agent.stderr.count("[tuidebug] optimizer") == 2


def test_argparse_and_sys_exit_code() -> None:
    plain, agent = run_both(["pat_argparse_exit.py", "--steps", "5", "--lr", "0.05", "--exit-code", "3"])

    assert_same_run(plain, agent, exit_code=3)
    assert_losses_reported(plain, agent)
    assert "argv ['pat_argparse_exit.py', '--steps', '5', '--lr', '0.05', '--exit-code', '3']" in agent.stdout


def test_the_scripts_own_argparse_error() -> None:
    plain, agent = run_both(["pat_argparse_exit.py", "--steps", "many"])

    assert_same_run(plain, agent, exit_code=2)
    assert "pat_argparse_exit.py: error: argument --steps: invalid int value: 'many'" in agent.stderr


def test_the_script_sees_what_python_shows_it() -> None:
    plain, agent = run_both(["pat_identity.py", "first", "--flag"])

    assert_same_run(plain, agent)
    assert "name __main__ main module is this one True" in agent.stdout
    assert "argv ['pat_identity.py', 'first', '--flag']" in agent.stdout
    assert "is the script's directory True" in agent.stdout


def test_stdin_and_stdout_stay_the_scripts() -> None:
    plain, agent = run_both(["pat_stdin.py"], stdin="3\n0.1\nextra words\n")

    assert_same_run(plain, agent)
    assert_losses_reported(plain, agent)
    assert "rest of stdin: ['extra', 'words']" in agent.stdout


def test_paths_relative_to_the_script_and_the_working_directory(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(SCRIPTS / "pat_paths.py", project)
    (project / "pat_paths.json").write_text('{"seed": 3, "lr": 0.2}')
    cwds = (tmp_path / "plain", tmp_path / "agent")
    for cwd in cwds:
        cwd.mkdir()

    plain, agent = run_both(["../project/pat_paths.py"], cwd=cwds)

    assert_same_run(plain, agent)
    assert_losses_reported(plain, agent)
    assert (tmp_path / "agent" / "run" / "checkpoint.pt").exists()


def test_module_run_like_python_dash_m() -> None:
    plain, agent = run_both(["-m", "pat_pkg.train", "4"])

    assert_same_run(plain, agent, exit_code=4)
    assert_losses_reported(plain, agent)
    assert "name __main__ package pat_pkg spec pat_pkg.train" in agent.stdout


def test_a_later_stage_with_its_own_optimizer_takes_over_the_step_count() -> None:
    """Its steps before it takes over are not counted, and its losses are not folded into the first
    step it counts."""
    plain, agent = run_both(["pat_stages.py"])

    assert plain.returncode == agent.returncode == 0 and agent.stdout == plain.stdout
    printed = re.findall(r"^stage (\d) step (\d+) loss (\S+)", plain.stdout, re.MULTILINE)
    reported = reported_losses(agent.stderr)
    first_stage, handover = 30, 20  # HANDOVER_STEPS
    assert sorted(reported) == list(range(1, first_stage + 40 - handover + 2))
    assert reported[first_stage] == number(float(printed[first_stage - 1][2]))
    assert reported[first_stage + 1] == number(float(printed[first_stage + handover - 1][2]))
    assert reported[max(reported)] == number(float(printed[-1][2]))
    assert "Adam now defines the step: it made 20 steps with none of SGD's" in agent.stderr


def test_per_sample_gradients_with_torch_func_run_as_without_the_agent() -> None:
    """Inside vmap the model is called with wrapper tensors that have no storage: the hooks stand aside."""
    plain, agent = run_both(["pat_vmap.py"])

    assert plain.returncode == agent.returncode == 0, agent.stderr
    assert agent.stdout == plain.stdout
    assert "[tuidebug] summary: 8 steps" in agent.stderr
