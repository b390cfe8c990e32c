"""Several co-partitioned topics in one run (issue 32, item 4), on the real broker through ``dag.test()``.

Two topics of equal count (a join's inputs) under live keyed traffic on both, read by one latest-reset
consumer group. First the scenario: growing both naively loses what producers write to the new partitions
of each. Then ``kstate_partition_increase`` with ``topics``: both grown in one run, nothing lost on either,
one lease set (a run on one of the topics meanwhile is refused), the group paused once.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from kstate_support.increase_runs import DAG_ID, grow, states, xcom
from kstate_support.traffic import ConsumerFleet, SeqProducer, loss, wait_until, warm_up

from airflow_provider_kstate.errors import LeaseHeldError
from airflow_provider_kstate.hooks.lease import KStateLeaseHook

pytestmark = pytest.mark.integration

RATE = 100.0


@contextlib.contextmanager
def join_traffic(
    config: dict[str, Any], topics: list[str], group: str, controlled: bool, metadata_ms: int = 4000
) -> Iterator[tuple[dict[str, SeqProducer], ConsumerFleet]]:
    """A keyed producer per topic and one group of two latest-reset consumers reading every topic; all
    stopped on the way out (a client left polling when the broker stops takes the process down)."""
    fleet = ConsumerFleet(
        config, topics[0], group, n=2, controlled=controlled, topics=topics, metadata_ms=metadata_ms
    )
    producers: dict[str, SeqProducer] = {}
    try:
        for topic in topics:
            producers[topic] = SeqProducer(config, topic, rate=RATE, controlled=controlled)
            producers[topic].start()
        yield producers, fleet
    finally:
        for producer in producers.values():
            if producer.is_alive():
                producer.stop()
        fleet.stop()


def _reader(fleet: ConsumerFleet, topic: str) -> Any:
    """What ``loss``/``warm_up`` read of a fleet, for one topic of the several it reads."""
    return SimpleNamespace(received=fleet.by_topic[topic], _lock=fleet._lock, group=f"{fleet.group}/{topic}")


def _losses(
    producers: dict[str, SeqProducer], fleet: ConsumerFleet, since: dict[str, int], drain: float = 20.0
) -> dict[str, dict[int, int]]:
    for producer in producers.values():
        producer.stop()
    return {t: loss(p, _reader(fleet, t), since[t], drain_timeout=drain) for t, p in producers.items()}


# make chaos: the loss it shows on each topic is KAFKA-12261's, which make test proves on one topic
# (test_kafka_12261.py's naive test); this one shows it on two at once (37 s in make test's time).
@pytest.mark.chaos
def test_growing_co_partitioned_topics_naively_loses_records_on_each(
    kafka_config: dict[str, Any], admin: Any, make_topic: Any
) -> None:
    """The scenario: 2 -> 4 on both topics under live traffic, nobody paused: new partitions lose records.

    The consumers refresh metadata every 15 s (the producers every 0.5 s): on a loaded 2-core machine the
    4 s of the other tests let them see the new partitions before the producers wrote there, now and then
    (0 lost, twice in four runs). 15 s is a plain consumer's default-sized gap (librdkafka: 5 minutes)."""
    topics = [make_topic("join-a", partitions=2), make_topic("join-b", partitions=2)]
    started = time.monotonic()
    with join_traffic(kafka_config, topics, f"{topics[0]}-g", controlled=False, metadata_ms=15000) as (
        producers,
        fleet,
    ):
        since = {t: warm_up(p, _reader(fleet, t)) for t, p in producers.items()}
        for topic in topics:
            grow(admin, topic, 4)
        wait_until(lambda: all({2, 3} <= set(p.placed.values()) for p in producers.values()), 15)
        time.sleep(3)  # keep producing while the consumers have not seen the new partitions yet
        lost = _losses(producers, fleet, since, drain=15.0)
    print(
        f"NAIVE lost per topic: { {t: len(v) for t, v in lost.items()} } in {time.monotonic() - started:.1f} s"
    )
    for topic in topics:
        assert lost[topic], f"{topic}: the naive increase lost nothing: the scenario did not reproduce"
        assert set(lost[topic].values()) <= {2, 3}, (
            f"{topic}: only new partitions lose records: {lost[topic]}"
        )


def test_one_run_grows_both_topics_with_one_lease_set_and_one_pause(
    kafka_config: dict[str, Any], admin: Any, make_topic: Any, run_dag: Any
) -> None:
    topics = [make_topic("join-a", partitions=2), make_topic("join-b", partitions=2)]
    group = f"{topics[0]}-g"
    leases = KStateLeaseHook()
    seen: dict[str, Any] = {}
    halt = threading.Event()

    def second_run() -> None:
        """While the run holds its leases: a run on ONE topic of the set is refused at once."""
        while not halt.is_set():
            held = [leases.current(t) for t in topics]
            if all(h is not None and h.owner.startswith(DAG_ID) for h in held):
                seen["owners"] = {h.owner for h in held if h is not None}
                try:
                    leases.acquire(topics[1], "other_dag/manual__second", ttl_seconds=60)
                    seen["second"] = "acquired"
                    leases.release(topics[1], "other_dag/manual__second")
                except LeaseHeldError as exc:
                    seen["second"] = str(exc)
                return
            time.sleep(0.05)

    watcher = threading.Thread(target=second_run, daemon=True)
    with join_traffic(kafka_config, topics, group, controlled=True) as (producers, fleet):
        since = {t: warm_up(p, _reader(fleet, t)) for t, p in producers.items()}
        watcher.start()
        started = time.monotonic()
        dr = run_dag(
            DAG_ID,
            {
                "topic": topics[0],
                "topics": [topics[1]],
                "partitions": 4,
                "consumer_groups": [],
                "dry_run": False,
            },
        )
        took = time.monotonic() - started
        halt.set()
        watcher.join(10)
        assert dr.state == "success", states(dr)
        wait_until(lambda: all({2, 3} <= set(p.placed.values()) for p in producers.values()), 15)
        lost = _losses(producers, fleet, since)
    window, verify = xcom(dr, "pause_window"), xcom(dr, "verify")
    print(
        f"SAFE run {took:.1f} s; window {window['timings']}; lost per topic "
        f"{ {t: len(v) for t, v in lost.items()} }; transitions {fleet.transitions}"
    )
    for topic in topics:
        assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 4, topic
        assert lost[topic] == {}, f"{topic}: {len(lost[topic])} records lost"
        assert window["topics"][topic]["groups"][group]["seeded"] == 2, window["topics"][topic]
        assert verify["topics"][topic]["ok"] and verify["topics"][topic]["partitions"] == 4
        assert {2, 3} <= {p for s, p in producers[topic].placed.items() if s >= since[topic]}
    # one pause of the group: each of its two members left once and came back once
    assert fleet.transitions.count("paused") == 2, fleet.transitions
    # one lease set: both topics held by this run during it, a run on one of them refused, both released
    assert seen.get("owners") == {f"{DAG_ID}/{dr.run_id}"}, seen
    assert "being changed by another run" in seen.get("second", "") or "held" in seen.get("second", ""), seen
    assert all(leases.current(t) is None for t in topics)


def test_a_set_with_unequal_counts_or_a_leased_topic_is_refused_and_nothing_changes(
    admin: Any, make_topic: Any, run_dag: Any
) -> None:
    a, b, c = (
        make_topic("join-a", partitions=2),
        make_topic("join-b", partitions=2),
        make_topic("odd", partitions=3),
    )
    dr = run_dag(
        DAG_ID, {"topic": a, "topics": [c], "partitions": 4, "consumer_groups": [], "dry_run": False}
    )
    assert (
        dr.state == "failed"
        and states(dr)["plan"] == "failed"
        and states(dr)["pause_window"] == "upstream_failed"
    )
    other = KStateLeaseHook()
    other.acquire(b, "other_dag/manual__busy", ttl_seconds=300)
    try:
        dr = run_dag(
            DAG_ID, {"topic": a, "topics": [b], "partitions": 4, "consumer_groups": [], "dry_run": False}
        )
        assert dr.state == "failed" and states(dr)["plan"] == "failed"
        assert other.current(a) is None, "the lease taken on the free topic was given back"
        assert other.current(b).owner == "other_dag/manual__busy"  # type: ignore[union-attr]
    finally:
        other.release(b, "other_dag/manual__busy")
    for topic, count in ((a, 2), (b, 2), (c, 3)):
        assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == count
