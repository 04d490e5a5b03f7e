"""`tuidebug diagnose` and `tuidebug replay` as a user runs them: real subprocesses, real scripts."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import EXAMPLES, SCRIPTS, tuidebug_command

KEYS = {"failure_class", "cause", "summary", "fix", "evidence", "checks", "reproduction", "confirmed", "validated",
        "steps", "partial"}


def diagnose(tmp_path: Path, script: str | Path, *args: str) -> tuple[int, dict, str]:
    out = tmp_path / "report.json"
    result = subprocess.run(
        [*tuidebug_command(), "diagnose", "--json", str(out), "--bundle-dir", str(tmp_path / "bundle"),
         str(EXAMPLES / script), *args],
        capture_output=True, text=True, timeout=240, cwd=tmp_path)
    return result.returncode, json.loads(out.read_text()), result.stdout


def test_a_nan_in_weights_kept_as_plain_tensors_says_no_check_could_try_a_cause(tmp_path):
    """No nn.Module and no optimizer: no check can replay the run, so none tries a cause, and the verdict's fix
    says why instead of pointing at trials that never ran."""
    out = tmp_path / "report.json"
    subprocess.run([*tuidebug_command(), "diagnose", "--json", str(out), str(SCRIPTS / "plain_tensors_diverge.py")],
                   capture_output=True, text=True, timeout=240, cwd=tmp_path)
    report = json.loads(out.read_text())

    assert (report["failure_class"], report["cause"]) == ("nan", "nan_unexplained")
    assert report["fix"].startswith("no check could try a cause, so no trial ran: the script trains no nn.Module: "
                                    "its 1 weight tensor(s) are plain tensors updated by hand"), report["fix"]


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
        lr_check = next(c for c in report["checks"] if c["id"] == "nan.lr")
        assert any("replay from" in line for line in lr_check["evidence"])  # every check's trials, not only the verdict's
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


def test_a_failure_before_the_first_optimizer_step_has_a_reproduction_that_validates_the_fix(tmp_path):
    """float16 overflows at step 0, before Adam ever stepped: the bundle holds the state before that step (the
    optimizer made over the model, its state still empty), and the replay tells the fixed script apart."""
    script = SCRIPTS / "fp16_first_step_adam.py"
    code, report, _ = diagnose(tmp_path, script)  # an absolute path: EXAMPLES / script is the script itself
    fixed = tmp_path / "fixed.py"
    fixed.write_text(script.read_text().replace(".half()", ""))

    assert (code, report["cause"]) == (1, "fp16_overflow"), report["summary"]
    unfixed, repaired = _replay(report["reproduction"], script), _replay(report["reproduction"], fixed)
    assert unfixed.returncode == 1 and unfixed.stdout.startswith("fail: the failing case still fails"), unfixed.stderr
    assert repaired.returncode == 0 and repaired.stdout.startswith("pass: the failing case no longer fails")


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


HANGS = """
import time
import torch

model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(32, 4), torch.randn(32, 1)
for step in range(1000):
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    if step == 20:
        time.sleep(3600)  # a dead lock, a hung collective, a stuck data worker
"""


@pytest.mark.fault('the script hangs',
                   '`diagnose`: a stall verdict with the stuck line, within the deadline')
def test_a_script_that_hangs_still_gets_a_verdict_within_the_deadline(tmp_path):
    script = tmp_path / "hangs.py"
    script.write_text(HANGS)
    out = tmp_path / "report.json"

    result = subprocess.run([*tuidebug_command(), "diagnose", "--json", str(out), "--seconds", "20", "--timeout", "40",
                             str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)

    report = json.loads(out.read_text())
    assert set(report) == KEYS
    assert result.returncode == 1
    assert (report["failure_class"], report["cause"]) == ("crash", "stalled"), report["summary"]
    assert "made no step for 10s after step 21" in report["summary"]  # seen while it runs, not at the window's end
    assert "hangs.py:14" in report["summary"]


# No backward() and no optimizer: the weights are updated by hand from gradients written out (makemore's
# manual backprop), so the agent has no point to pause at. Both phases run their own line: a thread seen
# on another line when the pause fails is computing. The control sleeps on one line before any step.
BY_HAND = """
import time
import torch

torch.manual_seed(0)
W = torch.randn(128, 128) * 0.1


def warm_up(seconds):
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        torch.tanh(torch.randn(256, 128) @ W)


def train():
    global W
    while True:
        x = torch.randn(256, 128); h = torch.tanh(x @ W); W -= 1e-4 * (x.t() @ (1 - h ** 2))


warm_up(6.5)
train()
"""
SLEEPS_FIRST = """
import time
import torch

model = torch.nn.Linear(4, 1)
time.sleep(3600)
"""


@pytest.mark.parametrize("text, verdict", [(BY_HAND, ("inconclusive", "no_training_step")),
                                           (SLEEPS_FIRST, ("crash", "stalled"))], ids=["computing", "sleeping"])
def test_a_run_without_a_step_is_stalled_only_where_its_thread_stands_still(tmp_path, text, verdict):
    script = tmp_path / "by_hand.py"
    script.write_text(text)
    out = tmp_path / "report.json"

    # The window (6 s) ends inside the warm-up even where the agent's start-up takes seconds on a loaded box,
    # and the failed pause's 5 s end in the loop.
    subprocess.run([*tuidebug_command(), "diagnose", "--json", str(out), "--seconds", "6", "--timeout", "40",
                    str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)

    report = json.loads(out.read_text())
    assert (report["failure_class"], report["cause"]) == verdict, report["summary"]
    if verdict[1] == "stalled":
        assert "by_hand.py:6" in report["summary"]  # where it sleeps
    else:
        assert any("moved from by_hand.py:12" in line and "to by_hand.py:18" in line for line in report["evidence"])


SEQUENCE_MODEL = """
import copy
import torch
import torch.nn as nn

torch.manual_seed(0)


class LM(nn.Module):
    def __init__(self, vocab=20, hidden=32):
        super().__init__()
        self.embed, self.rnn, self.head = nn.Embedding(vocab, hidden), nn.GRU(hidden, hidden), nn.Linear(hidden, vocab)

    def forward(self, x, h):
        out, h = self.rnn(self.embed(x), h)
        return self.head(out).view(-1, self.head.out_features), h


data = (torch.arange(4000) % 20).view(20, -1).t().contiguous()  # (time, batch), as word_language_model batchifies
model = LM()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
criterion = nn.CrossEntropyLoss()
for epoch in range(3):
    h = None
    for i in range(0, data.size(0) - 11, 10):
        x, y = data[i:i + 10], data[i + 1:i + 11].reshape(-1)
        optimizer.zero_grad()
        logits, h = model(x, h)
        loss = criterion(logits, y)
        loss.backward()
        optimizer.step()
        h = h.detach()
    print(epoch, loss.item())
best = copy.deepcopy(model)  # "the best checkpoint", evaluated on the test split
with torch.no_grad():
    logits, _ = best(data[:10], None)
    print("test loss", criterion(logits, data[1:11].reshape(-1)).item())
"""


def test_a_model_returning_a_tuple_without_a_dataloader_gets_the_single_batch_test(tmp_path):
    """The loss takes one item of the model's (logits, hidden); the sequence-first batch is not cut by
    rows; a checkpoint evaluated under no_grad after training does not replace the trained model."""
    script = tmp_path / "sequence_model.py"
    script.write_text(SEQUENCE_MODEL)
    out = tmp_path / "report.json"

    result = subprocess.run([*tuidebug_command(), "diagnose", "--json", str(out), str(script)],
                            capture_output=True, text=True, timeout=240, cwd=tmp_path)

    report = json.loads(out.read_text())
    assert result.returncode == 0 and (report["failure_class"], report["cause"]) == ("healthy", "healthy")
    overfit = report["checks"][0]
    assert (overfit["id"], overfit["status"]) == ("overfit", "pass"), overfit["summary"]


@pytest.mark.fault('the reproduction bundle cannot be written',
                   'the verdict written, the reason in the evidence')
def test_a_bundle_that_cannot_be_written_is_reported_with_the_reason(tmp_path):
    (tmp_path / "not_a_folder").write_text("a file where the bundle's parent folder should be")
    out = tmp_path / "report.json"

    result = subprocess.run(
        [*tuidebug_command(), "diagnose", "--json", str(out), "--bundle-dir", str(tmp_path / "not_a_folder" / "bundle"),
         str(EXAMPLES / "nan_inputs.py")], capture_output=True, text=True, timeout=240, cwd=tmp_path)

    report = json.loads(out.read_text())
    assert result.returncode == 1 and report["failure_class"] == "nan" and report["reproduction"] is None
    assert any("cannot write the bundle into" in line and "not_a_folder" in line for line in report["evidence"])


@pytest.mark.fault('the script reads stdin under `diagnose`',
                   'a crash verdict that says stdin is not connected')
def test_a_script_that_reads_stdin_is_told_that_diagnose_gives_it_none(tmp_path):
    out = tmp_path / "report.json"

    result = subprocess.run([*tuidebug_command(), "diagnose", "--json", str(out), str(SCRIPTS / "pat_stdin.py")],
                            capture_output=True, text=True, timeout=120, cwd=tmp_path)

    report = json.loads(out.read_text())
    assert result.returncode == 1 and (report["failure_class"], report["cause"]) == ("crash", "exception")
    assert "pat_stdin.py:8" in report["summary"] and "--headless" in report["fix"]


def test_the_window_is_lengthened_while_a_container_grows_at_every_pass_and_ends_once_it_is_settled(tmp_path):
    """Passes of 4 s (four steps of 1 s): the suspicion comes at the second pass's start (the first step
    + 4 s) and the finding at the fourth's (+ 12 s), so a 10 s window holds the one and not the other
    for any start-up time from 0 to 6 s; the suspicion lengthens the window and the finding ends it."""
    out = tmp_path / "report.json"
    subprocess.run([*tuidebug_command(), "diagnose", "--json", str(out), "--seconds", "10", "--timeout", "90",
                    str(SCRIPTS / "slow_metric_never_reset.py")], capture_output=True, text=True, timeout=240,
                   cwd=tmp_path)
    report = json.loads(out.read_text())

    assert (report["failure_class"], report["cause"]) == ("oom", "memory_growth"), report["summary"]
    assert "self.metric.preds" in report["summary"], report["summary"]
    assert any(line.startswith("window_extended: ") and "preds" in line for line in report["evidence"])
    assert report["steps"] < 24  # ended by the finding at the fourth pass (12 steps), not by the window's end



@pytest.mark.parametrize("accumulate", [False, True])
def test_a_loop_that_computes_losses_and_never_updates_is_no_learning(tmp_path, accumulate):
    """No backward and no step while the loss is computed in training mode: the loop's line is named. The
    correct loop that gathers 32 micro-batch losses for one backward is not taken for it."""
    out = tmp_path / "report.json"
    subprocess.run([*tuidebug_command(), "diagnose", "--json", str(out), str(SCRIPTS / "update_never_called.py"),
                    *(["--accumulate"] if accumulate else [])], capture_output=True, text=True, timeout=240, cwd=tmp_path)
    report = json.loads(out.read_text())

    if accumulate:
        assert report["failure_class"] == "healthy", report["summary"]
        assert not any("loss_without_backward" in line for line in report["evidence"])
    else:
        assert (report["failure_class"], report["cause"]) == ("no_learning", "missing_optimizer_step"), report["summary"]
        assert "the loop at update_never_called.py:30 computes" in report["fix"]
        assert any("update_never_called.py:24 `return nn.functional.cross_entropy(model(inputs), targets)`" in line
                   for line in report["evidence"])


PINN = """
import torch

torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
optimizer = torch.optim.Adam(net.parameters(), lr=2e-2)
x_ic = torch.rand(50, 2) * torch.tensor([1.0, 0.0])
x_f = torch.rand(200, 2)
c_ic = torch.full((50, 1), -2.0)
for it in range(300):
    optimizer.zero_grad()
    loss_ic = ((net(x_ic) - c_ic) ** 2).mean()
    g = x_f.clone()
    g.requires_grad = True
    u = net(g)
    u_x = torch.autograd.grad(u, g, torch.ones_like(u), create_graph=True)[0][:, :1]
    flux = (1.0 + u) ** 1.5 * u_x
    loss = loss_ic + flux.pow(2).mean()
    loss.backward()
    optimizer.step()
"""


def test_a_pinn_calling_its_model_on_several_point_sets_is_replayed_on_its_own_inputs(tmp_path):
    """No DataLoader: the replays hand the loop's first model call the inputs kept from a call (the last one, the
    collocation points, a leaf the loop differentiates against). Handed to the initial-condition call they broke
    the iteration (a (200, 1) prediction against a (50, 1) target) and every trial ended with the loop; the
    iteration now runs on its own inputs and the fractional power of the negative base is found."""
    script = tmp_path / "pinn.py"
    script.write_text(PINN)
    _, report, _ = diagnose(tmp_path, script)
    assert (report["failure_class"], report["cause"]) == ("nan", "unsafe_math"), report["summary"]
    assert "torch.pow at pinn.py:17" in report["summary"]
