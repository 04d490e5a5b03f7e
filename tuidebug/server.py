"""The TUI side of the socket: listen privately, check the handshake, feed the Session.

The socket lives in a fresh 0700 directory. A connection must send a ``Hello`` with the protocol
version and the session token within a few seconds; anything else is rejected, the reason logged
in the session, and the connection closed. One agent per rank: a single process is rank 0; every
worker of a torchrun job connects with its own rank, and commands go to all of them.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import tempfile
import threading

from tuidebug import protocol
from tuidebug.protocol import Command, Hello, Reject, Welcome
from tuidebug.session import Session

HANDSHAKE_SECONDS = 5.0  # for the whole hello, not per read: a peer trickling bytes is dropped too
# Rejected connections logged one by one; past this, only every power of ten, so that a flood of
# them cannot push the run's own events out of the session's bounded log.
LOGGED_REJECTIONS = 20
LISTEN_BACKLOG = 64  # every worker of a job connects at start-up, at once


class SocketFolderError(OSError):
    """The private socket folder cannot be made (a full disk, no usable temporary folder)."""


class AgentServer:
    """Listens on a Unix socket in a fresh 0700 folder; or, with ``tcp=(host, port)`` (``tuidebug
    listen``, for workers another launcher starts), on that TCP address, where the token is the only
    guard: the default host is loopback, reached from other machines through an SSH tunnel."""

    def __init__(self, session: Session, tcp: tuple[str, int] | None = None) -> None:
        self.session = session
        self.token = secrets.token_hex(16)
        try:
            self._dir = tempfile.mkdtemp(prefix="tuidebug-")
        except OSError as exc:  # tempfile writes a probe file first: a full disk fails here
            raise SocketFolderError(f"cannot make the private socket folder: {exc.strerror or exc}") from None
        self.stack_file = os.path.join(self._dir, "stacks.txt")  # where the agent dumps its stacks on SIGUSR1
        self._listener, self.address = self._listen(tcp)
        self._listener.listen(max(4, LISTEN_BACKLOG))
        self._agents: dict[int, socket.socket] = {}  # by rank
        self._send_lock = threading.Lock()
        self._closed = False
        self._readers: list[threading.Thread] = []
        self._rejected = 0

    def _listen(self, tcp: tuple[str, int] | None) -> tuple[socket.socket, str]:
        """The bound listener and the address agents connect to (``tcp:HOST:PORT`` or a socket path)."""
        family = socket.AF_UNIX if tcp is None else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        try:
            if tcp is not None:
                listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                listener.bind(tcp)
                host, port = listener.getsockname()[:2]
                return listener, f"tcp:{host}:{port}"
            path = os.path.join(self._dir, "agent.sock")
            listener.bind(path)
            os.chmod(path, 0o600)
            return listener, path
        except OSError as exc:
            listener.close()
            shutil.rmtree(self._dir, ignore_errors=True)
            where = f"{tcp[0]}:{tcp[1]}" if tcp is not None else self._dir
            raise SocketFolderError(f"cannot listen on {where}: {exc.strerror or exc}") from None

    def start(self) -> None:
        threading.Thread(target=self._accept_loop, name="tuidebug-accept", daemon=True).start()

    @property
    def connected(self) -> bool:
        return bool(self._agents)

    def send(self, command: Command) -> bool:
        """Send a command to every connected agent (every rank); False when none got it."""
        frame, sent = protocol.encode(command), False
        for agent in list(self._agents.values()):
            try:
                with self._send_lock:
                    agent.sendall(frame)
                sent = True
            except OSError:
                pass
        return sent

    def join(self, timeout: float = 5.0) -> None:
        """Wait for the readers to take in everything the agent sent before it closed."""
        for reader in list(self._readers):
            reader.join(timeout)

    def close(self) -> None:
        self._closed = True
        for sock in (*self._agents.values(), self._listener):
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()
        shutil.rmtree(self._dir, ignore_errors=True)

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            reader = threading.Thread(target=self._serve, args=(conn,), name="tuidebug-read", daemon=True)
            self._readers.append(reader)
            reader.start()

    def _serve(self, conn: socket.socket) -> None:
        decoder, pending, rank = protocol.FrameDecoder(), [], None
        try:
            rank = self._handshake(conn, decoder, pending)
            if rank is None:
                return
            while (message := protocol.read_message(conn, decoder, pending)) is not None:
                self.session.ingest_from(rank, message)
        except protocol.ProtocolError as exc:
            self.session.note("error", f"closed the agent connection: {exc}")
        except OSError:
            pass
        except Exception as exc:  # a frame the decoder or the session could not take: log it, never a traceback
            self.session.note("error", f"closed the agent connection: {type(exc).__name__}: {exc}")
        finally:
            if rank is not None and self._agents.get(rank) is conn:
                del self._agents[rank]
                self.session.agent_disconnected(rank)
            conn.close()

    def _handshake(self, conn: socket.socket, decoder: protocol.FrameDecoder, pending: list) -> int | None:
        """The agent's rank once its hello is accepted; None when it was rejected."""
        conn.settimeout(HANDSHAKE_SECONDS)
        expired = threading.Event()
        deadline = threading.Timer(HANDSHAKE_SECONDS, _cut, (conn, expired))
        deadline.start()
        try:
            hello = protocol.read_message(conn, decoder, pending)
        except (protocol.ProtocolError, OSError, ValueError, TypeError) as exc:  # timeouts are OSErrors
            return self._reject(conn, f"bad handshake: {exc}")
        finally:
            deadline.cancel()
        if expired.is_set():
            return self._reject(conn, "bad handshake: timed out")
        if not isinstance(hello, Hello):
            return self._reject(conn, "bad handshake: the first frame is not a hello")
        if hello.version != protocol.PROTOCOL_VERSION:
            return self._reject(conn, f"protocol version {hello.version}, expected {protocol.PROTOCOL_VERSION}")
        if not secrets.compare_digest(hello.token.encode(), self.token.encode()):  # str must be ASCII
            return self._reject(conn, "wrong token")
        if hello.rank in self._agents:
            return self._reject(conn, "an agent is already connected" + (f" for rank {hello.rank}" if hello.rank else ""))
        conn.settimeout(None)
        conn.sendall(protocol.encode(Welcome()))
        self._agents[hello.rank] = conn
        self.session.ingest_from(hello.rank, hello)
        return hello.rank

    def _reject(self, conn: socket.socket, reason: str) -> None:
        self._rejected += 1
        count = self._rejected
        if count <= LOGGED_REJECTIONS:
            self.session.note("rejected", f"rejected a connection: {reason}")
        elif str(count).rstrip("0") == "1":
            self.session.note("rejected", f"rejected {count} connections so far; the latest: {reason}")
        try:
            conn.sendall(protocol.encode(Reject(reason=reason)))
        except OSError:
            pass
        return None


def _cut(conn: socket.socket, expired: threading.Event) -> None:
    """The handshake's time is up: wake the read that waits on it."""
    expired.set()
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
