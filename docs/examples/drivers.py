"""Services in any language: a driver per group, from Python (docs: drivers).

Run by tests/docs/test_examples.py, which checks the drivers and the task group it builds.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

with DAG("orders_grow_driven", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")) as dag:
    # [START drivers]
    from airflow_provider_kstate.increase.drivers import CommandDriver
    from airflow_provider_kstate.task_groups.partition_increase import FleetConfig, safe_partition_increase

    billing = CommandDriver(
        name="billing-k8s",
        stop="kubectl -n shop scale deploy/billing --replicas=0 && "
        "kubectl -n shop wait --for=delete pod -l app=billing --timeout=120s",
        start="kubectl -n shop scale deploy/billing --replicas=3",
        ready="kubectl -n shop rollout status deploy/billing --timeout=10s",
        timeout=180,
    )
    feeder = CommandDriver(
        name="feeder",
        stop="systemctl stop feeder",
        start="systemctl start feeder",
        ready="systemctl is-active --quiet feeder",
    )
    safe_partition_increase(
        topic="orders",
        partitions=12,
        fleet=FleetConfig(group_drivers={"billing": billing}, producer_drivers={"feeder": feeder}),
    )
    # [END drivers]
