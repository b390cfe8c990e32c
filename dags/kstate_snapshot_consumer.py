"""Runs whenever ``kstate_state_maintenance`` declares the example store's snapshot good or rebuilt.

Scheduled on the snapshot's Asset: a downstream job (an export, a serving-cache refresh ...) that must
only ever read a snapshot that has just passed its checks. Here it logs the asset events that triggered it.
"""

from __future__ import annotations

import os

import pendulum
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG

from airflow_provider_kstate.assets import snapshot_asset

_SNAPSHOT_ROOT = os.environ.get("KSTATE_SNAPSHOT_ROOT", "/tmp/kstate/snapshots")
SNAPSHOT_ASSET = snapshot_asset(
    f"{_SNAPSHOT_ROOT}/kstate-example-totals", name="kstate_example_totals_snapshot"
)

with DAG(
    dag_id="kstate_snapshot_consumer",
    description="Downstream of the example store: runs on each checked or rebuilt snapshot.",
    schedule=[SNAPSHOT_ASSET],
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["kstate", "asset"],
    doc_md=__doc__,
) as dag:
    EmptyOperator(task_id="use_snapshot", inlets=[SNAPSHOT_ASSET])
