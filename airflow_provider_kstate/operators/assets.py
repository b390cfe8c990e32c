"""Add a checked snapshot's event to its Asset: the maintenance DAG's ``store_ok``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_provider_kstate.task_edge import TranslatesDomainErrors

if TYPE_CHECKING:
    from airflow.sdk import Context


class KStateSnapshotEventOperator(TranslatesDomainErrors, BaseOperator):
    """Add the event of the snapshot at ``snapshot_uri`` to this task's AssetAlias outlets
    (:mod:`airflow_provider_kstate.assets`).

    The maintenance DAG's ``store_ok``: the checks found the store good, so the snapshot is fresh.

    :param snapshot_uri: the snapshot's directory (templated).
    :param topic: its changelog topic (templated; goes to the event's extra).
    """

    template_fields: tuple[str, ...] = ("snapshot_uri", "topic")

    def __init__(self, *, snapshot_uri: str, topic: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.snapshot_uri = snapshot_uri
        self.topic = topic

    def execute(self, context: Context) -> str:
        from airflow_provider_kstate.assets import annotate_outlets, snapshot_asset

        report = {"check": "fast", "topic": self.topic or None, "snapshot_uri": self.snapshot_uri, "ok": True}
        annotate_outlets(list(self.outlets), context, report)
        asset = snapshot_asset(self.snapshot_uri)
        self.log.info("ASSET snapshot %s is good: event of %s", self.snapshot_uri, asset.uri)
        return asset.uri
