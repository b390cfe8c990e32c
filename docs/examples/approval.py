"""Plan, approve, apply: the approval step in your own DAG (docs: approval).

Run by tests/docs/test_examples.py, which checks that ``approve_plan`` is in the task group.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_provider_kstate.task_groups.partition_increase import ApprovalConfig, safe_partition_increase

with DAG("orders_grow_approved", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")) as dag:
    # [START approval]
    safe_partition_increase(
        topic="orders", partitions=12, approval=ApprovalConfig(require_approval=True, approval_timeout=1800)
    )
    # or, from the DAG's form: ApprovalConfig(require_approval="{{ params.require_approval }}", approval_timeout=1800)
    # [END approval]
