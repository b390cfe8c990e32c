"""The rebuild of a state store: a new snapshot version from the changelog, in Spark, committed by rewriting
the snapshot's pointer (``docs/snapshot-layout.md``, ``docs/guides/state.md``)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import TYPE_CHECKING, Any

from airflow_provider_kstate import defaults
from airflow_provider_kstate.assets import annotate_outlets
from airflow_provider_kstate.operators.store_spark import KStateStoreSparkOperator
from airflow_provider_kstate.store import tasks

if TYPE_CHECKING:
    from airflow.sdk import Context

#: The (templated) inputs :func:`~airflow_provider_kstate.store.tasks.plan_rebuild` checks before Spark starts.
REBUILD_INPUTS = ("partitions", "only_partitions", "keep_versions")


class KStateRebuildOperator(KStateStoreSparkOperator):
    """Rebuild the snapshot from the changelog (read_committed fold) in Spark and publish it.

    The rebuild writes a new immutable version under ``snapshot_uri`` and commits it by rewriting the
    pointer; the ``keep_versions`` newest committed versions stay (rollback: ``docs/snapshot-layout.md``).
    The run holds the snapshot's lease (:meth:`snapshot_lease`) while Spark runs. Before Spark starts, the
    topic must exist, the URI must be one the package reads, ``partitions`` must be at least the topic's
    count, and ``only_partitions`` needs a readable snapshot with the same layout.

    :param topic: the changelog topic. (templated)
    :param snapshot_uri: the snapshot's directory. (templated)
    :param partitions: the partition count to key the snapshot for; None: the topic's. (templated)
    :param only_partitions: rebuild only these partitions, keeping the others (the layout must be
        unchanged); a list, a comma-separated string or None for all. (templated)
    :param keep_versions: how many versions to keep, the current one included (>= 1). (templated)
    :param lease_topic: the lease log topic (shared with the partition increase).
    :param lease_ttl: seconds a crashed run's snapshot lease lasts; renewed every third of it.
    :param progress_interval: seconds between two ``PROGRESS`` lines of the changelog read (0: none); the
        same numbers are kept in ``<snapshot_uri>/_kstate_progress.json`` for the kstate page.
    :param kwargs: ``storage_conn_id``, ``allow_broker_deviation``, ``changelog_reader``,
        ``allow_non_compacted_changelog`` (the Spark store tasks' shared parameters:
        :class:`~airflow_provider_kstate.operators.store_spark.KStateStoreSparkOperator`) and those of
        :class:`~airflow_provider_kstate.operators.spark_app.KStateSparkApplicationOperator`.
    """

    #: A rebuild writes the snapshot (lineage: changelog in, snapshot out; the checks read both).
    writes_snapshot = True

    template_fields = (*KStateStoreSparkOperator.template_fields, *REBUILD_INPUTS)
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
        """Hold the snapshot's lease (key ``snapshot:<root>``) while the body runs, renewed in the background,
        owned by this execution of this task try
        (:meth:`~airflow_provider_kstate.lease_rules.LeaseKeeper.for_snapshot`).

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
        given = {name: getattr(self, name) for name in REBUILD_INPUTS}
        count = partial(hook.admin.partition_count, self.topic)
        plan = tasks.plan_rebuild(
            self.topic, given, count, lambda: hook.manifest(self.snapshot_uri).partitions
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
