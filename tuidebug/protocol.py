"""The wire protocol between the TUI and the agent in the training process.

A frame is a 4-byte big-endian length followed by a msgpack map. Every map carries its message
type under ``"t"``; the other keys are the fields of one of the dataclasses below, the only
place where messages are defined. Nothing on the wire is ever unpickled.

The agent speaks first: a ``Hello`` with the protocol version and the session token. The TUI
answers ``Welcome`` or ``Reject`` and closes.
"""

from __future__ import annotations

import dataclasses
import struct
from dataclasses import dataclass, field
from typing import Any, ClassVar

import msgpack

PROTOCOL_VERSION = 1
MAX_FRAME_BYTES = 8 * 1024 * 1024
HEADER = struct.Struct(">I")

ENV_ADDRESS = "TUIDEBUG_ADDRESS"
ENV_TOKEN = "TUIDEBUG_TOKEN"
ENV_CONFIG = "TUIDEBUG_CONFIG"

# Written by the agent on the script's own stdout, each on a line of its own, around the iterations
# a probe borrows from the script's loop: in the output stream itself, so that they stay in order with
# the lines printed between them (the socket and the pipe give no order between each other). OSC
# sequences no terminal acts on, should one reach a terminal.
PROBE_OUTPUT_BEGINS = "\x1b]777;tuidebug-probe-output;begin\x07"
PROBE_OUTPUT_ENDS = "\x1b]777;tuidebug-probe-output;end\x07"


class ProtocolError(Exception):
    """A frame that cannot be accepted: oversized, malformed, or of an unknown shape."""


@dataclass
class Message:
    TYPE: ClassVar[str] = ""


@dataclass
class Hello(Message):
    """First frame from the agent."""

    TYPE: ClassVar[str] = "hello"
    version: int
    token: str
    pid: int
    argv: list[str]
    python: str
    torch_version: str
    rank: int = 0  # in a torchrun job, the worker's RANK and WORLD_SIZE; one process is rank 0 of 1
    world_size: int = 1


@dataclass
class Welcome(Message):
    TYPE: ClassVar[str] = "welcome"


@dataclass
class Reject(Message):
    TYPE: ClassVar[str] = "reject"
    reason: str


@dataclass
class Device(Message):
    """What the training process computes on; sent once CUDA is known to be in use, or at start."""

    TYPE: ClassVar[str] = "device"
    kind: str  # "cuda" or "cpu"
    name: str
    total_bytes: int | None = None


@dataclass
class Step(Message):
    """One optimizer step, as seen by the hooks."""

    TYPE: ClassVar[str] = "step"
    step: int
    time: float
    loss: float | None = None
    backward_calls: int = 0
    grad_norm: float | None = None
    # The script clipped its gradients (clip_grad_norm_): the norm it returned, before clipping (what
    # the user means by "the gradient norm"; grad_norm is the one the optimizer applied), and the threshold.
    norm_before_clip: float | None = None
    clip_at: float | None = None
    lrs: list[float] = field(default_factory=list)
    step_seconds: float | None = None
    batch_size: int | None = None
    epoch: int | None = None
    cuda_allocated: int | None = None
    skipped: bool = False
    layer_norms: dict[str, float] | None = None
    dropped: int = 0
    # Where the run is: the batch of the DataLoader's pass and the pass's length, and the run's length
    # in steps where the script states it (Lightning's max_epochs/max_steps, OneCycleLR's total_steps).
    epoch_batch: int | None = None
    epoch_batches: int | None = None
    planned_steps: int | None = None
    # From the previous step's end to this step's first backward: loading the batch and the forward,
    # the part of a step that DDP's gradient all-reduce does not equalise across ranks.
    compute_seconds: float | None = None
    # The gradient norms were taken every k-th step (their cost was over the agent's budget on short
    # steps): grad_norm is None on the steps between; the loss is still checked at every step.
    norm_every: int = 1
    # The sampled checks (the loss input's range, stale gradients, kept graphs...) ran every k-th step
    # only, k stretched past its default on very short steps (agent/check_schedule.py); None: the default.
    check_every: int | None = None


@dataclass
class Memory(Message):
    """A periodic memory reading. Fields a machine cannot read stay None."""

    TYPE: ClassVar[str] = "memory"
    time: float
    rss: int
    cuda_allocated: int | None = None
    cuda_reserved: int | None = None
    cuda_peak: int | None = None
    nvml_used: int | None = None
    nvml_total: int | None = None
    # How busy the device is, in percent: the GPU's utilisation from NVML on a GPU, the process's CPU
    # use on a CPU (100 a core, so up to 100 x cores).
    gpu_percent: int | None = None
    cpu_percent: float | None = None


@dataclass
class Event(Message):
    """Something worth a line in the event log."""

    TYPE: ClassVar[str] = "event"
    kind: str
    message: str
    time: float
    step: int | None = None
    details: list[str] = field(default_factory=list)


@dataclass
class State(Message):
    """The training thread's state: running, paused (with where and why), or ended."""

    TYPE: ClassVar[str] = "state"
    state: str
    step: int
    reason: str = ""
    where: str = ""


@dataclass
class Command(Message):
    """An instruction from the TUI, executed by the training thread at its next safe point."""

    TYPE: ClassVar[str] = "command"
    name: str
    args: dict[str, Any] = field(default_factory=dict)


@dataclass
class ProbeProgress(Message):
    """A running probe's progress, for the progress bar."""

    TYPE: ClassVar[str] = "probe_progress"
    run_id: int
    probe: str
    fraction: float
    text: str = ""


@dataclass
class ProbeResult(Message):
    """What a probe found. ``method`` says how it ran the pipeline (replay, observed copy, watch API)."""

    TYPE: ClassVar[str] = "probe_result"
    run_id: int
    probe: str
    status: str  # pass, fail, inconclusive, cancelled, error
    summary: str
    evidence: list[str] = field(default_factory=list)
    fix: str = ""
    method: str = ""
    curve: list[float] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class BatchReport(Message):
    """The batch inspector's figures for one captured batch: one dict per tensor (see probes.batch)."""

    TYPE: ClassVar[str] = "batch_report"
    step: int | None
    available: list[int]
    tensors: list[dict[str, Any]] = field(default_factory=list)
    note: str = ""


MESSAGE_TYPES: dict[str, type[Message]] = {
    cls.TYPE: cls
    for cls in (Hello, Welcome, Reject, Device, Step, Memory, Event, State, Command,
                ProbeProgress, ProbeResult, BatchReport)
}
_WIRE_TYPES = {"int": (int,), "float": (float, int), "str": (str,), "bool": (bool,), "None": (type(None),),
               "list": (list,), "dict": (dict,), "Any": (object,)}


def _accepted_types(annotation: str) -> tuple[type, ...]:
    """The Python types a field may hold on the wire, from its annotation ("float | None")."""
    names = [part.strip().split("[")[0] for part in annotation.split("|")]
    return tuple(t for name in names for t in _WIRE_TYPES[name])


_FIELDS = {
    cls: {f.name: _accepted_types(f.type) for f in dataclasses.fields(cls)}
    for cls in MESSAGE_TYPES.values()
}


def encode(message: Message) -> bytes:
    """One complete frame for ``message``."""
    body = {"t": message.TYPE}
    body.update(message.__dict__)
    payload = msgpack.packb(body, use_bin_type=True)
    if len(payload) > MAX_FRAME_BYTES:
        raise ProtocolError(f"{message.TYPE} frame of {len(payload)} bytes exceeds {MAX_FRAME_BYTES}")
    return HEADER.pack(len(payload)) + payload


def decode_payload(payload: bytes) -> Message:
    """The message in one frame's payload; ProtocolError for anything else."""
    try:
        body = msgpack.unpackb(payload, raw=False, strict_map_key=True)
    except Exception as exc:  # msgpack raises several unrelated types for bad bytes
        raise ProtocolError(f"undecodable frame: {exc}") from None
    if not isinstance(body, dict):
        raise ProtocolError("frame is not a map")
    if not all(isinstance(key, str) for key in body):
        raise ProtocolError("frame has a key that is not a string")
    kind = body.pop("t", None)
    cls = MESSAGE_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ProtocolError("frame has no known message type")
    fields = _FIELDS[cls]
    unknown = set(body) - set(fields)
    if unknown:
        raise ProtocolError(f"{cls.TYPE} frame has unknown fields {sorted(unknown)}")
    for name, value in body.items():
        if not isinstance(value, fields[name]):
            raise ProtocolError(f"{cls.TYPE} frame: field {name} has type {type(value).__name__}")
    try:
        return cls(**body)
    except TypeError as exc:
        raise ProtocolError(f"{cls.TYPE} frame: {exc}") from None


class FrameDecoder:
    """Splits a byte stream into messages. Once it fails, the stream cannot be resynchronised: the
    messages decoded before a bad frame are returned, and the error is raised by the next call."""

    def __init__(self, max_frame: int = MAX_FRAME_BYTES) -> None:
        self._buffer = bytearray()
        self._max_frame = max_frame
        self._error: ProtocolError | None = None

    def feed(self, data: bytes) -> list[Message]:
        if self._error is not None:
            raise self._error
        self._buffer += data
        messages: list[Message] = []
        try:
            while len(self._buffer) >= HEADER.size:
                (length,) = HEADER.unpack_from(self._buffer)
                if length > self._max_frame:
                    raise ProtocolError(f"frame of {length} bytes exceeds the {self._max_frame}-byte limit")
                end = HEADER.size + length
                if len(self._buffer) < end:
                    break
                payload = bytes(self._buffer[HEADER.size : end])
                del self._buffer[:end]
                messages.append(decode_payload(payload))
        except ProtocolError as exc:
            self._error = exc
            if not messages:
                raise
        return messages


def read_message(sock: Any, decoder: FrameDecoder, pending: list[Message]) -> Message | None:
    """The next message from a blocking socket, or None at end of stream."""
    while not pending:
        data = sock.recv(65536)
        if not data:
            return None
        pending.extend(decoder.feed(data))
    return pending.pop(0)
