"""What every state-store task shares (the fast check, the deep check, the rebuild): the snapshot hook, a
check's ending and the lineage. The decisions are :mod:`airflow_provider_kstate.store.tasks`'s, the reports'
text :mod:`airflow_provider_kstate.store.results`'s: the operators gather the inputs, call them and log.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.assets import annotate_outlets
from airflow_provider_kstate.store import tasks

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_kstate.hooks.snapshot import KStateSnapshotHook
    from airflow_provider_kstate.store.results import CheckReport


class KStateStoreTask:
    """The mixin of the state-store tasks: the snapshot hook, a check's ending, and the lineage (the
    changelog and the snapshot, :func:`~airflow_provider_kstate.lineage.store_lineage`)."""

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
