"""Airflow Assets of kstate: a checked or rebuilt snapshot, and a topic that grew.

The snapshot a maintenance run checks and the topic an increase grows are runtime params, so the tasks
declare an :class:`~airflow.sdk.AssetAlias` as their outlet and add the concrete
:class:`~airflow.sdk.Asset` once they know it (``outlet_events[alias].add(asset)``). A DAG downstream is
scheduled on the concrete asset, for example ``schedule=[snapshot_asset("/data/snapshots/totals")]`` or
``schedule=[topic_asset("broker:9092", "orders")]``; Airflow resolves the alias at the event.

An asset's name is its URI, always: the event a task adds and the asset a downstream DAG declares must be
the same (name, URI) pair, or Airflow records the event on a second asset that nothing is scheduled on.
"""

from __future__ import annotations

import os
from typing import Any

from airflow.sdk import Asset, AssetAlias

from airflow_provider_kstate.store import uri as uris

#: The asset group of kstate snapshots.
GROUP = "kstate-snapshot"
#: The asset group of Kafka topics grown by an increase.
TOPIC_GROUP = "kstate-topic"
#: The alias a maintenance DAG's checks and rebuilds declare as their outlet.
SNAPSHOT_ALIAS = "kstate-snapshot"
#: The alias the increase's ``verify`` declares as its outlet.
TOPIC_ALIAS = "kstate-topic-increased"
_EXTRA_FIELDS = ("check", "topic", "snapshot_uri", "ok", "rows", "records_read")


def snapshot_uri_of(snapshot_uri: str) -> str:
    """Return the asset URI of a snapshot: ``file://`` + the absolute path of a local one, else its URI.

    :param snapshot_uri: the snapshot's directory (a local path, ``file://``, ``s3://`` ... URI).
    """
    root = uris.local_path(snapshot_uri)
    return f"file://{os.path.abspath(str(root))}" if root is not None else snapshot_uri.rstrip("/")


def snapshot_asset(snapshot_uri: str) -> Asset:
    """Return the Asset of the snapshot at ``snapshot_uri`` (named by its URI).

    :param snapshot_uri: the snapshot's directory.
    """
    uri = snapshot_uri_of(snapshot_uri)
    return Asset(uri=uri, name=uri, group=GROUP)


def snapshot_alias() -> AssetAlias:
    """Return the alias that resolves to the snapshot a maintenance task found good or rebuilt."""
    return AssetAlias(name=SNAPSHOT_ALIAS, group=GROUP)


def topic_asset(bootstrap_servers: str, topic: str) -> Asset:
    """Return the Asset of ``topic`` in the Kafka provider's scheme, ``kafka://<first server>/<topic>``.

    The first bootstrap server names the cluster, as the Kafka provider's ``create_asset`` and its
    OpenLineage namespace do.

    :param bootstrap_servers: the connection's ``bootstrap.servers`` (comma-separated ``host:port``).
    :param topic: the topic's name.
    """
    server = bootstrap_servers.split(",")[0].strip()
    if not server or not topic:
        raise ValueError(
            f"a kafka:// asset needs a server and a topic (got {bootstrap_servers!r}, {topic!r})"
        )
    uri = f"kafka://{server}/{topic}"
    return Asset(uri=uri, name=uri, group=TOPIC_GROUP)


def topic_alias() -> AssetAlias:
    """Return the alias that resolves to the topic an increase grew."""
    return AssetAlias(name=TOPIC_ALIAS, group=TOPIC_GROUP)


def _outlet_events(context: Any) -> Any:
    return context.get("outlet_events") if hasattr(context, "get") else None


def annotate_outlets(outlets: list[Any], context: Any, report: dict[str, Any]) -> None:
    """Put a check's or rebuild's findings on its outlets' events.

    An Asset outlet gets the findings as its event's extra. An AssetAlias outlet gets an event of the
    snapshot the report names (``snapshot_uri``), only when the report says the store is good (``ok``
    absent or true): a check that found the store bad is not a fresh snapshot.

    :param outlets: the task's outlets.
    :param context: the task's context (its ``outlet_events``; absent outside a task run).
    :param report: the task's report.
    """
    events = _outlet_events(context)
    if events is None:
        return
    extra = {k: v for k, v in ((k, report.get(k)) for k in _EXTRA_FIELDS) if v is not None}
    good = report.get("ok", True) is not False and report.get("snapshot_uri")
    for outlet in outlets or []:
        if isinstance(outlet, Asset):
            events[outlet].extra = extra
        elif isinstance(outlet, AssetAlias) and good:
            events[outlet].add(snapshot_asset(str(report["snapshot_uri"])), extra=extra)


def add_topic_event(
    outlets: list[Any], context: Any, bootstrap_servers: str, topic: str, extra: dict[str, Any]
) -> Asset | None:
    """Add the event of ``topic``'s ``kafka://`` Asset to the task's AssetAlias outlets; return the Asset.

    :param outlets: the task's outlets (nothing is added without an AssetAlias among them).
    :param context: the task's context (its ``outlet_events``; absent outside a task run).
    :param bootstrap_servers: the connection's ``bootstrap.servers``.
    :param topic: the topic that grew.
    :param extra: the event's extra (the partition counts).
    """
    events = _outlet_events(context)
    aliases = [o for o in outlets or [] if isinstance(o, AssetAlias)]
    if events is None or not aliases:
        return None
    asset = topic_asset(bootstrap_servers, topic)
    for alias in aliases:
        events[alias].add(asset, extra=extra)
    return asset
