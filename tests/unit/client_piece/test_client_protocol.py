"""The control protocol's records and Kafka's murmur2, without a broker."""

from __future__ import annotations

import json

import pytest

from airflow_provider_kstate.client_piece.murmur2 import murmur2, partition_for
from airflow_provider_kstate.client_piece.protocol import (
    PROTOCOL_VERSION,
    Ack,
    Command,
    Layout,
    ack_key,
    command_key,
    decode,
    encode,
    layout_ack_key,
    layout_key,
)

# Kafka's org.apache.kafka.common.utils.UtilsTest#testMurmur2
KAFKA_MURMUR2_VECTORS = {
    "21": -973932308,
    "foobar": -790332482,
    "a-little-bit-long-string": -985981536,
    "a-little-bit-longer-string": -1486304829,
    "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    "abc": 479470107,
}


@pytest.mark.parametrize(
    "record",
    [
        Command(group="g1", command="pause", epoch=1700000000123, topic="orders", issuer="dag/run"),
        Command(group="g1", command="resume", epoch=1700000000456),
        Layout(topic="orders", partitions=12, epoch=1700000000789, issuer="x"),
        Ack(client="c-1", epoch=5, state="paused", group="g1"),
        Ack(client="c-2", epoch=6, state="layout", topic="orders", partitions=12),
    ],
)
def test_round_trip(record: Command | Layout | Ack) -> None:
    raw = encode(record)
    assert decode(raw) == record
    doc = json.loads(raw)
    assert doc["v"] == PROTOCOL_VERSION
    assert doc["kind"] == record.kind


def test_keys() -> None:
    assert Command(group="g", command="pause", epoch=1).key == command_key("g") == "cmd/g"
    assert Layout(topic="t", partitions=2, epoch=1).key == layout_key("t") == "layout/t"
    assert Ack(client="c", epoch=1, state="paused", group="g").key == ack_key("g", "c") == "ack/g/c"
    ack = Ack(client="c", epoch=1, state="layout", topic="t", partitions=2)
    assert ack.key == layout_ack_key("t", "c") == "ack-layout/t/c"


def test_wire_format_is_the_documented_json() -> None:
    """A Java/Go implementation writes exactly these fields; decode must accept them."""
    raw = b'{"v":1,"kind":"command","group":"g","command":"pause","epoch":42,"topic":"t","issued_at":42,"issuer":"j"}'
    assert decode(raw) == Command(group="g", command="pause", epoch=42, topic="t", issued_at=42, issuer="j")
    raw = b'{"v":1,"kind":"layout","topic":"t","partitions":3,"epoch":7,"issued_at":7,"issuer":""}'
    assert decode(raw) == Layout(topic="t", partitions=3, epoch=7, issued_at=7)


def test_unknown_fields_are_ignored() -> None:
    raw = json.dumps(
        {"v": 1, "kind": "command", "group": "g", "command": "resume", "epoch": 3, "future": [1]}
    )
    record = decode(raw.encode())
    assert isinstance(record, Command)
    assert record.command == "resume" and record.epoch == 3


@pytest.mark.parametrize(
    "raw",
    [
        None,
        b"",
        b"not json",
        b'{"v":1,"kind":"telemetry","x":1}',
        b'{"v":2,"kind":"command","group":"g","command":"pause","epoch":1}',
        b'{"kind":"command","group":"g","command":"pause","epoch":1}',
        b'{"v":1,"kind":"command","group":"g","command":"explode","epoch":1}',
        b'{"v":1,"kind":"command","group":"g","command":"pause"}',
        b'{"v":1,"kind":"layout","topic":"t","partitions":0,"epoch":1}',
    ],
)
def test_unknown_or_invalid_records_decode_to_none(raw: bytes | None) -> None:
    assert decode(raw) is None


def test_bad_command_rejected() -> None:
    with pytest.raises(ValueError, match="unknown command"):
        Command(group="g", command="stop", epoch=1)
    with pytest.raises(ValueError):
        Layout(topic="t", partitions=0, epoch=1)


@pytest.mark.parametrize(("text", "expected"), sorted(KAFKA_MURMUR2_VECTORS.items()))
def test_murmur2_matches_kafka_utils(text: str, expected: int) -> None:
    assert murmur2(text.encode()) == expected


def test_partition_for_is_to_positive_mod_n() -> None:
    for text, h in KAFKA_MURMUR2_VECTORS.items():
        for n in (1, 2, 3, 7, 12, 64):
            assert partition_for(text.encode(), n) == (h & 0x7FFFFFFF) % n
    assert partition_for(b"", 5) == (murmur2(b"") & 0x7FFFFFFF) % 5
    with pytest.raises(ValueError):
        partition_for(b"k", 0)


def test_partition_for_keeps_a_key_when_n_is_pinned() -> None:
    """The point of the layout: with n pinned, a key's partition does not depend on the topic's real size."""
    keys = [f"key-{i}".encode() for i in range(2000)]
    moved = sum(partition_for(k, 4) != partition_for(k, 6) for k in keys)
    assert moved > 500  # raising n really moves keys, so pinning it matters
    assert all(0 <= partition_for(k, 6) < 6 for k in keys)
