"""The key-order records of the control protocol and the barrier arithmetic, without a broker."""

from __future__ import annotations

import json

import pytest

from airflow_provider_kstate.client.protocol import (
    Ack,
    Barrier,
    Layout,
    Release,
    barrier_ack_key,
    barrier_key,
    decode,
    encode,
    release_key,
)


@pytest.mark.parametrize(
    "record",
    [
        Barrier(topic="orders", epoch=5, offsets=[10, 0, 7], groups=["billing", "audit"], issuer="x"),
        Barrier(topic="orders", epoch=4, state="pending", groups=["billing"]),
        Barrier(topic="orders", epoch=6, state="off"),
        Release(topic="orders", group="billing", epoch=5),
        Layout(topic="orders", partitions=4, epoch=9, hold=True, hold_until=1_700_000_000_000),
        Ack(client="c", epoch=5, state="barrier", group="billing", topic="orders"),
    ],
)
def test_round_trip(record: object) -> None:
    assert decode(encode(record)) == record  # type: ignore[arg-type]


def test_keys() -> None:
    assert Barrier(topic="t", epoch=1).key == barrier_key("t") == "barrier/t"
    assert Release(topic="t", group="g", epoch=1).key == release_key("t", "g") == "release/t/g"
    assert Ack(client="c", epoch=1, state="released", group="g", topic="t").key == barrier_ack_key(
        "t", "g", "c"
    )
    assert Ack(client="c", epoch=1, state="held", topic="t").key == "ack-layout/t/c"
    assert Ack(client="c", epoch=1, state="paused", group="g").key == "ack/g/c"


def test_an_old_layout_reader_sees_no_hold_and_a_layout_without_hold_fields_is_no_hold() -> None:
    raw = {"v": 1, "kind": "layout", "topic": "t", "partitions": 3, "epoch": 7}
    layout = decode(json.dumps(raw).encode())
    assert isinstance(layout, Layout) and not layout.hold and layout.hold_until == 0


@pytest.mark.parametrize(
    "value",
    [
        {"v": 1, "kind": "barrier", "topic": "t", "epoch": 1, "state": "later"},
        {"v": 1, "kind": "barrier", "topic": "t", "epoch": 1, "offsets": [1, -2]},
        {"v": 1, "kind": "barrier", "topic": "t", "epoch": 1, "offsets": "12"},
        {"v": 1, "kind": "barrier", "topic": "t", "epoch": 1, "groups": [3]},
        {"v": 1, "kind": "release", "topic": "t", "epoch": 1},
    ],
)
def test_invalid_barrier_records_are_ignored(value: dict[str, object]) -> None:
    assert decode(json.dumps(value).encode()) is None


def test_barrier_offsets_applies_and_passed() -> None:
    barrier = Barrier(topic="t", epoch=1, offsets=[10, 20], groups=["g"])
    assert barrier.offset(0) == 10 and barrier.offset(1) == 20 and barrier.offset(5) == 0
    assert barrier.applies("g") and not barrier.applies("other")
    assert not Barrier(topic="t", epoch=1, state="pending", groups=["g"]).applies("g")
    assert barrier.passed({0: 10, 1: 25}, 2)
    assert not barrier.passed({0: 9, 1: 25}, 2)
    assert not barrier.passed({0: 10}, 2), "a partition without a committed offset has not passed"
    assert not barrier.passed({0: 10, 1: 20}, 3), "a new partition needs an offset too (B = 0)"
    assert barrier.passed({0: 10, 1: 20, 2: 0}, 3)
