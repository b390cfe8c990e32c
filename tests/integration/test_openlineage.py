"""OpenLineage events of kstate's operators, with the OpenLineage provider installed and its ``file``
transport, from real ``dag.test()`` runs on the real broker.

* ``kstate_partition_increase`` on a topic with two groups: the plan and ``verify`` read
  ``kafka://<first server>`` / ``<topic>``, the pause window writes it; the facets carry the partitions
  (1 -> 3), both groups and their class, the seed and verify reports and the verdict.
* the fast check of a snapshot written with pyarrow from a real changelog: the changelog and the snapshot
  (``file`` + its absolute path) are its inputs, with offsets equal to the changelog's, rows, the version
  and the check's data-quality assertion.
* ``kstate_state_maintenance`` with ``rebuild=force`` (real local Spark; ``make chaos``: 140 s on a loaded
  box; ``tests/unit/test_lineage.py`` keeps the rebuild's datasets and facets in ``make test``): the rebuild
  reads the changelog and writes the snapshot, whose version and rows are the manifest's.

The listener is registered in this process for the test only (OpenLineage is configured here, after
Airflow's plugins were loaded with it disabled), and removed after.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_deployment import commit_offsets, produce

pytest.importorskip("airflow.providers.openlineage", reason="the [openlineage] extra is not installed")

pytestmark = [pytest.mark.integration]

INCREASE = "kstate_partition_increase"
MAINTENANCE = "kstate_state_maintenance"


def _clear_openlineage_caches() -> None:
    from airflow.providers.openlineage import conf as ol_conf

    for value in vars(ol_conf).values():
        if callable(getattr(value, "cache_clear", None)):
            value.cache_clear()


@pytest.fixture(scope="module")
def lineage_events(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[], list[dict]]]:
    """Configure OpenLineage's file transport, register its listener for task events; yield a reader of
    the events written (one JSON event per line). One file for the module: the OpenLineage client, once
    made, keeps its transport for the process. Events run in a thread, not a forked child: in
    ``dag.test()`` the supervisor is in this process, and a forked child cannot reach it."""
    from airflow.providers.openlineage.plugins.listener import get_openlineage_listener
    from airflow.sdk.listener import get_listener_manager

    path = tmp_path_factory.mktemp("openlineage") / "events.jsonl"
    transport = {"type": "file", "log_file_path": str(path), "append": True}
    with pytest.MonkeyPatch.context() as env:
        env.setenv("AIRFLOW__OPENLINEAGE__TRANSPORT", json.dumps(transport))
        env.setenv("AIRFLOW__OPENLINEAGE__NAMESPACE", "kstate-test")
        env.setenv("AIRFLOW__OPENLINEAGE__EXECUTE_IN_THREAD", "True")
        _clear_openlineage_caches()
        listener = get_openlineage_listener()
        manager = get_listener_manager()
        manager.add_listener(listener)

        def read() -> list[dict]:
            if not path.exists():
                return []
            return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

        try:
            yield read
        finally:
            manager.pm.unregister(listener)
    _clear_openlineage_caches()


def _events(read: Callable[[], list[dict]], task_id: str, kind: str, run_id: str) -> list[dict]:
    def of_run(event: dict) -> bool:  # the airflow run facet names the DAG run
        return json.dumps(run_id) in json.dumps(event["run"].get("facets", {}))

    return [
        e for e in read() if e["eventType"] == kind and e["job"]["name"].endswith("." + task_id) and of_run(e)
    ]


def _one(read: Callable[[], list[dict]], task_id: str, run_id: str, kind: str = "COMPLETE") -> dict:
    found = _events(read, task_id, kind, run_id)
    assert len(found) == 1, (task_id, kind, [e["job"]["name"] + " " + e["eventType"] for e in read()])
    return found[0]


def _names(datasets: list[dict]) -> list[tuple[str, str]]:
    return [(d["namespace"], d["name"]) for d in datasets]


def test_increase_reads_and_writes_its_topic(
    make_topic: Any,
    run_dag: Any,
    kafka_config: dict[str, Any],
    unique: Callable[[str], str],
    lineage_events: Callable[[], list[dict]],
) -> None:
    topic = make_topic("lineage", partitions=1)
    billing, audit = unique("billing"), unique("audit")
    produce(kafka_config, topic, [(0, b"k%d" % i, b"v") for i in range(5)])
    for group in (billing, audit):
        commit_offsets(kafka_config, group, {(topic, 0): 5})

    dr = run_dag(INCREASE, {"topic": topic, "partitions": 3, "consumer_groups": [], "dry_run": False})

    assert dr.state == "success", {ti.task_id: ti.state for ti in dr.get_task_instances()}
    name = ("kafka://" + kafka_config["bootstrap.servers"].split(",")[0], topic)
    plan = _one(lineage_events, "plan", dr.run_id)
    assert _names(plan["inputs"]) == [name] and plan["outputs"] == []
    facet = plan["inputs"][0]["facets"]["kstate"]
    assert (facet["originalPartitions"], facet["partitions"], facet["mode"]) == (1, 3, "increase")
    assert facet["groups"] == {billing: "empty", audit: "empty"}

    window = _one(lineage_events, "pause_window", dr.run_id)
    assert window["inputs"] == [] and _names(window["outputs"]) == [name]
    written = window["outputs"][0]["facets"]["kstate"]
    assert (written["partitions"], written["created"], written["groupsTotal"]) == (3, True, 2)
    assert written["reportUri"].endswith("seed.jsonl.gz") and os.path.exists(written["reportUri"])

    verify = _one(lineage_events, "verify", dr.run_id)
    assert _names(verify["inputs"]) == [name]
    verdict = verify["inputs"][0]["facets"]["kstate"]
    assert (verdict["ok"], verdict["problems"], verdict["partitions"]) == (True, 0, 3)
    assert verdict["reportUri"].endswith("verify.jsonl.gz")
    # START events name the dataset too (the plan before it is known: the topic from the param).
    assert _names(_one(lineage_events, "verify", dr.run_id, "START")["inputs"]) == [name]


def _snapshot_of(admin_config: dict[str, Any], topic: str, root: Path, partitions: int) -> dict[int, int]:
    """Write a snapshot of ``topic`` (last value per key, pyarrow) and its manifest; return the end offsets."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from confluent_kafka import Consumer, TopicPartition

    from airflow_provider_kstate.store.digest import digest_rows
    from airflow_provider_kstate.store.manifest import Manifest, PartitionStats, write_manifest

    consumer = Consumer({**admin_config, "group.id": "unused", "enable.auto.commit": False})
    stats, ends = {}, {}
    try:
        for p in range(partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            consumer.assign([TopicPartition(topic, p, low)])
            latest: dict[bytes, tuple[bytes, int]] = {}
            while sum(1 for _ in latest) < high - low:
                msg = consumer.poll(5)
                assert msg is not None and not msg.error(), msg and msg.error()
                latest[msg.key()] = (msg.value(), msg.offset())
                if msg.offset() + 1 >= high:
                    break
            folder = root / f"partition={p}"
            folder.mkdir(parents=True)
            keys = sorted(latest)
            table = pa.table(
                {
                    "key": pa.array(keys, pa.binary()),
                    "value": pa.array([latest[k][0] for k in keys], pa.binary()),
                    "offset": pa.array([latest[k][1] for k in keys], pa.int64()),
                }
            )
            path = folder / "part-0.parquet"
            pq.write_table(table, path)
            rows = [(k, latest[k][0]) for k in keys]
            stats[p] = PartitionStats(
                low, high, len(rows), digest_rows(rows), {path.name: path.stat().st_size}
            )
            ends[p] = high
    finally:
        consumer.close()
    write_manifest(str(root), Manifest(topic=topic, partitions=partitions, partition_stats=stats))
    return ends


def test_fast_check_reads_the_changelog_and_the_snapshot(
    make_topic: Any,
    run_dag: Any,
    kafka_config: dict[str, Any],
    tmp_path: Path,
    lineage_events: Callable[[], list[dict]],
) -> None:
    changelog = make_topic("lineage-cl", partitions=2, config={"cleanup.policy": "compact"})
    produce(kafka_config, changelog, [(i % 2, b"key%d" % (i % 3), b"v%d" % i) for i in range(12)])
    root = tmp_path / "snapshot"
    ends = _snapshot_of(kafka_config, changelog, root, 2)
    assert ends == {0: 6, 1: 6}, "the scenario: 6 records per partition"
    conf = {"changelog_topic": changelog, "snapshot_uri": str(root), "deep": False, "rebuild": "never"}

    dr = run_dag(MAINTENANCE, conf)

    assert dr.state == "success", {ti.task_id: ti.state for ti in dr.get_task_instances()}
    event = _one(lineage_events, "fast_check", dr.run_id)
    server = "kafka://" + kafka_config["bootstrap.servers"].split(",")[0]
    assert _names(event["inputs"]) == [(server, changelog), ("file", str(root))]
    assert event["outputs"] == []
    log_facet = event["inputs"][0]["facets"]["kstate"]
    assert (log_facet["partitions"], log_facet["offsets"]) == (2, {"0": 6, "1": 6})
    snapshot = event["inputs"][1]
    facet = snapshot["facets"]["kstate"]
    assert (facet["check"], facet["ok"], facet["offsets"], facet["rows"]) == (
        "fast",
        True,
        {"0": 6, "1": 6},
        6,
    )
    assert [f["name"] for f in snapshot["facets"]["schema"]["fields"]] == [
        "key",
        "value",
        "offset",
        "partition",
    ]
    assertion = snapshot["inputFacets"]["dataQualityAssertions"]["assertions"][0]
    assert (assertion["assertion"], assertion["success"]) == ("kstate_fast_check", True)


@pytest.mark.spark
@pytest.mark.chaos  # 140 s under load (a Spark rebuild in the maintenance DAG): make chaos; unit-tested fast
def test_rebuild_reads_the_changelog_and_writes_the_snapshot(
    make_topic: Any,
    run_dag: Any,
    kafka_config: dict[str, Any],
    tmp_path: Path,
    lineage_events: Callable[[], list[dict]],
) -> None:
    from airflow_provider_kstate.store.fast_check import load_manifest

    changelog = make_topic("lineage-rb", partitions=2, config={"cleanup.policy": "compact"})
    produce(kafka_config, changelog, [(None, b"acct%d" % (i % 5), b"%d" % i) for i in range(40)])
    root = tmp_path / "snapshot"
    conf = {"changelog_topic": changelog, "snapshot_uri": str(root), "deep": False, "rebuild": "force"}

    dr = run_dag(MAINTENANCE, conf)

    assert dr.state == "success", {ti.task_id: ti.state for ti in dr.get_task_instances()}
    manifest = load_manifest(str(root))
    event = _one(lineage_events, "rebuild", dr.run_id)
    server = "kafka://" + kafka_config["bootstrap.servers"].split(",")[0]
    assert _names(event["inputs"]) == [(server, changelog)]
    assert _names(event["outputs"]) == [("file", str(root))]
    output = event["outputs"][0]
    assert output["facets"]["version"]["datasetVersion"] == manifest.version
    assert output["outputFacets"]["outputStatistics"]["rowCount"] == 5
    facet = output["facets"]["kstate"]
    assert (facet["rows"], facet["partitions"], facet["version"]) == (5, 2, manifest.version)
    assert facet["offsetsTotal"] == 40
    assert event["inputs"][0]["inputFacets"]["inputStatistics"]["rowCount"] == 40


@pytest.mark.deployment
@pytest.mark.chaos  # a second airflow standalone (~40 s): make chaos
def test_the_listener_forks_in_a_real_deployment(
    make_topic: Any, kafka_config: dict[str, Any], unique: Callable[[str], str], tmp_path: Path
) -> None:
    """In a real deployment the listener runs in a forked child of the task (the default): the plan's
    COMPLETE event still carries what the plan found, read from its XCom through the task's supervisor."""
    from tests.e2e.deployment import ROOT, airflow_deployment

    topic = make_topic("lineage-dep", partitions=1)
    group = unique("svc")
    produce(kafka_config, topic, [(0, b"k", b"v")])
    commit_offsets(kafka_config, group, {(topic, 0): 1})
    events = tmp_path / "events.jsonl"
    env = {
        "AIRFLOW_CONN_KAFKA_DEFAULT": os.environ["AIRFLOW_CONN_KAFKA_DEFAULT"],
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
            {"type": "file", "log_file_path": str(events), "append": True}
        ),
        "KSTATE_MAINTENANCE_SCHEDULE": "",
    }
    with airflow_deployment(ROOT / "dags", env=env) as dep:
        dep.wait_for_dags([INCREASE], timeout=120)
        dep.unpause(INCREASE)
        r = dep.trigger(INCREASE, {"topic": topic, "partitions": 2, "consumer_groups": [], "dry_run": True})
        assert r.status_code == 200, r.text
        run_id = r.json()["dag_run_id"]
        run = dep.wait_for_run(INCREASE, run_id, timeout=240)
        assert run["state"] == "success", dep.failure_report(INCREASE, run_id)

    def read() -> list[dict]:
        return [json.loads(line) for line in events.read_text().splitlines() if line.strip()]

    plan = _one(read, "plan", run_id)
    facet = plan["inputs"][0]["facets"]["kstate"]
    assert (facet["originalPartitions"], facet["partitions"], facet["groups"]) == (1, 2, {group: "empty"})
