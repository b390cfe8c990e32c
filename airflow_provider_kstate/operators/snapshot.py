"""Operators that check a state store against its changelog and rebuild it: the fast check (in the worker),
the deep check and the rebuild (Spark applications on
:class:`~airflow_provider_kstate.operators.spark_app.KStateSparkApplicationOperator`; the rebuild commits a
new version by rewriting the snapshot's pointer, ``docs/snapshot-layout.md``).

A check returns its report (``ok``, per-partition problems, ``failed_partitions``) and raises
:class:`~airflow_provider_kstate.errors.StateCheckFailed` when ``fail_on_bad`` is set and the store is bad.
The decisions are :mod:`airflow_provider_kstate.store.tasks`'s, the reports' text
:mod:`airflow_provider_kstate.store.results`'s: the operators gather the inputs, call them, log and raise.
``kafka_config_id``, ``request_timeout``, ``storage_conn_id``, ``lease_ttl``: ``docs/reference/parameters.md``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import TYPE_CHECKING, Any

from airflow_provider_kstate import defaults
from airflow_provider_kstate.assets import annotate_outlets
from airflow_provider_kstate.operators.kafka import KStateKafkaOperator
from airflow_provider_kstate.operators.spark_app import KStateSparkApplicationOperator
from airflow_provider_kstate.store import tasks
from airflow_provider_kstate.store.submission import app_file, package_app, spark_app_path

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_kstate.hooks.snapshot import KStateSnapshotHook
    from airflow_provider_kstate.store.results import CheckReport

__all__ = [
    "KStateDeepCheckOperator",
    "KStateFastCheckOperator",
    "KStateRebuildOperator",
    "KStateSparkApplicationOperator",
    "spark_app_path",
]


class _StoreTask:
    """What every state task shares: the snapshot hook, and its lineage (the changelog and the snapshot,
    :func:`~airflow_provider_kstate.lineage.store_lineage`)."""

    kafka_config_id: str
    request_timeout: float
    storage_conn_id: str | None
    topic: str
    snapshot_uri: str
    fail_on_bad: bool
    outlets: Any
    log: Any

    def snapshot_hook(self) -> KStateSnapshotHook:
        """Return the hook of the Kafka connection and of the snapshot's storage."""
        from airflow_provider_kstate.hooks.snapshot import KStateSnapshotHook

        return KStateSnapshotHook(
            kafka_config_id=self.kafka_config_id,
            request_timeout=self.request_timeout,
            storage_conn_id=self.storage_conn_id,
        )

    def finish_check(
        self, context: Context, kind: str, report: CheckReport, lines: list[tuple[bool, str]]
    ) -> Any:
        """Log a check's runbook ``lines`` (``(warning, text)``), annotate the outlets, count it, raise when
        ``fail_on_bad`` and the store is bad (:func:`~airflow_provider_kstate.store.tasks.check_failure`);
        return the report document (the XCom). ``kind``: ``fast`` or ``deep``."""
        from airflow_provider_kstate.metrics import METRICS_OUT

        for warning, text in lines:
            (self.log.warning if warning else self.log.info)("%s", text)
        doc = report.to_dict()
        annotate_outlets(self.outlets, context, doc)
        METRICS_OUT.checked(self.topic, kind, report.ok, report.failed_partitions)
        failure = tasks.check_failure(kind, self.snapshot_uri, self.topic, report)
        if self.fail_on_bad and failure is not None:
            raise failure
        return doc

    def get_openlineage_facets_on_start(self) -> Any:
        """The changelog and the snapshot."""
        from airflow_provider_kstate.lineage import store_lineage

        return store_lineage(self)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The changelog and the snapshot with what this task found (offsets, rows, version, verdict)."""
        from airflow_provider_kstate.lineage import store_lineage

        return store_lineage(self, task_instance, complete=True)


class KStateFastCheckOperator(_StoreTask, KStateKafkaOperator):
    """Check a snapshot's manifest against the changelog's offsets and layout, in the worker, O(partitions).

    Pushes the report (``ok``, ``problems``, ``failed_partitions``, per-partition offsets) to XCom.
    A missing snapshot is a failed check (``snapshot_ok: False``), not an error.

    :param topic: the changelog topic. (templated)
    :param snapshot_uri: the snapshot's directory (local path or filesystem URI). (templated)
    :param fail_on_bad: raise StateCheckFailed when the store is bad (else only report it).
    :param storage_conn_id: a connection whose credentials reach the snapshot's object store.
    """

    template_fields: tuple[str, ...] = ("topic", "snapshot_uri")
    ui_color = "#d9f2e6"

    def __init__(
        self,
        *,
        topic: str,
        snapshot_uri: str,
        fail_on_bad: bool = True,
        storage_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.topic = topic
        self.snapshot_uri = snapshot_uri
        self.fail_on_bad = fail_on_bad
        self.storage_conn_id = storage_conn_id

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_provider_kstate.store import results

        report = self.snapshot_hook().fast_check(self.topic, self.snapshot_uri)
        # the XCom: the fast check's report document, as it built it
        return self.finish_check(context, "fast", report, results.fast_lines(report))


class _StoreSparkOperator(_StoreTask, KStateSparkApplicationOperator):
    """Common ground of the deep check and the rebuild: a topic, a snapshot URI, the package's application,
    and a broker the changelog read can trust. ``topic`` and ``snapshot_uri``: as the subclasses';
    ``storage_conn_id``: ``docs/reference/parameters.md``.

    :param allow_non_compacted_changelog: read a non-compacted changelog whose log start moved (logged as
        ``RISK ACCEPTED``: a changelog that retention trimmed may lack keys).
    :param allow_broker_deviation: the broker doctor's broken promises to accept (a list, ``"['x']"`` or
        ``"x,y"``). Before Spark starts, the promises a changelog read relies on (``STATE_NEEDS``: ListOffsets'
        end is a fetch's end, read_committed hides aborted records, the last stable offset stops at an open
        transaction) must hold, else the task fails with
        :class:`~airflow_provider_kstate.errors.BrokerDeviationError`; so does an application whose read
        bounds disagree with where a fetch ends (nothing is published). (templated)
    :param progress_interval: seconds between two ``PROGRESS`` lines (offsets read of the total, percent,
        rate, time left) the driver logs while reading the changelog, copied into the task log; 0: none.
    :param changelog_reader: ``confluent`` (confluent-kafka in the tasks, the default and the faster:
        ``bench/results/changelog_reader.json``) or ``spark`` (Spark's Kafka source: spark-sql-kafka-0-10
        given with ``jars=`` or ``packages=``); the results are the same. (templated)
    """

    template_fields = (
        *KStateSparkApplicationOperator.template_fields,
        "topic",
        "snapshot_uri",
        "allow_broker_deviation",
        "changelog_reader",
    )
    app_name = ""

    def __init__(
        self,
        *,
        topic: str,
        snapshot_uri: str,
        storage_conn_id: str | None = None,
        allow_non_compacted_changelog: bool = False,
        allow_broker_deviation: list[str] | str | None = None,
        progress_interval: float = defaults.DEFAULT_INTERVAL,
        changelog_reader: str = tasks.DEFAULT_CHANGELOG_READER,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("application", app_file(self.app_name))
        super().__init__(**kwargs)
        self.topic = topic
        self.snapshot_uri = snapshot_uri
        self.storage_conn_id = storage_conn_id
        self.allow_non_compacted_changelog = allow_non_compacted_changelog
        self.allow_broker_deviation = allow_broker_deviation
        self.changelog_reader = changelog_reader
        self.progress_interval = tasks.progress_seconds(progress_interval)

    def trust_broker(self) -> list[str]:
        """Refuse a broker whose changelog reads cannot be trusted, by the doctor's verdict (cached per
        cluster), before Spark starts; return the broken promises ``allow_broker_deviation`` accepts.

        :raises BrokerDeviationError: a promise of ``STATE_NEEDS`` is broken and not accepted.
        """
        from airflow_provider_kstate.doctor.promises import STATE_NEEDS
        from airflow_provider_kstate.operators.doctor import allowed_deviations, broker_verdict

        verdict = broker_verdict(self, STATE_NEEDS, tasks.app_subject(self.app_name, self.topic))
        return tasks.accepted_deviations(verdict.broken(), allowed_deviations(self.allow_broker_deviation))

    def app_path(self) -> str:
        return package_app(self.application, self.app_name)


class KStateDeepCheckOperator(_StoreSparkOperator):
    """Compare the snapshot row by row with the changelog folded read_committed, in Spark.

    Finds what the fast check cannot: dropped rows, values from aborted transactions, stale values,
    keys in the wrong partition, manifest statistics that do not match the rows. Pushes the report
    (``ok``, per-partition ``problems`` and sample keys, ``failed_partitions``) to XCom.

    :param topic: the changelog topic. (templated)
    :param snapshot_uri: the snapshot's directory. (templated)
    :param sample_keys: how many example keys to report per kind of problem.
    :param fail_on_bad: raise StateCheckFailed when the store is bad (else only report it).
    :param kwargs: ``progress_interval``, ``storage_conn_id``, ``allow_broker_deviation``,
        ``changelog_reader``, ``allow_non_compacted_changelog`` (the Spark store tasks' shared parameters:
        ``_StoreSparkOperator``) and those of :class:`KStateSparkApplicationOperator`.
    """

    app_name = "deep_check.py"

    def __init__(
        self, *, topic: str, snapshot_uri: str, sample_keys: int = 5, fail_on_bad: bool = True, **kwargs: Any
    ) -> None:
        super().__init__(topic=topic, snapshot_uri=snapshot_uri, **kwargs)
        self.sample_keys = sample_keys
        self.fail_on_bad = fail_on_bad

    def app_args(self, accepted: list[str] | None = None) -> list[str]:
        return tasks.deep_check_args(tasks.read_args(self, accepted, self.log), self.sample_keys)

    def execute(self, context: Context) -> dict[str, Any]:  # type: ignore[override]
        from airflow_provider_kstate.store import results
        from airflow_provider_kstate.store.results import CheckReport

        hook = self.snapshot_hook()
        hook.admin.partition_count(self.topic)  # TopicNotFoundError before Spark starts
        hook.manifest(self.snapshot_uri)  # SnapshotError naming the problem before Spark starts
        accepted = self.trust_broker()  # BrokerDeviationError before Spark starts
        written = self.submit(hook, context, self.app_args(accepted))
        report = CheckReport.read(written, check="deep", topic=self.topic, snapshot_uri=self.snapshot_uri)
        # the XCom: the application's report with check, topic and the verdict
        return self.finish_check(context, "deep", report, results.deep_lines(report))


class KStateRebuildOperator(_StoreSparkOperator):
    """Rebuild the snapshot from the changelog (read_committed fold) in Spark and publish it.

    The rebuild writes a new immutable version under ``snapshot_uri`` and commits it by rewriting the
    pointer; the ``keep_versions`` newest committed versions stay (rollback: rewrite the pointer, see
    ``docs/snapshot-layout.md``). One run at a time writes a snapshot: the run holds the snapshot's lease
    (:meth:`snapshot_lease`) while Spark runs; another run holding it fails this one with
    :class:`~airflow_provider_kstate.errors.SnapshotLeaseHeldError` unless that run has ended. Before Spark
    starts, the topic must exist, the URI must be one the package reads, ``partitions`` must be at least the
    topic's count, and ``only_partitions`` needs a readable snapshot with the same layout.

    :param topic: the changelog topic. (templated)
    :param snapshot_uri: the snapshot's directory. (templated)
    :param partitions: the partition count to key the snapshot for; None: the topic's. (templated)
    :param only_partitions: rebuild only these partitions, keeping the others (the layout must be
        unchanged); a list, a comma-separated string or None for all. (templated)
    :param keep_versions: how many versions to keep, the current one included (>= 1).
    :param lease_topic: the lease log topic (shared with the partition increase).
    :param lease_ttl: seconds a crashed run's snapshot lease lasts; renewed every third of it.
    :param progress_interval: seconds between two ``PROGRESS`` lines of the changelog read (0: none); the
        same numbers are kept in ``<snapshot_uri>/_kstate_progress.json`` for the kstate page.
    :param kwargs: ``storage_conn_id``, ``allow_broker_deviation``, ``changelog_reader``,
        ``allow_non_compacted_changelog`` (the Spark store tasks' shared parameters: ``_StoreSparkOperator``)
        and those of :class:`KStateSparkApplicationOperator`.
    """

    #: A rebuild writes the snapshot (lineage: changelog in, snapshot out; the checks read both).
    writes_snapshot = True

    template_fields = (*_StoreSparkOperator.template_fields, "partitions", "only_partitions", "keep_versions")
    app_name = "rebuild.py"

    def __init__(
        self,
        *,
        topic: str,
        snapshot_uri: str,
        partitions: int | str | None = None,
        only_partitions: list[int] | str | None = None,
        keep_versions: int | str = defaults.DEFAULT_KEEP_VERSIONS,
        lease_topic: str = defaults.DEFAULT_LEASE_TOPIC,
        lease_ttl: float = defaults.DEFAULT_LEASE_TTL,
        **kwargs: Any,
    ) -> None:
        super().__init__(topic=topic, snapshot_uri=snapshot_uri, **kwargs)
        self.partitions = partitions
        self.only_partitions = only_partitions
        self.keep_versions = keep_versions
        self.lease_topic = lease_topic
        self.lease_ttl = lease_ttl

    @contextmanager
    def snapshot_lease(self, context: Context, root: str) -> Iterator[str]:
        """Hold the snapshot's lease (key ``snapshot:<root>``) while the body runs; renew it in the background.

        The owner is this execution of this task try, ``dag_id/run_id#tryN@nonce``: two deployments whose
        runs share a run id are two writers, while a retry takes over its own earlier try's lease. See
        :class:`~airflow_provider_kstate.lease_rules.LeaseKeeper`.

        :raises SnapshotLeaseHeldError: another run that is still running holds it.
        """
        from airflow_provider_kstate.hooks.lease import KStateLeaseHook
        from airflow_provider_kstate.lease_rules import LeaseKeeper

        hook = KStateLeaseHook(
            kafka_config_id=self.kafka_config_id,
            lease_topic=self.lease_topic,
            request_timeout=self.request_timeout,
        )
        keeper = LeaseKeeper.for_snapshot(hook, root, context, self.lease_ttl, self.log)
        with keeper.holding():
            yield keeper.key

    def execute(self, context: Context) -> dict[str, Any]:  # type: ignore[override]
        from airflow_provider_kstate.hooks.snapshot import check_uri
        from airflow_provider_kstate.metrics import METRICS_OUT

        hook = self.snapshot_hook()
        root = check_uri(self.snapshot_uri).rstrip("/")
        given = {
            "partitions": self.partitions,
            "only_partitions": self.only_partitions,
            "keep_versions": self.keep_versions,
        }
        plan = tasks.plan_rebuild(
            self.topic,
            given,
            partial(hook.admin.partition_count, self.topic),
            lambda: hook.manifest(self.snapshot_uri).partitions,
        )
        self.log.info("Rebuilding snapshot %s of %s for %s", self.snapshot_uri, self.topic, plan.intent())
        accepted = self.trust_broker()  # BrokerDeviationError before Spark starts: nothing published
        args = plan.args(tasks.read_args(self, accepted, self.log))
        with self.snapshot_lease(context, root):
            started = time.monotonic()
            written = self.submit(hook, context, args)
        report = tasks.rebuilt(written, self.snapshot_uri, self.topic)  # SnapshotError when it failed
        self.log.info("Rebuilt %s: %s", self.snapshot_uri, tasks.rebuilt_text(report))
        doc = report.to_dict()  # the XCom: the application's report, as it wrote it
        annotate_outlets(self.outlets, context, doc)
        METRICS_OUT.rebuilt(self.topic, doc, time.monotonic() - started)
        return doc
