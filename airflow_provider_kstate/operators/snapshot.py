"""Operators that check a state store against its changelog and rebuild it with Spark.

* :class:`KStateFastCheckOperator` - the O(partitions) check in the worker (manifest, offsets, layout).
* :class:`KStateDeepCheckOperator` - a Spark job folding the changelog (read_committed) and comparing it
  with the snapshot row by row.
* :class:`KStateRebuildOperator` - a Spark job rebuilding the snapshot from the changelog into a new version
  and committing it by rewriting the snapshot's pointer (see ``docs/snapshot-layout.md``).
* :class:`~airflow_provider_kstate.operators.spark_app.KStateSparkApplicationOperator` - their base, the
  Spark provider's ``SparkSubmitOperator``.

Each check returns its report (``ok``, per-partition problems, ``failed_partitions``) and raises
:class:`~airflow_provider_kstate.errors.StateCheckFailed` when ``fail_on_bad`` is set and the store is
bad. The checks' logic and report text live in :mod:`airflow_provider_kstate.store` (the tasks' decisions:
:mod:`airflow_provider_kstate.store.tasks`); the operators gather the inputs, call it, log and raise.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.assets import annotate_outlets
from airflow_provider_kstate.defaults import (
    DEFAULT_INTERVAL,
    DEFAULT_KEEP_VERSIONS,
    DEFAULT_LEASE_TOPIC,
    DEFAULT_LEASE_TTL,
)
from airflow_provider_kstate.operators.kafka import KStateKafkaOperator
from airflow_provider_kstate.operators.spark_app import KStateSparkApplicationOperator
from airflow_provider_kstate.params import as_optional_count, as_partitions, as_str_list
from airflow_provider_kstate.store import tasks
from airflow_provider_kstate.store.submission import DEFAULT_SPARK_CONF, app_file, package_app, spark_app_path

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_kstate.hooks.snapshot import KStateSnapshotHook
    from airflow_provider_kstate.store.results import CheckReport

__all__ = [
    "DEFAULT_SPARK_CONF",
    "KStateDeepCheckOperator",
    "KStateFastCheckOperator",
    "KStateRebuildOperator",
    "KStateSparkApplicationOperator",
    "parse_count",
    "parse_partitions",
    "spark_app_path",
]


def parse_partitions(value: Any) -> list[int] | None:
    """Normalize a partition list (see :func:`~airflow_provider_kstate.params.as_partitions`)."""
    return as_partitions("partitions", value)


def parse_count(value: Any, name: str = "partitions") -> int | None:
    """Normalize an optional partition count (see :func:`~airflow_provider_kstate.params.as_optional_count`)."""
    return as_optional_count(name, value)


def _finish_check(
    operator: Any, context: Context, kind: str, report: CheckReport, lines: list[tuple[bool, str]]
) -> dict[str, Any]:
    """Log a check's runbook lines, annotate the operator's outlets, raise when ``fail_on_bad`` and the
    store is bad (:func:`~airflow_provider_kstate.store.tasks.check_failure`), and return the report
    document (the XCom).

    :param operator: the fast or deep check operator (``log``, ``outlets``, ``fail_on_bad``, ``topic``,
        ``snapshot_uri``).
    :param kind: ``fast`` or ``deep``, as the error names the check.
    :param report: the check's report.
    :param lines: its runbook lines, ``(warning, text)``.
    """
    from airflow_provider_kstate.metrics import METRICS_OUT

    for warning, text in lines:
        (operator.log.warning if warning else operator.log.info)("%s", text)
    doc = report.to_dict()
    annotate_outlets(operator.outlets, context, doc)
    METRICS_OUT.checked(operator.topic, kind, report.ok, report.failed_partitions)
    failure = tasks.check_failure(kind, operator.snapshot_uri, operator.topic, report)
    if operator.fail_on_bad and failure is not None:
        raise failure
    return doc


class KStateFastCheckOperator(KStateKafkaOperator):
    """Check a snapshot's manifest against the changelog's offsets and layout, in the worker, O(partitions).

    Pushes the report (``ok``, ``problems``, ``failed_partitions``, per-partition offsets) to XCom.
    A missing snapshot is a failed check (``snapshot_ok: False``), not an error.

    :param topic: the changelog topic. (templated)
    :param snapshot_uri: the snapshot's directory (local path or filesystem URI). (templated)
    :param kafka_config_id: the Kafka connection (conn type ``kafka``).
    :param fail_on_bad: raise StateCheckFailed when the store is bad (else only report it).
    :param request_timeout: seconds to wait for each admin request.
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
        from airflow_provider_kstate.hooks.snapshot import KStateSnapshotHook
        from airflow_provider_kstate.store import results

        hook = KStateSnapshotHook(
            kafka_config_id=self.kafka_config_id,
            request_timeout=self.request_timeout,
            storage_conn_id=self.storage_conn_id,
        )
        report = hook.fast_check(self.topic, self.snapshot_uri)
        # the XCom: the fast check's report document, as it built it
        return _finish_check(self, context, "fast", report, results.fast_lines(report))

    def get_openlineage_facets_on_start(self) -> Any:
        """The changelog and the snapshot, for OpenLineage (:mod:`airflow_provider_kstate.lineage`)."""
        from airflow_provider_kstate.lineage import store_lineage

        return store_lineage(self)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The changelog and the snapshot with what this task found (offsets, rows, version, verdict)."""
        from airflow_provider_kstate.lineage import store_lineage

        return store_lineage(self, task_instance, complete=True)


class _StoreSparkOperator(KStateSparkApplicationOperator):
    """Common ground of the deep check and the rebuild: a topic, a snapshot URI, the package's application.

    Before Spark starts, the broker doctor's verdict must keep the promises a changelog read relies on
    (``STATE_NEEDS``: ListOffsets' end equals the end of a fetch, read_committed hides aborted records,
    the last stable offset stops at an open transaction); a broken one fails the task with
    :class:`~airflow_provider_kstate.errors.BrokerDeviationError` unless ``allow_broker_deviation``
    names it. The applications also cross-check the bounds of every read with where a fetch ends; a
    disagreement is a ``BrokerDeviationError`` too (the application's ``offset-bounds`` error code, see
    :data:`~airflow_provider_kstate.store.submission.APP_ERRORS`), and nothing is published.

    While the application reads the changelog its driver logs a ``PROGRESS`` line every
    ``progress_interval`` seconds (offsets read of the total, percent, rate, time left), which the Spark
    provider's hook copies into the task log; 0 turns them off.

    ``changelog_reader`` picks how the changelog is read: ``confluent`` (confluent-kafka in the tasks, the
    default: the faster, ``bench/results/changelog_reader.json``) or ``spark`` (Spark's own Kafka source:
    spark-sql-kafka-0-10 given with ``jars=`` or ``packages=``); the results are the same either way.
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
        progress_interval: float = DEFAULT_INTERVAL,
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

    def allowed_deviations(self) -> tuple[str, ...]:
        """Return ``allow_broker_deviation`` (a list, a rendered list ``"['x']"`` or ``"x,y"``) as promise
        names (KStateConfigError naming an unknown one)."""
        from airflow_provider_kstate.operators.doctor import allowed_deviations

        return allowed_deviations(as_str_list("allow_broker_deviation", self.allow_broker_deviation))

    def trust_broker(self) -> list[str]:
        """Refuse a broker whose changelog reads cannot be trusted, by the doctor's verdict (cached per
        cluster), before Spark starts; return the broken promises ``allow_broker_deviation`` accepts.

        :raises BrokerDeviationError: a promise of ``STATE_NEEDS`` is broken and not accepted.
        """
        from airflow_provider_kstate.doctor.promises import STATE_NEEDS
        from airflow_provider_kstate.hooks.doctor import KStateDoctorHook

        allow = self.allowed_deviations()
        what = tasks.app_subject(self.app_name, self.topic)
        verdict = KStateDoctorHook(kafka_config_id=self.kafka_config_id).require(STATE_NEEDS, allow, what)
        return tasks.accepted_deviations(verdict.broken(), allow)

    def app_path(self) -> str:
        return package_app(self.application, self.app_name)

    def snapshot_hook(self) -> KStateSnapshotHook:
        from airflow_provider_kstate.hooks.snapshot import KStateSnapshotHook

        return KStateSnapshotHook(
            kafka_config_id=self.kafka_config_id,
            request_timeout=self.request_timeout,
            storage_conn_id=self.storage_conn_id,
        )

    def _base_args(self, accepted: list[str] | None = None) -> list[str]:
        if self.allow_non_compacted_changelog:
            self.log.warning(
                "RISK ACCEPTED: allow_non_compacted_changelog=True for %s: a changelog that retention trimmed "
                "may lack keys, so the snapshot may miss state",
                self.topic,
            )
        return tasks.store_args(
            self.topic,
            self.snapshot_uri,
            progress_interval=self.progress_interval,
            changelog_reader=self.changelog_reader,
            accepted=accepted,
            allow_non_compacted=self.allow_non_compacted_changelog,
        )

    def get_openlineage_facets_on_start(self) -> Any:
        """The changelog and the snapshot, for OpenLineage (:mod:`airflow_provider_kstate.lineage`)."""
        from airflow_provider_kstate.lineage import store_lineage

        return store_lineage(self)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The changelog and the snapshot with what this task found (offsets, rows, version, verdict)."""
        from airflow_provider_kstate.lineage import store_lineage

        return store_lineage(self, task_instance, complete=True)


class KStateDeepCheckOperator(_StoreSparkOperator):
    """Compare the snapshot row by row with the changelog folded read_committed, in Spark.

    Finds what the fast check cannot: dropped rows, values from aborted transactions, stale values,
    keys in the wrong partition, manifest statistics that do not match the rows. Pushes the report
    (``ok``, per-partition ``problems`` and sample keys, ``failed_partitions``) to XCom.

    :param topic: the changelog topic. (templated)
    :param snapshot_uri: the snapshot's directory. (templated)
    :param sample_keys: how many example keys to report per kind of problem.
    :param fail_on_bad: raise StateCheckFailed when the store is bad (else only report it).
    :param progress_interval: seconds between two ``PROGRESS`` lines of the changelog read (0: none).
    :param kwargs: see :class:`KStateSparkApplicationOperator` and ``SparkSubmitOperator``.
    """

    app_name = "deep_check.py"

    def __init__(
        self, *, topic: str, snapshot_uri: str, sample_keys: int = 5, fail_on_bad: bool = True, **kwargs: Any
    ) -> None:
        super().__init__(topic=topic, snapshot_uri=snapshot_uri, **kwargs)
        self.sample_keys = sample_keys
        self.fail_on_bad = fail_on_bad

    def app_args(self, accepted: list[str] | None = None) -> list[str]:
        return tasks.deep_check_args(self._base_args(accepted), self.sample_keys)

    def execute(self, context: Context) -> dict[str, Any]:  # type: ignore[override]
        from airflow_provider_kstate.store import results
        from airflow_provider_kstate.store.results import CheckReport

        hook = self.snapshot_hook()
        hook.admin.partition_count(self.topic)  # TopicNotFoundError before Spark starts
        hook.manifest(self.snapshot_uri)  # SnapshotError naming the problem before Spark starts
        accepted = self.trust_broker()  # BrokerDeviationError before Spark starts
        report = CheckReport.read(
            self.submit(hook, context, self.app_args(accepted)),
            check="deep",
            topic=self.topic,
            snapshot_uri=self.snapshot_uri,
        )
        # the XCom: the application's report with check, topic and the verdict
        return _finish_check(self, context, "deep", report, results.deep_lines(report))


class KStateRebuildOperator(_StoreSparkOperator):
    """Rebuild the snapshot from the changelog (read_committed fold) in Spark and publish it.

    The rebuild writes a new immutable version under ``snapshot_uri`` and commits it by rewriting the
    pointer; the ``keep_versions`` newest committed versions stay (rollback: rewrite the pointer, see
    ``docs/snapshot-layout.md``). One run at a time writes a snapshot: the run takes the snapshot's lease
    (key ``snapshot:<uri>`` in the lease topic, renewed while Spark runs, released after); another run
    holding it fails this one with :class:`~airflow_provider_kstate.errors.SnapshotLeaseHeldError`
    unless that run has ended (then the lease is taken over). Inputs are validated before Spark starts: the topic must exist, the URI must be one the package reads, ``partitions`` must be at least
    the topic's count, and ``only_partitions`` needs a readable snapshot with the same layout.

    :param topic: the changelog topic. (templated)
    :param snapshot_uri: the snapshot's directory. (templated)
    :param partitions: the partition count to key the snapshot for; None: the topic's. (templated)
    :param only_partitions: rebuild only these partitions, keeping the others (the layout must be
        unchanged); a list, a comma-separated string or None for all. (templated)
    :param keep_versions: how many versions to keep, the current one included (>= 1).
    :param lease_topic: the lease log topic (shared with the partition increase).
    :param lease_ttl: seconds a crashed run's snapshot lease lasts (default 900, the topic lease's too);
        renewed every third of it.
    :param progress_interval: seconds between two ``PROGRESS`` lines of the changelog read (0: none); the
        same numbers are kept in ``<snapshot_uri>/_kstate_progress.json`` for the kstate page.
    :param kwargs: see :class:`KStateSparkApplicationOperator` and ``SparkSubmitOperator``.
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
        keep_versions: int | str = DEFAULT_KEEP_VERSIONS,
        lease_topic: str = DEFAULT_LEASE_TOPIC,
        lease_ttl: float = DEFAULT_LEASE_TTL,
        **kwargs: Any,
    ) -> None:
        super().__init__(topic=topic, snapshot_uri=snapshot_uri, **kwargs)
        self.partitions = partitions
        self.only_partitions = only_partitions
        self.keep_versions = keep_versions
        self.lease_topic = lease_topic
        self.lease_ttl = lease_ttl

    def _plan(self, hook: KStateSnapshotHook) -> tuple[int, list[int] | None]:
        """Validate the inputs against the cluster and the snapshot; return (target count, only list)."""
        current = hook.admin.partition_count(self.topic)
        target = tasks.rebuild_target(self.topic, current, parse_count(self.partitions))
        only = parse_partitions(self.only_partitions)
        return target, tasks.rebuild_scope(target, only, lambda: hook.manifest(self.snapshot_uri).partitions)

    @staticmethod
    def rebuild_args(base: list[str], target: int, only: list[int] | None) -> list[str]:
        """Return the rebuild application's arguments for a target count and partition list."""
        return tasks.rebuild_args(base, target, only)

    @contextmanager
    def snapshot_lease(self, context: Context, root: str) -> Iterator[str]:
        """Hold the snapshot's lease (key ``snapshot:<root>``) while the body runs; renew it in the background.

        The owner is this execution of this task try, ``dag_id/run_id#tryN@nonce``: two Airflow
        deployments whose runs share a run id (both run ``scheduled__<midnight>``) are still two writers,
        while a retry of this task takes over the lease of its own earlier try (Airflow starts try N+1 only
        after try N has ended). See :class:`~airflow_provider_kstate.lease_rules.LeaseKeeper`.

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
        keep = tasks.keep_count(parse_count(self.keep_versions, "keep_versions"), self.keep_versions)
        target, only = self._plan(hook)
        self.log.info(
            "Rebuilding snapshot %s of %s for %s partitions (%s) into a new version; keeping %s versions",
            self.snapshot_uri,
            self.topic,
            target,
            tasks.scope_text(only),
            keep,
        )
        accepted = self.trust_broker()  # BrokerDeviationError before Spark starts: nothing published
        args = tasks.rebuild_args(self._base_args(accepted), target, only, keep)
        with self.snapshot_lease(context, root):
            started = time.monotonic()
            written = self.submit(hook, context, args)
        report = tasks.rebuilt(written, self.snapshot_uri, self.topic)  # SnapshotError when it failed
        self.log.info(
            "Rebuilt %s: version %s, %s changelog records read, %s rows in %s partitions, %ss; previous: %s",
            self.snapshot_uri,
            report.snapshot_version,
            report.records_read,
            report.rows,
            len(report.partitions),
            report.seconds,
            report.previous,
        )
        doc = report.to_dict()  # the XCom: the application's report, as it wrote it
        annotate_outlets(self.outlets, context, doc)
        METRICS_OUT.rebuilt(self.topic, doc, time.monotonic() - started)
        return doc
