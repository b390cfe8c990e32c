"""Runs whenever ``kstate_state_maintenance`` declares the example store's snapshot good or rebuilt.

Scheduled on the snapshot's Asset: a downstream job (an export, a serving-cache refresh ...) that must
only ever read a snapshot that has just passed its checks. The maintenance DAG's checks declare the alias
``kstate-snapshot`` as their outlet and add the Asset of the snapshot they checked (``file://`` + its
absolute path, or its URI, named by that URI), so this DAG runs only for the snapshot it names: a run of
the maintenance DAG on another ``snapshot_uri`` does not trigger it. Here it logs the triggering events.
"""

from __future__ import annotations

import os
from typing import Any

import pendulum
from airflow.sdk import DAG, Asset, task

from airflow_provider_kstate.assets import snapshot_asset

_SNAPSHOT_ROOT = os.environ.get("KSTATE_SNAPSHOT_ROOT", "/tmp/kstate/snapshots")
#: The example store's snapshot (the maintenance DAG's default ``snapshot_uri``).
SNAPSHOT_ASSET = snapshot_asset(f"{_SNAPSHOT_ROOT}/kstate-example-totals")

with DAG(
    dag_id="kstate_snapshot_consumer",
    description="Downstream of the example store: runs on each checked or rebuilt snapshot.",
    schedule=[SNAPSHOT_ASSET],
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["kstate", "asset"],
    doc_md=__doc__,
) as dag:

    @task(inlets=[SNAPSHOT_ASSET])
    def use_snapshot(triggering_asset_events: Any = None) -> list[dict[str, Any]]:
        """Log each event that triggered this run: which task checked the snapshot, and what it found."""
        seen = []
        for asset, events in (triggering_asset_events or {}).items():
            if not isinstance(asset, Asset):
                continue  # the same events, keyed by the producer's alias as well
            for event in events:
                print(
                    f"SNAPSHOT {asset.uri} from {event.source_dag_id}.{event.source_task_id}: {event.extra}"
                )
                seen.append({"uri": asset.uri, "source_task_id": event.source_task_id, "extra": event.extra})
        return seen

    use_snapshot()
