"""The promises Tansu 0.6.0 breaks, measured with plain confluent-kafka clients (issue 17).

Each test proves one deviation the provider must not trust blindly; the same probes keep every promise on
the embedded broker (``/work/notes/tansu-findings.md`` has both columns). If a Tansu upgrade fixes one, its
test fails here: then the README's compatibility table and the doctor's expectations change with it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import NewPartitions, OffsetSpec


def _latest(admin: Any, topic: str, isolation: Any = IsolationLevel.READ_UNCOMMITTED) -> int:
    futures = admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.latest()}, isolation_level=isolation)
    return int(next(iter(futures.values())).result(timeout=10).offset)


def _read(config: dict[str, Any], topic: str, isolation: str) -> tuple[list[bytes], int]:
    """Read partition 0 from 0 to its EOF; return the values and the EOF offset."""
    consumer = Consumer(
        {
            **config,
            "group.id": f"probe-{uuid.uuid4().hex[:6]}",
            "isolation.level": isolation,
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is None:
                continue
            if m.error() is not None:
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                return values, int(m.offset())
            values.append(m.value())
        raise AssertionError("no partition EOF within 15 s")
    finally:
        consumer.close()


def test_list_offsets_latest_is_the_last_batchs_base_plus_one(
    kafka_config: dict[str, Any], admin: Any, make_topic: Callable[..., str]
) -> None:
    topic = make_topic("latest")
    producer = Producer({**kafka_config, "linger.ms": 200})
    for i in range(10):
        producer.produce(topic, partition=0, key=b"k%d" % i, value=b"v")
    producer.flush(10)  # one batch: offsets 0..9
    values, end = _read(kafka_config, topic, "read_uncommitted")
    assert (len(values), end) == (10, 10)  # a fetch reaches 10
    assert _latest(admin, topic) == 1  # Kafka: 10 (the batch's base offset 0, plus 1)
    assert _latest(admin, topic, IsolationLevel.READ_COMMITTED) == 1


def test_read_committed_returns_the_records_of_an_aborted_transaction(
    kafka_config: dict[str, Any], make_topic: Callable[..., str], unique: Callable[[str], str]
) -> None:
    topic = make_topic("aborted")
    producer = Producer({**kafka_config, "transactional.id": unique("txn")})
    producer.init_transactions(10)
    producer.begin_transaction()
    producer.produce(topic, partition=0, key=b"acct-020", value=b"120")
    producer.commit_transaction(10)
    producer.begin_transaction()
    producer.produce(topic, partition=0, key=b"acct-020", value=b"999999")
    producer.flush(10)
    producer.abort_transaction(10)
    values, end = _read(kafka_config, topic, "read_committed")
    assert values == [b"120", b"999999"]  # Kafka: [b"120"]
    assert end == 4  # the markers take offsets 1 and 3 as on Kafka


def test_the_last_stable_offset_is_0_while_a_transaction_is_open(
    kafka_config: dict[str, Any], admin: Any, make_topic: Callable[..., str], unique: Callable[[str], str]
) -> None:
    topic = make_topic("lso")
    plain = Producer(kafka_config)
    for i in range(3):
        plain.produce(topic, partition=0, key=b"k", value=b"%d" % i)
        plain.flush(10)
    txn = Producer({**kafka_config, "transactional.id": unique("open")})
    txn.init_transactions(10)
    txn.begin_transaction()
    txn.produce(topic, partition=0, key=b"k", value=b"open")
    txn.flush(10)
    try:
        assert _latest(admin, topic, IsolationLevel.READ_COMMITTED) == 0  # Kafka: 3
        values, end = _read(kafka_config, topic, "read_committed")
        assert (len(values), end) == (3, 3)  # the fetch itself stops at the open transaction
    finally:
        txn.abort_transaction(10)


def test_a_never_seen_group_is_described_empty_and_a_live_member_is_invisible(
    kafka_config: dict[str, Any], admin: Any, make_topic: Callable[..., str], unique: Callable[[str], str]
) -> None:
    ghost = unique("never-seen")
    described = admin.describe_consumer_groups([ghost])[ghost].result(timeout=10)
    assert described.state == ConsumerGroupState.EMPTY  # Kafka: DEAD
    listed = admin.list_consumer_groups().result(timeout=10)
    assert ghost not in {g.group_id for g in listed.valid}  # ListGroups tells the truth
    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(ghost)])
    assert offsets[ghost].result(timeout=10).topic_partitions in ([], None)

    topic, group = make_topic("live", partitions=2), unique("live")
    consumer = Consumer({**kafka_config, "group.id": group, "session.timeout.ms": 6000})
    assigned: list[Any] = []
    consumer.subscribe([topic], on_assign=lambda _c, parts: assigned.extend(parts))
    try:
        deadline = time.monotonic() + 30
        while len(assigned) < 2 and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert len(assigned) == 2  # the client holds both partitions
        live = admin.describe_consumer_groups([group])[group].result(timeout=10)
        assert live.state == ConsumerGroupState.STABLE
        assert live.members == []  # Kafka: one member with both partitions
    finally:
        consumer.close()


def test_create_partitions_is_not_supported(admin: Any, make_topic: Callable[..., str]) -> None:
    topic = make_topic("grow")
    with pytest.raises(KafkaException) as caught:
        admin.create_partitions([NewPartitions(topic, 2)])[topic].result(timeout=10)
    assert caught.value.args[0].code() == KafkaError._UNSUPPORTED_FEATURE


def test_delete_records_drops_the_connection(
    kafka_config: dict[str, Any], admin: Any, make_topic: Callable[..., str]
) -> None:
    from confluent_kafka.admin import AdminClient

    topic = make_topic("trim")
    producer = Producer(kafka_config)
    for i in range(5):
        producer.produce(topic, partition=0, key=b"k", value=b"%d" % i)
    producer.flush(10)
    with pytest.raises(KafkaException) as caught:
        futures = admin.delete_records(
            [TopicPartition(topic, 0, 3)], request_timeout=10, operation_timeout=10
        )
        next(iter(futures.values())).result(timeout=15)
    assert caught.value.args[0].code() == KafkaError._TRANSPORT
    assert topic in AdminClient(kafka_config).list_topics(timeout=10).topics  # the broker itself lives on


def test_live_traffic_stops_when_the_test_fails(
    kafka_config: dict[str, Any], make_topic: Callable[..., str]
) -> None:
    """A failing test inside ``live_traffic`` leaves no producer or consumer thread behind (before, a test
    that failed on Tansu left the fleet polling and the whole pytest process died at exit, rc 139)."""
    from kstate_support.traffic import live_traffic, wait_until

    topic = make_topic("traffic")
    started: list[Any] = []
    with pytest.raises(RuntimeError, match="the test failed here"):
        with live_traffic(kafka_config, topic, f"{topic}-g", n=2) as (producer, fleet):
            started += [producer, *fleet._threads]
            assert wait_until(lambda: len(producer.placed) > 20, 20)
            raise RuntimeError("the test failed here")
    assert len(started) == 3 and not any(thread.is_alive() for thread in started)
