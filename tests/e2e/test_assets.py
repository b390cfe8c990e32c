"""Airflow Assets in the real deployment: a checked snapshot's event triggers the DAG scheduled on it.

Found while landing this test: the deployment ran with ``[scheduler] use_job_schedule = False`` (to keep
the ``@daily`` maintenance DAG from starting runs of its own). That setting also turns off every
asset-triggered run: the event was recorded and the consumer queued (``asset_dag_run_queue``), but no run
was ever created. The deployment now keeps the scheduler on and empties ``KSTATE_MAINTENANCE_SCHEDULE``.
And the event named the default snapshot whatever ``snapshot_uri`` the run checked: the maintenance DAG
now adds the Asset of the snapshot it checked through the alias ``kstate-snapshot``.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from airflow_provider_kstate.assets import SNAPSHOT_ALIAS, snapshot_uri_of
from tests.e2e.deployment import AirflowDeployment
from tests.e2e.test_deployment import MAINTENANCE, RUN_TIMEOUT, _ok, create_topic, delete_topics

pytestmark = [pytest.mark.deployment, pytest.mark.timeout(480)]

CONSUMER = "kstate_snapshot_consumer"


def asset_tables(dep: AirflowDeployment) -> str:
    """The deployment's assets, their events and the asset-triggered run queue, for an assertion message."""
    con = sqlite3.connect(f"file:{dep.home}/airflow.db?mode=ro", uri=True)
    out = []
    try:
        for q in (
            "select id, name, uri from asset",
            "select name, uri from asset_active",
            "select id, asset_id, source_dag_id, source_task_id, source_run_id from asset_event",
            "select dag_id, asset_id from dag_schedule_asset_reference",
            "select target_dag_id, asset_id from asset_dag_run_queue",
        ):
            out.append(f"{q}:\n  " + "\n  ".join(map(repr, con.execute(q).fetchall())))
    finally:
        con.close()
    return "\n".join(out)


def write_empty_snapshot(path: Path, topic: str) -> None:
    """A valid snapshot of an empty 1-partition changelog: the fast check finds it good (no Spark)."""
    from airflow_provider_kstate.store.manifest import Manifest, PartitionStats, write_manifest

    stats = {0: PartitionStats(0, 0, 0, "0" * 16)}
    write_manifest(str(path), Manifest(topic=topic, partitions=1, partition_stats=stats))


def check_store(dep: AirflowDeployment, topic: str, snapshot: Path) -> tuple[str, list[dict[str, Any]]]:
    """Run the maintenance DAG (fast check only) on ``snapshot``; return its run id and asset events."""
    conf = {"changelog_topic": topic, "snapshot_uri": str(snapshot), "deep": False, "rebuild": "never"}
    r = dep.trigger(MAINTENANCE, conf)
    assert r.status_code == 200, r.text
    run_id = r.json()["dag_run_id"]
    _ok(dep, MAINTENANCE, run_id, dep.wait_for_run(MAINTENANCE, run_id, timeout=RUN_TIMEOUT))
    states = {t["task_id"]: t["state"] for t in dep.task_instances(MAINTENANCE, run_id)}
    assert states["store_ok"] == "success", states
    return run_id, asset_events(dep, run_id)


def asset_events(dep: AirflowDeployment, run_id: str, timeout: float = 60) -> list[dict[str, Any]]:
    """The asset events of a maintenance run, through the REST API.

    Airflow's ``GET /api/v2/assets/events`` answers 500 while a run the event created is queued but not
    started (``AssetEventResponse`` requires ``created_dagruns[].start_date``; it is None until the run
    starts), so a 500 is retried until the triggered run has started.
    """
    deadline = time.monotonic() + timeout
    while True:
        r = dep.api.get(
            "/api/v2/assets/events", params={"source_dag_id": MAINTENANCE, "source_run_id": run_id}
        )
        if r.status_code == 200:
            return list(r.json()["asset_events"])
        assert r.status_code == 500 and time.monotonic() < deadline, (r.status_code, r.text[:500])
        time.sleep(1)


def consumer_runs(dep: AirflowDeployment) -> dict[str, dict[str, Any]]:
    return {r["dag_run_id"]: r for r in dep.get_json(f"/api/v2/dags/{CONSUMER}/dagRuns")["dag_runs"]}


@pytest.mark.timeout(2 * RUN_TIMEOUT + 240)
def test_maintenance_asset_event_triggers_the_downstream_dag(
    deployment: AirflowDeployment, admin: AdminClient, tmp_path: Path
) -> None:
    """``store_ok`` emits the event of the snapshot it checked; only the example snapshot's event runs
    ``kstate_snapshot_consumer`` (scheduled on that snapshot's Asset), as an asset-triggered run."""
    deployment.wait_for_dags([CONSUMER], timeout=120)
    deployment.unpause(CONSUMER)
    before = set(consumer_runs(deployment))
    topic = f"kstate-e2e-asset-{uuid.uuid4().hex[:8]}"
    create_topic(admin, topic, 1, {"cleanup.policy": "compact"})
    try:
        # Another store: its own asset's event, and the consumer (scheduled on the example's) is not run.
        other = tmp_path / "other-snapshot"
        write_empty_snapshot(other, topic)
        other_run, other_events = check_store(deployment, topic, other)
        assert [(e["source_task_id"], e["uri"]) for e in other_events] == [("store_ok", f"file://{other}")], (
            other_events
        )
        # The example store (the DAG's default snapshot_uri under the deployment's KSTATE_SNAPSHOT_ROOT).
        example = deployment.snapshot_root / "kstate-example-totals"
        write_empty_snapshot(example, topic)
        t0 = time.monotonic()
        run_id, events = check_store(deployment, topic, example)
        expected_uri = snapshot_uri_of(str(example))
        assert [(e["source_task_id"], e["uri"], e["name"]) for e in events] == [
            ("store_ok", expected_uri, expected_uri)
        ], events
        assert events[0]["extra"]["topic"] == topic, events

        deadline = time.monotonic() + 120
        new: list[dict[str, Any]] = []
        while not new and time.monotonic() < deadline:
            new = [r for k, r in consumer_runs(deployment).items() if k not in before]
            time.sleep(1)
        assert len(new) == 1, new or f"no run of the downstream DAG:\n{asset_tables(deployment)}"
        assert new[0]["run_type"] == "asset_triggered", new
        consumer_run = new[0]["dag_run_id"]
        _ok(deployment, CONSUMER, consumer_run, deployment.wait_for_run(CONSUMER, consumer_run))
        print(f"\nasset event -> downstream run done in {time.monotonic() - t0:.1f}s")
        upstream = deployment.get_json(f"/api/v2/dags/{CONSUMER}/dagRuns/{consumer_run}/upstreamAssetEvents")
        assert [(e["source_run_id"], e["uri"]) for e in upstream["asset_events"]] == [
            (run_id, expected_uri)
        ], upstream
        assert other_run != run_id
        log = deployment.task_log(CONSUMER, consumer_run, "use_snapshot")
        assert f"SNAPSHOT {expected_uri} from {MAINTENANCE}.store_ok" in log, log[-2000:]
        aliases = deployment.get_json("/api/v2/assets/aliases")["asset_aliases"]
        assert SNAPSHOT_ALIAS in [a["name"] for a in aliases], aliases
    finally:
        delete_topics(admin, [topic])
