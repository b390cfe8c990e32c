"""Issue 32, item 3 from Airflow: the example DAG ``kstate_streams_resize`` run with ``dag.test()`` resizes a
real Kafka Streams 4.4 application (``support/streams``, the ``count`` shape on the classic protocol) under
live keyed traffic, 2 -> 4 partitions, with ``replacer=local``.

The application and its producer are driven by command pairs named in the run's params and defined in the
``kstate_drivers`` Variable (as whoever deploys the DAG would). After the run: its state is success, the
report in XCom names the downtime, the moved keys and a passed deep check, the topic's lease is released,
and after more traffic on the new layout every key's count equals a from-scratch count of every
acknowledged input record (0 wrong, 0 lost, 0 over). The helpers are ``test_streams_resize``'s.

Chaos (a JVM started three times and a DAG run: ~1-2 min on a loaded machine).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from kstate_support import streams

from airflow_provider_kstate.cluster.admin import ClusterAdmin
from airflow_provider_kstate.cluster.lease_log import KafkaLeaseLog
from airflow_provider_kstate.increase.drivers import CommandPairs
from airflow_provider_kstate.increase.model import DEFAULT_LEASE_TOPIC
from airflow_provider_kstate.lease_rules import LeaseRecords
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

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

DAG_ID = "kstate_streams_resize"


def test_the_dag_resizes_a_stateful_streams_application(
    kafka_config: dict[str, Any],
    topics: Any,  # noqa: F811 - the fixture imported above
    run_dag: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    _skip_unless_plain(kafka_config)
    app = _app("count", "classic", kafka_config, topics, tmp_path / "app")
    app_id, inputs, output = app._args["app_id"], app._args["inputs"], app._args["output"]
    log = _Log()
    pairs = CommandPairs(inputs[0], log)
    driver = _app_driver(app, tmp_path / "driver")
    traffic = HeldTraffic(kafka_config, inputs, tmp_path / "traffic", rate=RATE, keys=KEYS)
    registry = {"streams-app": driver.to_dict(), "traffic": traffic.driver().to_dict()}
    monkeypatch.setenv("AIRFLOW_VAR_KSTATE_DRIVERS", json.dumps(registry))
    assert not pairs.start({app_id: driver}, "group"), log.lines[-3:]
    try:
        traffic.start()
        time.sleep(6)  # state in the changelog, offsets committed
        started = time.monotonic()
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
        run_s = round(time.monotonic() - started, 1)
        time.sleep(8)  # traffic on the new layout, keys on their new partitions
    finally:
        traffic.stop()
    records, out = _results(traffic, app, kafka_config, output, lambda: pairs.stop({app_id: driver}, "group"))
    ti = dr.get_task_instance("resize")
    report = ti.xcom_pull(task_ids="resize")
    verdict = streams.count_verdict(records, out)
    print(json.dumps({"run_s": run_s, "report": report, "verdict": verdict}, indent=1, default=str))
    assert str(getattr(dr.state, "value", dr.state)) == "success", (dr.state, ti.state)
    assert report["resized"] and report["partitions"] == {"before": 2, "after": 4}, report
    assert report["deep_check_passed"] and report["moved_keys"] > 0, report
    assert report["downtime_s"] > 0 and not report["start_failures"], report
    assert sum(1 for r in records if r.partition >= 2) > 0, "traffic reached the new partitions"
    assert (verdict["keys_wrong"], verdict["lost"], verdict["over"]) == (0, 0, 0), verdict
    leases = LeaseRecords(KafkaLeaseLog(ClusterAdmin(kafka_config), DEFAULT_LEASE_TOPIC))
    assert leases.current(inputs[0]) is None, "the topic's lease is released"
