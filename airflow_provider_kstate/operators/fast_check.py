"""The fast check of a state store: its snapshot's manifest against the changelog, in the worker
(``docs/guides/state.md``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.operators.kafka import KStateKafkaOperator
from airflow_provider_kstate.operators.store_task import KStateStoreTask

if TYPE_CHECKING:
    from airflow.sdk import Context


class KStateFastCheckOperator(KStateStoreTask, KStateKafkaOperator):
    """Check a snapshot's manifest against the changelog's offsets and layout, in the worker, O(partitions).

    Pushes the report (``ok``, ``problems``, ``failed_partitions``, per-partition offsets) to XCom.
    A missing snapshot is a failed check (``snapshot_ok: False``), not an error. ``kafka_config_id``,
    ``request_timeout``: ``docs/reference/parameters.md``.

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
