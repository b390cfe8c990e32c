"""Several co-partitioned topics grown in one run (docs: topic sets).

Run by tests/docs/test_examples.py, which checks the task group it builds.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_provider_kstate.task_groups.partition_increase import safe_partition_increase

with DAG("join_inputs_grow", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")) as dag:
    # [START topic_sets]
    safe_partition_increase(topics=["orders", "payments"], partitions=12)
    # or topic="orders", topics=["payments"]: the set is topic, then topics
    # [END topic_sets]
