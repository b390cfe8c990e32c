"""DAGs scheduled on what the provider produced: a checked or rebuilt snapshot, a grown topic (docs: state).

Run by tests/docs/test_examples.py, which checks each DAG's schedule names the Asset.
"""

from __future__ import annotations

# [START assets]
from airflow.sdk import DAG

from airflow_provider_kstate.assets import snapshot_asset, topic_asset

with DAG("export_totals", schedule=[snapshot_asset("/data/snapshots/totals")]):
    ...
with DAG("rebalance_orders", schedule=[topic_asset("broker-1:9092", "orders")]):
    ...
# [END assets]
