"""A group with committed offsets and no live members is seeded, so it later reads new partitions from the start."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import NewPartitions

from airflow_provider_kstate.client_piece.murmur2 import partition_for

pytestmark = pytest.mark.integration


def _commit_position(config: dict[str, Any], topic: str, group: str, expected: int) -> None:
    """Consume ``expected`` messages as ``group`` and commit, leaving the group EMPTY with offsets."""
    consumer = Consumer(
        {**config, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )
    consumer.subscribe([topic])
    seen, deadline = 0, time.monotonic() + 30
    while seen < expected and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            seen += 1
    consumer.commit(asynchronous=False)
    consumer.close()
    assert seen == expected


def _write_keys(config: dict[str, Any], topic: str, keys: list[bytes]) -> None:
    producer = Producer({**config, "partitioner": "murmur2_random"})
    for key in keys:
        producer.produce(topic, key=key, value=key)
    assert producer.flush(30) == 0


def _read_latest(
    config: dict[str, Any], topic: str, group: str, want: int, timeout: float = 30
) -> dict[int, set[bytes]]:
    """Join ``group`` with ``auto.offset.reset=latest`` and collect what it receives per partition."""
    consumer = Consumer({**config, "group.id": group, "auto.offset.reset": "latest"})
    consumer.subscribe([topic])
    got: dict[int, set[bytes]] = {}
    deadline = time.monotonic() + timeout
    while sum(len(v) for v in got.values()) < want and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            got.setdefault(msg.partition(), set()).add(msg.key())
    consumer.close()
    return got


def _new_partition_keys(partitions: int, old: int, count: int) -> list[bytes]:
    keys = [f"acct-{i}".encode() for i in range(2000)]
    return [k for k in keys if partition_for(k, partitions) >= old][:count]


def test_naive_increase_offline_group_skips(
    kafka_config: dict[str, Any], admin: Any, make_topic: Any
) -> None:
    """The scenario is real: without seeding, the offline group's latest-reset consumer skips new partitions."""
    topic = make_topic("offline-naive", partitions=2)
    group = f"{topic}-g"
    _write_keys(kafka_config, topic, [b"seed-a", b"seed-b", b"seed-c", b"seed-d"])
    _commit_position(kafka_config, topic, group, 4)
    for future in admin.create_partitions([NewPartitions(topic, 4)]).values():
        future.result(timeout=30)
    keys = _new_partition_keys(4, 2, 40)
    _write_keys(kafka_config, topic, keys)
    got = _read_latest(kafka_config, topic, group, len(keys), timeout=12)
    assert not (got.get(2, set()) | got.get(3, set())), "latest reset should have skipped the new partitions"


def test_dag_seeds_offline_group(
    kafka_config: dict[str, Any], admin: Any, make_topic: Any, run_dag: Any
) -> None:
    topic = make_topic("offline", partitions=2)
    group = f"{topic}-g"
    _write_keys(kafka_config, topic, [b"seed-a", b"seed-b", b"seed-c", b"seed-d"])
    _commit_position(kafka_config, topic, group, 4)

    dr = run_dag(
        "kstate_partition_increase",
        {"topic": topic, "partitions": 4, "consumer_groups": [], "dry_run": False},
    )
    assert dr.state == "success", {ti.task_id: ti.state for ti in dr.get_task_instances()}
    plan = dr.get_task_instance("safe_partition_increase.plan").xcom_pull(
        task_ids="safe_partition_increase.plan"
    )
    assert plan["groups"][group]["class"] == "empty"
    window = dr.get_task_instance("safe_partition_increase.pause_window").xcom_pull(
        task_ids="safe_partition_increase.pause_window"
    )
    timings = window["timings"]  # no live group: nobody was out, the window is the seeding's time
    assert 0 <= timings["live_window_s"] <= timings["whole_window_s"], timings

    keys = _new_partition_keys(4, 2, 40)
    _write_keys(kafka_config, topic, keys)
    got = _read_latest(kafka_config, topic, group, len(keys))
    received = got.get(2, set()) | got.get(3, set())
    assert received == set(keys), f"missing {set(keys) - received}"


def test_dry_run_changes_nothing(
    kafka_config: dict[str, Any], admin: Any, make_topic: Any, run_dag: Any
) -> None:
    topic = make_topic("dry", partitions=1)
    group = f"{topic}-g"
    _write_keys(kafka_config, topic, [b"a"])
    _commit_position(kafka_config, topic, group, 1)
    dr = run_dag(
        "kstate_partition_increase", {"topic": topic, "partitions": 3, "consumer_groups": [], "dry_run": True}
    )
    assert dr.state == "success"
    states = {ti.task_id.split(".")[-1]: ti.state for ti in dr.get_task_instances()}
    assert states["plan"] == "success" and states["pause_window"] == "skipped"
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 1
