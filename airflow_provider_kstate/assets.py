"""Airflow Assets of state stores: a snapshot is an asset, updated by a successful check or rebuild."""

from __future__ import annotations

import os
from typing import Any

from airflow.sdk import Asset

from airflow_provider_kstate.store import uri as uris

#: The asset group of kstate snapshots.
GROUP = "kstate-snapshot"


def snapshot_asset(snapshot_uri: str, name: str | None = None) -> Asset:
    """Return the Asset of the snapshot at ``snapshot_uri`` (a local path becomes a ``file://`` URI).

    :param snapshot_uri: the snapshot's directory.
    :param name: the asset's name (default: its URI).
    """
    root = uris.local_path(snapshot_uri)
    uri = f"file://{os.path.abspath(str(root))}" if root is not None else snapshot_uri.rstrip("/")
    return Asset(uri=uri, name=name or uri, group=GROUP)


def annotate_outlets(outlets: list[Any], context: Any, report: dict[str, Any]) -> None:
    """Put what a check or rebuild found into the extra of its outlet assets' events.

    :param outlets: the task's outlets.
    :param context: the task's context (its ``outlet_events``; absent outside a task run).
    :param report: the task's report.
    """
    events = context.get("outlet_events") if hasattr(context, "get") else None
    if events is None:
        return
    extra = {k: report.get(k) for k in ("check", "topic", "snapshot_uri", "ok", "rows", "records_read")}
    for outlet in outlets or []:
        if isinstance(outlet, Asset):
            events[outlet].extra = {k: v for k, v in extra.items() if v is not None}
