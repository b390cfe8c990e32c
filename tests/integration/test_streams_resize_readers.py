"""Issue 40, item 3: one run for every reader of a topic. The example DAG ``kstate_streams_resize`` resizes a
real Kafka Streams 4.4 application (``support/streams``, the ``count`` shape on the classic protocol) whose
input is also read by a service group of two ControlledConsumers (the client piece, ``auto.offset.reset=
latest``), under live keyed traffic, 2 -> 4 partitions, ``replacer=local``.

Before, the resize refused the topic (``UnprotectedGroupError``: another group reads it), and the plain
increase left the application's state on the wrong partitions. Now the one run takes the service group out
of its group once the application is stopped, grows and re-places, seeds the group on the new partitions,
brings it back before the application starts, and starts the producers once the group consumed the old
partitions. After the run: success; the plan named both readers; every key's count equals a from-scratch
count of every acknowledged input record (0 wrong, 0 lost, 0 over); the service group processed every record
written while it was a member, the new partitions' too (0 lost), and each key's records in order.
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from kstate_support import streams
from kstate_support.traffic import wait_until

from airflow_provider_kstate.client_piece.consumer import ControlledConsumer
from airflow_provider_kstate.increase.drivers import CommandPairs
from tests.integration.test_streams_resize import (
    KEYS,
    RATE,
    HeldTraffic,
    _app,
    _app_driver,
    _Log,
    _results,
    _skip_unless_plain,
    topics,  # noqa: F401 - the fixture
)

pytestmark = [pytest.mark.integration]

DAG_ID = "kstate_streams_resize"


class ServiceGroup:
    """Two ControlledConsumers of one group polling in threads; what each processed, in order."""

    def __init__(self, config: dict[str, Any], topic: str, group: str) -> None:
        self.seen: list[tuple[str, int, int]] = []  # (key, seq, partition) in processing order per member
        self.order: dict[str, list[int]] = defaultdict(list)
        self._lock = threading.Lock()
        self._halt = threading.Event()
        settings = {**config, "group.id": group, "auto.offset.reset": "latest"}
        self._consumers = [
            ControlledConsumer({**settings, "client.id": f"{group}-{i}"}, [topic], check_interval=0.1)
            for i in range(2)
        ]
        self._threads = [threading.Thread(target=self._loop, args=(c,), daemon=True) for c in self._consumers]
        for thread in self._threads:
            thread.start()

    def _loop(self, consumer: Any) -> None:
        while not self._halt.is_set():
            msg = consumer.poll(0.1)
            if msg is None or msg.error():
                continue
            key, seq = msg.key().decode(), int(msg.value())
            with self._lock:
                self.seen.append((key, seq, msg.partition()))
                self.order[key].append(seq)
        consumer.close()

    def seqs(self) -> set[int]:
        with self._lock:
            return {seq for _k, seq, _p in self.seen}

    def out_of_order(self) -> int:
        """Keys whose records this group processed out of their written order."""
        with self._lock:
            return sum(1 for seqs in self.order.values() if seqs != sorted(seqs))

    def stop(self) -> None:
        self._halt.set()
        for thread in self._threads:
            thread.join(30)


def test_one_run_resizes_the_streams_application_and_protects_the_other_readers_of_its_input(
    kafka_config: dict[str, Any],
    admin: Any,
    topics: Any,  # noqa: F811 - the fixture imported above
    run_dag: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    _skip_unless_plain(kafka_config)
    app = _app("count", "classic", kafka_config, topics, tmp_path / "app")
    app_id, inputs, output = app._args["app_id"], app._args["inputs"], app._args["output"]
    service = f"{app_id}-svc"
    log = _Log()
    pairs = CommandPairs(inputs[0], log)
    driver = _app_driver(app, tmp_path / "driver")
    traffic = HeldTraffic(kafka_config, inputs, tmp_path / "traffic", rate=RATE, keys=KEYS)
    registry = {"streams-app": driver.to_dict(), "traffic": traffic.driver().to_dict()}
    monkeypatch.setenv("AIRFLOW_VAR_KSTATE_DRIVERS", json.dumps(registry))
    assert not pairs.start({app_id: driver}, "group"), log.lines[-3:]
    group = ServiceGroup(kafka_config, inputs[0], service)

    def assigned() -> bool:
        desc = admin.describe_consumer_groups([service])[service].result(timeout=10)
        held = {tp.partition for m in desc.members for tp in m.assignment.topic_partitions}
        return desc.state.name == "STABLE" and held == {0, 1}

    try:
        assert wait_until(assigned, 60), "the service group never held both partitions"
        traffic.start()
        time.sleep(6)  # state in the changelog, offsets committed by both readers
        since = len(traffic.records())
        dr = run_dag(
            DAG_ID,
            {
                "topic": inputs[0],
                "partitions": 4,
                "application_id": app_id,
                "app_driver": "streams-app",
                "producer_drivers": ["traffic"],
                "replacer": "local",
            },
        )
        time.sleep(8)  # traffic on the new layout, keys on their new partitions
    finally:
        traffic.stop()
    try:
        records, out = _results(
            traffic, app, kafka_config, output, lambda: pairs.stop({app_id: driver}, "group")
        )
        written = {r.seq for r in records[since:] if r.topic == inputs[0]}
        wait_until(lambda: written <= group.seqs(), 60)
    finally:
        group.stop()
    ti = dr.get_task_instance("resize")
    report = ti.xcom_pull(task_ids="resize")
    verdict = streams.count_verdict(records, out)
    lost = sorted(written - group.seqs())
    on_new = sum(1 for _k, _s, p in group.seen if p >= 2)
    print(
        json.dumps({"report": report, "verdict": verdict, "service_lost": len(lost)}, indent=1, default=str)
    )
    assert str(getattr(dr.state, "value", dr.state)) == "success", (dr.state, ti.state)
    assert report["resized"] and report["partitions"] == {"before": 2, "after": 4}, report
    assert report["deep_check_passed"] and report["moved_keys"] > 0, report
    others = report["others"]
    assert others["paused"]["groups"] == 1 and others["drain"]["drained"], others
    assert others["topics"][inputs[0]]["groups"][service]["seeded"] == 2, others
    assert (verdict["keys_wrong"], verdict["lost"], verdict["over"]) == (0, 0, 0), verdict
    assert sum(1 for r in records if r.partition >= 2) > 0 and on_new > 0, (
        "traffic reached the new partitions"
    )
    assert lost == [], f"the service group lost {len(lost)} records: {lost[:20]}"
    assert group.out_of_order() == 0, "a key's records were processed out of order"
