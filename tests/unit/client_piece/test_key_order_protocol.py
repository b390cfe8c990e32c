"""The key-order records of the control protocol and the barrier arithmetic, without a broker."""

from __future__ import annotations

import json
from typing import Any

import pytest

from airflow_provider_kstate.client_piece.protocol import (
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
from airflow_provider_kstate.increase.key_order import (
    ORDER_BARRIER,
    ORDER_OFFLINE,
    ORDER_RELAXED,
    client_piece_clients,
    mark_key_order,
)
from airflow_provider_kstate.increase.model import GroupInfo, Member
from airflow_provider_kstate.increase.plan import GroupPlan, Plan, describe


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


def _plan_of(groups: dict[str, GroupPlan]) -> Plan:
    return Plan(topic="orders", original_partitions=4, target_partitions=6, groups=groups)


def _info(group: str, *clients: str) -> GroupInfo:
    members = tuple(Member(f"m-{c}", c, "/127.0.0.1", (0,)) for c in clients)
    return GroupInfo(group, "STABLE" if clients else "EMPTY", "CLASSIC", "consumer", members)


def test_client_piece_clients_are_every_consumer_that_acknowledged_anything() -> None:
    state = {
        "ack/billing/b-0": Ack(client="b-0", epoch=0, state="running", group="billing"),
        "ack-barrier/orders/billing/b-1": Ack(
            client="b-1", epoch=7, state="pending", group="billing", topic="orders"
        ),
        "ack-layout/orders/p": Ack(client="p", epoch=3, state="layout", topic="orders"),
        "cmd/audit": None,
        "barrier/orders": Barrier(topic="orders", epoch=7, groups=["billing"]),
    }
    assert client_piece_clients(state) == {"billing": {"b-0", "b-1"}}  # type: ignore[arg-type]


def test_the_plan_marks_each_protected_group_barrier_relaxed_or_offline() -> None:
    live = GroupPlan(cls="active", state="STABLE", member_count=2, pause=True, seed=True, wait=True)
    idle = GroupPlan(cls="empty", state="EMPTY", pause=True, seed=True)
    plan = _plan_of(
        {
            "held": live,
            "plain": live,
            "mixed": live,
            "idle": idle,
            "spark-kafka-source-x": GroupPlan("spark", "STABLE"),
        }
    )
    infos = {
        "held": _info("held", "h-0", "h-1"),
        "plain": _info("plain", "rdkafka", "rdkafka"),
        "mixed": _info("mixed", "x-0", "x-1", "x-2", "x-3", "x-4", "x-5"),
        "idle": _info("idle"),
    }
    present = {"held": {"h-0", "h-1", "h-old"}, "mixed": {"x-0"}}
    marked = mark_key_order(plan, infos, present, "preserve")
    marks = {g: (e.key_order, e.key_order_reason) for g, e in marked.groups.items()}
    assert marks["held"] == (ORDER_BARRIER, "all 2 live members run the client piece")
    assert marks["plain"][0] == ORDER_RELAXED and "2 of 2 live members" in marks["plain"][1]
    assert "client ids rdkafka)" in marks["plain"][1], "a client id is named once"
    assert marks["mixed"][0] == ORDER_RELAXED
    assert "5 of 6 live members" in marks["mixed"][1] and "x-1, x-2, x-3 and 2 more" in marks["mixed"][1]
    assert marks["idle"][0] == ORDER_OFFLINE
    assert marks["spark-kafka-source-x"] == ("", ""), "a group the run leaves alone is not marked"

    relaxed = mark_key_order(plan, infos, present, "relax")
    assert {e.key_order for g, e in relaxed.groups.items() if g in plan.where("seed")} == {ORDER_RELAXED}
    assert "key_order=relax" in relaxed.groups["held"].key_order_reason


def test_the_marks_round_trip_through_xcom_and_show_in_the_plan_log() -> None:
    live = GroupPlan(cls="active", state="STABLE", member_count=1, pause=True, seed=True, wait=True)
    plan = mark_key_order(_plan_of({"plain": live}), {"plain": _info("plain", "rdkafka")}, {}, "preserve")
    data = json.loads(json.dumps(plan.to_dict()))
    assert data["groups"]["plain"]["key_order"] == "relaxed"
    back = Plan.from_dict(data)
    assert back == plan
    assert Plan.from_dict(_plan_of({"plain": live}).to_dict()).groups["plain"].key_order == ""
    line = [ln for ln in describe(plan) if "group plain" in ln][0]
    assert "key order: relaxed (1 of 1 live members never acknowledged" in line


def test_a_member_already_past_the_barrier_counts_as_holding_it() -> None:
    """A member whose group is past the barrier at once acknowledges ``released`` right after ``barrier``
    under the same key; the controller's watch may see only the second. It counts (found live: without it
    the switch waited its whole ack timeout, 10 s, with the producers held)."""
    from airflow_provider_kstate.client_piece.protocol import Ack
    from airflow_provider_kstate.increase.key_order import KeyOrderSwitch

    class Watch:
        state = {
            "ack-barrier/orders/g/c-0": Ack(
                client="c-0", epoch=7, state="released", group="g", topic="orders"
            ),
            "ack-barrier/orders/g/c-1": Ack(
                client="c-1", epoch=7, state="barrier", group="g", topic="orders"
            ),
            "ack-barrier/orders/g/c-2": Ack(
                client="c-2", epoch=6, state="barrier", group="g", topic="orders"
            ),  # an older barrier's
        }

        def acks(self, prefix: str, epoch: int, states: tuple[str, ...] = ()) -> list[Ack]:
            return [
                a
                for k, a in self.state.items()
                if k.startswith(prefix) and a.epoch == epoch and (not states or a.state in states)
            ]

        def wait(self, done: Any, timeout: float, interval: float = 0.005) -> bool:
            return bool(done())

    switch = KeyOrderSwitch(_plan_of({}), None, None, None, "run", ack_timeout=0.01)  # type: ignore[arg-type]
    assert switch._wait_members(Watch(), 7, {"g": 2}, {}) == {}  # type: ignore[arg-type]
    assert switch._wait_members(Watch(), 7, {"g": 3}, {}) == {"g": (2, 3)}  # type: ignore[arg-type]
    # A client that acknowledged the announcement but is not among the broker's members yet (rejoining
    # after the resume) is waited for all the same: it may fetch the new partitions before it read the
    # barrier (seen once in CI: 331 records of moved keys processed out of order under preserve).
    announced = {"g": {"c-0", "c-1", "c-3"}}
    assert switch._wait_members(Watch(), 7, {"g": 1}, announced) == {"g": (2, 3)}  # type: ignore[arg-type]
    assert switch._wait_members(Watch(), 7, {"g": 1}, {"g": {"c-0"}}) == {}  # type: ignore[arg-type]
