"""``make bench``: what running under tuidebug costs, measured in one run.

1. Step time: a small CNN and an MLP (``bench/workload.py``), in groups of three processes: one
   bare (``python workload.py``), a second bare one as a control, and one under the agent at the
   TUI's default settings (a real child process, a real socket, this process as the TUI side).
   After warm-up they take turns, one segment of steps each, so that all see the same load on the
   machine. Reported: the median over groups of the median over segments of (agent median step
   time / mean of the two bare median step times); the same for mean step times; and the
   control's ratio to the first bare process, the noise floor.
2. Protocol: 10^6 metric messages from a separate sender process through the real socket into a
   real ``Session``: the messages per second the TUI side takes in, and its memory afterwards.
3. Agent memory: a long run of a tiny model, bare and under the agent: the agent's extra RSS, and
   how much each grows per 1000 steps after warm-up.
4. First frame: a fresh process from its first line to the dashboard's first frame (Textual's
   headless driver), the child not yet started.
5. Time to verdict: ``tuidebug diagnose`` on each bundled example, median of a few runs, next to
   the time the bare script takes.
6. Big batches: a trivial model on batches of 1, 64 and 512 MiB (``bench/big_batch.py``), a few
   steps bare and under the agent: the agent's extra RSS at the end and at the peak; and the batch
   inspector on the 512 MiB batch of a paused run: seconds to its report, and the peak extra RSS
   while it summarises (``--big-batches-only`` runs just these).
7. Scale: the step-time ratio as the work grows, one group of three processes per point as in 1.: 10,
   1,000 and 10,000 parameter tensors, and steps of about 0.3, 3 and 30 ms; at each, the host reads of
   tensor values the agent adds per step on the training thread (each a device sync on a GPU). Two
   points again with break-on-NaN off, where the gradient norms may be sampled (``--scale-only`` runs
   just these).
8. The hooks alone (``bench/hooks_ab.py``): in one process, the workload's loop with the agent's hooks
   installed and removed between interleaved segments: what the training thread pays, without the
   noise between processes (no socket and no writer thread, so a little less than 1. and 7. count).

This process never imports torch, like the TUI. Results are also written to .bench/latest.json.
"""

from __future__ import annotations

import argparse
import errno
import json
import math
import os
import platform
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

import psutil

from tuidebug.agent.check_schedule import SAMPLE_EVERY
from tuidebug.cli import agent_options, build_parser
from tuidebug.launcher import ChildRun, Target
from tuidebug.server import AgentServer
from tuidebug.session import Session

ROOT = Path(__file__).resolve().parent.parent
WORKLOAD = Path(__file__).resolve().parent / "workload.py"
BIG_BATCH = Path(__file__).resolve().parent / "big_batch.py"
DDP_WORKLOAD = Path(__file__).resolve().parent / "ddp_workload.py"
HOOKS_AB = Path(__file__).resolve().parent / "hooks_ab.py"
TWO_RANKS = ["--nproc-per-node", "2"]
BIG_BATCH_MIB = (1, 64, 512)
RESULTS = ROOT / ".bench" / "latest.json"
MiB = 1024 * 1024
GROUPS = {"cnn": 5, "mlp": 3}  # the CNN's step time varies more from process to process
# The scale points: workload, steps per segment (about a second's worth or more), and how the agent runs:
# "armed" (break-on-NaN on, the default), "off" (break-on-NaN off: the gradient norms may be sampled),
# "screen" (the default under the real screen, in a tmux terminal) or "gpu" (armed, the losses read as on
# a GPU, with the gradient norms in one transfer: the count of device syncs a GPU run would make).
SCALE_POINTS = [("tensors-10", 200, "armed"), ("tensors-1000", 15, "armed"), ("tensors-10000", 3, "armed"),
                ("step-0.3ms", 300, "armed"), ("mlp", 60, "armed"), ("step-30ms", 20, "armed"),
                ("step-0.3ms", 300, "off"), ("tensors-10000", 3, "off"), ("step-15ms", 40, "screen"),
                ("mlp", 60, "gpu")]
# The points of 8.: workload, steps per segment, rounds, and break-on-NaN "armed" or "off".
HOOK_POINTS = [("mlp", 200, 8, "armed"), ("step-0.3ms", 1000, 8, "armed"), ("step-0.3ms", 1000, 8, "off"),
               ("tensors-1000", 15, 6, "armed"), ("tensors-10000", 4, 4, "armed"), ("tensors-10000", 4, 4, "off")]

# The sender: an agent-like peer that handshakes and streams Step frames as fast as it can encode them.
SENDER = """
import socket, sys, time
from tuidebug import protocol
from tuidebug.protocol import Hello, Step
address, token, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
sock = socket.socket(socket.AF_UNIX)
sock.connect(address)
sock.sendall(protocol.encode(Hello(version=protocol.PROTOCOL_VERSION, token=token, pid=0, argv=["bench"],
                                   python="", torch_version="")))
assert isinstance(protocol.read_message(sock, protocol.FrameDecoder(), []), protocol.Welcome)
layers = {f"block{i}.weight": 0.5 for i in range(12)}
for start in range(1, count + 1, 1000):
    frames = [protocol.encode(Step(step=n, time=time.time(), loss=1.0 / n, backward_calls=1, grad_norm=2.0,
                                   lrs=[1e-3], step_seconds=0.01, batch_size=64, epoch=n // 1000 + 1,
                                   layer_norms=layers if n % 10 == 0 else None))
              for n in range(start, min(start + 1000, count + 1))]
    sock.sendall(b"".join(frames))
sock.close()
"""


def default_options() -> dict[str, Any]:
    """The agent options of a plain ``tuidebug script.py``, with no post-mortem hold at the end."""
    return {**agent_options(build_parser().parse_args([])), "post_mortem": False}


class Worker:
    """A workload process that runs one segment of steps per request: bare, or under the agent."""

    def __init__(self, args: list[str], agent: bool, fifo: Path, options: dict[str, Any] | None = None) -> None:
        os.mkfifo(fifo)
        self.args = [*args, "--control", str(fifo)]
        self.lines: queue.Queue[str] = queue.Queue()
        self.session: Session | None = None
        if agent:
            self.session = Session(str(WORKLOAD), self.args)
            self.session.subscribe(lambda kind, line: self.lines.put(line.text) if kind == "output" else None)
            self.run = ChildRun(Target(str(WORKLOAD), self.args), self.session, options or default_options(),
                                capture_output=True)
            self.run.start()
            self.process = self.run.process
        else:
            self.process = subprocess.Popen([sys.executable, str(WORKLOAD), *self.args], stdout=subprocess.PIPE,
                                            text=True)
            threading.Thread(target=lambda: [self.lines.put(line) for line in self.process.stdout], daemon=True).start()
        self.control = self._open(fifo)

    def _open(self, fifo: Path) -> IO[str]:
        """The FIFO's writing end, once the workload (warmed up) opens it for reading."""
        while True:
            try:
                descriptor = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
                break
            except OSError as exc:
                if exc.errno != errno.ENXIO or not self._alive():
                    raise SystemExit(f"bench: the workload {self.args} did not start: {exc}") from None
                time.sleep(0.01)
        os.set_blocking(descriptor, True)
        return os.fdopen(descriptor, "w")

    def _alive(self) -> bool:
        return self.process.poll() is None

    def segment(self) -> dict[str, Any]:
        self.control.write("go\n")
        self.control.flush()
        return self._result()

    def finish(self) -> dict[str, Any]:
        """Close the FIFO; the workload prints its summary and exits."""
        self.control.close()
        summary = self._result()
        if self.process.wait(60) != 0:
            raise SystemExit(f"bench: the workload {self.args} exited with {self.process.returncode}")
        if self.session is not None:
            self.run.close()
            summary["steps_received"] = self.session.step
            summary["dropped"] = self.session.counters.dropped
        return summary

    def _result(self) -> dict[str, Any]:
        while True:
            try:
                line = self.lines.get(timeout=120)
            except queue.Empty:
                raise SystemExit(f"bench: no answer from the workload {self.args}") from None
            if line.startswith("{"):
                return json.loads(line)


class ScreenWorker(Worker):
    """The workload under the real screen: ``tuidebug`` in a tmux pane of a private tmux server (a real
    terminal, 120x40), its segments' results through a file, and the screen process's CPU time."""

    def __init__(self, args: list[str], fifo: Path) -> None:
        os.mkfifo(fifo)
        self.results = fifo.with_suffix(".results")
        self.results.touch()
        self.args = [*args, "--control", str(fifo), "--results", str(self.results)]
        self.tmux = ["tmux", "-L", f"tuidebug-bench-{os.getpid()}", "-f", os.devnull]
        command = " ".join([str(Path(sys.executable).parent / "tuidebug"), str(WORKLOAD), *self.args])
        subprocess.run([*self.tmux, "new-session", "-d", "-x", "120", "-y", "40", "-s", "bench",
                        f"unset COLUMNS LINES; {command}; sleep 600"], check=True)
        shell = psutil.Process(int(subprocess.run([*self.tmux, "display-message", "-p", "-t", "bench", "#{pane_pid}"],
                                                  capture_output=True, text=True, check=True).stdout))
        self.session = None
        self.screen = self._wait(lambda: next((c for c in shell.children() if "tuidebug" in " ".join(c.cmdline())), None))
        self.steps = int(args[args.index("--segment-steps") + 1])
        self.read = 0
        self.control = self._open(fifo)

    @staticmethod
    def _wait(find: Any) -> Any:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            found = find()
            if found is not None:
                return found
            time.sleep(0.05)
        raise SystemExit("bench: tuidebug did not start in the tmux pane")

    def _alive(self) -> bool:
        return self.screen.is_running()

    def segment(self) -> dict[str, Any]:
        before = sum(self.screen.cpu_times()[:2])
        result = super().segment()
        result["screen_cpu"] = (sum(self.screen.cpu_times()[:2]) - before) / (result["mean_step"] * self.steps)
        return result

    def _result(self) -> dict[str, Any]:
        def line() -> str | None:
            lines = self.results.read_text().splitlines()
            return lines[self.read] if len(lines) > self.read else None
        found = self._wait(line)
        self.read += 1
        return json.loads(found)

    def finish(self) -> dict[str, Any]:
        self.control.close()
        subprocess.run([*self.tmux, "kill-server"], capture_output=True)
        return {}


def step_time(model: str, pairs: int, segments: int, segment_steps: int, warmup: int, scratch: Path,
              count_reads: bool = False, options: dict[str, Any] | None = None, screen: bool = False,
              extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """Per process group: a bare, a second bare (the control) and an agent process take turns, one
    segment each, in ABC CBA order; the agent is compared with the mean of the two bare processes.
    Two identical bare processes can differ by several percent for the whole of their lives (memory
    placement, most on the CNN), so the figure is the median over several groups."""
    ratios, mean_ratios, controls, bare_ms, agent_ms, reads, screen_cpu = [], [], [], [], [], [], []
    for group in range(pairs):
        args = [model, "--warmup", str(warmup), "--segment-steps", str(segment_steps), *extra] + ["--count-reads"] * count_reads
        workers = {name: Worker(args, agent=name == "agent", fifo=scratch / f"{model}-{group}-{name}", options=options)
                   for name in ("bare", "control")}
        fifo = scratch / f"{model}-{group}-agent"
        workers["agent"] = ScreenWorker(args, fifo) if screen else Worker(args, True, fifo, options)
        figures: dict[str, list[dict[str, Any]]] = {name: [] for name in workers}
        for index in range(segments):
            for name in (list(workers) if index % 2 == 0 else list(reversed(workers))):
                figures[name].append(workers[name].segment())
        workers["bare"].finish()
        workers["control"].finish()
        received = workers["agent"].finish().get("steps_received", warmup + segments * segment_steps)
        if received != warmup + segments * segment_steps:
            raise SystemExit(f"bench: {received} of {warmup + segments * segment_steps} steps reached the TUI side")

        def ratio(name: str, key: str = "median_step", bare: tuple[str, ...] = ("bare", "control")) -> float:
            """Segment by segment: the process's step time over the mean of the bare ones'."""
            return statistics.median(
                a[key] / statistics.mean(figures[b][index][key] for b in bare) for index, a in enumerate(figures[name]))

        ratios.append(ratio("agent"))
        mean_ratios.append(ratio("agent", "mean_step"))
        controls.append(ratio("control", bare=("bare",)))
        bare_ms.append(statistics.median(f["median_step"] for f in figures["bare"] + figures["control"]) * 1e3)
        agent_ms.append(statistics.median(f["median_step"] for f in figures["agent"]) * 1e3)
        if screen:
            screen_cpu.append(statistics.median(f["screen_cpu"] for f in figures["agent"]))
        if count_reads:  # the agent's own: the script's optimizer reads its CPU step counters too
            reads.append(max(f["reads_per_step"] for f in figures["agent"]) - min(f["reads_per_step"] for f in figures["bare"]))
        print(f"  {model} group {group + 1}: agent / bare {ratios[-1]:.3f} (mean steps {mean_ratios[-1]:.3f}), "
              f"control bare / bare {controls[-1]:.3f}", flush=True)
    return {"ratio": statistics.median(ratios), "mean_ratio": statistics.median(mean_ratios),
            "control": statistics.median(controls), "ratios": ratios, "controls": controls,
            "bare_ms": statistics.median(bare_ms), "agent_ms": statistics.median(agent_ms),
            "agent_reads_per_step": max(reads) if reads else None,
            "screen_cpu": statistics.median(screen_cpu) if screen_cpu else None}


def scale(segments: int) -> list[dict[str, Any]]:
    """Each scale point: one group of a bare, a control bare and an agent process taking turns."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="tuidebug-bench-") as scratch:
        for index, (model, segment_steps, mode) in enumerate(SCALE_POINTS):
            folder = Path(scratch) / str(index)
            folder.mkdir()
            figures = step_time(model, 1, segments, segment_steps, max(5, segment_steps), folder, count_reads=True,
                                options={**default_options(), "break_on_nan": mode != "off"}, screen=mode == "screen",
                                extra=("--reads-as-on-a-gpu",) if mode == "gpu" else ())
            rows.append({"workload": model, "mode": mode, **figures})
    return rows


def hooks_alone() -> list[dict[str, Any]]:
    """Each point of 8.: one process, hooks installed and removed between interleaved segments."""
    rows = []
    for model, steps, rounds, mode in HOOK_POINTS:
        command = [sys.executable, str(HOOKS_AB), model, "--segment-steps", str(steps), "--rounds", str(rounds)]
        result = subprocess.run(command + ["--off"] * (mode == "off"), capture_output=True, text=True, cwd=ROOT,
                                env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=900)
        if result.returncode != 0:
            raise SystemExit(f"bench: {' '.join(command)} failed: {result.stderr.strip()[-500:]}")
        rows.append({"workload": model, "mode": mode, **json.loads(result.stdout.strip().splitlines()[-1])})
    return rows


def print_hooks_alone(rows: list[dict[str, Any]]) -> None:
    for row in rows:
        where = "break-on-NaN on" if row["mode"] == "armed" else "break-on-NaN off"
        sampled = f"; gradient norms every {row['norm_every']} step(s)" if row["mode"] == "off" else ""
        checks = f"; checks every {row['check_every']} steps" if row["check_every"] > SAMPLE_EVERY else ""
        print(f"  hooks alone {row['workload']:13} {where:16}: agent / bare {row['ratio']:.3f} (median step "
              f"{row['agent_ms']:.3f} ms vs {row['bare_ms']:.3f} ms), mean step {row['mean_ratio']:.3f}"
              f"{sampled}{checks}")


def print_scale(rows: list[dict[str, Any]]) -> None:
    for row in rows:
        where = {"armed": "break-on-NaN on", "off": "break-on-NaN off", "screen": "under the screen",
                 "gpu": "reads as on a GPU"}[row["mode"]]
        print(f"  scale {row['workload']:13} {where:17}: agent / bare {row['ratio']:.3f} (median step "
              f"{row['agent_ms']:.3f} ms vs {row['bare_ms']:.3f} ms; control {row['control']:.3f}); the agent's host "
              f"reads per step {row['agent_reads_per_step']:.2f}"
              + (f"; the screen process used {row['screen_cpu']:.0%} of a core" if row["mode"] == "screen" else ""))


def protocol_throughput(count: int) -> dict[str, Any]:
    process = psutil.Process()
    rss_before = process.memory_info().rss
    session = Session("bench", [])
    server = AgentServer(session)
    server.start()
    sender = subprocess.Popen([sys.executable, "-c", SENDER, server.address, server.token, str(count)],
                              cwd=ROOT)
    checkpoints: dict[int, int] = {}
    start = None
    try:
        while session.step < count:
            if sender.poll() not in (None, 0):
                raise SystemExit(f"bench: the protocol sender failed with {sender.returncode}")
            if start is None and session.step > 0:
                start = time.perf_counter()
            for mark in (count // 10, count // 2):
                if mark not in checkpoints and session.step >= mark:
                    checkpoints[mark] = process.memory_info().rss - rss_before
            time.sleep(0.001 if start is None else 0.01)
        seconds = time.perf_counter() - start
        sender.wait(30)
    finally:
        sender.kill()
        server.close()
    return {
        "messages": count, "seconds": seconds, "per_second": count / seconds,
        "session_rss_mib": (process.memory_info().rss - rss_before) / MiB,
        "session_rss_mib_at": {str(mark): rss / MiB for mark, rss in checkpoints.items()},
        "recent_points": len(session.loss.recent), "coarse_points": len(session.loss.coarse.points),
    }


def run_to_end(args: list[str], agent: bool, script: Path = WORKLOAD) -> dict[str, Any]:
    """A workload run start to finish; its summary line."""
    if not agent:
        result = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=600,
                                check=True)
        return json.loads(result.stdout.strip().splitlines()[-1])
    session = Session(str(script), args)
    run = ChildRun(Target(str(script), args), session, default_options(), capture_output=True)
    run.start()
    try:
        code = run.wait(600)
    finally:
        run.close()
    if code != 0:
        raise SystemExit(f"bench: the workload under the agent exited with {code}: {list(session.output)[-5:]}")
    summary = json.loads([line for line in session.output if line.startswith("{")][-1])
    return {**summary, "steps_received": session.step, "dropped": session.counters.dropped}


def agent_memory(steps: int, warmup: int) -> dict[str, Any]:
    args = ["tiny", "--steps", str(steps), "--warmup", str(warmup)]
    bare, agent = run_to_end(args, agent=False), run_to_end(args, agent=True)
    per_thousand = 1000 / (steps - warmup) / MiB
    return {
        "steps": steps, "extra_rss_mib": (agent["rss_end"] - bare["rss_end"]) / MiB,
        "bare_growth_mib_per_1000_steps": (bare["rss_end"] - bare["rss_warm"]) * per_thousand,
        "agent_growth_mib_per_1000_steps": (agent["rss_end"] - agent["rss_warm"]) * per_thousand,
        "agent_rss_mib": agent["rss_end"] / MiB, "bare_rss_mib": bare["rss_end"] / MiB,
        "steps_received": agent["steps_received"], "dropped": agent["dropped"],
    }


def batch_memory(sizes: tuple[int, ...], steps: int) -> dict[str, dict[str, float]]:
    """Per batch size in MiB: the agent's RSS over the bare run's, at the end and at the peak."""
    figures = {}
    for mib in sizes:
        args = ["--mib", str(mib), "--steps", str(steps)]
        bare, agent = run_to_end(args, False, BIG_BATCH), run_to_end(args, True, BIG_BATCH)
        figures[str(mib)] = {"extra_rss_mib": (agent["rss_end"] - bare["rss_end"]) / MiB,
                             "extra_peak_mib": (agent["rss_peak"] - bare["rss_peak"]) / MiB,
                             "bare_rss_mib": bare["rss_end"] / MiB, "agent_rss_mib": agent["rss_end"] / MiB}
        print(f"  {mib} MiB batches: agent +{figures[str(mib)]['extra_rss_mib']:.0f} MiB RSS at the end, "
              f"+{figures[str(mib)]['extra_peak_mib']:.0f} MiB at the peak", flush=True)
    return figures


def inspector_cost(mib: int, steps: int) -> dict[str, float]:
    """The batch inspector on the ``mib`` MiB batch of a run paused at its last step: seconds from the
    request to the report, and the child's peak RSS meanwhile (sampled every 5 ms) over its RSS before."""
    args = ["--mib", str(mib), "--steps", str(steps)]
    session = Session(str(BIG_BATCH), args)
    run = ChildRun(Target(str(BIG_BATCH), args), session, {**default_options(), "break_at": steps},
                   capture_output=True)
    run.start()
    try:
        while session.state != "paused":
            if not run.running:
                raise SystemExit(f"bench: the big-batch workload ended before its break: {list(session.output)[-5:]}")
            time.sleep(0.05)
        child = psutil.Process(run.process.pid)
        before = peak = child.memory_info().rss
        began = time.perf_counter()
        run.command("inspect")
        while session.batch_report is None:
            peak = max(peak, child.memory_info().rss)
            time.sleep(0.005)
        seconds = time.perf_counter() - began
    finally:
        run.close()
    summarised = sum(t["numel"] * 4 for t in session.batch_report.tensors)  # float32
    if summarised != mib * MiB:
        raise SystemExit(f"bench: the inspector summarised {summarised} bytes, not the {mib} MiB batch")
    return {"mib": mib, "seconds": seconds, "extra_peak_mib": (peak - before) / MiB,
            "extra_peak_per_batch": (peak - before) / (mib * MiB)}


def big_batches(steps: int) -> dict[str, Any]:
    print(f"big batches: {steps} steps of a trivial model on {', '.join(map(str, BIG_BATCH_MIB))} MiB batches, "
          "bare and under the agent; the inspector on the largest...", flush=True)
    return {"memory": batch_memory(BIG_BATCH_MIB, steps), "inspector": inspector_cost(max(BIG_BATCH_MIB), steps)}


def print_big_batches(figures: dict[str, Any]) -> None:
    for mib, row in figures["memory"].items():
        print(f"  agent with {mib} MiB batches: +{row['extra_rss_mib']:.0f} MiB RSS over the bare run at the end "
              f"({row['agent_rss_mib']:.0f} vs {row['bare_rss_mib']:.0f} MiB), "
              f"+{row['extra_peak_mib']:.0f} MiB at the peak")
    inspected = figures["inspector"]
    print(f"  inspector on a {inspected['mib']} MiB batch: {inspected['seconds']:.2f} s, peak +"
          f"{inspected['extra_peak_mib']:.0f} MiB RSS ({inspected['extra_peak_per_batch']:.2f}x the batch)")


FIRST_FRAME = """
import time
began = time.perf_counter()
import asyncio
from tuidebug.app import TuidebugApp
from tuidebug.launcher import ChildRun, Target
from tuidebug.session import Session
target = Target(sys.argv[1], [])
app = TuidebugApp(ChildRun(target, Session(target.name, []), {}, capture_output=True))
async def first_frame():
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        print(time.perf_counter() - began)
        app.child.close()
        app.exit()
asyncio.run(first_frame())
"""
VERDICT_EXAMPLES = [
    ("nan_after_warmup.py", ["--sleep", "0"]), ("nan_inputs.py", []), ("nan_log_zero.py", []),
    ("nan_divide_by_zero.py", []), ("nan_rnn_explode.py", []), ("no_grad_reaches_weights.py", []),
    ("healthy_mlp.py", ["--epochs", "3"]),
]


def first_frame(runs: int) -> list[float]:
    """Seconds from a fresh process's first line to the dashboard's first frame."""
    script = ROOT / "assets" / "examples" / "healthy_mlp.py"
    return [float(subprocess.run([sys.executable, "-c", "import sys\n" + FIRST_FRAME, str(script)],
                                 capture_output=True, text=True, timeout=120, check=True).stdout.split()[-1])
            for _ in range(runs)]


def timed(command: list[str], cwd: str) -> tuple[float, str]:
    began = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=cwd)
    return time.perf_counter() - began, result.stdout


def time_to_verdict(runs: int) -> dict[str, dict[str, Any]]:
    """Median wall time of ``tuidebug diagnose`` per example, and of the bare script."""
    figures = {}
    for name, args in VERDICT_EXAMPLES:
        script = str(ROOT / "assets" / "examples" / name)
        with tempfile.TemporaryDirectory(prefix="tuidebug-bench-") as scratch:
            bare = [timed([sys.executable, script, *args], scratch)[0] for _ in range(runs)]
            diagnosed = []
            for _ in range(runs):
                seconds, _ = timed([sys.executable, "-m", "tuidebug", "diagnose", "--json", "report.json", script,
                                    *args], scratch)
                diagnosed.append(seconds)
            report = json.loads((Path(scratch) / "report.json").read_text())
        figures[name] = {"verdict": f"{report['failure_class']}/{report['cause']}",
                         "diagnose_s": statistics.median(diagnosed), "bare_s": statistics.median(bare)}
        print(f"  {name}: {figures[name]['verdict']} in {figures[name]['diagnose_s']:.1f} s", flush=True)
    return figures


def two_ranks(runs: int) -> dict[str, Any]:
    """A 2-rank DDP job (torchrun, gloo) bare and under tuidebug, alternately: rank 0's median step time.
    A job that fails (gloo's rendezvous on a loaded box now and then) is tried again, once."""
    bare, agent, failures = [], [], []
    for _ in range(runs):
        for figures, run in ((bare, _bare_two_ranks), (agent, _agent_two_ranks)):
            for attempt in range(2):
                try:
                    figures.append(run())
                    break
                except (subprocess.CalledProcessError, StopIteration, ValueError) as exc:
                    failures.append(f"{run.__name__} attempt {attempt + 1}: {type(exc).__name__}")
    ratios = [a / b for a, b in zip(agent, bare)]
    return {"ratio": statistics.median(ratios) if ratios else math.nan, "ratios": ratios, "failures": failures,
            "bare_ms": statistics.median(bare) * 1e3 if bare else math.nan,
            "agent_ms": statistics.median(agent) * 1e3 if agent else math.nan}


def _bare_two_ranks() -> float:
    result = subprocess.run([sys.executable, "-m", "torch.distributed.run", *TWO_RANKS, str(DDP_WORKLOAD)],
                            capture_output=True, text=True, timeout=600, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])["median_step"]


def _agent_two_ranks() -> float:
    session = Session(str(DDP_WORKLOAD), [])
    run = ChildRun(Target(str(DDP_WORKLOAD), [], launch=TWO_RANKS), session, default_options(), capture_output=True)
    run.start()
    try:
        run.wait(600)
    finally:
        run.close()
    return json.loads(next(line for line in reversed(session.output) if line.startswith("{")))["median_step"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, help="process groups per model (default: CNN 5, MLP 3)")
    parser.add_argument("--segments", type=int, default=8, help="segments per process and group (default 8)")
    parser.add_argument("--segment-steps", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--long-steps", type=int, default=20_000)
    parser.add_argument("--verdict-runs", type=int, default=3, help="diagnose runs per example (default 3)")
    parser.add_argument("--big-batch-steps", type=int, default=6)
    parser.add_argument("--big-batches-only", action="store_true", help="only the big-batch rows (6.), not saved")
    parser.add_argument("--scale-segments", type=int, default=6, help="segments per process at each scale point")
    parser.add_argument("--scale-only", action="store_true", help="only the scale table (7.), not saved")
    parser.add_argument("--hooks-only", action="store_true", help="only the hooks alone (8.), not saved")
    args = parser.parse_args()
    began = time.perf_counter()
    print(f"tuidebug bench on {platform.machine()} ({psutil.cpu_count()} CPUs), python {platform.python_version()}",
          flush=True)
    if args.big_batches_only:
        batches = big_batches(args.big_batch_steps)
        print("\nresults")
        print_big_batches(batches)
        return
    if args.scale_only:
        rows = scale(args.scale_segments)
        print("\nresults")
        print_scale(rows)
        return
    if args.hooks_only:
        alone = hooks_alone()
        print("\nresults")
        print_hooks_alone(alone)
        return

    groups = {model: args.groups or default for model, default in GROUPS.items()}
    print(f"step time: groups of a bare, a control bare and an agent process ({groups['cnn']} for the CNN, "
          f"{groups['mlp']} for the MLP), taking turns, {args.segments} segments of {args.segment_steps} steps each",
          flush=True)
    with tempfile.TemporaryDirectory(prefix="tuidebug-bench-") as scratch:
        steps = {model: step_time(model, count, args.segments, args.segment_steps, args.warmup, Path(scratch))
                 for model, count in groups.items()}
    print(f"protocol: {args.messages:,} metric messages through the socket into a Session...", flush=True)
    wire = protocol_throughput(args.messages)
    print(f"agent memory: {args.long_steps:,} steps of a tiny model, bare and under the agent...", flush=True)
    memory = agent_memory(args.long_steps, args.long_steps // 10)
    print("first frame: 5 fresh processes...", flush=True)
    frames = first_frame(5)
    print(f"time to verdict: tuidebug diagnose on each example, {args.verdict_runs} runs...", flush=True)
    verdicts = time_to_verdict(args.verdict_runs)
    batches = big_batches(args.big_batch_steps)
    print("two ranks: a 2-rank DDP job under torchrun, bare and under tuidebug, 3 runs each...", flush=True)
    ranks = two_ranks(3)
    print("scale: 10 to 10,000 tensors, 0.3 to 30 ms steps, one group each...", flush=True)
    rows = scale(args.scale_segments)
    print("hooks alone: the agent's hooks installed and removed between segments in one process...", flush=True)
    alone = hooks_alone()

    print("\nresults")
    for model, figures in steps.items():
        print(f"  {model:4} step time ratio (agent / bare): {figures['ratio']:.3f}   (median step "
              f"{figures['agent_ms']:.3f} ms vs {figures['bare_ms']:.3f} ms; mean-step ratio "
              f"{figures['mean_ratio']:.3f}; groups {min(figures['ratios']):.3f}-{max(figures['ratios']):.3f}; "
              f"control bare / bare {figures['control']:.3f})")
    print(f"  protocol: {wire['per_second']:,.0f} metric messages/s sustained "
          f"({wire['messages']:,} in {wire['seconds']:.1f} s)")
    print(f"  TUI side after {wire['messages']:,} messages: +{wire['session_rss_mib']:.1f} MiB RSS "
          f"(+{wire['session_rss_mib_at'].get(str(args.messages // 10), float('nan')):.1f} MiB after "
          f"{args.messages // 10:,}); loss series keeps {wire['recent_points']:,} recent + "
          f"{wire['coarse_points']:,} coarse points")
    print(f"  agent: +{memory['extra_rss_mib']:.1f} MiB RSS over the bare run; growth after warm-up "
          f"{memory['agent_growth_mib_per_1000_steps']:.4f} MiB per 1000 steps "
          f"(bare {memory['bare_growth_mib_per_1000_steps']:.4f}); {memory['steps_received']:,} steps received, "
          f"{memory['dropped']} dropped")
    print(f"  first frame: median {statistics.median(frames):.2f} s (runs {', '.join(f'{f:.2f}' for f in frames)})")
    for name, figures in verdicts.items():
        print(f"  time to verdict {name}: {figures['diagnose_s']:.1f} s ({figures['verdict']}); "
              f"bare script {figures['bare_s']:.1f} s")
    print_big_batches(batches)
    print(f"  two ranks (DDP, gloo): step time ratio {ranks['ratio']:.3f} (rank 0's median step "
          f"{ranks['agent_ms']:.3f} ms vs {ranks['bare_ms']:.3f} ms; runs {', '.join(f'{r:.3f}' for r in ranks['ratios'])}"
          + (f"; failed and retried: {', '.join(ranks['failures'])}" if ranks["failures"] else "") + ")")
    print_scale(rows)
    print_hooks_alone(alone)
    elapsed = time.perf_counter() - began
    print(f"  bench took {elapsed:.0f} s")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"step_time": steps, "protocol": wire, "agent_memory": memory,
                                   "first_frame_s": frames, "time_to_verdict": verdicts, "big_batches": batches, "two_ranks": ranks, "scale": rows,
                                   "hooks_alone": alone,
                                   "seconds": elapsed},
                                  indent=2))


if __name__ == "__main__":
    main()
