"""Example stateful pipeline: running totals per account, a PySpark Structured Streaming query keeping a
compacted changelog.

The Spark application (``dags/pipelines/running_totals.py``) reads the input as PySpark users read Kafka:
``spark.readStream.format("kafka")`` (Spark's own Kafka source, ``spark-sql-kafka-0-10`` from Maven Central),
its offsets in the query's checkpoint (``checkpoint`` param). Each run is one ``trigger(availableNow=True)``:
every micro-batch updates the totals of the touched accounts and writes them to the changelog in one Kafka
transaction together with the batch's input offsets for ``group`` (``partitioner=murmur2_random``): exactly
once. ``kstate_state_maintenance`` then checks and rebuilds the store's snapshot from that changelog.

The connector travels with the submission: the jars named by ``KSTATE_SPARK_KAFKA_JARS`` (comma-separated,
``python -m kstate_support.spark_kafka`` fetches them from Maven Central into ``.kstate/``) with ``--jars``,
else ``--packages org.apache.spark:spark-sql-kafka-0-10_2.13:<pyspark version>`` through Ivy (the driver
resolves it at submit time, wherever it runs: in cluster deploy mode it needs Maven Central or a mirror;
otherwise put the jars on storage the cluster reads and name them in ``KSTATE_SPARK_KAFKA_JARS``). In cluster
mode the checkpoint must be a URI every driver reaches (``hdfs://``, ``s3a://``).

Before Spark starts, ``check_broker`` asks the broker doctor (cached per cluster) whether the broker keeps
the promises the pipeline's exactly-once relies on (``needs=Needs.STATE``: read_committed hides aborted
records, ListOffsets' end equals where a fetch ends, the last stable offset stops at an open
transaction); a broken one fails the run with ``BrokerDeviationError`` and nothing is read or written,
unless ``allow_broker_deviation`` names it. The application itself refuses input bounds a fetch disagrees
with before its query starts; its report's ``payments_read`` counts what the batches returned.

A checkpoint is resumed only against the log it was taken from: the application records the input's topic
id (KIP-516) beside the checkpoint, and refuses one whose input was deleted and created again
(``TopicRecreatedError``) or whose offsets lie beyond the topic's end (``StoredOffsetsError``), naming the
two ways out: a new ``checkpoint`` location, or ``start_over=true`` (set it aside, read from the earliest
offset, and say so in the report's ``started_over``).

Triggered by hand or by the demo (no schedule: its default topics need not exist).
"""

from __future__ import annotations

import os
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pendulum
from airflow.sdk import DAG, Param

from airflow_provider_kstate.doctor.promises import Needs
from airflow_provider_kstate.operators.doctor import KStateBrokerDoctorOperator
from airflow_provider_kstate.operators.spark_app import KStateSparkApplicationOperator

APPLICATION = str(Path(__file__).resolve().parent / "pipelines" / "running_totals.py")


def _spark_version() -> str:
    try:
        return version("pyspark")
    except PackageNotFoundError:
        return "4.2.0"


#: Spark's Kafka source: jars fetched beforehand (``--jars``), else its Maven coordinate (``--packages``).
SPARK_KAFKA_JARS = os.environ.get("KSTATE_SPARK_KAFKA_JARS") or None
SPARK_KAFKA_PACKAGE = (
    None if SPARK_KAFKA_JARS else f"org.apache.spark:spark-sql-kafka-0-10_2.13:{_spark_version()}"
)

with DAG(
    dag_id="kstate_example_pipeline",
    description="Example PySpark Structured Streaming pipeline: running totals per account into a compacted changelog.",
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
            description="Consumer group the pipeline commits each batch's input offsets to (in the transaction).",
        ),
        "checkpoint": Param(
            "",
            type="string",
            description="The query's checkpoint location (empty: a folder per group under the temporary "
            "directory; in cluster mode a URI every driver reaches).",
        ),
        "start_over": Param(
            False,
            type="boolean",
            description="When the checkpoint cannot be resumed (its input topic was deleted and created "
            "again, or its offsets lie beyond the topic's end): true sets it aside and starts over from the "
            "earliest offset (the report's started_over says so); false refuses with TopicRecreatedError or "
            "StoredOffsetsError.",
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
            "--checkpoint",
            "{{ params.checkpoint }}",
            "--start-over",
            "{{ params.start_over | string | lower }}",
        ],
        jars=SPARK_KAFKA_JARS,
        packages=SPARK_KAFKA_PACKAGE,
        kafka_config_id="kafka_default",
        spark_conn_id="spark_default",
    )
