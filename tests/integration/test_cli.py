"""The command the issue names: `airflow dags test kstate_partition_increase -c '{...}'` runs the whole safe order."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer

pytestmark = pytest.mark.integration


def test_airflow_dags_test_cli(kafka_config: dict[str, Any], admin: Any, make_topic: Any) -> None:
    topic = make_topic("cli", partitions=1)
    group = f"{topic}-g"
    producer = Producer(kafka_config)
    producer.produce(topic, value=b"x")
    producer.flush(30)
    consumer = Consumer({**kafka_config, "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and consumer.poll(0.5) is None:
        pass
    consumer.commit(asynchronous=False)
    consumer.close()

    conf = json.dumps({"topic": topic, "partitions": 3, "consumer_groups": [group]})
    airflow = str(Path(sys.executable).with_name("airflow"))
    out = subprocess.run(
        [airflow, "dags", "test", "kstate_partition_increase", "-c", conf],
        capture_output=True,
        text=True,
        timeout=300,
    )
    log = out.stdout + out.stderr
    assert "DagRun Finished" in log and "state=success" in log, log[-3000:]
    assert "VERIFY" in log and "no group skips a message" in log
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 3
    from airflow_provider_kstate.hooks.admin import KStateAdminHook

    assert KStateAdminHook().committed_offsets(group, topic) == {0: 1, 1: 0, 2: 0}
