"""The store's and the Spark applications' wire documents (issue 26): one typed model each, read and written
with the same ``to_json``/``from_json``, validated on read with a named error, each with a version field and
a JSON Schema under ``docs/schemas/store/``. Documents written before (the literals below, written by the
code before the models) still read, and are written again byte for byte."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from airflow_provider_kstate import documents
from airflow_provider_kstate.spark_apps import deep_check, kafka_io, rebuild
from airflow_provider_kstate.spark_apps.read_progress import ProgressDocument, ProgressError
from airflow_provider_kstate.store import contract, layout
from airflow_provider_kstate.store.contract import AppFailure, AppReportError, ErrorCode
from airflow_provider_kstate.store.manifest import Manifest, ManifestError, PartitionStats, loads_manifest
from airflow_provider_kstate.store.results import (
    CheckReport,
    PartitionEntry,
    PartitionResult,
    RebuildReport,
    Side,
    store_report,
)

SCHEMAS = Path(__file__).resolve().parents[3] / "docs" / "schemas"

OLD_POINTER = """{
  "format": "kstate-pointer/1",
  "version": "v-20261123T031640-3f9a1c",
  "written_at": "2026-11-24T19:27:44Z",
  "history": [
    "v-20261122T020000-77b0e2"
  ],
  "writer": {
    "app": "airflow_provider_kstate.spark_apps.rebuild",
    "version": "0.9.0",
    "rows": 7,
    "partitions": 2
  }
}"""

OLD_MANIFEST = """{
  "format": "kstate-snapshot/1",
  "topic": "totals",
  "partitions": 2,
  "partitioner": "murmur2",
  "digest_algorithm": "sum64-xxh64-spark-seed42",
  "written_at": "2026-11-23T03:16:40Z",
  "writer": {
    "app": "a",
    "version": "0.9.0",
    "spark": "3.5.3"
  },
  "partition_stats": {
    "0": {
      "start_offset": 0,
      "end_offset": 30,
      "rows": 4,
      "digest": "00000000000000aa",
      "files": {
        "part-0.parquet": 100,
        "part-1.parquet": 120
      }
    },
    "1": {
      "start_offset": 2,
      "end_offset": 10,
      "rows": 3,
      "digest": "00000000000000bb",
      "files": {}
    }
  }
}"""

OLD_PROGRESS = """{
 "format": "kstate-progress/1",
 "app": "rebuild",
 "topic": "orders",
 "interval": 10.0,
 "error": "no such topic",
 "state": "failed",
 "updated_at": "2026-11-24T19:27:44Z"
}"""

OLD_REBUILD = {
    "ok": True,
    "topic": "totals",
    "snapshot_uri": "/data/totals",
    "snapshot_version": "v-20261123T031640-3f9a1c",
    "records_read": 40,
    "rows": 7,
    "layout": 2,
    "only_partitions": None,
    "partitions": json.loads(OLD_MANIFEST)["partition_stats"],
    "previous": "/data/totals/v-20261122T020000-77b0e2",
    "removed": [],
    "warnings": [],
    "seconds": 2.5,
}


def schema(name: str) -> Draft202012Validator:
    found = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    Draft202012Validator.check_schema(found)
    return Draft202012Validator(found)


def test_every_store_document_is_published_with_a_version_field() -> None:
    store = [cls for cls in documents.documents() if cls.schema_name.startswith("store/")]
    assert {cls.schema_name for cls in store} == {
        "store/pointer",
        "store/manifest",
        "store/check-report",
        "store/rebuild-report",
        "store/app-failure",
        "store/rebuild-progress",
    }
    for cls in store:
        assert "format" in cls.model_fields, cls
        committed = (SCHEMAS / f"{cls.schema_name}.schema.json").read_text()
        assert committed == documents.render(cls.json_schema()), f"run python -m {documents.__name__}"


# -- the pointer ---------------------------------------------------------------------------------------------


def test_a_pointer_written_before_reads_and_is_written_the_same() -> None:
    pointer = layout.parse_pointer(OLD_POINTER.encode(), "p")
    assert pointer.version == "v-20261123T031640-3f9a1c" and pointer.history == ["v-20261122T020000-77b0e2"]
    assert pointer.to_json(indent=2) == OLD_POINTER
    assert layout.Pointer.from_json(pointer.to_json()) == pointer
    schema("store/pointer").validate(json.loads(OLD_POINTER))
    new = json.loads(
        layout.pointer_bytes("v-20261123T031640-3f9a1c", ["v-20261122T020000-77b0e2"], writer={})
    )
    assert list(new) == ["format", "version", "written_at", "history", "writer"]
    schema("store/pointer").validate(new)


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"version": "v-20261123T031640-3f9a1c"}, "not a kstate-pointer/1 document"),
        ({"format": "kstate-pointer/1", "version": 7}, "names no valid version: 7"),
        (
            {"format": "kstate-pointer/1", "version": "v-20261123T031640-3f9a1c", "history": "v-1"},
            "'history' must be a list of version names",
        ),
    ],
)
def test_a_bad_pointer_is_a_pointer_error(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(layout.PointerError, match=message):
        layout.Pointer.from_json(json.dumps(doc))
    assert list(schema("store/pointer").iter_errors(doc))


# -- the manifest --------------------------------------------------------------------------------------------


def test_a_manifest_written_before_reads_and_is_written_the_same() -> None:
    manifest = loads_manifest(OLD_MANIFEST)
    assert manifest.partition_stats[0] == PartitionStats(
        0, 30, 4, "00000000000000aa", {"part-0.parquet": 100, "part-1.parquet": 120}
    )
    assert manifest.to_json(indent=2) == OLD_MANIFEST
    assert Manifest.from_json(manifest.to_json()) == manifest
    schema("store/manifest").validate(json.loads(OLD_MANIFEST))
    older = json.loads(OLD_MANIFEST)  # before file lists were recorded, and a field of a newer writer
    for stats in older["partition_stats"].values():
        del stats["files"]
    older["note"] = {"kept": True}
    read = Manifest.from_dict(older)
    assert read.partition_stats[1].files is None and read.extra == {"note": {"kept": True}}
    assert read.to_dict() == older and list(read.to_dict())[-1] == "note"


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d.update(format="kstate-snapshot/2"),
        lambda d: d.pop("topic"),
        lambda d: d.update(partitions="2"),
        lambda d: d.update(partitions=0),
        lambda d: d.update(partitioner="crc32"),
        lambda d: d["partition_stats"]["0"].pop("end_offset"),
        lambda d: d["partition_stats"]["0"].update(end_offset=-1),
        lambda d: d["partition_stats"]["0"].update(digest="XYZ"),
        lambda d: d["partition_stats"]["0"].update(rows=True),
        lambda d: d["partition_stats"]["0"].update(files={"a/b": 1}),
        lambda d: d.update(writer=[]),
    ],
)
def test_the_manifest_schema_refuses_what_the_reader_refuses(change: Any) -> None:
    doc = json.loads(OLD_MANIFEST)
    change(doc)
    with pytest.raises(ManifestError):
        Manifest.from_dict(doc)
    assert list(schema("store/manifest").iter_errors(doc)), doc


# -- the check report ----------------------------------------------------------------------------------------


def _deep_report() -> dict[str, Any]:
    bad = PartitionResult(
        1, changelog=Side(3, "a" * 16), snapshot=Side(2, "b" * 16), manifest=Side(3, "a" * 16)
    )
    bad.problems.append("row differences: 1 missing")
    bad.samples["missing"].append("b'k'")
    return {  # the deep check application's report, as it wrote it before
        "ok": False,
        "topic": "t",
        "snapshot_uri": "/s",
        "snapshot_version": "v-20261123T031640-3f9a1c",
        "layout": 2,
        "records_read": 9,
        "failed_partitions": [1],
        "problems": [],
        "partitions": {"0": PartitionResult(0).to_dict(), "1": bad.to_dict()},
        "warnings": [],
        "seconds": 1.5,
    }


def test_a_check_report_round_trips_typed_and_an_old_xcom_gains_only_its_version() -> None:
    old_xcom = {**_deep_report(), "check": "deep"}  # what the deep check operator pushed before
    report = CheckReport.from_json(json.dumps(old_xcom))
    assert isinstance(report.partitions[1], PartitionEntry) and report.partitions[1].missing_keys == ["b'k'"]
    assert report.entry(1).problems == ["row differences: 1 missing"] and report.failed_partitions == [1]
    assert report.to_dict() == {"format": "kstate-check-report/1", **old_xcom}
    assert CheckReport.from_json(report.to_json()).to_json() == report.to_json()
    assert store_report(old_xcom).to_dict() == report.to_dict()
    schema("store/check-report").validate(old_xcom)
    schema("store/check-report").validate(report.to_dict())
    assert PartitionResult.from_dict(1, report.partitions[1]).to_dict() == old_xcom["partitions"]["1"]


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d.update(ok="perhaps"),
        lambda d: d.update(problems="one"),
        lambda d: d["partitions"]["0"].update(problems=5),
        lambda d: d.update(partitions={"zero": {"ok": True}}),
        lambda d: d.update(check="medium"),
        lambda d: d.pop("topic"),
    ],
)
def test_a_bad_check_report_is_an_app_report_error(change: Any) -> None:
    doc = {**_deep_report(), "check": "deep"}
    change(doc)
    with pytest.raises(AppReportError, match="not a valid CheckReport document"):
        CheckReport.from_dict(doc)
    assert list(schema("store/check-report").iter_errors(doc)), doc


# -- the rebuild report --------------------------------------------------------------------------------------


def test_a_rebuild_report_round_trips_typed_and_an_old_one_gains_only_its_version() -> None:
    report = RebuildReport.from_dict(OLD_REBUILD)
    assert report.partitions[0].files == {"part-0.parquet": 100, "part-1.parquet": 120}
    assert report.to_dict() == {"format": "kstate-rebuild-report/1", **OLD_REBUILD}
    assert RebuildReport.from_json(report.to_json()).to_dict() == report.to_dict()
    assert store_report(OLD_REBUILD) == report
    schema("store/rebuild-report").validate(OLD_REBUILD)
    with pytest.raises(AppReportError, match=r"not a valid RebuildReport document: partitions\.0\.digest"):
        RebuildReport.from_dict(
            {**OLD_REBUILD, "partitions": {"0": {"start_offset": 0, "end_offset": 1, "rows": 1}}}
        )
    with pytest.raises(AppReportError, match="snapshot_version"):
        RebuildReport.from_dict({k: v for k, v in OLD_REBUILD.items() if k != "snapshot_version"})


# -- the applications' failure report and its error code -----------------------------------------------------


def test_a_failed_application_reports_its_error_code(tmp_path: Path) -> None:
    path = str(tmp_path / "r.json")
    assert (
        contract.fail(path, "changelog not compacted: no", lambda line: None, "app", ErrorCode.NOT_COMPACTED)
        == 2
    )
    written = json.loads(Path(path).read_text())
    assert written == {
        "format": "kstate-app-failure/1",
        "ok": False,
        "error": "changelog not compacted: no",
        "error_code": "not-compacted",
    }
    schema("store/app-failure").validate(written)
    failure = contract.reported_failure(path)
    assert failure is not None and failure.error_code is ErrorCode.NOT_COMPACTED
    assert AppFailure.from_json(failure.to_json()) == failure
    with pytest.raises(AppReportError, match="error_code"):
        AppFailure.from_dict({"ok": False, "error": "x", "error_code": "bad-luck"})


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (f"{contract.NOT_COMPACTED}: topic 't' has cleanup.policy=delete", ErrorCode.NOT_COMPACTED),
        (f"{contract.OFFSET_BOUNDS}: topic 't' on h:1: partition 0: bound 1", ErrorCode.OFFSET_BOUNDS),
        ("topic 'x' does not exist", ErrorCode.INTERNAL),
    ],
)
def test_a_failure_report_written_before_error_codes_reads_with_its_code(error: str, code: ErrorCode) -> None:
    assert AppFailure.from_dict({"ok": False, "error": error}).error_code is code
    assert AppFailure.from_dict({"message": error}).error == error  # an application of the caller's own


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (kafka_io.NotCompactedError("changelog not compacted: x"), ErrorCode.NOT_COMPACTED),
        (kafka_io.OffsetBoundError("broker offsets disagree with its reads: x"), ErrorCode.OFFSET_BOUNDS),
        (kafka_io.KafkaReadError("cannot list offsets"), ErrorCode.CHANGELOG_UNREADABLE),
        (rebuild.RebuildError("--keep-versions must be at least 1"), ErrorCode.BAD_INPUT),
        (contract.AppError("the Kafka config file is not valid JSON"), ErrorCode.BAD_INPUT),
        (ManifestError("manifest is missing"), ErrorCode.BAD_SNAPSHOT),
        (layout.PointerError("garbled"), ErrorCode.BAD_SNAPSHOT),
        (RuntimeError("Py4JJavaError"), ErrorCode.INTERNAL),
    ],
)
def test_each_error_an_application_fails_with_has_its_code(exc: BaseException, code: ErrorCode) -> None:
    assert contract.error_code(exc) is code


@pytest.mark.parametrize("app", [deep_check, rebuild])
def test_an_application_with_bad_input_writes_a_bad_input_failure(app: Any, tmp_path: Path) -> None:
    (tmp_path / "kafka.json").write_text("{not json")
    report = tmp_path / "report.json"
    args = ["--kafka-config-file", str(tmp_path / "kafka.json"), "--topic", "t"]
    assert app.main([*args, "--snapshot-uri", str(tmp_path / "s"), "--report-file", str(report)]) == 2
    failure = AppFailure.from_json(report.read_text())
    assert failure.error_code is ErrorCode.BAD_INPUT and "is not valid JSON" in failure.error


# -- the rebuild's progress document -------------------------------------------------------------------------


def test_a_progress_document_written_before_reads_and_is_written_the_same() -> None:
    doc = ProgressDocument.from_json(OLD_PROGRESS)
    assert (doc.state, doc.error, doc.interval) == ("failed", "no such topic", 10.0)
    assert doc.to_json(indent=1) == OLD_PROGRESS
    schema("store/rebuild-progress").validate(json.loads(OLD_PROGRESS))
    with pytest.raises(ProgressError, match="state"):
        ProgressDocument.from_dict({**json.loads(OLD_PROGRESS), "state": "asleep"})
    with pytest.raises(ProgressError, match="format"):
        ProgressDocument.from_dict({k: v for k, v in json.loads(OLD_PROGRESS).items() if k != "format"})


def test_the_page_shows_an_invalid_progress_document_as_unreadable(tmp_path: Path) -> None:
    from airflow_provider_kstate.plugins.rebuild_progress import snapshot_progress
    from airflow_provider_kstate.spark_apps.read_progress import PROGRESS_NAME

    (tmp_path / PROGRESS_NAME).write_text(json.dumps({"format": "kstate-progress/0"}))
    shown = snapshot_progress(str(tmp_path))
    assert shown is not None and shown["state"] == "unreadable" and "format" in shown["problem"]
    (tmp_path / PROGRESS_NAME).write_text(OLD_PROGRESS)
    shown = snapshot_progress(str(tmp_path), now=0.0)
    assert shown is not None and shown["state"] == "failed" and shown["stale"] is False


# -- the operators map each code in one place ----------------------------------------------------------------


def test_the_operators_map_each_error_code_in_one_table() -> None:
    from airflow_provider_kstate import errors
    from airflow_provider_kstate.store.submission import APP_ERRORS, app_error

    faces = {
        ErrorCode.NOT_COMPACTED: errors.NotCompactedChangelogError,
        ErrorCode.OFFSET_BOUNDS: errors.BrokerDeviationError,
        ErrorCode.TOPIC_RECREATED: errors.TopicRecreatedError,
        ErrorCode.STORED_OFFSETS: errors.StoredOffsetsError,
    }
    assert set(APP_ERRORS) == set(faces)
    refusals = {ErrorCode.NOT_COMPACTED, ErrorCode.TOPIC_RECREATED, ErrorCode.STORED_OFFSETS}
    for code in ErrorCode:
        error = app_error(AppFailure(error="the line", error_code=code), "/apps/rebuild.py", "rebuild")
        assert type(error) is faces.get(code, errors.SparkApplicationError), code
        assert str(error).startswith(
            "rebuild.py refused: the line" if code in refusals else "rebuild.py failed: the line"
        )
    assert not app_error(AppFailure(error="x", error_code=ErrorCode.NOT_COMPACTED), "a", "t").retryable
    assert "rebuild refused to trust the read" in str(
        app_error(AppFailure(error="x", error_code=ErrorCode.OFFSET_BOUNDS), "a", "rebuild")
    )
