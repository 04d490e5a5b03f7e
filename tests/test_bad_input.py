"""Bad input: a one-line error and the right exit code from the real ``tuidebug`` command, rejected
and logged connections on a real socket, and no process left behind however the run ends."""

from __future__ import annotations

import os
import select
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import msgpack
import psutil
import pytest

from conftest import SCRIPTS, tuidebug_command, wait_for
from tuidebug import protocol, server as server_module
from tuidebug.protocol import HEADER, Command, FrameDecoder, Hello, Reject, Welcome
from tuidebug.server import AgentServer
from tuidebug.session import Session

USAGE_ERROR = 2


def tuidebug(*args: str, cwd: Path = SCRIPTS) -> subprocess.CompletedProcess:
    return subprocess.run([*tuidebug_command(), *args], cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=120)


def own_lines(stderr: str) -> list[str]:
    """stderr without the headless status lines."""
    return [line for line in stderr.splitlines() if not line.startswith("[tuidebug]")]


# --- the command line -----------------------------------------------------------------------

@pytest.fixture
def broken(tmp_path: Path) -> Path:
    (tmp_path / "syntax.py").write_text("import torch\ndef train(:\n    pass\n")
    (tmp_path / "nul.py").write_bytes(b"print('a')\x00\n")
    (tmp_path / "folder").mkdir()
    return tmp_path


@pytest.mark.parametrize("headless", [False, True], ids=["tui", "headless"])
@pytest.mark.parametrize(("args", "message"), [
    pytest.param([], "no script given", id="no-script"),
    pytest.param(["missing.py"], "no such script: missing.py", id="missing-script"),
    pytest.param(["folder"], "folder is a directory, not a script", id="directory"),
    pytest.param(["syntax.py", "--epochs", "2"], "syntax error in syntax.py line 2: invalid syntax", id="syntax-error"),
    pytest.param(["nul.py"], "syntax error in nul.py: source code string cannot contain null bytes",
                 id="null-bytes"),
    pytest.param(["--bogus", "syntax.py"], "unrecognized arguments: --bogus", id="unknown-option"),
    pytest.param(["--print-every", "often", "x.py"], "argument --print-every: not a whole number", id="bad-value"),
    pytest.param(["--norm-stride", "-1", "x.py"], "argument --norm-stride: must not be negative", id="negative"),
    pytest.param(["-m"], "argument -m: expected one argument", id="dash-m-alone"),
])
def test_usage_errors_are_one_line_with_exit_code_2(broken: Path, headless: bool, args: list[str],
                                                     message: str) -> None:
    result = tuidebug(*(["--headless"] if headless else []), *args, cwd=broken)

    assert result.returncode == USAGE_ERROR
    assert result.stderr.splitlines() == [result.stderr.strip()]
    assert result.stderr.startswith("tuidebug: error: ") and message in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("module", ["no_such_module_xyz", "pat_pkg.no_such_module", "pat_pkg"])
def test_a_module_that_cannot_be_found_is_one_line_with_exit_code_2(module: str) -> None:
    result = tuidebug("--headless", "-m", module)

    assert result.returncode == USAGE_ERROR
    (line,) = own_lines(result.stderr)
    assert line.startswith("tuidebug: error: No module named ")
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("source", [
    pytest.param("import no_such_dependency_xyz\n", id="import-error"),
    pytest.param("import torch\n\ndef load():\n    return {}['weights']\n\nmodel = load()\n", id="raises-at-import"),
    pytest.param("import sys\nsys.exit('config file missing')\n", id="exit-with-message"),
    pytest.param("import sys\nprint('partial', flush=True)\nsys.exit(5)\n", id="exit-code"),
    pytest.param("raise KeyboardInterrupt\n", id="keyboard-interrupt"),
])
def test_the_scripts_own_failure_reads_as_under_python(tmp_path: Path, source: str) -> None:
    script = tmp_path / "train.py"
    script.write_text(source)
    plain = subprocess.run([sys.executable, "train.py"], cwd=tmp_path, capture_output=True, text=True, timeout=60)

    result = tuidebug("--headless", "train.py", cwd=tmp_path)

    assert result.stdout == plain.stdout
    assert own_lines(result.stderr) == plain.stderr.splitlines()  # the script's traceback, none of ours
    assert "tuidebug/" not in result.stderr and "runpy" not in result.stderr
    expected = 130 if plain.returncode == -signal.SIGINT else plain.returncode
    assert result.returncode == expected and expected != 0


# --- the socket -----------------------------------------------------------------------------

@pytest.fixture
def thread_errors(monkeypatch: pytest.MonkeyPatch) -> list[threading.ExceptHookArgs]:
    """Exceptions that escaped a thread: the server must never let one out."""
    errors: list[threading.ExceptHookArgs] = []
    monkeypatch.setattr(threading, "excepthook", errors.append)
    return errors


@pytest.fixture
def server(thread_errors: list) -> Iterator[AgentServer]:
    agent_server = AgentServer(Session("train.py", []))
    agent_server.start()
    yield agent_server
    agent_server.close()
    assert not thread_errors, [f"{e.exc_type.__name__}: {e.exc_value}" for e in thread_errors]


def connect(agent_server: AgentServer) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.connect(agent_server.address)
    return sock


def hello(token: str, version: int = protocol.PROTOCOL_VERSION) -> bytes:
    return protocol.encode(Hello(version=version, token=token, pid=os.getpid(), argv=["train.py"], python="3.11",
                                 torch_version="2.13"))


def reply(sock: socket.socket) -> protocol.Message | None:
    try:
        return protocol.read_message(sock, FrameDecoder(), [])
    except OSError:
        return None


def logged(agent_server: AgentServer, kind: str) -> list[str]:
    return [e.message for e in list(agent_server.session.events) if e.kind == kind]


def frame(body: object) -> bytes:
    payload = msgpack.packb(body, use_bin_type=True)
    return HEADER.pack(len(payload)) + payload


@pytest.mark.parametrize(("data", "reason"), [
    pytest.param(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "bad handshake: frame of 1195725856 bytes exceeds",
                 id="http-request"),
    pytest.param(HEADER.pack(protocol.MAX_FRAME_BYTES + 1), "exceeds", id="oversized-frame"),
    pytest.param(HEADER.pack(1) + b"\xc1", "bad handshake: undecodable frame", id="undecodable"),
    pytest.param(frame({"t": [1]}), "bad handshake", id="unhashable-type"),
    pytest.param(protocol.encode(Command(name="pause")), "the first frame is not a hello", id="not-a-hello"),
    pytest.param(hello("0" * 32), "wrong token", id="wrong-token"),
    pytest.param(hello("jeton-ü" * 4), "wrong token", id="non-ascii-token"),
    pytest.param(hello("", version=99), "protocol version 99, expected", id="wrong-version"),
    pytest.param(b"", "the first frame is not a hello", id="closes-at-once"),
])
@pytest.mark.fault('the socket: a bad client ({id})',
                   'rejected with the reason logged, the session unharmed')
def test_a_bad_client_is_rejected_and_logged(server: AgentServer, data: bytes, reason: str) -> None:
    sock = connect(server)
    sock.sendall(data)
    if not data:
        sock.shutdown(socket.SHUT_WR)

    wait_for(lambda: logged(server, "rejected"), 10, "the rejection")
    (message,) = logged(server, "rejected")
    assert reason in message
    answer = reply(sock)
    assert answer is None or (isinstance(answer, Reject) and reason in f"rejected a connection: {answer.reason}")
    assert not server.connected and server.session.hello is None
    sock.close()


@pytest.mark.fault('the socket: a second agent, after bad clients',
                   'the right token is welcome, a second agent is refused')
def test_the_right_token_is_welcome_after_bad_clients(server: AgentServer) -> None:
    for data in (b"\x00\x00\x00\x02\xc1\xc1", hello("wrong")):
        bad = connect(server)
        bad.sendall(data)
        bad.close()
    wait_for(lambda: len(logged(server, "rejected")) == 2, 10, "both rejections")

    good = connect(server)
    good.sendall(hello(server.token))
    assert isinstance(reply(good), Welcome)
    wait_for(lambda: server.connected, 10, "the agent to count as connected")
    second = connect(server)
    second.sendall(hello(server.token))
    assert isinstance(reply(second), Reject)
    wait_for(lambda: any("already connected" in m for m in logged(server, "rejected")), 10, "the second agent's rejection")
    good.close()
    second.close()


@pytest.mark.fault('the socket: a client that connects and says nothing',
                   'dropped after the handshake time')
def test_a_silent_client_is_dropped_after_the_handshake_time(server: AgentServer,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server_module, "HANDSHAKE_SECONDS", 0.3)
    sock = connect(server)

    wait_for(lambda: logged(server, "rejected"), 10, "the handshake timeout")
    assert logged(server, "rejected") == ["rejected a connection: bad handshake: timed out"]
    sock.close()


@pytest.mark.parametrize(("data", "reason"), [
    pytest.param(HEADER.pack(protocol.MAX_FRAME_BYTES + 1) + b"x" * 100, "exceeds", id="oversized-frame"),
    pytest.param(HEADER.pack(3) + b"\x92\x01\x02", "frame is not a map", id="not-a-map"),
    pytest.param(frame({"t": [1]}), "closed the agent connection", id="unhashable-type"),
    pytest.param(frame({"t": "step", "step": "one", "time": 0.0}), "field step has type str", id="wrong-field-type"),
])
@pytest.mark.fault('the socket: garbage after the handshake ({id})',
                   'the connection cut, the reason logged')
def test_a_connected_agent_that_sends_garbage_is_cut_off_and_logged(server: AgentServer, data: bytes,
                                                                      reason: str) -> None:
    sock = connect(server)
    sock.sendall(hello(server.token))
    assert isinstance(reply(sock), Welcome)
    sock.sendall(protocol.encode(protocol.State(state="running", step=0)))
    wait_for(lambda: server.session.state == "running", 10, "the state before the garbage")
    sock.sendall(data)

    wait_for(lambda: logged(server, "error") and logged(server, "disconnected"), 10, "the cut-off")
    (message,) = logged(server, "error")
    assert reason in message
    assert reply(sock) is None
    assert not server.connected
    sock.close()


@pytest.mark.fault("the socket's permissions",
                   'folder 0700, socket 0600, a 128-bit token')
@pytest.mark.fault('the socket: a slow sender that never finishes its hello',
                   'dropped at the handshake deadline, not per read')
def test_a_client_that_trickles_its_hello_is_dropped_at_the_deadline(server: AgentServer,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server_module, "HANDSHAKE_SECONDS", 0.5)
    sock = connect(server)
    started = time.monotonic()
    for byte in hello(server.token)[:12]:  # one byte every 0.1 s: each read is quick, the whole is not
        try:
            sock.sendall(bytes([byte]))
        except OSError:
            break
        time.sleep(0.1)

    wait_for(lambda: logged(server, "rejected"), 10, "the handshake deadline")
    assert logged(server, "rejected") == ["rejected a connection: bad handshake: timed out"]
    assert time.monotonic() - started < 3
    sock.close()


@pytest.mark.fault('the socket: 300 bad connections',
                   "the first 20 logged, then a count; the run's events kept")
def test_a_flood_of_bad_connections_does_not_push_out_the_runs_events(server: AgentServer) -> None:
    server.session.note("model", "the run's own event")
    for _ in range(300):
        sock = connect(server)
        sock.sendall(hello("wrong"))
        reply(sock)
        sock.close()
    wait_for(lambda: any("rejected 100 connections" in m for m in logged(server, "rejected")), 10, "the count")

    assert len(logged(server, "rejected")) == server_module.LOGGED_REJECTIONS + 1
    assert logged(server, "model") == ["the run's own event"]


def test_the_socket_is_private(server: AgentServer) -> None:
    assert stat.S_IMODE(os.stat(os.path.dirname(server.address)).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(server.address).st_mode) == 0o600
    assert len(server.token) >= 32


# --- no orphans -----------------------------------------------------------------------------

def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def start_headless(*options: str, sigint_ignored: bool = False) -> tuple[subprocess.Popen, int, int]:
    """tuidebug --headless on a long run; the script's pid and that of a process it started. With
    ``sigint_ignored``, started as `&` in a script starts it: SIGINT ignored, inherited."""
    process = subprocess.Popen(
        [*tuidebug_command(), "--headless", *options, "pat_steps.py", "--steps", "3000", "--sleep", "0.01",
         "--helper"], cwd=SCRIPTS, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored else None)
    ready, _, _ = select.select([process.stdout], [], [], 60)
    line = process.stdout.readline() if ready else ""
    assert line.startswith("pids "), line or "no pids line within 60 s"
    script, helper = map(int, line.split()[1:])
    return process, script, helper


def finish(process: subprocess.Popen, *pids: int) -> tuple[int, str]:
    """Wait for tuidebug to exit; kill anything left so that a failing test leaves nothing behind."""
    try:
        _, stderr = process.communicate(timeout=30)
    finally:
        process.kill()
        for pid in pids:
            if not gone(pid):
                os.kill(pid, signal.SIGKILL)
    return process.returncode, stderr


@pytest.mark.fault("tuidebug stopped: {id}", "the script and what it started stop within 30 s; the summary printed")
@pytest.mark.parametrize(("signum", "exit_code"), [
    pytest.param(signal.SIGTERM, 128 + signal.SIGTERM, id="sigterm"),
    pytest.param(signal.SIGHUP, 128 + signal.SIGTERM, id="sighup"),
    pytest.param(signal.SIGINT, 130, id="ctrl-c"),
])
def test_stopping_tuidebug_stops_the_script_and_what_it_started(signum: int, exit_code: int) -> None:
    process, script, helper = start_headless(sigint_ignored=signum == signal.SIGINT)

    process.send_signal(signum)
    wait_for(lambda: gone(script) and gone(helper), 30, "the script and its helper to stop")

    code, stderr = finish(process, script, helper)
    assert code == exit_code
    assert "[tuidebug] summary:" in stderr


@pytest.mark.fault('tuidebug killed (SIGKILL) with `--stop-on-disconnect`',
                   'the script notices and stops')
def test_when_tuidebug_dies_the_script_stops_itself_with_stop_on_disconnect() -> None:
    process, script, helper = start_headless("--stop-on-disconnect", sigint_ignored=True)

    process.kill()
    wait_for(lambda: gone(script), 30, "the script to notice and stop")

    finish(process, script, helper)


@pytest.mark.fault('a normal end',
                   'exit 0, the script gone')
def test_after_a_normal_end_nothing_is_left(tmp_path: Path) -> None:
    result = subprocess.Popen([*tuidebug_command(), "--headless", "pat_steps.py", "--steps", "3", "--helper"],
                              cwd=SCRIPTS, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    stdout, _ = result.communicate(timeout=120)
    script, helper = map(int, stdout.splitlines()[0].split()[1:])

    assert result.returncode == 0
    assert gone(script)
    os.kill(helper, signal.SIGKILL)  # the script's own helper outlives it, as under plain python
