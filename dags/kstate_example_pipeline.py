"""Example stateful pipeline: running totals per account, a PySpark job keeping a compacted changelog.

The Spark application (``dags/pipelines/running_totals.py``) reads each input partition's new records
with confluent-kafka ``assign()``, from the offsets its consumer group committed, updates the totals
of the touched accounts and writes them to the changelog in one Kafka transaction together with the
input offsets (``partitioner=murmur2_random``): exactly once. ``kstate_state_maintenance`` then checks
and rebuilds the store's snapshot from that changelog.

Before Spark starts, ``check_broker`` asks the broker doctor (cached per cluster) whether the broker keeps
the promises the pipeline's exactly-once relies on (``needs=Needs.STATE``: read_committed hides aborted
records, ListOffsets' end equals where a fetch ends, the last stable offset stops at an open
transaction); a broken one fails the run with ``BrokerDeviationError`` and nothing is read or written,
unless ``allow_broker_deviation`` names it. The application itself refuses input bounds a fetch disagrees
with and fails a read that ends short of its bound, so it never reports success on fewer payments than its
bounds say; its report's ``payments_read`` counts what the reads returned.

Triggered by hand or by the demo (no schedule: its default topics need not exist).
"""

from __future__ import annotations

from pathlib import Path

import pendulum
from airflow.sdk import DAG, Param

from airflow_provider_kstate.doctor.promises import Needs
from airflow_provider_kstate.operators.doctor import KStateBrokerDoctorOperator
from airflow_provider_kstate.operators.snapshot import KStateSparkApplicationOperator

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
        "allow_broker_deviation": Param(
            [],
            type="array",
            items={"type": "string"},
            description="Broken broker promises this run accepts by name (logged as RISK ACCEPTED).",
        ),
    },
) as dag:
    check_broker = KStateBrokerDoctorOperator(
        task_id="check_broker",
        needs=Needs.STATE,
        allow_broker_deviation="{{ params.allow_broker_deviation | join(',') }}",
        kafka_config_id="kafka_default",
    )
    check_broker >> KStateSparkApplicationOperator(
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
