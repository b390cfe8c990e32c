"""The safe increase in your own DAG: the task-group factory with its config objects (docs: the safe increase).

Run by tests/docs/test_examples.py, which checks the task group it builds.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

with DAG("orders_grow", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")) as dag:
    # [START factory_minimal]
    from airflow_provider_kstate.task_groups.partition_increase import GroupsConfig, safe_partition_increase

    safe_partition_increase(topic="orders", partitions=12, groups=GroupsConfig(consumer_groups=["billing"]))
    # [END factory_minimal]

with DAG("orders_grow_deferrable", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")) as dag2:
    # [START factory]
    from airflow_provider_kstate.task_groups.partition_increase import (
        GroupsConfig,
        WaitConfig,
        safe_partition_increase,
    )

    safe_partition_increase(
        topic="orders",
        partitions=12,
        groups=GroupsConfig(consumer_groups=["billing"]),
        waits=WaitConfig(deferrable=True),
    )
    # [END factory]

with DAG("orders_grow_staying", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")) as dag3:
    # [START factory_stay]
    from airflow_provider_kstate.task_groups.partition_increase import (
        FleetConfig,
        StayConfig,
        safe_partition_increase,
    )

    safe_partition_increase(
        topic="orders",
        partitions=16,
        fleet=FleetConfig(producer_drivers=["control"]),  # the ControlledProducers: the run pins them
        stay=StayConfig(consumers_stay="auto", committing_groups=["billing-java"]),
    )
    # [END factory_stay]
