"""Keep a state store honest: check its snapshot against the changelog, rebuild it when it is bad.

Flow::

    check_broker -> fast_check -> choose_deep -> [deep_check] -> decide -> store_ok
                                                        -> store_bad                (rebuild=never: run FAILS)
                                                        -> rebuild -> recheck_fast -> recheck_deep

* ``check_broker``: the broker doctor (``needs=Needs.STATE``, cached per cluster for a day;
  ``refresh_broker_check`` re-runs it). A broker whose end offsets, read_committed or last stable offset
  cannot be trusted stops the run here, before anything is read, unless ``allow_broker_deviation`` names
  the deviation.
* ``fast_check`` (worker, O(partitions)): manifest present and valid, covered offsets within the
  changelog's log start and high watermark, partition count equal to the topic's, and the changelog's
  topic id (KIP-516) equal to the one the manifest records: a changelog deleted and created again since the
  snapshot was built fails the check even at the same offsets, naming both ids (an id that cannot be read
  is a named warning, and the offsets decide). A missing snapshot is a failed check, so ``rebuild=auto``
  builds the first one.
* ``deep_check`` (Spark, when ``deep`` and a snapshot exists): row by row against the read_committed fold.
* ``decide``: ``force`` always rebuilds; ``auto`` rebuilds a bad store: only the failing partitions when
  the damage is theirs (the deep check's findings, or the fast check's damaged data files) and the layout
  is unchanged; in full after a bad manifest, a layout change, a changelog recreated (its id differs) or
  an offset finding (the changelog was recreated or trimmed); ``never`` fails the run on a bad store.
* After a rebuild both checks run again and fail the run if the store is still bad.
* The deep check and the rebuild first ask the broker doctor (cached per cluster): a broker that breaks a
  promise their reads rely on (end offsets that match fetches, read_committed, the last stable offset)
  fails the task with ``BrokerDeviationError`` before Spark starts, so nothing is published, unless
  ``allow_broker_deviation`` names it (``RISK ACCEPTED``). Their Spark apps also cross-check every read's
  bound with where a fetch ends.
* A store found good (``store_ok``) or rebuilt and re-checked (``recheck_deep``) emits an event of the
  Asset of the snapshot it checked (``file://`` + its absolute path, or its URI; named by that URI),
  through the outlet alias ``kstate-snapshot``, so DAGs scheduled on that snapshot run on a fresh,
  checked snapshot (``kstate_snapshot_consumer`` is the example). ``KSTATE_MAINTENANCE_SCHEDULE`` (parse
  time) replaces the ``@daily`` schedule; empty: triggered runs only.

Nothing here touches the network at parse time; connections ``kafka_default`` and ``spark_default``.
"""

from __future__ import annotations

import os

import pendulum
from airflow.sdk import DAG, Param

from airflow_provider_kstate.assets import snapshot_alias
from airflow_provider_kstate.doctor.promises import Needs
from airflow_provider_kstate.operators.assets import KStateSnapshotEventOperator
from airflow_provider_kstate.operators.deep_check import KStateDeepCheckOperator
from airflow_provider_kstate.operators.doctor import KStateBrokerDoctorOperator
from airflow_provider_kstate.operators.fast_check import KStateFastCheckOperator
from airflow_provider_kstate.operators.maintenance import (
    KStateChooseDeepCheckOperator,
    KStateStoreBadOperator,
    KStateStoreVerdictOperator,
)
from airflow_provider_kstate.operators.rebuild import KStateRebuildOperator

KAFKA_CONN_ID = "kafka_default"
SPARK_CONN_ID = "spark_default"
_SNAPSHOT_ROOT = os.environ.get("KSTATE_SNAPSHOT_ROOT", "/tmp/kstate/snapshots")
TOPIC = "{{ params.changelog_topic }}"
URI = "{{ params.snapshot_uri }}"
DEVIATIONS = "{{ params.allow_broker_deviation }}"
#: The outlet of the tasks that declare a snapshot good: resolves to the Asset of the checked snapshot.
SNAPSHOT_ALIAS = snapshot_alias()

with DAG(
    dag_id="kstate_state_maintenance",
    description="Check a state store (snapshot) against its changelog; rebuild it with Spark when bad.",
    schedule=os.environ.get("KSTATE_MAINTENANCE_SCHEDULE", "@daily") or None,
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
        "keep_versions": Param(
            3,
            type="integer",
            minimum=1,
            title="Versions to keep",
            description="Snapshot versions a rebuild keeps (the current one included) for rollback.",
        ),
        "allow_broker_deviation": Param(
            [],
            type="array",
            items={"type": "string"},
            title="Accepted broker deviations",
            description="Promises the broker doctor found broken that this run accepts by name (latest_offset, "
            "read_committed, last_stable_offset ...), logged as RISK ACCEPTED. Empty: a broker that breaks one "
            "the checks and the rebuild rely on is refused before Spark starts, and nothing is published.",
        ),
        "refresh_broker_check": Param(
            False,
            type="boolean",
            title="Re-check the broker now",
            description="Re-run the broker's behavioural checks instead of using the verdict cached for a day.",
        ),
    },
) as dag:
    # The broker doctor first: a broker whose ListOffsets, read_committed or LSO cannot be trusted makes
    # every check below meaningless and a rebuild unsafe; the run stops here, before anything is read.
    check_broker = KStateBrokerDoctorOperator(
        task_id="check_broker",
        needs=Needs.STATE,
        allow_broker_deviation=DEVIATIONS,
        refresh_broker_check="{{ params.refresh_broker_check }}",
        kafka_config_id=KAFKA_CONN_ID,
    )
    fast_check = KStateFastCheckOperator(
        task_id="fast_check",
        topic=TOPIC,
        snapshot_uri=URI,
        kafka_config_id=KAFKA_CONN_ID,
        fail_on_bad=False,
    )

    deep_branch = KStateChooseDeepCheckOperator(
        task_id="choose_deep",
        fast_report=fast_check.output,
        deep_task_id="deep_check",
        otherwise_task_id="decide",
    )

    deep_check = KStateDeepCheckOperator(
        task_id="deep_check",
        topic=TOPIC,
        snapshot_uri=URI,
        allow_broker_deviation=DEVIATIONS,
        kafka_config_id=KAFKA_CONN_ID,
        spark_conn_id=SPARK_CONN_ID,
        fail_on_bad=False,
    )

    verdict = KStateStoreVerdictOperator(
        task_id="decide", fast_report=fast_check.output, deep_report=deep_check.output
    )

    store_ok = KStateSnapshotEventOperator(
        task_id="store_ok", snapshot_uri=URI, topic=TOPIC, outlets=[SNAPSHOT_ALIAS]
    )

    store_bad = KStateStoreBadOperator(task_id="store_bad", reports=[fast_check.output, deep_check.output])

    rebuild = KStateRebuildOperator(
        task_id="rebuild",
        topic=TOPIC,
        snapshot_uri=URI,
        partitions="{{ params.partitions }}",
        only_partitions=verdict.output["only_partitions"],
        keep_versions="{{ params.keep_versions }}",
        allow_broker_deviation=DEVIATIONS,
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
        allow_broker_deviation=DEVIATIONS,
        kafka_config_id=KAFKA_CONN_ID,
        spark_conn_id=SPARK_CONN_ID,
        outlets=[SNAPSHOT_ALIAS],
    )

    check_broker >> fast_check >> deep_branch >> [deep_check, verdict]
    deep_check >> verdict
    verdict >> [store_ok, store_bad, rebuild]
    rebuild >> recheck_fast >> recheck_deep
