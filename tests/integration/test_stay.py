"""Consumers stay in their groups while the topic grows (issue 41, item 1), through the real DAG
(``dag.test()``) on Apache Kafka 4.4 under live keyed traffic from a ControlledProducer.

The scenario is the one the naive increase loses in (``test_kafka_12261.py`` for the classic protocol,
``test_kip848.py`` for KIP-848: a latest-reset consumer that gets a new partition after producers wrote to
it starts at its end). Here, with ``consumers_stay=auto`` and the producers named (``control``): two
client-piece groups, one classic with ``cooperative-sticky`` and one on KIP-848, never leave their groups
(no pause, the window's ``live_window_s`` is 0; in the layout of one task per step as well, where
``scale_producers`` waits for the positions), each holds a committed offset on
every new partition before the producers switch, no old partition is revoked from either, an offline group
is seeded at 0, and nothing is lost. Each group's largest gap in processing during the run is printed.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from kstate_support import kafka as kfacts
from kstate_support.increase_runs import states, xcom
from kstate_support.stay_fleet import offline_group
from kstate_support.traffic import ConsumerFleet, SeqProducer, loss, wait_until, warm_up

pytestmark = pytest.mark.integration

DAG_ID = "kstate_partition_increase"


def _old_revoked(fleet: ConsumerFleet, start: float, end: float, old: int) -> list[tuple[str, list[int]]]:
    """The revocations of old partitions between ``start`` and ``end`` (none when the group took only the
    new ones)."""
    return [
        (member, sorted(p for p in parts if p < old))
        for t, member, kind, parts in fleet.timeline.events
        if start <= t <= end and kind == "revoke" and any(p < old for p in parts)
    ]


@pytest.mark.parametrize(
    ("dag_id", "switched_by"),
    [
        (DAG_ID, "pause_window"),
        # the same proof through the other layout: make chaos (make test keeps the default layout)
        pytest.param(f"{DAG_ID}_per_step", "scale_producers", marks=pytest.mark.chaos),
    ],
    ids=["window", "per-step"],
)
def test_consumers_stay_in_their_groups_while_the_topic_grows(
    kafka_config: dict[str, Any],
    admin: Any,
    make_topic: Any,
    run_dag: Any,
    dag_id: str,
    switched_by: str,
) -> None:
    topic = make_topic("stay", partitions=4)
    classic, kip848, offline = f"{topic}-classic", f"{topic}-kip848", f"{topic}-offline"
    offline_group(kafka_config, topic, offline)
    producer = SeqProducer(kafka_config, topic, rate=200.0, controlled=True)
    fleets = [
        ConsumerFleet(kafka_config, topic, classic, controlled=True, assignor="cooperative-sticky"),
        ConsumerFleet(kafka_config, topic, kip848, controlled=True, protocol="consumer"),
    ]
    try:
        producer.start()
        since = max(warm_up(producer, fleet) for fleet in fleets)
        started = time.monotonic()
        dr = run_dag(
            dag_id,
            {
                "topic": topic,
                "partitions": 8,
                "consumer_groups": [classic, kip848, offline],
                "consumers_stay": "auto",
                "producer_drivers": ["control"],
            },
        )
        ended = time.monotonic()
        assert dr.state == "success", states(dr)
        plan = xcom(dr, "plan")["groups"]
        assert [plan[g].get("stay") for g in (classic, kip848, offline)] == [
            "client-piece",
            "client-piece",
            None,
        ]
        window = xcom(dr, switched_by)
        stayed = window["stayed"]
        assert sorted(stayed["positioned"]) == sorted([classic, kip848]) and stayed["fell_back"] == [], stayed
        assert stayed["stray_records"] == 0, stayed
        if switched_by == "pause_window":
            assert window["timings"]["live_window_s"] == 0.0, window["timings"]
        for group in (classic, kip848, offline):
            assert set(kfacts.committed(admin, group, topic, 8)) == set(range(8)), group
        assert wait_until(lambda: set(producer.placed.values()) == set(range(8)), 20), "never wrote to all 8"
        time.sleep(1.0)
        producer.stop()
        lost = {fleet.group: loss(producer, fleet, since, drain_timeout=30) for fleet in fleets}
    finally:
        producer.stop()
        for fleet in fleets:
            fleet.stop()
    for fleet in fleets:
        assert "paused" not in fleet.transitions, f"{fleet.group} left its group: {fleet.transitions}"
        assert _old_revoked(fleet, started, ended, 4) == [], f"{fleet.group} lost old partitions in the run"
        gaps = fleet.largest_gaps(started, ended)
        print(
            f"STAY {fleet.group}: largest gap in processing during the run {max(gaps):.3f} s (per member {gaps})"
        )
    assert lost == {classic: {}, kip848: {}}, {g: len(v) for g, v in lost.items()}
    print(f"STAY {dag_id}: positions after {stayed['positioned_after_s']} s; {window.get('timings')}")
