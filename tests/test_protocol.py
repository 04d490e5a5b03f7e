"""The wire protocol: every message survives a round trip, and nothing a peer sends can make the
decoder raise anything but ProtocolError."""

from __future__ import annotations

import dataclasses
import math

import msgpack
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tuidebug import protocol
from tuidebug.protocol import (
    HEADER, MAX_FRAME_BYTES, MESSAGE_TYPES, Command, Event, FrameDecoder, Hello, ProtocolError, Reject,
    Step, decode_payload, encode,
)

ATOMS = {
    "int": st.integers(-(2**63), 2**64 - 1),
    "float": st.floats(allow_nan=False),
    "str": st.text(max_size=20),
    "bool": st.booleans(),
    "None": st.none(),
    "Any": st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.floats(allow_nan=False) | st.text(max_size=8),
}


def value_strategy(annotation: str) -> st.SearchStrategy:
    """Values a field with this annotation ("list[float] | None") may carry."""
    options = []
    for part in (p.strip() for p in annotation.split("|")):
        if part.startswith("list["):
            options.append(st.lists(value_strategy(part[5:-1]), max_size=4))
        elif part.startswith("dict["):
            value = part[5:-1].split(",", 1)[1]
            options.append(st.dictionaries(st.text(max_size=8), value_strategy(value), max_size=4))
        else:
            options.append(ATOMS[part])
    return st.one_of(options)


def message_strategy(cls: type) -> st.SearchStrategy:
    fields = {f.name: value_strategy(f.type) for f in dataclasses.fields(cls)}
    return st.fixed_dictionaries(fields).map(lambda values: cls(**values))


any_message = st.one_of([message_strategy(cls) for cls in MESSAGE_TYPES.values()])


def frame(body: object) -> bytes:
    payload = msgpack.packb(body, use_bin_type=True)
    return HEADER.pack(len(payload)) + payload


@given(any_message)
def test_every_message_survives_a_round_trip(message: protocol.Message) -> None:
    assert FrameDecoder().feed(encode(message)) == [message]


def test_non_finite_figures_survive_a_round_trip() -> None:
    step = Step(step=3, time=1.5, loss=math.nan, grad_norm=math.inf, lrs=[-math.inf])
    (decoded,) = FrameDecoder().feed(encode(step))
    assert math.isnan(decoded.loss) and decoded.grad_norm == math.inf and decoded.lrs == [-math.inf]


@given(st.lists(any_message, min_size=1, max_size=5), st.data())
def test_frames_split_anywhere_come_out_whole_and_in_order(messages: list, data: st.DataObject) -> None:
    stream = b"".join(encode(m) for m in messages)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    decoder, received = FrameDecoder(), []
    for start, end in zip([0, *cuts], [*cuts, len(stream)]):
        received += decoder.feed(stream[start:end])
    assert received == messages


def test_a_frame_fed_one_byte_at_a_time() -> None:
    data = encode(Command(name="pause")) + encode(Reject(reason="wrong token"))
    decoder, received = FrameDecoder(), []
    for index in range(len(data)):
        received += decoder.feed(data[index:index + 1])
    assert received == [Command(name="pause"), Reject(reason="wrong token")]


def test_an_oversized_frame_is_refused_from_its_header_alone() -> None:
    with pytest.raises(ProtocolError, match="exceeds"):
        FrameDecoder().feed(HEADER.pack(MAX_FRAME_BYTES + 1))
    with pytest.raises(ProtocolError, match="exceeds the 100-byte limit"):
        FrameDecoder(max_frame=100).feed(encode(Event(kind="x", message="y" * 200, time=0.0)))


def test_an_oversized_message_is_not_sent() -> None:
    with pytest.raises(ProtocolError, match="exceeds"):
        encode(Event(kind="log", message="x" * (MAX_FRAME_BYTES + 1), time=0.0))


@pytest.mark.parametrize(("payload", "reason"), [
    pytest.param(b"\xc1", "undecodable", id="reserved-byte"),
    pytest.param(msgpack.packb({"t": "reject", "reason": "x"})[:-1], "undecodable", id="truncated"),
    pytest.param(msgpack.packb({"t": "welcome"}) + b"\x00", "undecodable", id="trailing-bytes"),
    pytest.param(msgpack.packb([1, 2]), "not a map", id="array"),
    pytest.param(msgpack.packb({1: "a"}), "undecodable", id="integer-key"),
    pytest.param(msgpack.packb({"reason": "x"}), "no known message type", id="no-type"),
    pytest.param(msgpack.packb({"t": "launch_missiles"}), "no known message type", id="unknown-type"),
    pytest.param(msgpack.packb({"t": "reject", "reason": "x", "extra": 1}), "unknown fields", id="unknown-field"),
    pytest.param(msgpack.packb({"t": "reject", "reason": 7}), "field reason has type int", id="wrong-type"),
    pytest.param(msgpack.packb({"t": "step", "step": 1, "time": 0.0, "loss": "low"}), "field loss", id="wrong-optional"),
    pytest.param(msgpack.packb({"t": "reject"}), "reject frame", id="missing-field"),
    pytest.param(msgpack.packb({"t": "hello", "version": 1, "token": b"x", "pid": 1, "argv": [], "python": "3",
                                "torch_version": "2"}, use_bin_type=True), "field token", id="bytes-for-str"),
])
def test_malformed_payloads_raise_protocol_error(payload: bytes, reason: str) -> None:
    with pytest.raises(ProtocolError, match=reason):
        decode_payload(payload)


def test_a_hello_carries_what_the_handshake_checks() -> None:
    hello = Hello(version=protocol.PROTOCOL_VERSION, token="t" * 32, pid=42, argv=["train.py", "--epochs", "2"],
                  python="3.11.7", torch_version="2.13.0")
    assert decode_payload(encode(hello)[HEADER.size:]) == hello


@settings(max_examples=300)
@given(st.binary(max_size=256), st.lists(st.integers(1, 64), max_size=8))
def test_arbitrary_bytes_only_ever_raise_protocol_error(data: bytes, chunks: list[int]) -> None:
    decoder = FrameDecoder(max_frame=1024)
    position = 0
    try:
        for size in [*chunks, len(data)]:
            for message in decoder.feed(data[position:position + size]):
                assert isinstance(message, protocol.Message)
            position += size
    except ProtocolError:
        pass


@settings(max_examples=300)
@given(st.binary(max_size=200))
def test_arbitrary_payloads_in_a_valid_frame_only_ever_raise_protocol_error(payload: bytes) -> None:
    try:
        FrameDecoder().feed(HEADER.pack(len(payload)) + payload)
    except ProtocolError:
        pass


msgpack_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats() | st.text(max_size=10)
    | st.binary(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6) | st.binary(max_size=4), inner,
                                                                max_size=3),
    max_leaves=8,
)
field_names = sorted({f.name for cls in MESSAGE_TYPES.values() for f in dataclasses.fields(cls)} | {"t"})
maps = st.dictionaries(st.sampled_from(field_names) | st.text(max_size=4) | st.binary(max_size=4),
                       st.sampled_from(sorted(MESSAGE_TYPES)) | msgpack_values, max_size=8)


@example({"t": [1]})
@example({"t": "reject", b"reason": "x", "extra": 1})
@settings(max_examples=300)
@given(maps)
def test_arbitrary_maps_only_ever_raise_protocol_error(body: dict) -> None:
    try:
        message = FrameDecoder().feed(frame(body))
    except ProtocolError:
        return
    assert len(message) == 1 and isinstance(message[0], protocol.Message)


def test_messages_before_a_bad_frame_are_kept_and_the_error_comes_next():
    good = Event(kind="x", message="kept", time=0.0)
    decoder = FrameDecoder()

    assert decoder.feed(encode(good) + HEADER.pack(5) + b"\xc1\xc1\xc1\xc1\xc1") == [good]
    with pytest.raises(ProtocolError):
        decoder.feed(b"")
