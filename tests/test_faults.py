"""The fault matrix: real processes, real signals, real sockets. Each test is a row of the README's
reliability table (the ``fault`` marker; conftest.py writes the table from a full run)."""

from __future__ import annotations

import json
import os
import random
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import EXAMPLES, SCRIPTS, tuidebug_command, wait_for
from tuidebug import protocol
from tuidebug.protocol import FrameDecoder, ProtocolError

FAULTS = SCRIPTS / "pat_faults.py"


def diagnose(tmp_path: Path, *args: str, seconds: int = 4, **run: object) -> tuple[int, dict, str]:
    out = tmp_path / "report.json"
    result = subprocess.run([*tuidebug_command(), "diagnose", "--seconds", str(seconds), "--json", str(out),
                             str(FAULTS), *args], capture_output=True, text=True, timeout=180, cwd=tmp_path, **run)
    report = json.loads(out.read_text()) if out.exists() else {}
    return result.returncode, report, result.stderr


@pytest.mark.parametrize(("mode", "at", "says"), [
    pytest.param("kill", "2", "killed by SIGKILL", id="SIGKILL before the overfit step"),
    pytest.param("kill", "40", "killed by SIGKILL", id="SIGKILL after the overfit step"),
    pytest.param("segv", "40", "killed by SIGSEGV", id="a segfault"),
    pytest.param("exit", "2", "exited with code 3", id="os._exit(3)"),
    pytest.param("raise", "2", "ValueError: bad value at step 2", id="an exception at step 2"),
    pytest.param("worker", "0", "ValueError", id="an exception in a DataLoader worker"),
    pytest.param("import", "0", "ImportError", id="an exception at import"),
    pytest.param("after", "0", "RuntimeError: the export after training failed", id="an exception after the last step"),
])
@pytest.mark.fault("the script dies: {id}", "`diagnose`: class crash with the cause, exit 1, a valid JSON")
def test_a_script_that_dies_gets_a_crash_verdict(tmp_path: Path, record_property, mode: str, at: str,
                                                 says: str) -> None:
    # The window must outlast a slow start (torch's import on a loaded box) to step 40: a death ends it anyway.
    code, report, stderr = diagnose(tmp_path, mode, at, seconds=15)

    assert code == 1, stderr
    assert report["failure_class"] == "crash" and says in report["summary"], report["summary"]
    record_property("observed", f"crash, exit 1: {report['summary'][:90]}")


@pytest.mark.fault("the script ends early: `sys.exit(0)` after 30 steps",
                   "`diagnose`: a verdict on the steps it made, exit 0 or 1, never a hang")
def test_a_script_that_ends_early_gets_a_verdict(tmp_path: Path, record_property) -> None:
    code, report, stderr = diagnose(tmp_path, "early", "30")

    assert code in (0, 1) and report["steps"] == 30, (code, stderr, report.get("summary"))
    record_property("observed", f"{report['failure_class']}, exit {code}, 30 steps seen")


@pytest.mark.fault("the script runs out of memory (an address-space cap)",
                   "`diagnose`: class oom with the allocation's figures, exit 1")
def test_a_script_that_exhausts_memory_gets_an_oom_verdict(tmp_path: Path, record_property) -> None:
    script = tmp_path / "grows.py"
    script.write_text(
        "import torch\nfrom torch import nn\nmodel = nn.Linear(64, 1)\n"
        "optimizer = torch.optim.SGD(model.parameters(), lr=0.01)\nkept = []\n"
        "for step in range(100000):\n"
        "    x = torch.randn(4096, 64)\n    kept.append(torch.empty(64, 1 << 20))  # 256 MiB a step, never freed\n"
        "    optimizer.zero_grad()\n    model(x).pow(2).mean().backward()\n    optimizer.step()\n")
    cap = 3 << 30

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    out = tmp_path / "report.json"
    result = subprocess.run([*tuidebug_command(), "diagnose", "--seconds", "10", "--json", str(out), str(script)],
                            capture_output=True, text=True, timeout=180, cwd=tmp_path, preexec_fn=limit)
    report = json.loads(out.read_text())

    assert result.returncode == 1 and report["failure_class"] == "oom", report["summary"]
    record_property("observed", f"oom, exit 1: {report['summary'][:90]}")


@pytest.mark.fault("a report on a full disk (a file-size limit of 1 KiB: the report's write fails)",
                   "the verdict still printed, a one-line error, exit 2, no half-written file")
def test_a_report_that_cannot_be_written_leaves_nothing_half_written(tmp_path: Path, record_property) -> None:
    def full_disk() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))  # python ignores SIGXFSZ: writes fail with EFBIG

    code, report, stderr = diagnose(tmp_path, "raise", "2", preexec_fn=full_disk)

    assert code == 2 and stderr.strip().startswith("tuidebug: error: cannot write the report"), stderr
    assert report == {} and not list(tmp_path.glob(".tuidebug-*"))
    record_property("observed", f"exit 2, `{stderr.strip()[:80]}`, no file left")


@pytest.mark.fault("no usable temporary folder for the private socket (a file-size limit of 0)",
                   "a one-line error, exit 2, the script not started")
def test_no_room_for_the_socket_is_a_one_line_error(tmp_path: Path, record_property) -> None:
    def no_room() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))

    code, report, stderr = diagnose(tmp_path, "raise", "2", preexec_fn=no_room)

    assert code == 2 and len(stderr.strip().splitlines()) == 1, stderr
    assert stderr.startswith("tuidebug: error: cannot make the private socket folder"), stderr
    record_property("observed", f"exit 2, `{stderr.strip()[:90]}`")


@pytest.mark.fault("the decoder fuzzed: 100,000 mutated and random frames",
                   "only ProtocolError, never another exception; memory bounded by the frame limit")
def test_the_decoder_takes_a_hundred_thousand_bad_inputs(record_property) -> None:
    rng = random.Random(0)
    valid = [protocol.encode(protocol.Step(step=i, time=1.0, loss=0.5)) for i in range(8)] + [
        protocol.encode(protocol.Event(kind="x", message="y" * 40, time=1.0, step=1))]
    raised = 0
    for _ in range(100_000):
        frame = bytearray(rng.choice(valid))
        for _ in range(rng.randint(1, 4)):
            kind = rng.random()
            if kind < 0.4 and frame:
                frame[rng.randrange(len(frame))] = rng.randrange(256)
            elif kind < 0.6:
                frame = frame[: rng.randrange(len(frame) + 1)]
            elif kind < 0.8:
                frame += bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
            else:
                frame[:4] = rng.randrange(2**32).to_bytes(4, "big")
        decoder = FrameDecoder()
        try:
            decoder.feed(bytes(frame))
        except ProtocolError:
            raised += 1
        assert len(decoder._buffer) <= protocol.MAX_FRAME_BYTES + protocol.HEADER.size
    record_property("observed", f"100,000 inputs: {raised} refused with ProtocolError, nothing else raised")


@pytest.mark.parametrize("probe", ["fault.raises", "fault.oom"])
@pytest.mark.fault("a probe fails after changing the weights: {id}",
                   "the result says error with the cause, the run ends bit-identical, the session usable")
def test_a_failing_probe_leaves_the_run_as_it_was(start_run, record_property, probe: str) -> None:
    plain = subprocess.run([sys.executable, str(FAULTS), "none", "0"], capture_output=True,
                           text=True, timeout=120).stdout.strip().splitlines()[-1]
    run, session = start_run(FAULTS, "none", "0", break_at=10)
    wait_for(lambda: session.state == "paused", 60, "the break at step 10")

    run.command("probe", name=probe, params={})
    wait_for(lambda: probe in session.probe_results, 60, "the failing probe's result")
    result = session.probe_results[probe]
    run.command("probe", name="overfit", params={"steps": 20})
    wait_for(lambda: "overfit" in session.probe_results, 60, "a probe after the failed one")
    run.command("resume")
    wait_for(lambda: session.state == "ended", 120, "the script's end")
    run.command("quit")
    run.wait(30)

    assert result.status == "error" and ("MemoryError" in result.summary or "the probe's own bug" in result.summary)
    assert [line for line in session.output if line.startswith("step ")][-1] == plain
    record_property("observed", f"`{result.summary[:60]}`; final checksum equal to a plain run's")


class _Payload:
    """Unpickling this runs a shell command: what a crafted bundle would do to a loader that trusts it."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.fixture(scope="module")
def saved_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real reproduction bundle of a NaN run, saved by `diagnose`."""
    folder = tmp_path_factory.mktemp("bundle")
    out = folder / "report.json"
    subprocess.run([*tuidebug_command(), "diagnose", "--json", str(out), "--bundle-dir", str(folder / "bundle"),
                    str(EXAMPLES / "nan_inputs.py")], capture_output=True, text=True, timeout=240, cwd=folder)
    return Path(json.loads(out.read_text())["reproduction"])


@pytest.mark.parametrize("damage", ["a malicious pickle", "a truncated file"])
@pytest.mark.fault("`tuidebug replay` of a crafted bundle: {id}",
                   "no code run, a one-line error, exit 2")
def test_a_crafted_bundle_is_refused(saved_bundle: Path, tmp_path: Path, record_property, damage: str) -> None:
    bundle = tmp_path / "bundle"
    shutil.copytree(saved_bundle, bundle)
    marker = tmp_path / "code-ran"
    if damage == "a malicious pickle":
        torch.save({"model": _Payload(marker)}, bundle / "state.pt")
    else:
        data = (bundle / "batches.pt").read_bytes()
        (bundle / "batches.pt").write_bytes(data[: len(data) // 2])

    result = subprocess.run([*tuidebug_command(), "replay", str(bundle), str(EXAMPLES / "nan_inputs.py")],
                            capture_output=True, text=True, timeout=240)

    assert not marker.exists()
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stdout + result.stderr
    said = result.stderr.strip().replace(str(bundle), "BUNDLE")
    record_property("observed", f"exit 2: `{said.removeprefix('tuidebug: error: ')[:110]}`")


@pytest.mark.fault("`tuidebug replay` of a bundle against a script with another model",
                   "a one-line error that says so, exit 2")
def test_a_bundle_replayed_against_another_model_says_so(saved_bundle: Path, record_property) -> None:
    result = subprocess.run([*tuidebug_command(), "replay", str(saved_bundle), str(EXAMPLES / "healthy_mlp.py")],
                            capture_output=True, text=True, timeout=240)

    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stdout + result.stderr
    assert "the bundle was saved from another model" in result.stderr
    record_property("observed", f"exit 2: `{result.stderr.strip().removeprefix('tuidebug: error: ')[:100]}`")


ONEDNN_AT_THE_LIMIT = """
import resource, sys
from tuidebug.agent.crash import is_out_of_memory
failure = RuntimeError("could not create a primitive")
free = is_out_of_memory(failure)
peak = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmPeak:"))
resource.setrlimit(resource.RLIMIT_AS, (int(peak / 0.97), resource.RLIM_INFINITY))
unsupported = RuntimeError("could not create a primitive descriptor for a convolution forward propagation primitive")
print(free, is_out_of_memory(failure), is_out_of_memory(unsupported))
"""


def test_onednns_could_not_create_a_primitive_is_out_of_memory_only_at_the_address_space_limit() -> None:
    """oneDNN reports its failed scratch allocation as "could not create a primitive": an out-of-memory error once
    the process's peak size is at its RLIMIT_AS, and not where no limit is near."""
    done = subprocess.run([sys.executable, "-c", ONEDNN_AT_THE_LIMIT], capture_output=True, text=True, timeout=60)

    assert done.stdout.split() == ["False", "True", "False"], done.stderr
