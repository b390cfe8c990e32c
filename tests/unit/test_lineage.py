"""OpenLineage of kstate (airflow_provider_kstate.lineage): names, facets, the operators' methods, and the
agreement of the Asset URIs the provider emits with the datasets its lineage names. No broker."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_kstate import lineage
from airflow_provider_kstate.assets import snapshot_asset, topic_asset
from airflow_provider_kstate.operators.consumers import KStatePauseConsumersOperator
from airflow_provider_kstate.operators.deep_check import KStateDeepCheckOperator
from airflow_provider_kstate.operators.fast_check import KStateFastCheckOperator
from airflow_provider_kstate.operators.partitions import KStateIncreasePartitionsOperator
from airflow_provider_kstate.operators.rebuild import KStateRebuildOperator
from airflow_provider_kstate.operators.verify import KStateVerifyOperator
from airflow_provider_kstate.store.results import CheckReport

pytest.importorskip("airflow.providers.openlineage", reason="the [openlineage] extra is not installed")

SERVERS = "b1:9092,b2:9093"
PLAN = {
    "topic": "orders",
    "original_partitions": 2,
    "target_partitions": 4,
    "groups": {
        "billing": {"class": "active", "state": "STABLE", "member_count": 2},
        "audit": {"class": "empty"},
    },
}


class FakeTI:
    """A task instance whose XCom holds ``value`` (what the listener's task instance answers)."""

    def __init__(self, task_id: str, value: Any) -> None:
        self.task_id = task_id
        self.value = value

    def xcom_pull(self, task_ids: str, key: str = "return_value") -> Any:
        assert (task_ids, key) == (self.task_id, "return_value")
        return self.value


@pytest.fixture(autouse=True)
def servers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lineage, "bootstrap_servers", lambda conn_id: SERVERS)


def _names(datasets: list[Any]) -> list[tuple[str, str]]:
    return [(d.namespace, d.name) for d in datasets]


def _facet(dataset: Any) -> dict[str, Any]:
    from openlineage.client.serde import Serde

    out = Serde.to_dict(dataset.facets[lineage.FACET_KEY])
    return {k: v for k, v in out.items() if not k.startswith("_")}


def test_names_follow_openlineage_naming() -> None:
    assert lineage.topic_dataset(SERVERS, "orders") == ("kafka://b1:9092", "orders")
    assert lineage.snapshot_dataset("/data/snap/") == ("file", "/data/snap")
    assert lineage.snapshot_dataset("file:///data/snap") == ("file", "/data/snap")
    assert lineage.snapshot_dataset("s3://bucket/kstate/totals/") == ("s3://bucket", "kstate/totals")
    assert lineage.snapshot_dataset("s3a://bucket/kstate/totals") == ("s3://bucket", "kstate/totals")
    assert lineage.snapshot_dataset("gs://bucket/totals") == ("gs://bucket", "totals")
    assert lineage.snapshot_dataset("hdfs://nn:8020/state/totals") == ("hdfs://nn:8020", "/state/totals")
    with pytest.raises(ValueError, match="bootstrap server"):
        lineage.topic_dataset("", "orders")


@pytest.mark.parametrize("snapshot", ["/data/snap", "/data/snap/", "relative/snap", "file:///data/snap"])
def test_assets_and_lineage_agree_on_snapshots(snapshot: str) -> None:
    """The Asset a check or a rebuild emits converts (through the OpenLineage provider's own asset
    translation, i.e. the common.io provider's ``file`` converter) to the dataset the lineage names."""
    from airflow.providers.openlineage.utils.utils import translate_airflow_asset

    asset = snapshot_asset(snapshot)
    converted = translate_airflow_asset(asset, None)
    assert converted is not None, asset.uri
    assert (converted.namespace, converted.name) == lineage.snapshot_dataset(snapshot)
    assert lineage.asset_dataset(asset.uri) == lineage.snapshot_dataset(snapshot)


def test_assets_and_lineage_agree_on_topics() -> None:
    """The topic Asset of an increase converts (the Kafka provider's converter) to the lineage's dataset."""
    from airflow.providers.openlineage.utils.utils import translate_airflow_asset

    asset = topic_asset(SERVERS, "orders")
    converted = translate_airflow_asset(asset, None)
    assert converted is not None
    assert (converted.namespace, converted.name) == lineage.topic_dataset(SERVERS, "orders")
    assert lineage.asset_dataset(asset.uri) == ("kafka://b1:9092", "orders")


def test_object_store_assets_agree() -> None:
    """s3:// snapshot Assets keep their URI; the lineage names them as the Amazon provider's converter
    does (``s3://bucket`` and the key without its leading slash; that provider is not installed here)."""
    asset = snapshot_asset("s3://bucket/kstate/totals/")
    assert asset.uri == "s3://bucket/kstate/totals"
    assert lineage.asset_dataset(asset.uri) == ("s3://bucket", "kstate/totals")


def _fast_report(ok: bool = True) -> dict[str, Any]:
    return {
        "check": "fast",
        "topic": "totals-changelog",
        "snapshot_uri": "/data/snap",
        "topic_partitions": 2,
        "snapshot_partitions": 2,
        "snapshot_version": "v-20260101T000000-abcdef",
        "ok": ok,
        "failed_partitions": [] if ok else [1],
        "partitions": {
            "0": {
                "ok": True,
                "log_start": 0,
                "high_watermark": 10,
                "start_offset": 0,
                "end_offset": 10,
                "rows": 4,
            },
            "1": {
                "ok": ok,
                "log_start": 0,
                "high_watermark": 7,
                "start_offset": 0,
                "end_offset": 7,
                "rows": 3,
            },
        },
    }


def test_fast_check_reads_the_changelog_and_the_snapshot() -> None:
    op = KStateFastCheckOperator(task_id="fast_check", topic="totals-changelog", snapshot_uri="/data/snap")
    start = op.get_openlineage_facets_on_start()
    assert _names(start.inputs) == [("kafka://b1:9092", "totals-changelog"), ("file", "/data/snap")]
    assert start.outputs == []
    done = op.get_openlineage_facets_on_complete(FakeTI("fast_check", _fast_report(ok=False)))
    changelog, snapshot = done.inputs
    assert _facet(changelog) == {"partitions": 2, "offsets": {"0": 10, "1": 7}, "offsetsTotal": 17}
    assert _facet(snapshot) == {
        "partitions": 2,
        "version": "v-20260101T000000-abcdef",
        "rows": 7,
        "offsets": {"0": 10, "1": 7},
        "offsetsTotal": 17,
        "check": "fast",
        "ok": False,
        "failedPartitions": [1],
    }
    assert snapshot.facets["version"].datasetVersion == "v-20260101T000000-abcdef"
    assert [f.name for f in snapshot.facets["schema"].fields] == ["key", "value", "offset", "partition"]
    assertion = snapshot.inputFacets["dataQualityAssertions"].assertions[0]
    assert (assertion.assertion, assertion.success) == ("kstate_fast_check", False)


def test_rebuild_reads_the_changelog_and_writes_the_snapshot() -> None:
    op = KStateRebuildOperator(task_id="rebuild", topic="totals-changelog", snapshot_uri="s3://b/snap")
    report = {
        "ok": True,
        "topic": "totals-changelog",
        "snapshot_uri": "s3://b/snap",
        "snapshot_version": "v-20260102T000000-123456",
        "records_read": 40,
        "rows": 7,
        "layout": 2,  # a whole rebuild report: the lineage reads it typed
        "partitions": {
            "0": {"start_offset": 0, "end_offset": 30, "rows": 4, "digest": "0" * 16},
            "1": {"start_offset": 0, "end_offset": 10, "rows": 3, "digest": "0" * 16},
        },
        "previous": "s3://b/snap/v-20260101T000000-abcdef",
    }
    done = op.get_openlineage_facets_on_complete(FakeTI("rebuild", report))
    assert _names(done.inputs) == [("kafka://b1:9092", "totals-changelog")]
    assert _names(done.outputs) == [("s3://b", "snap")]
    (snapshot,) = done.outputs
    assert snapshot.outputFacets["outputStatistics"].rowCount == 7
    assert done.inputs[0].inputFacets["inputStatistics"].rowCount == 40
    assert _facet(snapshot)["version"] == "v-20260102T000000-123456"
    assert _facet(snapshot)["offsets"] == {"0": 30, "1": 10}
    assert _facet(snapshot)["previousVersion"] == "s3://b/snap/v-20260101T000000-abcdef"


def test_deep_check_on_start_names_both_inputs() -> None:
    op = KStateDeepCheckOperator(task_id="deep", topic="c", snapshot_uri="/s")
    assert _names(op.get_openlineage_facets_on_start().inputs) == [("kafka://b1:9092", "c"), ("file", "/s")]


def test_offsets_are_capped_at_scale() -> None:
    parts = {
        str(p): {"end_offset": p, "rows": 1, "high_watermark": p} for p in range(lineage.OFFSETS_CAP + 1)
    }
    report = CheckReport.read({"partitions": parts, "snapshot_partitions": len(parts)}, check="fast")
    facet = lineage.store_facet(report, "snapshot")
    assert "offsets" not in facet
    assert facet["offsetsTotal"] == sum(range(lineage.OFFSETS_CAP + 1))
    assert facet["rows"] == lineage.OFFSETS_CAP + 1


def test_increase_writes_the_topic_and_verify_reads_it() -> None:
    grow = KStateIncreasePartitionsOperator(task_id="increase", plan=PLAN)
    done = grow.get_openlineage_facets_on_complete(
        FakeTI("increase", {"created": True, "topics": {"orders": {"created": True, "partitions": 4}}})
    )
    assert done.inputs == [] and _names(done.outputs) == [("kafka://b1:9092", "orders")]
    assert _facet(done.outputs[0]) == {
        "step": "increase",
        "mode": "increase",
        "originalPartitions": 2,
        "partitions": 4,
        "groups": {"billing": "active", "audit": "empty"},
        "groupsTotal": 2,
    }
    verify = KStateVerifyOperator(task_id="verify", plan=PLAN)
    each = {"ok": True, "partitions": 4, "problems": 0, "lag_total": 5, "report_uri": "/r/verify.jsonl.gz"}
    result = {"topics": {"orders": each}, "ok": True, "partitions": 4}
    done = verify.get_openlineage_facets_on_complete(FakeTI("verify", result))
    assert done.outputs == [] and _names(done.inputs) == [("kafka://b1:9092", "orders")]
    facet = _facet(done.inputs[0])
    assert (facet["ok"], facet["lagTotal"], facet["reportUri"]) == (True, 5, "/r/verify.jsonl.gz")


def test_steps_that_move_no_data_report_nothing() -> None:
    pause = KStatePauseConsumersOperator(task_id="pause", plan=PLAN)
    assert pause.get_openlineage_facets_on_start() is None


def test_lineage_never_fails_the_task(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(conn_id: str) -> str:
        raise RuntimeError("no such connection")

    monkeypatch.setattr(lineage, "bootstrap_servers", broken)
    op = KStateFastCheckOperator(task_id="fast_check", topic="t", snapshot_uri="/s")
    assert op.get_openlineage_facets_on_complete(FakeTI("fast_check", None)) is None


def test_a_run_of_several_topics_names_each_topic_with_its_own_facet() -> None:
    from airflow_provider_kstate.operators.window import KStatePauseWindowOperator

    several = {
        **PLAN,
        "topics": {"orders": 2, "payments": 2},
        "groups": {**PLAN["groups"], "audit": {"class": "empty", "topics": ["orders"]}},
    }
    window = KStatePauseWindowOperator(task_id="window", plan=several)
    result = {
        "topics": {"orders": {"created": True, "seeded": 4}, "payments": {"created": True, "seeded": 2}}
    }
    done = window.get_openlineage_facets_on_complete(FakeTI("window", result))
    assert _names(done.outputs) == [("kafka://b1:9092", "orders"), ("kafka://b1:9092", "payments")]
    orders, payments = (_facet(d) for d in done.outputs)
    assert orders["seeded"] == 4 and orders["groups"] == {"billing": "active", "audit": "empty"}
    assert payments["seeded"] == 2 and payments["groups"] == {"billing": "active"}
