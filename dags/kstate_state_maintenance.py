"""Keep a state store honest: check its snapshot against the changelog, rebuild it when it is bad.

Flow::

    fast_check -> choose_deep -> [deep_check] -> decide -> store_ok
                                                        -> store_bad                (rebuild=never: run FAILS)
                                                        -> rebuild -> recheck_fast -> recheck_deep

* ``fast_check`` (worker, O(partitions)): manifest present and valid, covered offsets within the
  changelog's log start and high watermark, partition count equal to the topic's. A missing snapshot is a
  failed check, so ``rebuild=auto`` builds the first one.
* ``deep_check`` (Spark, when ``deep`` and a snapshot exists): row by row against the read_committed fold.
* ``decide``: ``force`` always rebuilds; ``auto`` rebuilds a bad store (only the failing partitions when
  the deep check alone found them and the layout is unchanged); ``never`` fails the run on a bad store.
* After a rebuild both checks run again and fail the run if the store is still bad.

Nothing here touches the network at parse time; connections ``kafka_default`` and ``spark_default``.
"""

from __future__ import annotations

import os
from typing import Any

import pendulum
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, Param, task

from airflow_provider_kstate.exceptions import StateCheckFailed
from airflow_provider_kstate.operators.state import (
    KStateDeepCheckOperator,
    KStateFastCheckOperator,
    KStateRebuildOperator,
    failed_partitions,
)

KAFKA_CONN_ID = "kafka_default"
SPARK_CONN_ID = "spark_default"
_SNAPSHOT_ROOT = os.environ.get("KSTATE_SNAPSHOT_ROOT", "/tmp/kstate/snapshots")
TOPIC = "{{ params.changelog_topic }}"
URI = "{{ params.snapshot_uri }}"

with DAG(
    dag_id="kstate_state_maintenance",
    description="Check a state store (snapshot) against its changelog; rebuild it with Spark when bad.",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["kstate", "kafka", "spark"],
    doc_md=__doc__,
    params={
        "changelog_topic": Param(
            "kstate-example-totals",
            type="string",
            minLength=1,
            maxLength=249,
            pattern=r"^[A-Za-z0-9._-]+$",
            title="Changelog topic",
            description="The compacted changelog topic of the store (key -> latest value, null deletes).",
        ),
        "snapshot_uri": Param(
            f"{_SNAPSHOT_ROOT}/kstate-example-totals",
            type="string",
            minLength=1,
            title="Snapshot URI",
            description="Directory (local path or file://, s3://, gs://, hdfs:// URI) of the Parquet snapshot.",
        ),
        "deep": Param(
            False,
            type="boolean",
            title="Deep check",
            description="Also compare the snapshot row by row with the changelog (a Spark job).",
        ),
        "rebuild": Param(
            "auto",
            type="string",
            enum=["auto", "never", "force"],
            title="Rebuild",
            description="auto: rebuild when a check fails; never: fail the run instead; force: always rebuild.",
        ),
        "partitions": Param(
            None,
            type=["null", "integer"],
            minimum=1,
            title="Partitions (re-key target)",
            description="Partition count to key the rebuilt snapshot for; empty: the topic's current count.",
        ),
    },
) as dag:
    fast_check = KStateFastCheckOperator(
        task_id="fast_check",
        topic=TOPIC,
        snapshot_uri=URI,
        kafka_config_id=KAFKA_CONN_ID,
        fail_on_bad=False,
    )

    @task.branch
    def choose_deep(params: dict[str, Any] | None = None, ti: Any = None) -> str:
        """Run the deep check when asked and there is a snapshot to check."""
        fast = ti.xcom_pull(task_ids="fast_check")
        return "deep_check" if params and params["deep"] and fast["snapshot_ok"] else "decide"

    deep_check = KStateDeepCheckOperator(
        task_id="deep_check",
        topic=TOPIC,
        snapshot_uri=URI,
        kafka_config_id=KAFKA_CONN_ID,
        spark_conn_id=SPARK_CONN_ID,
        fail_on_bad=False,
    )

    @task.branch(trigger_rule="none_failed_min_one_success")
    def decide(params: dict[str, Any] | None = None, ti: Any = None) -> str:
        """Choose store_ok, store_bad or rebuild from the check reports and ``rebuild``."""
        fast = ti.xcom_pull(task_ids="fast_check")
        deep = ti.xcom_pull(task_ids="deep_check")
        mode = (params or {}).get("rebuild", "auto")
        bad = not fast["ok"] or (deep is not None and not deep.get("ok"))
        # Only the deep check's per-partition findings on an unchanged layout allow a partial rebuild.
        only = failed_partitions(deep) if fast["ok"] and deep is not None and mode == "auto" else []
        ti.xcom_push(key="only_partitions", value=",".join(str(p) for p in only))
        if mode == "force":
            return "rebuild"
        if not bad:
            return "store_ok"
        return "rebuild" if mode == "auto" else "store_bad"

    store_ok = EmptyOperator(task_id="store_ok")

    @task
    def store_bad(ti: Any = None) -> None:
        """Fail the run: the store is bad and ``rebuild=never``."""
        reports = [r for r in (ti.xcom_pull(task_ids="fast_check"), ti.xcom_pull(task_ids="deep_check")) if r]
        details = "; ".join(
            f"{r['check']} check: problems {r.get('problems') or []}, failed partitions {failed_partitions(r)}"
            for r in reports
            if not r.get("ok")
        )
        raise StateCheckFailed(f"the state store is bad and rebuild=never: {details}")

    rebuild = KStateRebuildOperator(
        task_id="rebuild",
        topic=TOPIC,
        snapshot_uri=URI,
        partitions="{{ params.partitions }}",
        only_partitions="{{ ti.xcom_pull(task_ids='decide', key='only_partitions') }}",
        kafka_config_id=KAFKA_CONN_ID,
        spark_conn_id=SPARK_CONN_ID,
    )
    recheck_fast = KStateFastCheckOperator(
        task_id="recheck_fast", topic=TOPIC, snapshot_uri=URI, kafka_config_id=KAFKA_CONN_ID
    )
    recheck_deep = KStateDeepCheckOperator(
        task_id="recheck_deep",
        topic=TOPIC,
        snapshot_uri=URI,
        kafka_config_id=KAFKA_CONN_ID,
        spark_conn_id=SPARK_CONN_ID,
    )

    deep_branch = choose_deep()
    verdict = decide()
    fast_check >> deep_branch >> [deep_check, verdict]
    deep_check >> verdict
    verdict >> [store_ok, store_bad(), rebuild]
    rebuild >> recheck_fast >> recheck_deep
