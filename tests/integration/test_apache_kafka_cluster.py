"""The broker helper's three-node Apache Kafka cluster (``python -m kstate_support.broker up --nodes 3``):
replication factor 3 with ``min.insync.replicas=2``, a node killed and brought back on its own data.

It starts its own cluster beside the session's broker (about 10 s on 2 cores) and stops it afterwards.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from kstate_support import apache_kafka, broker
from kstate_support.traffic import wait_until

# A fault test (nodes SIGKILLed; about 40 s quiet, 100 s in a loaded suite): make chaos.
pytestmark = [pytest.mark.integration, pytest.mark.chaos]


@pytest.fixture
def three_nodes(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    if broker.kind() != "kafka":
        pytest.skip("starts its own Apache Kafka cluster: not under KSTATE_BROKER=noida")
    data_dir = tmp_path / "cluster"
    bootstrap = broker.up(data_dir, nodes=3)
    try:
        yield data_dir, bootstrap
    finally:
        broker.down(data_dir)


def _partitions(admin: AdminClient, topic: str) -> dict[int, Any]:
    """The topic's partitions' metadata; ``{}`` when the read times out (with nodes down the client may ask a
    dead one first: a chaos run once timed out here while two of three were killed), so a wait looks again."""
    try:
        return dict(admin.list_topics(topic, timeout=10).topics[topic].partitions)
    except KafkaException:
        return {}


def _isr(admin: AdminClient, topic: str) -> list[list[int]]:
    partitions = _partitions(admin, topic)
    return [sorted(partitions[p].isrs) for p in sorted(partitions)]


def _leaders(admin: AdminClient, topic: str) -> set[int]:
    return {p.leader for p in _partitions(admin, topic).values()}


def _produce(bootstrap: str, topic: str, count: int) -> int:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 8000})
    failed: list[Any] = []
    for i in range(count):
        producer.produce(
            topic, key=str(i).encode(), value=b"v", on_delivery=lambda e, _m: e and failed.append(e)
        )
    producer.flush(15)
    return count - len(failed)


def test_three_nodes_replicate_and_a_killed_node_catches_up(three_nodes: tuple[Path, str]) -> None:
    data_dir, bootstrap = three_nodes
    admin = AdminClient({"bootstrap.servers": bootstrap})
    assert sorted(admin.list_topics(timeout=10).brokers) == [1, 2, 3]
    for future in admin.create_topics([NewTopic("replicated", 3)]).values():
        future.result(timeout=30)
    wait_until(lambda: _isr(admin, "replicated") == [[1, 2, 3]] * 3, 30)
    configs = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "replicated")])
    entries = next(iter(configs.values())).result(timeout=10)
    assert entries["min.insync.replicas"].value == "2"

    apache_kafka.kill_node(data_dir, 3)  # SIGKILL: no controlled shutdown
    wait_until(lambda: all(3 not in isr for isr in _isr(admin, "replicated")), 60)
    assert _produce(bootstrap, "replicated", 200) == 200  # two in sync: acks=all still succeeds

    apache_kafka.kill_node(data_dir, 2)
    wait_until(lambda: _leaders(admin, "replicated") == {1}, 60)
    assert _produce(bootstrap, "replicated", 20) < 20  # below min.insync.replicas: refused, not lost silently

    started = time.monotonic()
    broker.up(data_dir, nodes=3)  # the same ports and data: nodes 2 and 3 come back and catch up
    wait_until(lambda: _isr(admin, "replicated") == [[1, 2, 3]] * 3, 90)
    print(f"\nnodes 2 and 3 back in sync {time.monotonic() - started:.1f} s after the restart")
