"""`tuidebug diagnose` and `tuidebug replay` as a user runs them: real subprocesses, real scripts."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import EXAMPLES, tuidebug_command

KEYS = {"failure_class", "cause", "summary", "fix", "evidence", "checks", "reproduction", "confirmed", "validated",
        "steps", "partial"}


def diagnose(tmp_path: Path, script: str, *args: str) -> tuple[int, dict, str]:
    out = tmp_path / "report.json"
    result = subprocess.run(
        [*tuidebug_command(), "diagnose", "--json", str(out), "--bundle-dir", str(tmp_path / "bundle"),
         str(EXAMPLES / script), *args],
        capture_output=True, text=True, timeout=240, cwd=tmp_path)
    return result.returncode, json.loads(out.read_text()), result.stdout


@pytest.mark.parametrize("script, args, failure_class, cause", [
    ("nan_after_warmup.py", ("--sleep", "0"), "nan", "learning_rate_too_high"),
    ("nan_inputs.py", (), "nan", "nan_in_inputs"),
    ("nan_log_zero.py", (), "nan", "unsafe_math"),
    ("nan_divide_by_zero.py", (), "nan", "unsafe_math"),
    ("nan_rnn_explode.py", (), "nan", "exploding_gradients"),
    ("no_grad_reaches_weights.py", (), "no_learning", "no_gradient_to_weights"),
    ("healthy_mlp.py", ("--epochs", "3"), "healthy", "healthy"),
])
def test_diagnose_names_the_failure_class_and_cause(tmp_path, script, args, failure_class, cause):
    code, report, text = diagnose(tmp_path, script, *args)

    assert (report["failure_class"], report["cause"]) == (failure_class, cause), report["summary"]
    assert set(report) == KEYS
    assert code == (0 if failure_class == "healthy" else 1)
    assert report["checks"][0]["id"] == "overfit"  # the protocol's first rule
    assert f"`{cause}`" in text
    if failure_class == "nan":
        ran = {c["id"]: c["status"] for c in report["checks"]}
        assert {"nan.lr", "nan.inputs", "nan.unsafe_math", "nan.grad_explosion"} <= set(ran)
        assert "[x] For NaN: learning rate, input NaNs, unsafe math, and gradient explosion all checked" in text
    if failure_class == "healthy":
        assert report["reproduction"] is None
    else:
        assert Path(report["reproduction"], "bundle.json").is_file()


def test_a_script_that_exits_with_an_error_is_not_called_healthy(tmp_path):
    code, report, _ = diagnose(tmp_path, "healthy_mlp.py", "--no-such-option")

    assert code == 1
    assert report["failure_class"] == "crash"
    assert any("unrecognized arguments" in line for line in report["evidence"])


def _replay(bundle: str, script: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*tuidebug_command(), "replay", bundle, str(script), *args],
                          capture_output=True, text=True, timeout=240)


def test_replay_validates_the_fix_and_reports_an_unfixed_script(tmp_path):
    _, report, _ = diagnose(tmp_path, "nan_after_warmup.py", "--sleep", "0")
    bundle = report["reproduction"]
    original = EXAMPLES / "nan_after_warmup.py"
    fixed = tmp_path / "fixed.py"
    fixed.write_text(original.read_text().replace("lambda step: 1 + step / 4", "lambda step: min(1 + step / 4, 4)"))

    unfixed = _replay(bundle, original, "--sleep", "0")
    repaired = _replay(bundle, fixed, "--sleep", "0")

    assert unfixed.returncode == 1, unfixed.stdout + unfixed.stderr
    assert unfixed.stdout.startswith("fail: the failing case still fails")
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert repaired.stdout.startswith("pass: the failing case no longer fails")


def test_bundle_files_load_with_weights_only(tmp_path):
    import torch

    _, report, _ = diagnose(tmp_path, "nan_inputs.py")
    folder = Path(report["reproduction"])

    state = torch.load(folder / "state.pt", weights_only=True)
    batches = torch.load(folder / "batches.pt", weights_only=True)
    meta = json.loads((folder / "bundle.json").read_text())
    assert set(state) == {"model", "optimizer"} and state["model"]
    assert torch.isnan(batches[-1][0]).any()
    assert meta["check"] == "inputs" and meta["samples"] == ["sample 37", "sample 301", "sample 777"]
    assert "tuidebug.cli" in (folder / "replay.py").read_text()


@pytest.mark.parametrize("argv, message", [
    (["diagnose"], "no script given"),
    (["diagnose", "--max-steps", "0", "x.py"], "must be at least 1"),
    (["replay", "/nonexistent", "x.py"], "not a reproduction bundle"),
    (["replay"], "no bundle given"),
])
def test_diagnose_and_replay_usage_errors(argv, message):
    result = subprocess.run([*tuidebug_command(), *argv], capture_output=True, text=True, timeout=30)

    assert result.returncode == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
