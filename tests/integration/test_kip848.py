"""KIP-848 consumer groups (``group.protocol=consumer``, librdkafka) on Apache Kafka 4.4 (issue 30, item 5).

The scenario first: the naive increase loses records at a consumer-protocol group with
``auto.offset.reset=latest`` (the broker hands the new partition to a member on its next heartbeat, 5 s by
default, while producers write to it within 0.5 s), and the broker refuses admin offsets while the group has
members (``UNKNOWN_MEMBER_ID`` per partition), which is why the seed waits for EMPTY. Then the provider's
increase through the real DAG (``dag.test()``) loses nothing with ControlledConsumers and with plain
librdkafka consumers driven by a command pair, both under the consumer protocol; and the pause window is
measured against a plain restart of the same group (a benchmark figure, printed; the bound is loose).
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import NewPartitions
from kstate_support.increase_runs import states, xcom
from kstate_support.traffic import (
    ConsumerFleet,
    SeqProducer,
    Timeline,
    live_traffic,
    loss,
    wait_until,
    warm_up,
)

pytestmark = pytest.mark.integration

DAG_ID = "kstate_partition_increase"
PREFIX = "safe_partition_increase."
CONSUMER = "consumer"


def test_naive_increase_loses_at_a_consumer_protocol_group(
    kafka_config: dict[str, Any], admin: Any, make_topic: Any
) -> None:
    """Growing 1 -> 2 under a live ``group.protocol=consumer`` group with latest reset skips the records
    written to partition 1 before its member is assigned it; an admin offset commit to the live group is
    refused per partition with UNKNOWN_MEMBER_ID."""
    topic = make_topic("k848-naive", partitions=1)
    group = f"{topic}-g"
    with live_traffic(kafka_config, topic, group, n=2, protocol=CONSUMER) as (producer, fleet):
        since = warm_up(producer, fleet)
        described = admin.describe_consumer_groups([group])[group].result(30)
        assert described.type.name == "CONSUMER", described.type
        refused = admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 0)])]
        )[group].result(30)
        assert [tp.error.name() for tp in refused.topic_partitions] == ["UNKNOWN_MEMBER_ID"], refused
        grown = time.monotonic()
        admin.create_partitions([NewPartitions(topic, 2)])[topic].result(30)
        assert wait_until(lambda: any(k == "assign" and 1 in p for _, _, k, p in fleet.timeline.events), 30)
        assigned = min(t for t, _, k, p in fleet.timeline.events if k == "assign" and 1 in p) - grown
        time.sleep(2)
        producer.stop()
        lost = loss(producer, fleet, since, drain_timeout=20)
    written = sum(1 for s, p in producer.placed.items() if s >= since and p == 1)
    print(
        f"KIP-848 naive: partition 1 assigned {assigned:.2f} s after the create; lost {len(lost)} of {written}"
    )
    assert len(lost) > 0, "the naive increase lost nothing: the scenario did not reproduce"
    assert set(lost.values()) == {1}, f"only the new partition should lose records, got {lost}"


def test_safe_increase_with_controlled_consumers_under_the_consumer_protocol(
    kafka_config: dict[str, Any], admin: Any, make_topic: Any, run_dag: Any
) -> None:
    """1 -> 4 -> 8 through the DAG with ControlledConsumers under ``group.protocol=consumer``: they leave
    (the group is EMPTY), the new partitions are seeded, they rejoin; 0 lost; the plan names the group's
    type CONSUMER."""
    topic = make_topic("k848-safe", partitions=1)
    group = f"{topic}-g"
    traffic = live_traffic(kafka_config, topic, group, n=2, controlled=True, protocol=CONSUMER)
    with traffic as (producer, fleet):
        since = warm_up(producer, fleet)
        for target in (4, 8):
            dr = run_dag(DAG_ID, {"topic": topic, "partitions": target, "consumer_groups": [group]})
            assert dr.state == "success", states(dr)
            plan = xcom(dr, "plan")["groups"][group]
            assert (plan["class"], plan["type"], plan["key_order"]) == ("active", "CONSUMER", "barrier"), plan
        wait_until(lambda: set(producer.placed.values()) == set(range(8)), 15)
        producer.stop()
        lost = loss(producer, fleet, since, drain_timeout=30)
    assert set(producer.placed.values()) == set(range(8)), "producers never wrote to every new partition"
    assert fleet.transitions.count("paused") >= 2 * 2, (
        f"consumers did not pause each round: {fleet.transitions}"
    )
    assert lost == {}, f"{len(lost)} records lost: {dict(list(lost.items())[:20])}"


class CommandDrivenGroup:
    """Plain librdkafka consumers of one group under ``group.protocol=consumer`` (no client piece), stopped
    and started through a command pair as a service manager would: ``stop`` asks for the stop and returns
    once every consumer ``close()``d (each leaves the group), ``start`` once new consumers subscribed."""

    def __init__(self, config: dict[str, Any], topic: str, group: str, run_dir: Path) -> None:
        self.config, self.topic, self.group, self.dir = config, topic, group, run_dir
        self.timeline = Timeline()
        self.fleets = [self._fleet()]
        self.received: set[int] = set()
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _fleet(self) -> ConsumerFleet:
        return ConsumerFleet(
            self.config, self.topic, self.group, n=2, protocol=CONSUMER, timeline=self.timeline
        )

    def commands(self) -> dict[str, Any]:
        """The command pair a user would configure (the ``kstate_drivers`` Variable's entry)."""

        def ask(action: str, done: str) -> str:
            return (
                f"rm -f {self.dir}/{done}; touch {self.dir}/{action}; "
                f"for i in $(seq 1 3000); do [ -e {self.dir}/{done} ] && exit 0; sleep 0.01; done; exit 1"
            )

        return {"kind": "command", "stop": ask("stop", "stopped"), "start": ask("start", "started")}

    def _serve(self) -> None:
        while not self._halt.is_set():
            for action, done in (("stop", "stopped"), ("start", "started")):
                request = self.dir / action
                if request.exists():
                    request.unlink()
                    self._apply(action)
                    (self.dir / done).touch()
            time.sleep(0.005)

    def _apply(self, action: str) -> None:
        current = self.fleets[-1]
        if action == "stop" and not current._halt.is_set():
            current.stop()
        elif action == "start" and current._halt.is_set():
            self.fleets.append(self._fleet())

    @property
    def all_received(self) -> set[int]:
        return set().union(*(f.received for f in self.fleets))

    def stop(self) -> None:
        self._halt.set()
        self._thread.join(10)
        for fleet in self.fleets:
            fleet.stop()


@pytest.mark.chaos  # repeats the proof above with command pairs (test_java_fleet proves those in make test)
def test_safe_increase_with_plain_librdkafka_consumers_driven_by_a_command_pair(
    kafka_config: dict[str, Any],
    admin: Any,
    make_topic: Any,
    run_dag: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Plain librdkafka consumers (``group.protocol=consumer``, latest reset) that cannot run the client
    piece: the run stops them with their command pair (they close: the group is EMPTY), seeds, starts them;
    0 lost over 1 -> 2 -> 4; the group is relaxed for key order, as a group that cannot hold."""
    topic = make_topic("k848-plain", partitions=1)
    group = f"{topic}-g"
    driven = CommandDrivenGroup(kafka_config, topic, group, tmp_path)
    monkeypatch.setenv("AIRFLOW_VAR_KSTATE_DRIVERS", json.dumps({"plain-rdkafka": driven.commands()}))
    producer = SeqProducer(kafka_config, topic, rate=200)
    producer.start()
    try:
        assert wait_until(lambda: len(driven.all_received) >= 20, 60), "the plain consumers read nothing"
        time.sleep(1.0)
        since = max(driven.all_received) + 1
        for target in (2, 4):
            conf = {"topic": topic, "partitions": target, "consumer_groups": [group]}
            dr = run_dag(DAG_ID, {**conf, "group_drivers": {group: "plain-rdkafka"}})
            assert dr.state == "success", states(dr)
            plan = xcom(dr, "plan")["groups"][group]
            assert (plan["type"], plan["driver"]["name"], plan["key_order"]) == (
                "CONSUMER",
                "plain-rdkafka",
                "relaxed",
            ), plan
        wait_until(lambda: set(producer.placed.values()) == set(range(4)), 15)
    finally:
        producer.stop()
    produced = {s for s in producer.produced if s >= since}
    wait_until(lambda: produced <= driven.all_received, 30)
    lost = sorted(produced - driven.all_received)
    driven.stop()
    assert len(driven.fleets) == 3, (
        f"the command pair did not restart the group each round: {len(driven.fleets)}"
    )
    assert set(producer.placed.values()) == set(range(4)), "producers never wrote to every new partition"
    assert lost == [], f"{len(lost)} records lost: {lost[:20]}"


def _window(timeline: Timeline, after: float, members: list[str], partitions: int) -> float:
    assert wait_until(lambda: timeline.window(after, set(members), partitions) is not None, 60, 0.02), (
        f"{members} never held all {partitions} partitions again"
    )
    window = timeline.window(after, set(members), partitions)
    assert window is not None
    return window["window"]


@pytest.mark.chaos  # a measurement (printed), not a proof: make chaos
def test_pause_window_against_a_plain_restart_under_the_consumer_protocol(
    kafka_config: dict[str, Any], make_topic: Any, run_dag: Any
) -> None:
    """P1 under ``group.protocol=consumer``: the consumers' downtime of the DAG's 1 -> 8 increase against a
    plain restart (every consumer ``close()``s, new ones subscribe) of the same ControlledConsumers at 8
    partitions, one definition for both (``Timeline.window``: first stop -> all 8 held again); 3 of each,
    medians printed. The issue's target is 1.2x; the assertion only bounds it loosely (shared machine)."""
    windows, restarts = [], []
    for i in range(3):
        topic = make_topic(f"k848-p1-{i}", partitions=1)
        timeline = Timeline()
        fleet = ConsumerFleet(
            kafka_config,
            topic,
            f"{topic}-g",
            controlled=True,
            check_interval=0.2,
            timeline=timeline,
            protocol=CONSUMER,
        )
        producer = SeqProducer(kafka_config, topic, rate=200, controlled=True)
        producer.start()
        try:
            since = warm_up(producer, fleet)
            began = time.monotonic()
            dr = run_dag(DAG_ID, {"topic": topic, "partitions": 8, "consumer_groups": [f"{topic}-g"]})
            assert dr.state == "success", states(dr)
            windows.append(_window(timeline, began, fleet.members, 8))
        finally:
            producer.stop()
        assert loss(producer, fleet, since, drain_timeout=30) == {}
        fleet.stop()

        topic = make_topic(f"k848-restart-{i}", partitions=8)
        timeline = Timeline()
        settings = {"controlled": True, "check_interval": 0.2, "timeline": timeline, "protocol": CONSUMER}
        old = ConsumerFleet(kafka_config, topic, f"{topic}-g", name="old", **settings)
        producer = SeqProducer(kafka_config, topic, rate=200)
        producer.start()
        new = None
        try:
            warm_up(producer, old)
            began = time.monotonic()
            old.stop()
            new = ConsumerFleet(kafka_config, topic, f"{topic}-g", name="new", **settings)
            restarts.append(_window(timeline, began, new.members, 8))
        finally:
            producer.stop()
            if new is not None:
                new.stop()
    window, restart = statistics.median(windows), statistics.median(restarts)
    print(
        f"KIP-848 P1: pause window {window:.2f} s (samples {[round(w, 2) for w in windows]}) vs plain restart "
        f"{restart:.2f} s ({[round(r, 2) for r in restarts]}): {window / restart:.2f}x"
    )
    assert window <= 3 * restart + 1.0, (windows, restarts)
