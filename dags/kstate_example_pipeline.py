"""Example stateful pipeline: running totals per account, a PySpark job keeping a compacted changelog.

The Spark application (``dags/pipelines/running_totals.py``) reads each input partition's new records
with confluent-kafka ``assign()``, from the offsets its consumer group committed, updates the totals
of the touched accounts and writes them to the changelog in one Kafka transaction together with the
input offsets (``partitioner=murmur2_random``): exactly once. ``kstate_state_maintenance`` then checks
and rebuilds the store's snapshot from that changelog.

Triggered by hand or by the demo (no schedule: its default topics need not exist).
"""

from __future__ import annotations

from pathlib import Path

import pendulum
from airflow.sdk import DAG, Param

from airflow_provider_kstate.operators.state import KStateSparkApplicationOperator

APPLICATION = str(Path(__file__).resolve().parent / "pipelines" / "running_totals.py")

with DAG(
    dag_id="kstate_example_pipeline",
    description="Example PySpark pipeline: running totals per account into a compacted changelog.",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["kstate", "example", "spark"],
    doc_md=__doc__,
    params={
        "input_topic": Param(
            "kstate-example-payments",
            type="string",
            minLength=1,
            pattern=r"^[A-Za-z0-9._-]+$",
            description="Input topic: key = account id, value = integer amount or CLOSE.",
        ),
        "changelog_topic": Param(
            "kstate-example-totals",
            type="string",
            minLength=1,
            pattern=r"^[A-Za-z0-9._-]+$",
            description="Compacted changelog topic of the totals (key = account, value = total, null = closed).",
        ),
        "group": Param(
            "kstate-example-totals",
            type="string",
            minLength=1,
            description="Consumer group that keeps the pipeline's input offsets (committed in the transaction).",
        ),
    },
) as dag:
    KStateSparkApplicationOperator(
        task_id="running_totals",
        application=APPLICATION,
        application_args=[
            "--input-topic",
            "{{ params.input_topic }}",
            "--changelog-topic",
            "{{ params.changelog_topic }}",
            "--group",
            "{{ params.group }}",
        ],
        kafka_config_id="kafka_default",
        spark_conn_id="spark_default",
    )
