"""The asset helpers: names equal URIs, the alias events a check, a rebuild and an increase add."""

from __future__ import annotations

import pytest
from airflow.sdk.execution_time.context import OutletEventAccessors

from airflow_provider_kstate.assets import (
    add_topic_event,
    annotate_outlets,
    snapshot_alias,
    snapshot_asset,
    topic_alias,
    topic_asset,
)
from airflow_provider_kstate.operators.assets import KStateSnapshotEventOperator


def _added(events: OutletEventAccessors, alias: object) -> list[tuple[str, dict[str, object]]]:
    return [(e.dest_asset_key.uri, e.extra) for e in events[alias].asset_alias_events]  # type: ignore[index]


def test_asset_names_are_their_uris() -> None:
    snap = snapshot_asset("/data/snap/")
    assert (snap.uri, snap.name, snap.group) == ("file:///data/snap", "file:///data/snap", "kstate-snapshot")
    assert snapshot_asset("s3://b/snap/").name == "s3://b/snap"
    asset = topic_asset("b1:9092, b2:9092", "orders")
    assert asset.uri == asset.name == "kafka://b1:9092/orders"
    with pytest.raises(ValueError, match="server and a topic"):
        topic_asset("", "orders")


def test_store_ok_adds_the_checked_snapshot_to_its_alias() -> None:
    events = OutletEventAccessors()
    op = KStateSnapshotEventOperator(
        task_id="store_ok", snapshot_uri="/data/other", topic="t", outlets=[snapshot_alias()]
    )
    assert op.execute({"outlet_events": events}) == "file:///data/other"  # type: ignore[arg-type]
    assert _added(events, snapshot_alias()) == [
        ("file:///data/other", {"check": "fast", "topic": "t", "snapshot_uri": "/data/other", "ok": True})
    ]


def test_a_bad_store_adds_no_event_and_no_alias_no_event() -> None:
    events = OutletEventAccessors()
    annotate_outlets([snapshot_alias()], {"outlet_events": events}, {"ok": False, "snapshot_uri": "/s"})
    assert _added(events, snapshot_alias()) == []
    assert add_topic_event([], {"outlet_events": events}, "b:9092", "t", {}) is None
    asset = add_topic_event([topic_alias()], {"outlet_events": events}, "b:9092", "t", {"partitions": 3})
    assert asset is not None and _added(events, topic_alias()) == [("kafka://b:9092/t", {"partitions": 3})]
