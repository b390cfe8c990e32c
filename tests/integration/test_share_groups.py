"""Share groups (KIP-932) on Apache Kafka 4.4 (issue 30, item 6), with confluent-kafka's ``ShareConsumer``.

Measured first, without the provider: a share group reading a topic at the default
``share.auto.offset.reset=latest`` first reads a partition added by a naive increase seconds after it exists
(its next heartbeat), yet on 4.4.0 it gets every record written there before (the broker starts an added
partition at its first record; 4.2.0 and 4.2.2 started it at latest and lost, see the broker doctor's
``share_new_partitions``). Then the plan: it sees which share groups read the topic (DescribeShareGroupOffsets)
and not the others, refuses one at ``latest`` with the fix, and after that fix (the group's
``share.auto.offset.reset=earliest``) the DAG's run leaves the group alone and it loses nothing.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from confluent_kafka import ShareConsumer
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions
from kstate_support.traffic import SeqProducer, wait_until

pytestmark = pytest.mark.integration

DAG_ID = "kstate_partition_increase"
PREFIX = "safe_partition_increase."


class ShareReaders:
    """Two ShareConsumers of one share group polling ``topic`` in threads; what each record's partition
    was and when the group first read each partition."""

    def __init__(self, config: dict[str, Any], topic: str, group: str) -> None:
        self.received: dict[int, int] = {}
        self.first_read: dict[int, float] = {}
        self._halt = threading.Event()
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._run, args=(config, topic, group), daemon=True) for _ in range(2)
        ]
        for thread in self._threads:
            thread.start()

    def _run(self, config: dict[str, Any], topic: str, group: str) -> None:
        consumer = ShareConsumer({**config, "group.id": group})
        consumer.subscribe([topic])
        try:
            while not self._halt.is_set():
                for msg in consumer.poll(0.2):
                    if msg.error() is None:
                        with self._lock:
                            self.received[int(msg.value())] = msg.partition()
                            self.first_read.setdefault(msg.partition(), time.monotonic())
        finally:
            consumer.close()

    def stop(self) -> None:
        self._halt.set()
        for thread in self._threads:
            thread.join(30)


def _reset(admin: Any, group: str) -> str:
    resource = ConfigResource(ConfigResource.Type.GROUP, group)
    return str(admin.describe_configs([resource])[resource].result(30)["share.auto.offset.reset"].value)


def _set_earliest(admin: Any, group: str) -> None:
    """What ``kafka-configs.sh --entity-type groups --entity-name G --alter --add-config
    share.auto.offset.reset=earliest`` sends (IncrementalAlterConfigs on the GROUP resource)."""
    entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ConfigResource.Type.GROUP, group, incremental_configs=[entry])
    admin.incremental_alter_configs([resource])[resource].result(30)


def _warm(producer: SeqProducer, readers: ShareReaders) -> int:
    assert wait_until(lambda: len(readers.received) >= 20, 60), "the share group read nothing"
    time.sleep(1.0)
    return max(readers.received) + 1


@pytest.mark.chaos  # a measurement of the broker (the doctor's share_new_partitions checks it in make test)
def test_a_naive_increase_at_a_share_group_on_kafka_4_4_loses_nothing(
    kafka_config: dict[str, Any], admin: Any, make_topic: Any
) -> None:
    """At the default ``latest``, the share group first reads the added partition seconds after the create
    (records were written to it meanwhile), and still receives every one of them: the broker starts it at
    its first record."""
    topic = make_topic("share-naive", partitions=1)
    group = f"{topic}-sg"
    readers = ShareReaders(kafka_config, topic, group)
    producer = SeqProducer(kafka_config, topic, rate=200)
    producer.start()
    try:
        since = _warm(producer, readers)
        assert _reset(admin, group) == "latest"
        grown = time.monotonic()
        admin.create_partitions([NewPartitions(topic, 2)])[topic].result(30)
        assert wait_until(lambda: 1 in readers.first_read, 30), "the share group never read partition 1"
        time.sleep(2)
    finally:
        producer.stop()
    produced = {s for s in producer.produced if s >= since}
    wait_until(lambda: produced <= set(readers.received), 30)
    readers.stop()
    late = readers.first_read[1] - grown
    early = [s for s in produced if producer.placed[s] == 1]
    lost = sorted(produced - set(readers.received))
    print(
        f"share naive on 4.4: partition 1 first read {late:.2f} s after the create; {len(early)} records "
        f"written to it; lost {len(lost)} of {len(produced)}"
    )
    assert late > 1.0, f"partition 1 was read {late:.2f} s after the create: no window to lose records in"
    assert early, "no record was written to partition 1"
    assert lost == [], f"{len(lost)} records lost: {lost[:20]}"


def _broker_keeps_new_partitions() -> bool:
    """The doctor's verdict on ``share_new_partitions``, as the plan just read it (cached by the run)."""
    from airflow_provider_kstate.doctor.promises import SHARE_NEW_PARTITIONS
    from airflow_provider_kstate.hooks.doctor import KStateDoctorHook

    verdict = KStateDoctorHook("kafka_default").last_verdict()
    assert verdict is not None, "the plan's broker check left no verdict"
    return verdict.kept(SHARE_NEW_PARTITIONS)


def test_the_plan_sees_which_share_groups_read_the_topic_and_protects_them(
    kafka_config: dict[str, Any], admin: Any, make_topic: Any, run_dag: Any
) -> None:
    """A share group reading the topic is seen (not a share group that reads another topic). Where the
    broker starts it on new partitions at their first record (the doctor's ``share_new_partitions``,
    kept on Kafka 4.4) the run leaves it alone at ``latest``; where it does not (4.2, 4.3) the plan fails
    with the fix, and with the fix applied the run leaves it alone (``share-safe``). Either way it loses
    nothing over 2 -> 4. (The refusal's message is checked in the unit tests.)"""
    topic, other = make_topic("share-plan", partitions=2), make_topic("share-other", partitions=1)
    group, bystander = f"{topic}-sg", f"{other}-sg"
    readers = ShareReaders(kafka_config, topic, group)
    elsewhere = ShareReaders(kafka_config, other, bystander)
    producer = SeqProducer(kafka_config, topic, rate=200)
    producer.start()
    try:
        since = _warm(producer, readers)
        feeder = SeqProducer(kafka_config, other, rate=50)
        feeder.start()
        assert wait_until(lambda: len(elsewhere.received) > 5, 60), "the bystander share group read nothing"
        feeder.stop()
        first = run_dag(DAG_ID, {"topic": topic, "partitions": 4, "consumer_groups": []})
        kept = _broker_keeps_new_partitions()
        if kept:  # Kafka 4.4+: the broker starts the share group on new partitions at their first record
            dr, reset = first, "latest"
        else:  # Kafka 4.2, 4.3: refused with the fix; applied, the run leaves the group alone
            states = {ti.task_id.removeprefix(PREFIX): ti.state for ti in first.get_task_instances()}
            assert first.state == "failed" and states["plan"] == "failed", states
            assert admin.list_topics(topic, timeout=10).topics[topic].partitions.keys() == {0, 1}
            _set_earliest(admin, group)
            dr, reset = run_dag(DAG_ID, {"topic": topic, "partitions": 4, "consumer_groups": []}), "earliest"
        assert dr.state == "success", {ti.task_id: ti.state for ti in dr.get_task_instances()}
        plan = dr.get_task_instance(PREFIX + "plan").xcom_pull(task_ids=PREFIX + "plan")["groups"]
        wait_until(lambda: set(producer.placed.values()) == set(range(4)), 15)
    finally:
        producer.stop()
        elsewhere.stop()
    produced = {s for s in producer.produced if s >= since}
    wait_until(lambda: produced <= set(readers.received), 30)
    readers.stop()
    assert plan[group]["class"] == "share-safe" and plan[group]["share_reset"] == reset, (kept, plan)
    assert bystander not in plan, f"a share group reading another topic is not at risk: {plan}"
    assert set(producer.placed.values()) == set(range(4))
    lost = sorted(produced - set(readers.received))
    assert lost == [], f"{len(lost)} records lost: {lost[:20]}"
