"""Issue 32, item 5: each shape of the Kafka Streams 4.4 app (``support/streams``: ``count``, the ``join``'s
window stores, the stateless ``filter``) resized 2 -> 4 by the ``kstate_streams_resize`` DAG (``dag.test()``,
``replacer=local``, classic protocol) under live keyed traffic; and beside them (:data:`VARIANTS`) the count
and the join on KIP-1071's streams protocol (``group.protocol=streams``: a streams group the broker assigns),
and the count with ``replacer=spark`` (``spark-submit replace_changelog.py`` in the application's downtime).

* ``test_each_shape_under_live_traffic``: a keyed producer writes to the app's sources (50 records/s each,
  40 keys, murmur2) before, during and after the run; the DAG holds it by its driver for the window only (its
  contract: every producer of the sources is named in ``producer_drivers``) and it goes on by itself
  afterwards. Then: 0 acknowledged input records missing from the sources, 0 lost and 0 wrong results
  against the truth the test computes from every acknowledged record (``kstate_support.streams``'s
  verdicts), and the app's downtime (its driver's stop command to its ready check: RUNNING with tasks) next
  to a plain restart of the same app measured the same way in the same test.
* ``test_a_producer_left_writing_is_refused``: a producer the run cannot hold (not named) writes through the
  run (for 60 s): the run refuses within its ``drain_timeout`` (15 s here) before anything stops or grows,
  the app keeps running, and its results stay exact. It found that the drain's count (``kafka_io.drain_count``)
  read each partition to its log's end rather than its range's end, so under traffic a 15 s drain refused
  after 484 s (fixed: it stops at the range's end).

The helpers and the ``topics`` fixture are ``test_streams_resize``'s. With ``KSTATE_STREAMS_LIVE=FILE`` each
shape's numbers are merged into ``FILE`` (``docs/measurements/issue32/live.json``). Chaos: ~1 min a shape, ~1.5 min the refusal.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from kstate_support import streams
from kstate_support.streams import KeyedTraffic

from airflow_provider_kstate.cluster.admin import ClusterAdmin
from airflow_provider_kstate.cluster.lease_log import KafkaLeaseLog
from airflow_provider_kstate.increase.drivers import CommandPairs
from airflow_provider_kstate.increase.model import DEFAULT_LEASE_TOPIC
from airflow_provider_kstate.lease_rules import LeaseRecords
from tests.integration.test_streams_resize import (
    KEYS,
    RATE,
    WINDOW_MS,
    HeldTraffic,
    _app,
    _app_driver,
    _Log,
    _results,
    _skip_unless_plain,
    _timed_restart,
    topics,  # noqa: F401 - the fixture
)

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

DAG_ID = "kstate_streams_resize"
PROTOCOL = "classic"
#: The runs beside the classic protocol with replacer=local (every shape): KIP-1071 streams groups (item 2 of
#: issue 32's leftovers: the count and the join) and the Spark replacer (item 3: the count).
VARIANTS = [
    *((shape, PROTOCOL, "local") for shape in streams.SHAPES),
    ("count", "streams", "local"),
    ("join", "streams", "local"),
    pytest.param("count", PROTOCOL, "spark", marks=pytest.mark.spark),
]


def _verdict(shape: str, records: list[Any], out: list[Any], inputs: list[str]) -> dict[str, Any]:
    """The shape's verdict, with ``lost`` (results short of the truth) and ``wrong`` (results not in it, or
    a key's last count other than its truth) named alike for every shape."""
    if shape == "count":
        v = streams.count_verdict(records, out)
        return {**v, "wrong": v["keys_wrong"]}
    if shape == "join":
        v = streams.join_verdict(records, out, inputs[0], inputs[1], WINDOW_MS)
    else:
        v = streams.filter_verdict(records, out)
    return {**v, "lost": v["missing"], "wrong": v["duplicated"] + v["extra"]}


def _inputs_lost(kafka_config: dict[str, Any], records: list[Any], inputs: list[str]) -> int:
    """Acknowledged records the sources no longer hold."""
    held = {(t, value.decode()) for t in inputs for _, value, _ in streams.read_topic(kafka_config, t)}
    return sum(1 for r in records if (r.topic, str(r.seq)) not in held)


def cell_key(shape: str, protocol: str, replacer: str) -> str:
    """The cell's key in the measurements' ``shapes``: the shape alone for the classic protocol with
    ``replacer=local`` (the first measurements), else ``shape/protocol/replacer``."""
    return shape if (protocol, replacer) == (PROTOCOL, "local") else f"{shape}/{protocol}/{replacer}"


def _save(cell: dict[str, Any]) -> None:
    target = os.environ.get("KSTATE_STREAMS_LIVE")
    if not target:
        return
    path = Path(target)
    doc = json.loads(path.read_text()) if path.exists() else {"issue": 32, "item": 5, "shapes": {}}
    doc["how"] = (
        "tests/integration/test_streams_resize_live.py on Apache Kafka 4.4.0 (KRaft, one node), 2 cores: "
        "the kstate_streams_resize DAG through dag.test(), sources 2 -> 4; a cell named by its shape alone "
        f"ran replacer=local on the {PROTOCOL} protocol, a cell 'shape/protocol/replacer' as it names "
        "(streams: a KIP-1071 streams group, group.protocol=streams; spark: spark-submit replace_changelog.py, "
        f"--master local[2]); {RATE:g} keyed records/s per source ({KEYS} keys, murmur2) before, during and "
        "after the run, the producer held by its driver for the window; downtime and plain restart: the app "
        "driver's stop command to its ready check (RUNNING with tasks)"
    )
    key = cell_key(cell["shape"], cell["protocol"], cell["replacer"])
    before = doc["shapes"].get(key)
    if before:  # the cell's earlier runs stay, summed up (the newest first, four at most)
        kept = {k: before[k] for k in EARLIER if k in before}
        cell = {**cell, "other_runs": [kept, *before.get("other_runs", [])][:4]}
    doc["shapes"][key] = cell
    path.write_text(json.dumps(doc, indent=1) + "\n")


#: What a cell keeps of its earlier runs.
EARLIER = (
    "records_written",
    "inputs_lost",
    "lost",
    "wrong",
    "app_downtime_s",
    "continue_downtime_s",
    "plain_restart_s",
    "dag_run_s",
    "timings",
    "load_average_1m",
)


class LiveApp(NamedTuple):
    """The app of one shape on one protocol, its driver and its held traffic, registered as the DAG's
    ``kstate_drivers`` (``streams-app``, ``traffic``)."""

    app: Any
    app_id: str
    inputs: list[str]
    output: str
    pairs: CommandPairs
    driver: Any
    traffic: HeldTraffic


def live_app(
    shape: str,
    protocol: str,
    kafka_config: dict[str, Any],
    topics: Any,  # noqa: F811 - the fixture's value, passed on
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> LiveApp:
    """Build the app (not started), its driver and its traffic, and register both drivers for the DAG."""
    app = _app(shape, protocol, kafka_config, topics, tmp_path / "app")
    app_id, inputs, output = app._args["app_id"], app._args["inputs"], app._args["output"]
    pairs = CommandPairs(inputs[0], _Log())
    driver = _app_driver(app, tmp_path / "driver")
    traffic = HeldTraffic(kafka_config, inputs, tmp_path / "traffic", rate=RATE, keys=KEYS)
    registry = {"streams-app": driver.to_dict(), "traffic": traffic.driver().to_dict()}
    monkeypatch.setenv("AIRFLOW_VAR_KSTATE_DRIVERS", json.dumps(registry))
    return LiveApp(app, app_id, inputs, output, pairs, driver, traffic)


@pytest.mark.parametrize(("shape", "protocol", "replacer"), VARIANTS, ids=lambda v: str(v))
def test_each_shape_under_live_traffic(
    shape: str,
    protocol: str,
    replacer: str,
    kafka_config: dict[str, Any],
    topics: Any,  # noqa: F811 - the fixture imported above
    run_dag: Any,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    _skip_unless_plain(kafka_config)
    began = time.monotonic()
    app, app_id, inputs, output, pairs, driver, traffic = live_app(
        shape, protocol, kafka_config, topics, tmp_path, monkeypatch
    )
    request.addfinalizer(lambda: pairs.stop({app_id: driver}, "group"))  # a no-op once stopped
    assert not pairs.start({app_id: driver}, "group")
    try:
        traffic.start()
        time.sleep(6)  # state in the changelogs, offsets committed
        restart_s = _timed_restart(pairs, app_id, driver)  # the baseline, on the old layout
        time.sleep(4)
        run_from, started = time.time() * 1000, time.monotonic()
        dr = run_dag(
            DAG_ID,
            {
                "topic": inputs[0],
                "partitions": 4,
                "application_id": app_id,
                "app_driver": "streams-app",
                "producer_drivers": ["traffic"],
                "replacer": replacer,
            },
        )
        run_s, run_to = round(time.monotonic() - started, 1), time.time() * 1000
        time.sleep(8)  # traffic on the new layout
    finally:
        traffic.stop()
    records, out = _results(traffic, app, kafka_config, output, lambda: pairs.stop({app_id: driver}, "group"))
    report = dr.get_task_instance("resize").xcom_pull(task_ids="resize") or {}
    verdict = _verdict(shape, records, out, inputs)
    cell = {
        "shape": shape,
        "protocol": protocol,
        "replacer": replacer,
        "state": str(getattr(dr.state, "value", dr.state)),
        "records_written": len(records),
        "records_during_run": sum(1 for r in records if run_from <= r.ts <= run_to),
        "records_in_new_partitions": sum(1 for r in records if r.partition >= 2),
        "inputs_lost": _inputs_lost(kafka_config, records, inputs),
        "lost": verdict["lost"],
        "wrong": verdict["wrong"],
        "app_downtime_s": report.get("downtime_s"),
        "plain_restart_s": restart_s,
        "producer_held_s": round(traffic.held_s, 3),
        "dag_run_s": run_s,
        "moved_keys": report.get("moved_keys"),
        "timings": report.get("timings"),
        "changelogs": report.get("changelogs"),
        "verdict": verdict,
        "tasks_after": next((e["tasks"] for e in reversed(app.events()) if e.get("tasks")), None),
        "test_s": round(time.monotonic() - began, 1),
        "load_average_1m": round(os.getloadavg()[0], 1),  # the machine is shared: its load, at the end
    }
    print(json.dumps(cell, indent=1))
    _save(cell)
    assert cell["state"] == "success" and report.get("resized") and report["deep_check_passed"], cell
    assert report["protocol"] == protocol and report["replacer"] == replacer, report
    assert (report["moved_keys"] > 0) == (shape != "filter"), report
    assert cell["records_during_run"] > 0 and cell["records_in_new_partitions"] > 0, cell
    assert cell["tasks_after"] == ["0_0", "0_1", "0_2", "0_3"], cell
    assert (cell["inputs_lost"], cell["lost"], cell["wrong"]) == (0, 0, 0), cell
    leases = LeaseRecords(KafkaLeaseLog(ClusterAdmin(kafka_config), DEFAULT_LEASE_TOPIC))
    assert leases.current(inputs[0]) is None, "the topic's lease is released"


def test_a_producer_left_writing_is_refused(
    kafka_config: dict[str, Any],
    topics: Any,  # noqa: F811 - the fixture imported above
    run_dag: Any,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    _skip_unless_plain(kafka_config)
    app = _app("count", PROTOCOL, kafka_config, topics, tmp_path / "app")
    app_id, inputs, output = app._args["app_id"], app._args["inputs"], app._args["output"]
    pairs = CommandPairs(inputs[0], _Log())
    driver = _app_driver(app, tmp_path / "driver")
    traffic = KeyedTraffic(kafka_config, inputs, rate=RATE, keys=KEYS)  # nobody can hold it
    monkeypatch.setenv("AIRFLOW_VAR_KSTATE_DRIVERS", json.dumps({"streams-app": driver.to_dict()}))
    request.addfinalizer(lambda: pairs.stop({app_id: driver}, "group"))
    assert not pairs.start({app_id: driver}, "group")
    ends = threading.Timer(60, traffic.stop)  # the test's bound: the run under traffic for ~54 s at most
    try:
        traffic.start()
        ends.start()
        time.sleep(6)
        conf = {"topic": inputs[0], "partitions": 4, "application_id": app_id, "app_driver": "streams-app"}
        started = time.monotonic()
        dr = run_dag(DAG_ID, {**conf, "replacer": "local"}, overrides={"resize": {"drain_timeout": 15}})
        run_s = round(time.monotonic() - started, 1)
        time.sleep(4)
    finally:
        ends.cancel()
        traffic.stop()
    records, out = _results(traffic, app, kafka_config, output, lambda: pairs.stop({app_id: driver}, "group"))
    verdict = _verdict("count", records, out, inputs)
    print(json.dumps({"state": str(dr.state), "run_s": run_s, "verdict": verdict}, indent=1))
    assert str(getattr(dr.state, "value", dr.state)) == "failed"
    assert ClusterAdmin(kafka_config).partition_count(inputs[0]) == 2, "nothing grew"
    # refused at the drain (the app never stopped: one start) or, when the app caught up with the traffic at
    # one look of the drain, once stopped, by the records still in flight (started again: two starts)
    starts = sum(1 for e in app.events() if e["ev"] == "start")
    assert starts in (1, 2), f"the app started {starts} times"
    assert (_inputs_lost(kafka_config, records, inputs), verdict["lost"], verdict["wrong"]) == (0, 0, 0)
    # timeout contract: refused within its drain timeout (15 s); 30 s more for the run's other steps and a
    # loaded machine (3x the bound)
    assert run_s < 15 + 30, f"refused {run_s} s into the run: the drain_timeout of 15 s was not honoured"
