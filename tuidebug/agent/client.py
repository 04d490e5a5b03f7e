"""The agent's connection to the TUI: one writer thread, one reader thread.

The training thread only appends to bounded queues and never touches the socket. Step records are
coalesced under back-pressure (the oldest is dropped and the drop is counted in the next record
that gets through); events are kept unless their own, larger queue overflows.
"""

from __future__ import annotations

import collections
import itertools
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from tuidebug import protocol
from tuidebug.protocol import Command, Hello, Message, Step

METRIC_QUEUE = 4096
EVENT_QUEUE = 16384
HANDSHAKE_TIMEOUT = 10.0
# Step records wait up to this long and go out together: one writer wake-up per step would cost the
# training thread GIL hand-offs every step. Events and state changes wake the writer at once.
FLUSH_SECONDS = 0.05
THREAD_STACK = 512 * 1024  # the writer and reader only encode and decode small frames


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

    def connect(self, argv: list[str], torch_version: str, resolve: Callable[[Any], Step]) -> None:
        self._resolve = resolve
        sock = socket.socket(socket.AF_UNIX if not _is_tcp(self._address) else socket.AF_INET)
        sock.settimeout(HANDSHAKE_TIMEOUT)
        try:
            sock.connect(_parse_address(self._address))
            sock.sendall(protocol.encode(Hello(
                version=protocol.PROTOCOL_VERSION, token=self._token, pid=os.getpid(), argv=argv,
                python=".".join(map(str, sys.version_info[:3])), torch_version=torch_version,
            )))
            reply = protocol.read_message(sock, protocol.FrameDecoder(), [])
        except (OSError, protocol.ProtocolError) as exc:
            sock.close()
            raise ConnectionRefused(f"cannot reach the tuidebug TUI at {self._address}: {exc}") from None
        if not isinstance(reply, protocol.Welcome):
            sock.close()
            reason = reply.reason if isinstance(reply, protocol.Reject) else "no welcome"
            raise ConnectionRefused(f"the tuidebug TUI refused the agent: {reason}")
        sock.settimeout(None)
        self._sock = sock
        self.connected = True
        os.register_at_fork(after_in_child=self._forget_in_child)
        previous = threading.stack_size(THREAD_STACK)  # small stacks: the run may be under a memory limit
        try:
            for target, name in ((self._write_loop, "tuidebug-writer"), (self._read_loop, "tuidebug-reader")):
                thread = threading.Thread(target=target, name=name, daemon=True)
                thread.start()
                self._threads.append(thread)
        finally:
            threading.stack_size(previous)

    def send(self, message: Message) -> None:
        """Queue a message that must get through (events, state); never blocks the caller."""
        if not self.connected:
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
        if not self.connected:
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
        self._lost()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout=5)

    def _forget_in_child(self) -> None:
        """A forked child (a DataLoader worker) must not hold the connection open, nor use it."""
        self.connected = False
        if self._sock is not None:
            self._sock.close()  # close, never shutdown: the parent's connection lives on

    def _write_loop(self) -> None:
        next_sample = 0.0
        while self.connected:
            with self._wake:
                if not self._events:
                    self._wake.wait(timeout=max(0.0, min(FLUSH_SECONDS, next_sample - time.monotonic())))
            if not self.connected:
                return
            self._busy = True
            batch = []
            while self._events:
                batch.append(self._events.popleft())
            while self._metrics:
                batch.append(self._metrics.popleft())
            batch = [item for _, item in sorted(batch, key=lambda pair: pair[0])]
            if self._sampler and time.monotonic() >= next_sample:
                next_sample = time.monotonic() + 1.0
                batch.extend(self._sampler())
            if not self._write(batch):
                return
            self._busy = False

    def _write(self, batch: list[Message]) -> bool:
        frames = []
        for message in batch:
            try:
                if not isinstance(message, Message):
                    message = self._resolve(message)
                    message.dropped, self._dropped = self._dropped, 0
                frames.append(protocol.encode(message))
            except MemoryError:  # the script ran the process out of memory: drop this one, keep the channel
                self._dropped += 1
        try:
            if frames and self._sock is not None:
                self._sock.sendall(b"".join(frames))
        except OSError:
            self._lost()
            return False
        return True

    def _read_loop(self) -> None:
        decoder, pending = protocol.FrameDecoder(), []
        try:
            while True:
                message = protocol.read_message(self._sock, decoder, pending)
                if message is None:
                    break
                if isinstance(message, Command) and message.name in self.immediate:
                    self.immediate[message.name](message.args)
                elif isinstance(message, Command):
                    self.post_local(message)
        except (OSError, protocol.ProtocolError):
            pass
        self._lost()

    def _lost(self) -> None:
        with self._lost_lock:
            if not self.connected:
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
        if self.on_disconnect is not None:
            self.on_disconnect()


def _is_tcp(address: str) -> bool:
    return address.startswith("tcp:")


def _parse_address(address: str) -> Any:
    if _is_tcp(address):
        host, _, port = address[4:].rpartition(":")
        return host, int(port)
    return address
