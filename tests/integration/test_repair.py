"""Finish or repair from any state, and protect every group at risk (issue: crash-safe increases).

Each scenario is proven first: the naive path really loses messages. Then the provider's run repairs it.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import NewPartitions
from kstate_support.kafka import commit, committed, partition_count, task_states

from airflow_provider_kstate.client_piece.murmur2 import partition_for
from airflow_provider_kstate.hooks.lease import KStateLeaseHook

pytestmark = pytest.mark.integration

DAG_ID = "kstate_partition_increase"
PER_STEP = "kstate_partition_increase_per_step"
G = "safe_partition_increase"


def _write(config: dict[str, Any], topic: str, partitions: int, old: int, count: int) -> set[bytes]:
    """Write ``count`` keyed messages that land on partitions >= ``old`` (murmur2, as Java places them)."""
    keys = [k for k in (f"acct-{i}".encode() for i in range(5000)) if partition_for(k, partitions) >= old][
        :count
    ]
    producer = Producer({**config, "partitioner": "murmur2_random"})
    for key in keys:
        producer.produce(topic, key=key, value=key)
    assert producer.flush(30) == 0
    return set(keys)


def _read_latest(config: dict[str, Any], topic: str, group: str, want: int, timeout: float) -> set[bytes]:
    """Join ``group`` with ``auto.offset.reset=latest``; return the keys it receives."""
    consumer = Consumer({**config, "group.id": group, "auto.offset.reset": "latest"})
    consumer.subscribe([topic])
    got: set[bytes] = set()
    deadline = time.monotonic() + timeout
    try:
        while len(got) < want and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                got.add(msg.key() or b"")
    finally:
        consumer.close()
    return got


def test_topic_grown_outside_the_tool_is_repaired(
    kafka_config: dict[str, Any], admin: Any, make_topic: Any, run_dag: Any, capfd: Any
) -> None:
    """KAFKA-12261 made with kafka-topics --alter: a repair run (target = current count) seeds the gaps."""
    topic = make_topic("outside", partitions=2)
    billing, audit = f"{topic}-billing", f"{topic}-audit"
    for group in (billing, audit):
        commit(admin, group, topic, {0: 0, 1: 0})
    for future in admin.create_partitions([NewPartitions(topic, 4)]).values():
        future.result(timeout=30)
    commit(admin, audit, topic, {2: 0})  # half-done: audit was seeded on partition 2 only
    # The scenario is real: one group reading now with latest reset skips what producers write there.
    lost = _write(kafka_config, topic, 4, 2, 20)
    assert not _read_latest(kafka_config, topic, f"{topic}-probe", len(lost), timeout=8) & lost
    capfd.readouterr()

    dr = run_dag(DAG_ID, {"topic": topic, "partitions": 4, "consumer_groups": [], "dry_run": False})
    out, err = capfd.readouterr()
    assert dr.state == "success", task_states(dr)
    assert partition_count(admin, topic) == 4
    assert "repair (seed every gap, create nothing)" in out + err
    assert committed(admin, billing, topic) == {0: 0, 1: 0, 2: 0, 3: 0}
    assert committed(admin, audit, topic) == {0: 0, 1: 0, 2: 0, 3: 0}
    window = dr.get_task_instance(f"{G}.pause_window").xcom_pull(task_ids=f"{G}.pause_window")
    seeded = window["topics"][topic]["groups"]
    assert window["mode"] == "repair" and seeded[billing]["seeded"] == 2
    assert seeded[audit]["seeded"] == 1 and seeded[audit]["kept"] == 3
    # Nothing the producers wrote before the repair is skipped by either group.
    for group in (billing, audit):
        assert _read_latest(kafka_config, topic, group, len(lost), timeout=30) >= lost, group
    assert KStateLeaseHook().current(topic) is None

    again = run_dag(DAG_ID, {"topic": topic, "partitions": 4, "consumer_groups": [], "dry_run": False})
    assert again.state == "success"
    summary = again.get_task_instance(f"{G}.pause_window").xcom_pull(task_ids=f"{G}.pause_window")
    assert summary["seeded"] == 0, "a second repair has nothing to do"


def test_a_typo_never_leaves_a_group_unprotected(
    kafka_config: dict[str, Any], admin: Any, make_topic: Any, run_dag: Any, capfd: Any
) -> None:
    """Two offline groups; the run names only a mistyped one: the plan fails and the topic is not grown."""
    topic = make_topic("typo", partitions=1)
    billing, audit = f"{topic}-billing", f"{topic}-audit"
    for group in (billing, audit):
        commit(admin, group, topic, {0: 0})
    capfd.readouterr()
    dr = run_dag(
        DAG_ID, {"topic": topic, "partitions": 4, "consumer_groups": ["ghost-group"], "dry_run": False}
    )
    out, err = capfd.readouterr()
    assert dr.state == "failed" and task_states(dr)["plan"] == "failed"
    assert "UnknownGroupError" in out + err and "likely a typo" in out + err
    assert partition_count(admin, topic) == 1

    named = run_dag(DAG_ID, {"topic": topic, "partitions": 4, "consumer_groups": [billing], "dry_run": False})
    out, err = capfd.readouterr()
    assert named.state == "failed" and "UnprotectedGroupError" in out + err and audit in out + err
    assert partition_count(admin, topic) == 1

    accepted = run_dag(
        DAG_ID,
        {
            "topic": topic,
            "partitions": 4,
            "consumer_groups": [billing],
            "exclude_groups": [audit],
            "dry_run": False,
        },
    )
    out, err = capfd.readouterr()
    assert accepted.state == "success", task_states(accepted)
    assert f"RISK ACCEPTED: group {audit}" in out + err
    assert committed(admin, billing, topic) == {0: 0, 1: 0, 2: 0, 3: 0}
    assert committed(admin, audit, topic) == {0: 0}, "an excluded group is left alone"


def test_a_failed_runs_lease_is_taken_over_and_its_gaps_repaired(
    kafka_config: dict[str, Any], admin: Any, make_topic: Any, run_dag: Any, monkeypatch: Any, capfd: Any
) -> None:
    """A run stops after the create step with the lease held; a new run takes the lease over from the
    ended run at once (no 4 h wait), seeds every gap the first run left, resumes and releases the lease."""
    topic = make_topic("takeover", partitions=1)
    group = f"{topic}-g"
    commit(admin, group, topic, {0: 0})
    monkeypatch.setenv(
        "AIRFLOW_CONN_KAFKA_UNREACHABLE",
        json.dumps(
            {"conn_type": "kafka", "extra": {"bootstrap.servers": "127.0.0.1:1", "socket.timeout.ms": 2000}}
        ),
    )
    conf = {"topic": topic, "partitions": 3, "consumer_groups": [], "dry_run": False}
    broken = {"kafka_config_id": "kafka_unreachable", "request_timeout": 3.0, "retries": 0}
    first = run_dag(PER_STEP, conf, overrides={f"{G}.seed_offsets": broken})
    assert first.state == "failed" and task_states(first)["increase_partitions"] == "success"
    held = KStateLeaseHook().current(topic)
    assert held is not None and held.owner == f"{PER_STEP}/{first.run_id}"
    assert committed(admin, group, topic) == {0: 0}, "the group has gaps on partitions 1-2"
    capfd.readouterr()

    second = run_dag(DAG_ID, conf)
    out, err = capfd.readouterr()
    assert second.state == "success", task_states(second)
    assert f"taking the lease over from {PER_STEP}/{first.run_id}" in out + err
    assert committed(admin, group, topic) == {0: 0, 1: 0, 2: 0}
    assert KStateLeaseHook().current(topic) is None
