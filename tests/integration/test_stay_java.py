"""Java consumer groups stay in their groups while the topic grows (issue 41, items 1 and 3), through the
real DAG (``dag.test()`` of ``kstate_partition_increase``) on Apache Kafka 4.4 under live keyed traffic.

The consumers are the Java fleet's service (``support/java/.../fleet/Consumer.java``, kafka-clients 4.4, no
client piece) with ``--auto-commit true``: ``enable.auto.commit=true`` every 200 ms, so the client commits
the position of every partition it is assigned, a new partition no one wrote to included (offset 0,
measured in ``test_stay_evidence.py``). The request names the group in ``committing_groups``, so the plan
lets it stay (``stay: commits``); the producer is a ControlledProducer (``producer_drivers: ["control"]``),
kept on the old partitions until the group holds a committed offset on every new partition.

Per protocol: two members on ``group.protocol=consumer`` (KIP-848: the broker assigns the new partitions on
a member's heartbeat) and two on classic with ``CooperativeStickyAssignor``. A classic Java member finds
new partitions only at its metadata refresh (``metadata.max.age.ms``, 5 minutes by default; set to 1 s
here, :data:`CLASSIC_METADATA_MS`): the producer keeps writing to the old partitions until then, so the
wait costs no one anything but the run's time. Per key order: a plain Java group cannot hold at the
key-order barrier, so ``relax`` switches the producer at once (keys that move may be processed out of
order: reported, not asserted), and ``preserve`` drains the group instead (``key_order: drained``: once
the group holds its positions the producer is held, the group consumes the old partitions to their ends,
then the producer switches): nothing reordered, and the producer's hold is the consumers' largest gap.

The scenario first (:func:`test_a_naive_increase_loses_records_at_the_same_java_group`): the same group
grown by a plain ``CreatePartitions`` under a plain producer loses records on the new partitions (also
``test_java_fleet.py`` with manual commits, ``test_kafka_12261.py``, ``test_kip848.py``).

Asserted: the run succeeds; the group is marked ``stay: commits``; the window's ``stayed`` lists it as
positioned with nothing fallen back and no stray record; the group holds a committed offset on all 8
partitions; each Java member kept its member id and never stopped, lost its partitions or had an old
partition revoked (its ``.events.jsonl``); every record delivered after the warm-up was processed (the
fleet's :func:`~kstate_support.fleet.judge`) and each new partition was read from offset 0. Each member's
largest gap in processing and the longest wait of a delivered record during the run are printed beside the
same over the seconds before it, with the producer's own largest gap in deliveries (a gap of the consumers
that is the producer's).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from kstate_support import kafka as kfacts
from kstate_support.fleet import judge, warm_up
from kstate_support.increase_runs import DAG_ID, grow, states, xcom
from kstate_support.java_services import JavaFleet
from kstate_support.stay_fleet import (
    ProducerProcess,
    caught_up,
    first_offsets,
    java_group,
    largest_gap,
    latency,
    left_group,
)
from kstate_support.traffic import wait_until

pytestmark = pytest.mark.integration

#: The members' metadata refresh in the naive scenario (``test_java_fleet.py``'s, still far below the default
#: 5 minutes), and how many naive increases may win the race before the scenario counts as not reproduced.
NAIVE_MEMBER_METADATA_MS = 5000
NAIVE_TRIES = 3
#: Seconds of traffic before the run, the baseline of the members' gaps in processing.
BASELINE_S = 5.0
OLD, NEW = 4, 8


def _ms() -> float:
    return time.time() * 1000


def _members(admin: Any, group: str) -> dict[str, str]:
    """The broker's members of ``group``: client id -> member id."""
    desc = admin.describe_consumer_groups([group])[group].result(timeout=10)
    return {m.client_id: m.member_id for m in desc.members}


def _finish(fleet: JavaFleet, producer: ProducerProcess, group: str, drain: float = 30) -> None:
    """Once the producer wrote to all 8 partitions and the group holds them: a second of traffic, the producer
    stopped, and the group given ``drain`` seconds to process what it delivered (a group that skipped
    records never catches up on those: the judge counts them)."""
    assert wait_until(lambda: producer.partitions() == set(range(NEW)), 30), "never wrote to all 8"
    assert wait_until(lambda: fleet.assigned(group) == set(range(NEW)), 30), "never took all 8"
    time.sleep(1.0)  # traffic on the eight partitions
    producer.stop()
    wait_until(lambda: caught_up(producer.delivered, fleet.lines(*fleet.groups[group])), drain)


@pytest.mark.chaos  # the scenario, for both protocols also in test_java_fleet.py (make chaos)
@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_a_naive_increase_loses_records_at_the_same_java_group(
    protocol: str, admin: Any, kafka_config: dict[str, Any], make_topic: Any, java_fleet: JavaFleet
) -> None:
    """The scenario first: the same auto-committing Java group and the same traffic from a plain producer,
    grown 4 -> 8 by a plain ``CreatePartitions``. The producer writes to the new partitions at its next
    metadata refresh (0.1 s); the members get them later (classic: the leader's refresh, then a rebalance;
    KIP-848: the broker's heartbeat, 1 s on the test broker) and start them at their end (latest): records
    lost, on new partitions only. The members refresh their metadata every 5 s here, as in
    ``test_java_fleet.py`` (5 minutes by default).

    A race, so up to :data:`NAIVE_TRIES` tries on fresh topics until one loses. Measured here: with the
    members refreshing every 0.5 s (KIP-848) or 1 s (classic) they won it often (KIP-848: 4 of 5 tries lost
    nothing, with the producer at 0.1 or 0.5 s; classic: 1 of 3); at 5 s every try lost. The same with manual
    commits: ``test_java_fleet.py``."""
    tries = []
    for attempt in range(NAIVE_TRIES):
        topic = make_topic(f"stay-java-naive{attempt}-{protocol}", partitions=OLD)
        group, names = java_group(
            java_fleet, admin, topic, protocol, metadata_ms=NAIVE_MEMBER_METADATA_MS, prefix=f"naive{attempt}"
        )
        out = java_fleet.run_dir / f"producer-naive{attempt}.jsonl"
        producer = ProducerProcess(kafka_config, topic, out, controlled=False, metadata_ms=100)
        try:
            since = warm_up(java_fleet, group)
            grow(admin, topic, NEW)
            _finish(java_fleet, producer, group, drain=10)
        finally:
            producer.stop()
            java_fleet.stop(*names)
        verdict = judge(producer.delivered, java_fleet.lines(*names), since=since)
        tries.append(verdict)
        print(
            f"NAIVE java {protocol} try {attempt + 1}: {verdict.summary()}; first offsets processed on the "
            f"new partitions {first_offsets(java_fleet.lines(*names), OLD)}"
        )
        if verdict.lost:
            break
    assert tries[-1].lost, f"{len(tries)} naive increases lost nothing: {[v.summary() for v in tries]}"
    assert set(tries[-1].lost_by_partition) <= set(range(OLD, NEW)), tries[-1].summary()


@pytest.mark.parametrize(
    ("protocol", "key_order"),
    [
        ("consumer", "relax"),
        # the three other cells: make chaos (make test keeps one; test_stay.py keeps classic and preserve)
        pytest.param("classic", "preserve", marks=pytest.mark.chaos),
        pytest.param("consumer", "preserve", marks=pytest.mark.chaos),
        pytest.param("classic", "relax", marks=pytest.mark.chaos),
    ],
)
def test_java_auto_committing_group_stays_in_its_group_while_the_topic_grows(
    protocol: str,
    key_order: str,
    admin: Any,
    kafka_config: dict[str, Any],
    make_topic: Any,
    run_dag: Any,
    java_fleet: JavaFleet,
) -> None:
    topic = make_topic(f"stay-java-{protocol}", partitions=OLD)
    group, names = java_group(java_fleet, admin, topic, protocol)
    members_before = _members(admin, group)
    producer = ProducerProcess(kafka_config, topic, java_fleet.run_dir / "producer.jsonl")
    try:
        since = warm_up(java_fleet, group)
        time.sleep(BASELINE_S)
        started = _ms()
        dr = run_dag(
            DAG_ID,
            {
                "topic": topic,
                "partitions": NEW,
                "consumer_groups": [group],
                "consumers_stay": "auto",
                "producer_drivers": ["control"],
                "committing_groups": [group],
                "key_order": key_order,
            },
        )
        ended = _ms()
        assert dr.state == "success", states(dr)
        plan = xcom(dr, "plan")["groups"][group]
        window = xcom(dr, "pause_window")
        released = xcom(dr, "start_producers")
        stayed = window["stayed"]
        committed = kfacts.committed(admin, group, topic, NEW)
        _finish(java_fleet, producer, group)
        members_after = _members(admin, group)
        left = {n: left_group(java_fleet, n, started, OLD) for n in names}
    finally:
        producer.stop()
    delivered = producer.delivered
    verdict = judge(delivered, java_fleet.lines(*names), since=since)
    base = started - BASELINE_S * 1000
    figures = {
        n: {
            "gap_s": round(largest_gap([r["t"] for r in java_fleet.lines(n)], started, ended), 3),
            "gap_before_s": round(largest_gap([r["t"] for r in java_fleet.lines(n)], base, started), 3),
            "latency_s": round(latency(delivered, java_fleet.lines(n), started, ended), 3),
            "latency_before_s": round(latency(delivered, java_fleet.lines(n), base, started), 3),
        }
        for n in names
    }
    produced_gap = largest_gap([d["t"] for d in delivered], started, ended)
    print(
        f"STAY java {protocol} {key_order}: {verdict.summary()}; run {(ended - started) / 1000:.1f} s; positions after "
        f"{stayed.get('positioned_after_s')} s; per member (largest gap in processing and longest wait of a "
        f"delivered record, during the run and over the {BASELINE_S:.0f} s before it) {figures}; the "
        f"producer's largest gap in deliveries during the run {produced_gap:.3f} s; plan stay "
        f"{plan.get('stay')!r} ({plan.get('stay_reason')}); timings {window.get('timings')}; committed {committed}; key order {plan.get('key_order')}; "
        f"producers {window.get('drivers', {}).get('producers_stopped')} -> {released}"
    )

    assert plan.get("stay") == "commits", plan
    assert stayed["positioned"] == [group] and stayed["fell_back"] == [], stayed
    assert stayed["stray_records"] == 0, stayed
    assert window["timings"]["live_window_s"] == 0.0, window["timings"]
    assert set(committed) == set(range(NEW)), f"committed offsets only on {sorted(committed)}"
    assert members_after == members_before, f"the members changed: {members_before} -> {members_after}"
    assert left == {n: [] for n in names}, f"a member left its group or lost old partitions: {left}"
    assert not producer.errors, producer.errors[:5]
    assert not verdict.lost, verdict.summary()
    first = first_offsets(java_fleet.lines(*names), OLD)
    assert first == dict.fromkeys(range(OLD, NEW), 0), f"new partitions not read from 0: {first}"
    if key_order == "preserve":
        assert plan.get("key_order") == "drained", plan
        assert released["drained_groups"] == [group] and not released["start_failures"], released
        assert verdict.keys_out_of_order == 0, verdict.summary()
