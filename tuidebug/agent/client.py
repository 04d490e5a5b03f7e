"""The agent's connection to the TUI: one writer thread, one reader thread.

The training thread only appends to bounded queues and never touches the socket. Step records are
coalesced under back-pressure (the oldest is dropped and the drop is counted in the next record
that gets through); events are kept unless their own, larger queue overflows.
"""

from __future__ import annotations

import collections
import itertools
import os
import shutil
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from tuidebug import protocol
from tuidebug.protocol import Command, Device, Event, Hello, Memory, Message, ProbeResult, State, Step

METRIC_QUEUE = 4096
EVENT_QUEUE = 16384
HANDSHAKE_TIMEOUT = 10.0
# Step records wait up to this long and go out together: one writer wake-up per step would cost the
# training thread GIL hand-offs every step. Events and state changes wake the writer at once.
FLUSH_SECONDS = 0.05
THREAD_STACK = 512 * 1024  # the writer and reader only encode and decode small frames
# What a screen that attaches later sees of the past, by message: the charts' recent history (a few
# thousand points, more than a chart of a terminal's width can show; memory is read once a second),
# and the events, states and probe results. Progress and batch reports are transient.
HISTORY = {Step: 4096, Memory: 600, Event: 1024, State: 64, Device: 4, ProbeResult: 256}


class ConnectionRefused(Exception):
    """The TUI could not be reached or turned the handshake down."""


class AgentClient:
    def __init__(self, address: str, token: str, sampler: Callable[[], list[Message]] | None = None):
        self._address = address
        self._token = token
        self._sampler = sampler
        self._sock: socket.socket | None = None
        self._metrics: collections.deque[Any] = collections.deque()
        self._events: collections.deque[Message] = collections.deque()
        self._dropped = 0
        self._wake = threading.Condition()
        self._commands: collections.deque[Command] = collections.deque()
        self._command_ready = threading.Condition()
        self.connected = False
        self.on_disconnect: Callable[[], None] | None = None
        # Commands handled at once on the reader thread: cancelling a probe can't wait for a safe point.
        self.immediate: dict[str, Callable[[dict], None]] = {}
        self._resolve: Callable[[Any], Step] = lambda record: record
        self._lost_lock = threading.Lock()
        self._busy = False
        self._sequence = itertools.count()  # keeps events and steps in the order they happened
        self._threads: list[threading.Thread] = []
        self._hello: dict[str, Any] = {}
        # Set for a run a later screen may attach to: while no screen is connected, steps are still
        # resolved and events still kept, and what was sent last is replayed to the next screen.
        self.reattachable = False
        self._sent: dict[type, collections.deque[tuple[int, Message]]] = {
            kind: collections.deque(maxlen=length) for kind, length in HISTORY.items()}
        self._replay: list[Message] = []

    def connect(self, argv: list[str], torch_version: str, resolve: Callable[[Any], Step]) -> None:
        self._resolve = resolve
        self._hello = dict(pid=os.getpid(), argv=argv, python=".".join(map(str, sys.version_info[:3])),
                           torch_version=torch_version, rank=_env_int("RANK", 0), world_size=_env_int("WORLD_SIZE", 1))
        self._sock = self._handshake(self._address, self._token)
        self.connected = True
        os.register_at_fork(after_in_child=self._forget_in_child)
        self._start_threads()

    def reconnect(self, address: str, token: str) -> None:
        """Connect to a new screen (``tuidebug attach``) after the first one went away; it first gets
        the recent history, then what happened while nobody watched. Raises ConnectionRefused."""
        sock = self._handshake(address, token)
        self._address = address
        with self._wake:
            kept = [pair for sent in self._sent.values() for pair in sent]
            self._replay = [message for _, message in sorted(kept, key=lambda pair: pair[0])]
            self._sock = sock
            self.connected = True
            self._wake.notify()
        self._start_threads()

    def _handshake(self, address: str, token: str) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX if not _is_tcp(address) else socket.AF_INET)
        sock.settimeout(HANDSHAKE_TIMEOUT)
        try:
            sock.connect(_parse_address(address))
            sock.sendall(protocol.encode(Hello(version=protocol.PROTOCOL_VERSION, token=token, **self._hello)))
            reply = protocol.read_message(sock, protocol.FrameDecoder(), [])
        except (OSError, protocol.ProtocolError) as exc:
            sock.close()
            raise ConnectionRefused(f"cannot reach the tuidebug TUI at {address}: {exc}") from None
        if not isinstance(reply, protocol.Welcome):
            sock.close()
            reason = reply.reason if isinstance(reply, protocol.Reject) else "no welcome"
            raise ConnectionRefused(f"the tuidebug TUI refused the agent: {reason}")
        sock.settimeout(None)
        return sock

    def _start_threads(self) -> None:
        """The reader always; the writer unless it is still running (it resolves steps while detached)."""
        self._threads = [thread for thread in self._threads if thread.is_alive()]
        loops = [(self._read_loop, "tuidebug-reader")]
        if not any(thread.name == "tuidebug-writer" for thread in self._threads):
            loops.append((self._write_loop, "tuidebug-writer"))
        previous = threading.stack_size(THREAD_STACK)  # small stacks: the run may be under a memory limit
        try:
            for target, name in loops:
                thread = threading.Thread(target=target, name=name, daemon=True)
                thread.start()
                self._threads.append(thread)
        finally:
            threading.stack_size(previous)

    def send(self, message: Message) -> None:
        """Queue a message that must get through (events, state); never blocks the caller."""
        if not self.connected and not self.reattachable:
            return
        if len(self._events) < EVENT_QUEUE:
            self._events.append((next(self._sequence), message))
        else:
            self._dropped += 1
        with self._wake:
            self._wake.notify()

    def send_metric(self, record: Any) -> None:
        """Queue a per-step record; under back-pressure the oldest queued one is dropped and counted.

        ``record`` is turned into a Step message on the writer thread (see ``connect``'s
        ``resolve``), so reading tensor values never blocks training.
        """
        if not self.connected and not self.reattachable:
            return
        if len(self._metrics) >= METRIC_QUEUE:
            self._metrics.popleft()
            self._dropped += 1
        self._metrics.append((next(self._sequence), record))  # the writer takes it within FLUSH_SECONDS

    def next_command(self, timeout: float | None = None) -> Command | None:
        """Pop the next command; with a timeout, wait for one that long."""
        if self._commands:
            return self._commands.popleft()
        if timeout is None:
            return None
        with self._command_ready:
            self._command_ready.wait_for(lambda: self._commands or not self.connected, timeout)
        return self._commands.popleft() if self._commands else None

    def post_local(self, command: Command) -> None:
        """Queue a command from inside the agent (a probe's hand-off), as if the TUI had sent it."""
        self._commands.append(command)
        with self._command_ready:
            self._command_ready.notify_all()

    def has_commands(self) -> bool:
        return bool(self._commands)

    def flush(self, timeout: float = 5.0) -> None:
        """Wait until the queues are written out, or the connection is gone, or the time is up."""
        deadline = time.monotonic() + timeout
        while self.connected and (self._metrics or self._events or self._busy) and time.monotonic() < deadline:
            with self._wake:
                self._wake.notify()
            time.sleep(0.01)

    def close(self) -> None:
        """Flush, disconnect, and let the threads end: a daemon thread that still drops tensors while
        the interpreter shuts down aborts the process ("terminate called without an active exception")."""
        self.flush()
        self.reattachable = False
        self._lost()
        with self._wake:
            self._wake.notify_all()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout=5)

    def _forget_in_child(self) -> None:
        """A forked child (a DataLoader worker) must not hold the connection open, nor use it."""
        self.connected = self.reattachable = False
        if self._sock is not None:
            self._sock.close()  # close, never shutdown: the parent's connection lives on

    def _write_loop(self) -> None:
        next_sample = 0.0
        while self.connected or self.reattachable:
            with self._wake:
                if not self._events:
                    self._wake.wait(timeout=max(0.0, min(FLUSH_SECONDS, next_sample - time.monotonic())))
            if not (self.connected or self.reattachable):
                return
            self._busy = True
            batch = []
            while self._events:
                batch.append(self._events.popleft())
            while self._metrics:
                batch.append(self._metrics.popleft())
            batch.sort(key=lambda pair: pair[0])
            if self._sampler and time.monotonic() >= next_sample:
                next_sample = time.monotonic() + 1.0
                batch.extend((next(self._sequence), message) for message in self._sampler())
            self._write(batch)
            self._busy = False

    def _write(self, batch: list[tuple[int, Any]]) -> None:
        frames = [protocol.encode(message) for message in self._take_replay()]
        for sequence, message in batch:
            try:
                if not isinstance(message, Message):
                    message = self._resolve(message)
                    message.dropped, self._dropped = self._dropped, 0
                if self.reattachable:
                    self._remember(sequence, message)
                frames.append(protocol.encode(message))
            except MemoryError:  # the script ran the process out of memory: drop this one, keep the channel
                self._dropped += 1
        sock = self._sock
        try:
            if frames and self.connected and sock is not None:
                sock.sendall(b"".join(frames))
        except OSError:
            self._lost(sock)

    def _remember(self, sequence: int, message: Message) -> None:
        sent = self._sent.get(type(message))
        if sent is not None:
            sent.append((sequence, message))

    def _take_replay(self) -> list[Message]:
        with self._wake:
            replay, self._replay = self._replay, []
        return replay

    def _read_loop(self) -> None:
        decoder, pending, sock = protocol.FrameDecoder(), [], self._sock
        try:
            while True:
                message = protocol.read_message(sock, decoder, pending)
                if message is None:
                    break
                if isinstance(message, Command) and message.name in self.immediate:
                    self.immediate[message.name](message.args)
                elif isinstance(message, Command):
                    self.post_local(message)
        except (OSError, protocol.ProtocolError):
            pass
        self._lost(sock)

    def _lost(self, sock: socket.socket | None = None) -> None:
        """The connection ended; ``sock``, when given, is the one that failed (a stale reader of an
        earlier connection must not cut the one a later screen made)."""
        with self._lost_lock:
            if not self.connected or (sock is not None and sock is not self._sock):
                return
            self.connected = False
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._sock.close()
        with self._command_ready:
            self._command_ready.notify_all()
        with self._wake:
            self._wake.notify_all()
        if self.reattachable or sock is not None:  # the screen went away, not closed by the script's end
            _remove_private_folder(self._address)
        if self.on_disconnect is not None:
            self.on_disconnect()


def _env_int(name: str, default: int) -> int:
    """torchrun's RANK and WORLD_SIZE, as every worker has them before it starts."""
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


def _remove_private_folder(address: str) -> None:
    """A screen that was killed (SIGKILL) could not remove its private socket folder: its run does."""
    folder = os.path.dirname(address)
    if not _is_tcp(address) and os.path.basename(folder).startswith("tuidebug-") and os.path.isdir(folder):
        shutil.rmtree(folder, ignore_errors=True)


def _is_tcp(address: str) -> bool:
    return address.startswith("tcp:")


def _parse_address(address: str) -> Any:
    if _is_tcp(address):
        host, _, port = address[4:].rpartition(":")
        return host, int(port)
    return address
