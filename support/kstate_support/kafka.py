"""Kafka facts for assertions: committed offsets, partition counts, log starts; and DAG-run task states."""

from __future__ import annotations

import concurrent.futures
import json
import time
from typing import Any

from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import OffsetSpec

#: Partitions per offsets request: librdkafka's admin offset calls are quadratic in one request's size.
CHUNK = 256


def commit(admin: Any, group: str, topic: str, offsets: dict[int, int]) -> None:
    """Commit ``{partition: offset}`` for ``group`` on ``topic`` (the group must be EMPTY), in chunks.

    :param admin: a confluent-kafka ``AdminClient``.
    """
    items = sorted(offsets.items())
    for first in range(0, len(items), CHUNK):
        tps = [TopicPartition(topic, p, o) for p, o in items[first : first + CHUNK]]
        deadline = time.monotonic() + 60
        while True:
            # The answer says per partition whether the offset was taken: a fresh broker's first commit comes
            # back COORDINATOR_LOAD_IN_PROGRESS on every partition, without raising.
            # A request can also go unanswered while a fresh broker creates ``__consumer_offsets`` under load
            # (seen once: 30 s, the test's first commit): asked again with a shorter bound.
            done = admin.alter_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group, tps)], request_timeout=10
            )[group]
            try:
                answer = done.result(timeout=15)
            except concurrent.futures.TimeoutError:
                if time.monotonic() > deadline:
                    raise
                continue
            refused = {tp.partition: tp.error for tp in answer.topic_partitions if tp.error}
            if not refused:
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"group {group!r} on {topic!r}: offsets refused {refused}")
            time.sleep(0.2)


#: What a group coordinator answers while ``__consumer_offsets`` is created, loads or moves (librdkafka does
#: not mark NOT_COORDINATOR retriable on a synchronous commit: the fresh-clone CI failed on it once).
COORDINATOR_MOVING = frozenset(
    {
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
    }
)


def commit_as_consumer(
    config: dict[str, Any], group: str, topic: str, offsets: dict[int, int], within: float = 60.0
) -> None:
    """Commit ``{partition: offset}`` for ``group`` on ``topic`` through a consumer that never joins, asking
    again while the group's coordinator is created, loads or moves (up to ``within`` seconds).

    :param config: librdkafka settings (bootstrap servers, security) of the committing principal.
    """
    consumer = Consumer({**config, "group.id": group, "enable.auto.commit": False, "log_level": 2})
    deadline = time.monotonic() + within
    try:
        while True:
            try:
                consumer.commit(
                    offsets=[TopicPartition(topic, p, o) for p, o in sorted(offsets.items())],
                    asynchronous=False,
                )
                return
            except KafkaException as exc:
                error = exc.args[0]
                moving = error.retriable() or error.code() in COORDINATOR_MOVING
                if not moving or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        consumer.close()


def committed(admin: Any, group: str, topic: str, partitions: int | None = None) -> dict[int, int]:
    """Return the group's committed offsets on ``topic`` (partitions without one are absent).

    :param partitions: the topic's partition count: asked in chunks of :data:`CHUNK` (fast at thousands
        of partitions); None asks for all of the group's offsets in one request.
    """
    if partitions is None:
        requests = [ConsumerGroupTopicPartitions(group)]
    else:
        requests = [
            ConsumerGroupTopicPartitions(
                group, [TopicPartition(topic, p) for p in range(first, min(partitions, first + CHUNK))]
            )
            for first in range(0, partitions, CHUNK)
        ]
    out: dict[int, int] = {}
    for request in requests:
        result = admin.list_consumer_group_offsets([request], request_timeout=15)[group].result(timeout=30)
        out.update(
            {
                tp.partition: tp.offset
                for tp in result.topic_partitions
                if tp.topic == topic and tp.offset >= 0
            }
        )
    return out


def partition_count(admin: Any, topic: str) -> int:
    """Return the topic's partition count, as the cluster's metadata says now."""
    return len(admin.list_topics(topic, timeout=10).topics[topic].partitions)


def log_starts(admin: Any, topic: str, partitions: list[int]) -> dict[int, int]:
    """Return ``{partition: log start offset}``."""
    futures = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.earliest() for p in partitions})
    return {tp.partition: f.result(timeout=30).offset for tp, f in futures.items()}


def task_states(dr: Any) -> dict[str, str]:
    """Return ``{task id without its group: state}`` of a DagRun's task instances."""
    return {ti.task_id.split(".")[-1]: ti.state for ti in dr.get_task_instances()}


def new_partitions_taken(
    admin: Any, group: str, topic: str, old: int, new: int, published_ms: float, timeout: float
) -> tuple[dict[int, int], float]:
    """Poll the group's committed offsets every 20 ms until it has one on each of ``old .. new-1``; return
    them and the milliseconds from ``published_ms`` (the pending record's epoch) to the first poll that saw
    all of them (the last new partition's committed offset). Fails (``AssertionError``) after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        found = committed(admin, group, topic, new)
        if all(p in found for p in range(old, new)):
            return found, time.time() * 1000 - published_ms
        assert time.monotonic() < deadline, (
            f"the group has committed offsets on {sorted(found)} of {new} partitions after {timeout} s"
        )
        time.sleep(0.02)


def write_keyed_json(config: dict[str, Any], topic: str, count: int, keys: int = 97) -> None:
    """Write ``count`` records to ``topic`` with a plain producer: key ``k<i % keys>``, value
    ``{"key", "seq"}`` as JSON (what the Java and Node.js client apps read), and wait until all are delivered."""
    producer = Producer(config)
    for i in range(count):
        key = f"k{i % keys}"
        producer.produce(topic, key=key, value=json.dumps({"key": key, "seq": i}))
    assert producer.flush(30) == 0, "records left undelivered"
