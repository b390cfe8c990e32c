"""Every snapshot fault is damage to a named partition (or the whole snapshot), never a crash (issue 10).

One compacted changelog (6 partitions, murmur2-placed upserts and tombstones) and one snapshot built from it
by a real ``spark-submit rebuild.py`` are shared by the module; each test damages a copy of that snapshot
inside its current version directory (:func:`layout.resolve`), first proves the fault is on disk, then
checks that the checks name the partition and that a rebuild heals it.

In ``make test``: the fast check of every file fault on a real snapshot (no Spark per case); the heal
through the whole maintenance DAG is ``test_state_maintenance``'s (a deep-check failure rebuilt by
``rebuild=auto``). Behind ``chaos``: the stale-checksum case through the maintenance DAG, the deep check of
every fault class, the manifest faults and the compaction refusal (several spark-submits each).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from airflow_provider_kstate.spark_apps import kafka_io, rebuild
from airflow_provider_kstate.store import layout
from airflow_provider_kstate.store.fast_check import fast_check
from airflow_provider_kstate.store.manifest import MANIFEST_NAME

pytestmark = [pytest.mark.integration, pytest.mark.spark]

APPS = Path(rebuild.__file__).resolve().parent
N = 6
KEYS = [b"acct-%03d" % i for i in range(240)]


# -- the shared changelog and snapshot ----------------------------------------------------------------------


class Admin:
    """The fast check's admin port over the real broker (no Airflow connection needed)."""

    def __init__(self, kafka_config: dict[str, Any]) -> None:
        self.kafka_config = kafka_config

    def partition_count(self, topic: str) -> int:
        return kafka_io.topic_partition_count(self.kafka_config, topic)

    def watermarks(self, topic: str, partitions: list[int]) -> dict[int, tuple[int, int]]:
        return kafka_io.list_offsets(self.kafka_config, topic, partitions)

    def topic_ids(self, topics: list[str]) -> dict[str, str]:
        return {t: kafka_io.topic_id(self.kafka_config, t) for t in topics}


def produce(kafka_config: dict[str, Any], topic: str, records: list[tuple[bytes, bytes | None]]) -> None:
    producer = Producer({**kafka_config, "partitioner": "murmur2_random"})
    for key, value in records:
        producer.produce(topic, key=key, value=value)
    assert producer.flush(30) == 0


def create(admin: AdminClient, topic: str, partitions: int, policy: str) -> None:
    for f in admin.create_topics(
        [NewTopic(topic, partitions, 1, config={"cleanup.policy": policy})]
    ).values():
        f.result(timeout=30)


def drop(admin: AdminClient, topic: str) -> None:
    for f in admin.delete_topics([topic]).values():
        try:
            f.result(timeout=30)
        except Exception:  # noqa: BLE001 - best-effort clean-up
            pass


def submit(app: str, *args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """Run ``spark-submit APP ARGS`` on local[2]; return the process and the report it wrote."""
    venv_bin = str(Path(sys.executable).parent)
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PATH": f"{venv_bin}{os.pathsep}{os.environ['PATH']}",
    }
    report = Path(args[args.index("--report-file") + 1])
    report.unlink(missing_ok=True)
    cmd = [str(Path(venv_bin) / "spark-submit"), "--master", "local[2]", "--conf", "spark.ui.enabled=false"]
    proc = subprocess.run(
        [*cmd, str(APPS / app), *args], env=env, capture_output=True, text=True, timeout=560
    )
    return proc, json.loads(report.read_text()) if report.exists() else {}


class Store:
    def __init__(self, topic: str, cfg: str, kafka_config: dict[str, Any], root: Path) -> None:
        self.topic, self.cfg, self.kafka_config, self.root = topic, cfg, kafka_config, root
        self.base = root / "base"

    def app(self, name: str, snap: Path, *extra: str, topic: str | None = None) -> tuple[Any, dict[str, Any]]:
        report = str(snap) + f".{name}-{uuid.uuid4().hex[:6]}.json"
        common = [
            "--kafka-config-file",
            self.cfg,
            "--topic",
            topic or self.topic,
            "--snapshot-uri",
            str(snap),
        ]
        return submit(f"{name}.py", *common, "--report-file", report, *extra)

    def copy(self, name: str) -> Path:
        snap = self.root / name
        shutil.copytree(self.base, snap)
        return snap

    def fast(self, snap: Path) -> dict[str, Any]:
        return fast_check(Admin(self.kafka_config), self.topic, str(snap)).to_dict()


@pytest.fixture(scope="module")
def store(kafka_config: dict[str, Any], admin: AdminClient, tmp_path_factory: Any) -> Iterator[Store]:
    topic = f"kstate-test-faults-{uuid.uuid4().hex[:8]}"
    create(admin, topic, N, "compact")
    root = tmp_path_factory.mktemp("faults")
    cfg = root / "kafka.json"
    cfg.write_text(json.dumps(kafka_config))
    produce(kafka_config, topic, [(k, b"v1-" + k) for k in KEYS])
    produce(kafka_config, topic, [(k, b"v2-" + k) for k in KEYS[::4]] + [(k, None) for k in KEYS[::9]])
    s = Store(topic, str(cfg), kafka_config, root)
    proc, report = s.app("rebuild", s.base)
    assert proc.returncode == 0 and report["ok"], proc.stderr[-3000:]
    yield s
    drop(admin, topic)


def data(snap: Path) -> Path:
    """The directory holding the snapshot's current data and manifest."""
    return Path(layout.resolve(str(snap)).uri)


def data_file(snap: Path, p: int) -> Path:
    files = sorted((data(snap) / f"partition={p}").glob("*.parquet"))
    assert files, f"partition {p} has no data file"
    return files[0]


# -- the faults: each changes partition p's files and proves it -------------------------------------------


def hadoop_crc(raw: bytes, chunk: int = 512) -> bytes:
    """Hadoop's ``.NAME.crc`` side file: ``crc\\0``, the chunk size, the CRC32 of each chunk (big-endian)."""
    sums = b"".join(zlib.crc32(raw[i : i + chunk]).to_bytes(4, "big") for i in range(0, len(raw), chunk))
    return b"crc\0" + chunk.to_bytes(4, "big") + sums


def stale_checksum(snap: Path, p: int) -> None:
    """Rewrite a data file with pyarrow, dropping a row, under Hadoop's checksum of the old bytes."""
    f = data_file(snap, p)
    crc = f.with_name(f".{f.name}.crc")
    crc.write_bytes(hadoop_crc(f.read_bytes()))
    pq.write_table(pq.read_table(f).slice(1), f)
    assert crc.read_bytes() != hadoop_crc(f.read_bytes())  # the checksum really is stale


def truncated(snap: Path, p: int) -> None:
    f = data_file(snap, p)
    size = f.stat().st_size
    f.write_bytes(f.read_bytes()[: size // 2])
    assert f.stat().st_size == size // 2 and not f.read_bytes().endswith(b"PAR1")


def random_bytes(snap: Path, p: int) -> None:
    f = data_file(snap, p)
    size = f.stat().st_size
    f.write_bytes(os.urandom(size))
    assert f.stat().st_size == size and not f.read_bytes().startswith(b"PAR1")


def deleted_file(snap: Path, p: int) -> None:
    f = data_file(snap, p)
    f.unlink()
    assert not f.exists()


def extra_file(snap: Path, p: int) -> None:
    foreign = data(snap) / f"partition={p}" / "notes.txt"
    foreign.write_text("not parquet")
    assert foreign.exists()


def deleted_directory(snap: Path, p: int) -> None:
    folder = data(snap) / f"partition={p}"
    shutil.rmtree(folder)
    assert not folder.exists()


FILE_FAULTS: dict[str, Callable[[Path, int], None]] = {
    "stale-checksum": stale_checksum,
    "truncated": truncated,
    "random-bytes": random_bytes,
    "deleted-file": deleted_file,
    "extra-file": extra_file,
    "deleted-directory": deleted_directory,
}


def manifest_fault(snap: Path, fault: str, store: Store) -> None:
    path = data(snap) / MANIFEST_NAME
    if fault == "deleted-manifest":
        path.unlink()
        assert not path.exists()
    elif fault == "garbled-manifest":
        path.write_bytes(b'{"format": "kstate-snapshot/1", "topic"')
        with pytest.raises(ValueError):
            json.loads(path.read_bytes())
    else:  # another topic's manifest
        doc = json.loads(path.read_text())
        doc["topic"] = "another-topic"
        path.write_text(json.dumps(doc))
        assert json.loads(path.read_text())["topic"] != store.topic


# -- make test: the fast check of every file fault, the stale checksum through the DAG ------------------------


@pytest.mark.parametrize("fault", list(FILE_FAULTS))
def test_fast_check_names_the_partition_of_each_file_fault(store: Store, fault: str) -> None:
    snap = store.copy(f"fast-{fault}")
    assert store.fast(snap)["ok"]
    FILE_FAULTS[fault](snap, 2)
    report = store.fast(snap)
    assert not report["ok"] and report["failed_partitions"] == [2], json.dumps(report)[:2000]
    assert report["snapshot_ok"] and not report["problems"]
    assert any("partition 2" in x for x in report["partitions"]["2"]["problems"])


@pytest.mark.parametrize("fault", ["deleted-manifest", "garbled-manifest", "other-topic"])
def test_fast_check_fails_the_whole_snapshot_for_a_bad_manifest(store: Store, fault: str) -> None:
    snap = store.copy(f"fast-{fault}")
    manifest_fault(snap, fault, store)
    report = store.fast(snap)
    assert not report["ok"] and report["problems"], report
    assert report["failed_partitions"] == []  # the whole snapshot, not a partition


@pytest.mark.chaos  # 52 s; make test: test_state_maintenance heals a deep-check failure through the same DAG
def test_stale_checksum_is_found_and_healed_by_the_maintenance_dag(store: Store, run_dag: Any) -> None:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    snap = store.copy("dag-stale-checksum")
    before = store.fast(snap)["partitions"]
    stale_checksum(snap, 3)

    def xcom(dr: Any, task_id: str, key: str = "return_value") -> Any:
        with create_session() as session:
            row = (
                session.query(XComModel)
                .filter_by(dag_id=dr.dag_id, run_id=dr.run_id, task_id=task_id, key=key)
                .one_or_none()
            )
            return None if row is None else XComModel.deserialize_value(row)

    conf = {"changelog_topic": store.topic, "snapshot_uri": str(snap), "deep": True, "rebuild": "auto"}
    dr = run_dag("kstate_state_maintenance", conf)
    assert str(dr.state) == "success"
    fast, deep = xcom(dr, "fast_check"), xcom(dr, "deep_check")
    assert fast["failed_partitions"] == [3], fast
    assert "rewritten outside the rebuild" in " ".join(fast["partitions"]["3"]["problems"])
    assert deep is not None and deep["failed_partitions"] == [3], deep  # a report, not ChecksumException
    assert "ChecksumException" not in json.dumps(deep)
    # File damage is partition-local: only partition 3 is rebuilt; the others are carried over unchanged.
    assert str(xcom(dr, "decide", "only_partitions")) == "3"  # XCom reads "3" back as a number
    assert xcom(dr, "rebuild")["only_partitions"] == [3]
    assert xcom(dr, "recheck_fast")["ok"] and xcom(dr, "recheck_deep")["ok"]
    after = store.fast(snap)
    assert after["ok"]
    for p in range(N):
        if p != 3:
            assert after["partitions"][str(p)]["end_offset"] == before[str(p)]["end_offset"]
            assert after["partitions"][str(p)]["rows"] == before[str(p)]["rows"]


# -- chaos: the deep check of every fault class, the rebuild, the compaction refusal --------------------------


@pytest.mark.chaos
def test_deep_check_names_each_file_fault_and_a_partial_rebuild_heals_it(store: Store) -> None:
    snap = store.copy("deep-files")
    faults = list(FILE_FAULTS)
    assert len(faults) == N
    for p, fault in enumerate(faults):  # one fault class per partition
        FILE_FAULTS[fault](snap, p)
    assert store.fast(snap)["failed_partitions"] == list(range(N))

    proc, report = store.app("deep_check", snap)
    assert proc.returncode == 0, proc.stderr[-3000:]  # a report, not a crash
    assert "ChecksumException" not in proc.stderr + json.dumps(report)
    assert not report["ok"] and report["failed_partitions"] == list(range(N)), json.dumps(report)[:3000]
    problems = {p: " | ".join(report["partitions"][str(p)]["problems"]) for p in range(N)}
    assert "differs from its manifest entry" in problems[0]  # stale checksum: the rows changed
    assert "unreadable data file" in problems[1] and "unreadable data file" in problems[2]
    assert (
        "differs from its manifest entry" in problems[3] and "differs from its manifest entry" in problems[5]
    )
    assert "unreadable data file notes.txt" in problems[4]

    only = ",".join(str(p) for p in report["failed_partitions"])
    proc, rebuilt = store.app("rebuild", snap, "--only-partitions", only)
    assert proc.returncode == 0 and rebuilt["ok"], proc.stderr[-3000:]
    proc, report = store.app("deep_check", snap)
    assert proc.returncode == 0 and report["ok"], json.dumps(report)[:3000]
    assert store.fast(snap)["ok"]


@pytest.mark.chaos
@pytest.mark.parametrize("fault", ["deleted-manifest", "garbled-manifest", "other-topic"])
def test_deep_check_reports_a_bad_manifest_and_a_rebuild_heals_it(store: Store, fault: str) -> None:
    snap = store.copy(f"deep-{fault}")
    manifest_fault(snap, fault, store)
    proc, report = store.app("deep_check", snap)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not report["ok"] and not report["snapshot_ok"] and report["problems"], report
    assert report["failed_partitions"] == []
    if fault == "other-topic":
        assert "another-topic" in report["problems"][0]
    proc, rebuilt = store.app("rebuild", snap)
    assert proc.returncode == 0 and rebuilt["ok"], proc.stderr[-3000:]
    proc, report = store.app("deep_check", snap)
    assert proc.returncode == 0 and report["ok"], json.dumps(report)[:3000]
    assert store.fast(snap)["ok"]


@pytest.mark.chaos
def test_a_trimmed_non_compacted_changelog_is_refused_unless_acknowledged(
    store: Store, admin: AdminClient, kafka_config: dict[str, Any]
) -> None:
    topic = f"kstate-test-faults-delete-{uuid.uuid4().hex[:8]}"
    create(admin, topic, 2, "delete")
    try:
        produce(kafka_config, topic, [(k, b"v-" + k) for k in KEYS[:40]])
        snap = store.root / f"trimmed-{topic}"
        proc, report = store.app("rebuild", snap, topic=topic)  # log start 0: allowed with the warning
        assert proc.returncode == 0 and any("not compact" in w for w in report["warnings"]), proc.stderr
        futures = admin.delete_records([TopicPartition(topic, 0, 2)])
        for f in futures.values():
            f.result(timeout=30)
        low, _ = kafka_io.list_offsets(kafka_config, topic, [0])[0]
        assert low == 2  # retention really moved the log start

        for app in ("deep_check", "rebuild"):
            proc, report = store.app(app, snap, topic=topic)
            assert proc.returncode == 2, (app, proc.stderr[-2000:])
            assert "changelog not compacted" in report["error"] and "allow-non-compacted" in report["error"]
            assert report["error_code"] == "not-compacted"  # what the operators map, not the text
        proc, report = store.app("rebuild", snap, "--allow-non-compacted", topic=topic)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert any(w.startswith("RISK ACCEPTED") for w in report["warnings"]), report["warnings"]
    finally:
        drop(admin, topic)
