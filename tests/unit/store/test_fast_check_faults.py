"""The fast check names the partition of every snapshot file fault, without Spark (issue 10).

A small snapshot is written with pyarrow (``partition=N/part-0.parquet`` and a manifest recording each
file's size), damaged one way per test, and checked: each test first proves the fault is on disk.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_kstate.store import fast_check as checks
from airflow_provider_kstate.store.digest import digest_rows
from airflow_provider_kstate.store.fast_check import partial_scope
from airflow_provider_kstate.store.layout import framing_problem
from airflow_provider_kstate.store.manifest import (
    MANIFEST_NAME,
    Manifest,
    PartitionStats,
    loads_manifest,
    write_manifest,
)
from airflow_provider_kstate.store.results import CheckReport

TOPIC = "faults-cl"
N = 3
ROWS = 20


class Admin:
    """A changelog of ``N`` partitions, each at log start 0 and high watermark ``ROWS``."""

    def partition_count(self, topic: str) -> int:
        return N

    def watermarks(self, topic: str, partitions: list[int]) -> dict[int, tuple[int, int]]:
        return {p: (0, ROWS) for p in partitions}

    def topic_ids(self, topics: list[str]) -> dict[str, str]:
        return dict.fromkeys(topics, "")  # unknown: checked by offsets (test_topic_identity.py has ids)


def make_snapshot(root: Path, record_files: bool = True, topic: str = TOPIC) -> Path:
    """Write ``N`` partitions of ``ROWS`` rows each and their manifest; return ``root``."""
    stats = {}
    for p in range(N):
        rows = [(f"k{p}-{i}".encode(), f"v{i}".encode()) for i in range(ROWS)]
        folder = root / f"partition={p}"
        folder.mkdir(parents=True)
        table = pa.table(
            {
                "key": pa.array([k for k, _ in rows], pa.binary()),
                "value": pa.array([v for _, v in rows], pa.binary()),
                "offset": pa.array(range(ROWS), pa.int64()),
            }
        )
        path = folder / "part-0.parquet"
        pq.write_table(table, path)
        files = {path.name: path.stat().st_size} if record_files else None
        stats[p] = PartitionStats(0, ROWS, ROWS, digest_rows(rows), files)
    write_manifest(str(root), Manifest(topic=topic, partitions=N, partition_stats=stats))
    return root


def fast_check(*args: Any) -> dict:
    """The fast check's report document (the XCom)."""
    return checks.fast_check(*args).to_dict()


def scope(report: dict) -> list[int] | None:
    """:func:`partial_scope` of a fast-check report document, parsed as the operators parse their XCom."""
    return partial_scope(CheckReport.read(report, check="fast"))


def check(root: Path) -> dict:
    report = fast_check(Admin(), TOPIC, str(root))
    json.dumps(report)  # the report is XCom-able
    return report


def problems_of(report: dict, p: int) -> str:
    return " | ".join(report["partitions"][str(p)]["problems"])


def data_file(root: Path, p: int) -> Path:
    return root / f"partition={p}" / "part-0.parquet"


def test_a_sound_snapshot_passes_and_its_manifest_records_the_files(tmp_path: Path) -> None:
    root = make_snapshot(tmp_path / "s")
    report = check(root)
    assert report["ok"], report
    assert report["data_files"] == N
    doc = json.loads((root / MANIFEST_NAME).read_text())
    assert doc["partition_stats"]["0"]["files"] == {"part-0.parquet": data_file(root, 0).stat().st_size}


def test_a_manifest_without_file_lists_still_loads_and_passes(tmp_path: Path) -> None:
    root = make_snapshot(tmp_path / "s", record_files=False)
    assert "files" not in json.loads((root / MANIFEST_NAME).read_text())["partition_stats"]["0"]
    assert loads_manifest((root / MANIFEST_NAME).read_bytes()).partition_stats[0].files is None
    assert check(root)["ok"]


def _rewrite_dropping_rows(path: Path) -> None:
    pq.write_table(pq.read_table(path).slice(1), path)


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _random_bytes(path: Path) -> None:
    path.write_bytes(os.urandom(path.stat().st_size))


def _delete(path: Path) -> None:
    path.unlink()


def _extra_file(path: Path) -> None:
    (path.parent / "notes.txt").write_text("not parquet")


def _delete_directory(path: Path) -> None:
    shutil.rmtree(path.parent)


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        (_rewrite_dropping_rows, "truncated or rewritten outside the rebuild"),
        (_truncate, "not a Parquet file"),
        (_random_bytes, "not a Parquet file"),
        (_delete, "part-0.parquet"),
        (_extra_file, "notes.txt"),
        (_delete_directory, "is missing"),
    ],
    ids=["rewritten", "truncated", "random-bytes", "deleted-file", "extra-file", "deleted-directory"],
)
def test_each_file_fault_fails_the_named_partition_only(tmp_path: Path, fault, expected: str) -> None:  # type: ignore[no-untyped-def]
    root = make_snapshot(tmp_path / "s")
    before = data_file(root, 1).read_bytes()
    fault(data_file(root, 1))
    after = data_file(root, 1).read_bytes() if data_file(root, 1).exists() else None
    assert after != before or (data_file(root, 1).parent / "notes.txt").exists()  # the fault is on disk
    report = check(root)
    assert not report["ok"] and report["failed_partitions"] == [1], report
    assert expected in problems_of(report, 1), problems_of(report, 1)
    assert report["snapshot_ok"] and not report["problems"]
    assert scope(report) == [1]  # file damage: a partial rebuild of partition 1 repairs it


def test_legacy_manifest_still_catches_framing_and_a_deleted_directory(tmp_path: Path) -> None:
    root = make_snapshot(tmp_path / "s", record_files=False)
    _random_bytes(data_file(root, 0))
    shutil.rmtree(root / "partition=2")
    report = check(root)
    assert report["failed_partitions"] == [0, 2], report
    assert "not a Parquet file" in problems_of(report, 0)
    assert "no data file" in problems_of(report, 2)


def test_a_file_outside_any_partition_is_a_store_problem(tmp_path: Path) -> None:
    root = make_snapshot(tmp_path / "s")
    (root / "stray.parquet").write_bytes(data_file(root, 0).read_bytes())
    report = check(root)
    assert not report["ok"] and "outside any partition directory: stray.parquet" in report["problems"][0]
    assert scope(report) is None


def test_hidden_files_are_not_data(tmp_path: Path) -> None:
    root = make_snapshot(tmp_path / "s")
    (root / "partition=0" / ".part-0.parquet.crc").write_bytes(b"crc\0")
    (root / "_SUCCESS").write_bytes(b"")
    assert check(root)["ok"]


@pytest.mark.parametrize("fault", ["deleted", "garbled", "wrong-schema", "other-topic"])
def test_manifest_faults_fail_the_whole_snapshot(tmp_path: Path, fault: str) -> None:
    root = make_snapshot(tmp_path / "s")
    manifest = root / MANIFEST_NAME
    if fault == "deleted":
        manifest.unlink()
    elif fault == "garbled":
        manifest.write_bytes(b"\x00{not json")
    elif fault == "wrong-schema":
        manifest.write_text(json.dumps({"format": "kstate-snapshot/1", "topic": TOPIC}))
    else:
        shutil.rmtree(root)
        make_snapshot(root, topic="another-topic")
        assert json.loads(manifest.read_text())["topic"] == "another-topic"
    report = check(root)
    assert not report["ok"] and report["problems"], report
    if fault == "other-topic":
        assert "of topic 'another-topic'" in report["problems"][0]
    else:
        assert not report["snapshot_ok"]
        assert report["snapshot_missing"] == (fault == "deleted")


def test_framing_problem() -> None:
    assert framing_problem(b"PAR1", (100).to_bytes(4, "little") + b"PAR1", 200) == ""
    assert "too short" in framing_problem(b"", b"", 5)
    assert "corrupt Parquet footer" in framing_problem(b"PAR1", (500).to_bytes(4, "little") + b"PAR1", 200)
    assert "no PAR1" in framing_problem(b"XXXX", (100).to_bytes(4, "little") + b"PAR1", 200)


def test_the_compaction_refusal_is_fatal_and_acknowledged_by_a_parameter() -> None:
    from airflow_provider_kstate.errors import NotCompactedChangelogError
    from airflow_provider_kstate.operators.deep_check import KStateDeepCheckOperator
    from airflow_provider_kstate.operators.rebuild import KStateRebuildOperator
    from airflow_provider_kstate.store import tasks
    from airflow_provider_kstate.store.contract import NOT_COMPACTED, app_parser

    assert not NotCompactedChangelogError.retryable
    common = {"topic": TOPIC, "snapshot_uri": "/tmp/s"}
    assert "--allow-non-compacted" not in KStateDeepCheckOperator(task_id="d", **common).app_args()
    deep = KStateDeepCheckOperator(task_id="d", allow_non_compacted_changelog=True, **common)
    assert "--allow-non-compacted" in deep.app_args()
    rebuild = KStateRebuildOperator(task_id="r", allow_non_compacted_changelog=True, **common)
    assert "--allow-non-compacted" in tasks.rebuild_args(tasks.read_args(rebuild, None, rebuild.log), 3, None)
    args = ["--kafka-config-file", "c", "--topic", "t", "--snapshot-uri", "u", "--report-file", "r"]
    parser = app_parser("x.py", "x")
    assert not parser.parse_args(args).allow_non_compacted
    assert parser.parse_args([*args, "--allow-non-compacted"]).allow_non_compacted
    assert NOT_COMPACTED == "changelog not compacted"


class TrimmedAdmin(Admin):
    """Partition 2's changelog now ends before the snapshot's end offset (recreated or truncated)."""

    def watermarks(self, topic: str, partitions: list[int]) -> dict[int, tuple[int, int]]:
        return {p: (0, ROWS if p != 2 else ROWS // 2) for p in partitions}


def test_an_offset_finding_or_a_bad_manifest_needs_a_full_rebuild(tmp_path: Path) -> None:
    root = make_snapshot(tmp_path / "s")
    _random_bytes(data_file(root, 1))
    report = fast_check(TrimmedAdmin(), TOPIC, str(root))
    assert report["failed_partitions"] == [1, 2], report
    assert "recreated" in problems_of(report, 2)
    assert scope(report) is None  # the changelog changed: every partition may be wrong
    (root / MANIFEST_NAME).unlink()
    assert scope(check(root)) is None
    assert scope(fast_check(Admin(), TOPIC, str(tmp_path / "never-built"))) is None


def test_the_verdict_rebuilds_only_damaged_partitions_when_that_repairs_them(tmp_path: Path) -> None:
    from airflow_provider_kstate.store.tasks import verdict

    root = make_snapshot(tmp_path / "s")
    _delete(data_file(root, 0))
    fast = CheckReport.read(check(root), check="fast")
    deep = CheckReport.read(
        {"ok": False, "partitions": {"0": {"ok": False}, "1": {"ok": True}, "2": {"ok": False}}}
    )
    assert verdict(fast, None, "auto") == ("rebuild", [0])
    assert verdict(fast, deep, "auto") == ("rebuild", [0, 2])
    assert verdict(fast, None, "never") == ("store_bad", [])
    assert verdict(fast, None, "force") == ("rebuild", [])  # force rebuilds everything
    assert verdict(fast, None, "auto", target=N + 2) == ("rebuild", [])  # a re-key rebuilds everything
    good = CheckReport.read(check(make_snapshot(tmp_path / "ok")), check="fast")
    assert verdict(good, None, "auto") == ("store_ok", [])
    trimmed = CheckReport.read(fast_check(TrimmedAdmin(), TOPIC, str(root)), check="fast")
    assert verdict(trimmed, deep, "auto") == ("rebuild", [])


def test_a_remote_snapshot_is_read_through_fsspec_with_the_connections_storage_options(
    tmp_path: Path,
) -> None:
    """The branch a ``storage_conn_id`` takes (``uri.filesystem`` with storage options: fsspec wrapped for
    pyarrow), on fsspec's in-memory filesystem: the fast check resolves, lists and frames the files there,
    and names the partition of a damaged one."""
    import fsspec
    from pyarrow import fs as pafs

    from airflow_provider_kstate.store.uri import filesystem

    root = make_snapshot(tmp_path / "s")
    memory = fsspec.filesystem("memory")
    uri = f"memory://kstate-{tmp_path.name}/snap"
    memory.put(str(root), uri.removeprefix("memory://"), recursive=True)
    options = {"skip_instance_cache": False}  # what an Airflow connection's filesystem carries
    fs, _ = filesystem(uri, options)
    assert isinstance(fs, pafs.PyFileSystem)  # the fsspec branch, not pyarrow's ambient-credential one
    report = fast_check(Admin(), TOPIC, uri, options)
    assert report["ok"] and report["data_files"] == N, report
    with memory.open(uri.removeprefix("memory://") + "/partition=2/part-0.parquet", "wb") as f:
        f.write(os.urandom(64))
    report = fast_check(Admin(), TOPIC, uri, options)
    assert report["failed_partitions"] == [2] and scope(report) == [2], report


def test_the_hook_builds_storage_options_from_the_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    """``storage_conn_id`` goes through Airflow's ObjectStoragePath (the provider registered for the
    scheme builds the filesystem from the connection); local snapshots and no connection use none."""
    import airflow.sdk

    from airflow_provider_kstate.hooks.snapshot import KStateSnapshotHook

    seen = []

    class FakePath:
        def __init__(self, uri: str, conn_id: str) -> None:
            seen.append((uri, conn_id))
            self.fs = type("FS", (), {"storage_options": {"key": "AKIA", "secret": "x"}})()

    monkeypatch.setattr(airflow.sdk, "ObjectStoragePath", FakePath)
    hook = KStateSnapshotHook(storage_conn_id="aws_snapshots")
    assert hook.storage_options("s3://bucket/store") == {"key": "AKIA", "secret": "x"}
    assert seen == [("s3://bucket/store", "aws_snapshots")]
    assert hook.storage_options("/var/kstate/store") is None
    assert KStateSnapshotHook().storage_options("s3://bucket/store") is None
