"""The Spark applications end to end: ``spark-submit rebuild.py`` / ``deep_check.py`` on a real broker.

One changelog (6 partitions, compacted) holds upserts, tombstones, a committed and an ABORTED transaction
(a transactional producer with ``partitioner=murmur2_random``). The truth is folded here independently from
what the test produced (read_committed semantics: aborted writes never count). The tests of this module share
that changelog and its snapshots and run in order; each spark-submit is a real local Spark run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from airflow_provider_kstate.client_piece.murmur2 import partition_for
from airflow_provider_kstate.plugins.rebuild_progress import snapshot_progress
from airflow_provider_kstate.spark_apps import kafka_io, rebuild
from airflow_provider_kstate.store import layout
from airflow_provider_kstate.store.digest import digest_rows
from airflow_provider_kstate.store.manifest import MANIFEST_NAME, read_manifest

APPS = Path(rebuild.__file__).resolve().parent
N = 6
KEYS = [b"user-%03d" % i for i in range(300)]


# -- the changelog and its truth --------------------------------------------------------------------------


@dataclass
class Changelog:
    """The topic, what was written to it, and the truth: key -> (offset, value) of committed writes."""

    topic: str
    kafka_config: dict[str, Any]
    cfg_file: str
    truth: dict[bytes, tuple[int, bytes]] = field(default_factory=dict)
    records: int = 0  # records a read_committed reader returns
    aborted: dict[bytes, bytes] = field(default_factory=dict)  # key -> value written in the aborted txn
    placed: list[tuple[bytes, int]] = field(default_factory=list)  # (key, partition) from delivery reports

    def apply(self, delivered: list[tuple[bytes, bytes | None, int, int]]) -> None:
        for key, value, partition, offset in delivered:
            self.placed.append((key, partition))
            self.records += 1
            if value is None:
                self.truth.pop(key, None)
            else:
                self.truth[key] = (offset, value)

    def by_partition(self, n: int = N) -> dict[int, dict[bytes, bytes]]:
        out: dict[int, dict[bytes, bytes]] = {p: {} for p in range(n)}
        for key, (_, value) in self.truth.items():
            out[partition_for(key, n)][key] = value
        return out

    def produce(
        self, records: Sequence[tuple[bytes, bytes | None]], txn: str | None = None, abort: bool = False
    ) -> None:
        delivered = _produce(self.kafka_config, self.topic, records, txn, abort)
        if abort:
            self.aborted.update({k: v for k, v, _, _ in delivered if v is not None})
        else:
            self.apply(delivered)


def _produce(
    kafka_config: dict[str, Any],
    topic: str,
    records: Sequence[tuple[bytes, bytes | None]],
    txn: str | None,
    abort: bool,
) -> list[tuple[bytes, bytes | None, int, int]]:
    conf = {**kafka_config, "partitioner": "murmur2_random", "linger.ms": 5}
    if txn:
        conf["transactional.id"] = txn
    producer = Producer(conf)
    delivered: list[tuple[bytes, bytes | None, int, int]] = []

    def report(err: Any, msg: Any) -> None:
        assert err is None, err
        delivered.append((msg.key(), msg.value(), msg.partition(), msg.offset()))

    if txn:
        producer.init_transactions(30)
        producer.begin_transaction()
    for key, value in records:
        producer.produce(topic, key=key, value=value, on_delivery=report)
        producer.poll(0)
    if txn:
        producer.flush(30)
        (producer.abort_transaction if abort else producer.commit_transaction)(30)
    assert producer.flush(30) == 0
    assert len(delivered) == len(records)
    return delivered


def write_history(log: Changelog, tag: str, pause_s: float = 0.0) -> None:
    """The changelog's history: overwrites, tombstones, a committed and an aborted transaction (keys only
    the aborted one wrote among them), then more writes ``pause_s`` later."""
    log.produce([(k, b"v1-" + k) for k in KEYS])
    log.produce([(k, b"v2-" + k) for k in KEYS[::3]])
    log.produce([(k, None) for k in KEYS[::10]])  # tombstones
    log.produce([(k, b"committed-" + k) for k in KEYS[:60:2]], txn=f"kstate-test-c-{tag}")
    aborted = [(k, b"aborted-" + k) for k in KEYS[:90:3]] + [
        (b"only-aborted-%02d" % i, b"x") for i in range(24)
    ]
    log.produce(aborted, txn=f"kstate-test-a-{tag}", abort=True)
    time.sleep(pause_s)
    log.produce([(k, b"v3-" + k) for k in KEYS[100:130]] + [(KEYS[2], None)])


@pytest.fixture(scope="module")
def changelog(kafka_config: dict[str, Any], admin: AdminClient, tmp_path_factory: Any) -> Iterator[Changelog]:
    tag = uuid.uuid4().hex[:8]
    topic = f"kstate-test-spark-log-{tag}"
    for f in admin.create_topics([NewTopic(topic, N, 1, config={"cleanup.policy": "compact"})]).values():
        f.result(timeout=30)
    cfg = tmp_path_factory.mktemp("cfg") / "kafka.json"
    cfg.write_text(json.dumps(kafka_config))
    log = Changelog(topic, kafka_config, str(cfg))
    write_history(log, tag)
    yield log
    for f in admin.delete_topics([topic]).values():
        try:
            f.result(timeout=30)
        except Exception:  # noqa: BLE001 - best-effort clean-up
            pass


@pytest.fixture(scope="module")
def work(tmp_path_factory: Any) -> Path:
    return tmp_path_factory.mktemp("snapshots")


# -- running the applications -----------------------------------------------------------------------------


def submit(
    app: str, *args: str, watch: Callable[[], None] | None = None, spark_args: Sequence[str] = ()
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """Run ``spark-submit APP ARGS`` on local[2]; return the process and the report it wrote.

    :param watch: called every 20 ms while the application runs.
    :param spark_args: more ``spark-submit`` options (``--jars ...``).
    """
    venv_bin = str(Path(sys.executable).parent)
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PATH": f"{venv_bin}{os.pathsep}{os.environ['PATH']}",
    }
    report = Path(args[args.index("--report-file") + 1])
    report.unlink(missing_ok=True)
    cmd = [
        str(Path(venv_bin) / "spark-submit"),
        "--master",
        "local[2]",
        "--conf",
        "spark.log.level=WARN",
        "--conf",
        "spark.ui.enabled=false",
        *spark_args,
        str(APPS / app),
        *args,
    ]
    if watch is None:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=560)
    else:
        proc = _watched(cmd, env, watch)
    return proc, json.loads(report.read_text()) if report.exists() else {}


def _watched(
    cmd: list[str], env: dict[str, str], watch: Callable[[], None]
) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` like ``subprocess.run(capture_output=True)``, calling ``watch`` while it runs."""
    popen = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out: list[tuple[str, str]] = []
    reader = threading.Thread(target=lambda: out.append(popen.communicate(timeout=560)))
    reader.start()
    while reader.is_alive():
        watch()
        time.sleep(0.02)
    reader.join()
    return subprocess.CompletedProcess(cmd, popen.returncode, *out[0])


def progress_lines(output: str, kind: str) -> list[str]:
    """The driver's ``PROGRESS <kind> ...`` lines in an application's output."""
    return [line for line in output.splitlines() if line.startswith(f"PROGRESS {kind} ")]


def assert_progress(lines: list[str], kind: str, topic: str, total: int, records: int) -> None:
    """A first line at 0 of ``total``, never going back, a last line at ``total`` with the records read."""
    head = f"PROGRESS {kind} {topic}: "
    assert lines and lines[0] == f"{head}0 of {total:,} offsets (0.0%) in {N} partitions, starting", lines
    read = [int(line[len(head) :].split(" of ")[0].replace(",", "")) for line in lines]
    assert read == sorted(read) and all(f" of {total:,} offsets (" in line for line in lines), lines
    assert lines[-1].startswith(f"{head}{total:,} of {total:,} offsets (100.0%), "), lines
    assert " done in " in lines[-1] and lines[-1].endswith(f": {records:,} records"), lines


def run_rebuild(
    log: Changelog,
    uri: str,
    *extra: str,
    topic: str | None = None,
    watch: Callable[[], None] | None = None,
) -> tuple[Any, dict[str, Any]]:
    report = f"{uri}.rebuild-report.json"
    common = ["--kafka-config-file", log.cfg_file, "--topic", topic or log.topic, "--snapshot-uri", uri]
    return submit("rebuild.py", *common, "--report-file", report, *extra, watch=watch)


def run_check(log: Changelog, uri: str) -> tuple[Any, dict[str, Any]]:
    report = f"{uri}.check-report.json"
    common = ["--kafka-config-file", log.cfg_file, "--topic", log.topic, "--snapshot-uri", uri]
    return submit("deep_check.py", *common, "--report-file", report, "--sample-keys", "50")


def data(path: Path) -> Path:
    """The directory holding the snapshot's current data and manifest (its pointer's version)."""
    return Path(layout.resolve(str(path)).uri)


def read_snapshot(path: Path) -> dict[int, dict[bytes, tuple[int, bytes]]]:
    """The snapshot's rows read with pyarrow (no Spark): partition -> key -> (offset, value)."""
    table = pads.dataset(str(data(path)), format="parquet", partitioning="hive").to_table()
    out: dict[int, dict[bytes, tuple[int, bytes]]] = {}
    for row in table.to_pylist():
        rows = out.setdefault(int(row["partition"]), {})
        assert row["key"] not in rows, f"duplicate key {row['key']!r}"
        rows[row["key"]] = (row["offset"], row["value"])
    return out


def assert_snapshot_is_truth(path: Path, log: Changelog, n: int = N) -> None:
    snap = read_snapshot(path)
    truth = log.by_partition(n)
    for p in range(n):
        got = snap.get(p, {})
        assert {k: v for k, (_, v) in got.items()} == truth[p], f"partition {p}"
        if n == N:
            assert {k: o for k, (o, _) in got.items()} == {k: log.truth[k][0] for k in truth[p]}
    assert set(snap) <= set(range(n))
    manifest = read_manifest(str(data(path)))
    assert manifest.partitions == n
    for p in range(n):
        assert manifest.partition_stats[p].rows == len(truth[p])
        assert manifest.partition_stats[p].digest == digest_rows(truth[p].items())


def fingerprint(path: Path) -> dict[str, bytes]:
    return {str(f.relative_to(path)): f.read_bytes() for f in sorted(path.rglob("*")) if f.is_file()}


def rewrite_partition(path: Path, p: int, rows: dict[bytes, tuple[int, bytes]]) -> None:
    """Replace partition ``p``'s Parquet files with ``rows`` (key -> (offset, value))."""
    folder = data(path) / f"partition={p}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    keys = list(rows)
    table = pa.table(
        {
            "key": pa.array(keys, pa.binary()),
            "value": pa.array([rows[k][1] for k in keys], pa.binary()),
            "offset": pa.array([rows[k][0] for k in keys], pa.int64()),
        }
    )
    pq.write_table(table, folder / "part-corrupted.parquet")


# -- the tests --------------------------------------------------------------------------------------------


@pytest.mark.integration
def test_partition_for_matches_the_java_partitioner_of_a_real_producer(changelog: Changelog) -> None:
    assert changelog.placed
    for key, partition in changelog.placed:
        assert partition_for(key, N) == partition, key


@pytest.mark.integration
def test_reader_stops_at_the_end_despite_aborted_records_and_markers(changelog: Changelog) -> None:
    offsets = kafka_io.list_offsets(changelog.kafka_config, changelog.topic, list(range(N)))
    total = 0
    for p, (start, end) in offsets.items():
        fold = kafka_io.fold_partition(changelog.kafka_config, changelog.topic, p, start, end, timeout=30)
        total += fold.records
        live = {k: v for k, (_, v) in fold.state.items() if v is not None}
        assert live == changelog.by_partition()[p]
    assert total == changelog.records
    assert kafka_io.drain_count(changelog.kafka_config, changelog.topic, offsets) == changelog.records


@pytest.mark.integration
@pytest.mark.spark
def test_rebuild_equals_the_truth_and_the_deep_check_passes(changelog: Changelog, work: Path) -> None:
    """... and both report progress from the driver: PROGRESS lines from 0 to the total of the offset
    ranges read, and, for the rebuild, the document beside the snapshot the kstate page reads: caught
    while the rebuild runs, then ``done`` with the version it committed."""
    snap = work / "snap"
    seen: list[dict[str, Any]] = []

    def watch() -> None:
        doc = snapshot_progress(str(snap))
        if doc is not None and doc["state"] == "running" and doc["line"] not in [d["line"] for d in seen]:
            seen.append(doc)

    proc, report = run_rebuild(changelog, str(snap), "--progress-interval", "0.5", watch=watch)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert report["ok"] and report["previous"] is None
    assert report["records_read"] == changelog.records
    assert report["rows"] == len(changelog.truth)
    assert report["warnings"] == []
    assert_snapshot_is_truth(snap, changelog)
    lso = kafka_io.list_offsets(changelog.kafka_config, changelog.topic, list(range(N)))
    assert read_manifest(str(data(snap))).end_offsets == {p: hi for p, (_, hi) in lso.items()}
    total = sum(hi - lo for lo, hi in lso.values())  # offsets, markers and aborted records included
    assert total > changelog.records
    assert_progress(
        progress_lines(proc.stdout, "rebuild"), "rebuild", changelog.topic, total, changelog.records
    )
    assert seen and all(0 <= d["read"] <= d["total"] == total and not d["stale"] for d in seen), seen
    assert seen[0]["version"] == report["snapshot_version"]  # the page's view of the running rebuild
    done = snapshot_progress(str(snap))
    assert done is not None and (done["state"], done["read"], done["total"]) == ("done", total, total)
    assert done["version"] == report["snapshot_version"] and done["rows"] == report["rows"]
    assert done["live_reports"] >= 1  # the executors' tasks reached the driver's listener
    assert not any(snap.parent.glob("snap.staging-*"))
    assert (
        layout.is_version_name(report["snapshot_version"]) and data(snap).name == report["snapshot_version"]
    )

    proc, check = run_check(changelog, str(snap))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert check["ok"], json.dumps(check, indent=1)[:3000]
    assert check["records_read"] == changelog.records
    checked = progress_lines(proc.stdout, "deep check")
    assert_progress(checked, "deep check", changelog.topic, total, changelog.records)
    after = snapshot_progress(str(snap))  # a check writes no progress document
    assert after is not None and (after["state"], after["updated_at"]) == ("done", done["updated_at"])
    for p, entry in check["partitions"].items():
        assert entry["changelog_digest"] == entry["snapshot_digest"] == entry["manifest_digest"], p
        assert entry["lag"] == 0


def _pick_partitions(log: Changelog) -> tuple[int, int, int, int]:
    """B: a partition with a live key the aborted txn overwrote and an aborted-only key; A, C, D others."""
    truth = log.by_partition()
    for b in range(N):
        overwritten = [k for k in log.aborted if k in truth[b]]
        only = [k for k in log.aborted if k not in log.truth and partition_for(k, N) == b]
        if overwritten and only:
            a, c, d = [p for p in range(N) if p != b][:3]
            return a, b, c, d
    raise AssertionError("no partition holds both kinds of aborted keys")


@pytest.mark.integration
@pytest.mark.spark
def test_deep_check_names_each_corruption(changelog: Changelog, work: Path) -> None:
    a, b, c, d = _pick_partitions(changelog)
    clean = [p for p in range(N) if p not in (a, b, c, d)]
    bad = work / "bad"
    shutil.copytree(work / "snap", bad)
    snap = read_snapshot(bad)
    # A: rows missing (KAFKA-7672 class)
    dropped = sorted(snap[a])[:3]
    rewrite_partition(bad, a, {k: v for k, v in snap[a].items() if k not in dropped})
    # B: a value and a key from the aborted transaction, and a value written after the manifest (KAFKA-20685)
    truth_b = changelog.by_partition()[b]
    overwritten = next(k for k in sorted(changelog.aborted) if k in truth_b)
    only = next(k for k in sorted(changelog.aborted) if k not in changelog.truth and partition_for(k, N) == b)
    later = next(k for k in sorted(truth_b) if k != overwritten)
    rows_b = dict(snap[b])
    rows_b[overwritten] = (rows_b[overwritten][0] + 10_000, changelog.aborted[overwritten])
    rows_b[only] = (99_999, changelog.aborted[only])
    rows_b[later] = (rows_b[later][0] + 10_000, b"written-after-the-manifest")
    rewrite_partition(bad, b, rows_b)
    # C -> D: a misplaced key
    moved = sorted(snap[c])[0]
    rewrite_partition(bad, c, {k: v for k, v in snap[c].items() if k != moved})
    rewrite_partition(bad, d, {**snap[d], moved: snap[c][moved]})
    # the changelog moves on after the manifest: stale, not wrong
    after = [(k, b"after-" + k) for k in KEYS[150:300:7]] + [(later, b"written-after-the-manifest")]
    changelog.produce(after)

    proc, check = run_check(changelog, str(bad))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not check["ok"]
    assert sorted(check["failed_partitions"]) == sorted([a, b, c, d]), json.dumps(check, indent=1)[:4000]
    parts = check["partitions"]
    assert set(parts[str(a)]["missing_keys"]) == {repr(k) for k in dropped}
    assert parts[str(a)]["snapshot_rows"] == parts[str(a)]["changelog_rows"] - 3
    assert any("differs from its manifest entry" in x for x in parts[str(a)]["problems"])
    assert repr(overwritten) in parts[str(b)]["changed_keys"]
    assert repr(later) in parts[str(b)]["changed_keys"]
    assert parts[str(b)]["extra_keys"] == [repr(only)]
    assert parts[str(c)]["missing_keys"] == [repr(moved)]
    assert parts[str(d)]["extra_keys"] == [repr(moved)]
    assert parts[str(d)]["misplaced_keys"] == [repr(moved)]
    assert any("outside their home partition" in x for x in parts[str(d)]["problems"])
    for p in clean:
        assert parts[str(p)]["ok"], parts[str(p)]
    assert any(parts[str(p)]["lag"] > 0 for p in range(N))
    stale = [p for p in range(N) if parts[str(p)]["lag"]]
    assert all("stale" in " ".join(parts[str(p)]["notes"]) for p in stale)


@pytest.mark.integration
@pytest.mark.spark
@pytest.mark.chaos  # 29 s; make test: test_state_maintenance's damaged store, rebuilt with the bad one kept aside
def test_rebuild_repairs_and_keeps_the_previous_snapshot(changelog: Changelog, work: Path) -> None:
    bad = work / "bad"
    old_version = data(bad)
    corrupt_manifest = (old_version / MANIFEST_NAME).read_bytes()
    proc, report = run_rebuild(changelog, str(bad))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert report["previous"] == str(old_version) and data(bad) != old_version  # kept for rollback (keep-N)
    assert (old_version / MANIFEST_NAME).read_bytes() == corrupt_manifest
    assert_snapshot_is_truth(bad, changelog)
    proc, check = run_check(changelog, str(bad))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert check["ok"], json.dumps(check, indent=1)[:3000]


@pytest.mark.integration
@pytest.mark.spark
@pytest.mark.chaos  # 15 s; make test: test_state_maintenance rebuilds only the 3 damaged partitions, keeps the rest
def test_only_partitions_rebuilds_just_those(changelog: Changelog, work: Path) -> None:
    uri = work / "bad"
    before = read_manifest(str(data(uri)))
    old = read_snapshot(uri)
    a, others = 1, [p for p in range(N) if p != 1]
    rewrite_partition(uri, a, dict(list(old[a].items())[:5]))  # broken
    new_a = next(k for k in KEYS if partition_for(k, N) == a)
    new_o = next(k for k in KEYS if partition_for(k, N) == others[0])
    changelog.produce([(new_a, b"new-after-repair"), (new_o, b"new-after-repair")])

    proc, report = run_rebuild(changelog, str(uri), "--only-partitions", str(a), "--partitions", str(N))
    assert proc.returncode == 0, proc.stderr[-3000:]
    after = read_manifest(str(data(uri)))
    snap = read_snapshot(uri)
    assert {k: v for k, (_, v) in snap[a].items()} == changelog.by_partition()[a]
    assert snap[a][new_a][1] == b"new-after-repair"
    assert after.partition_stats[a].end_offset > before.partition_stats[a].end_offset
    for p in others:
        assert snap.get(p, {}) == old.get(p, {}), p  # carried over, not re-read: the new record is not there
        kept, was = after.partition_stats[p], before.partition_stats[p]  # data files are rewritten: new names
        assert (kept.start_offset, kept.end_offset, kept.rows, kept.digest) == (
            was.start_offset,
            was.end_offset,
            was.rows,
            was.digest,
        )

    proc, report = run_rebuild(changelog, str(uri), "--only-partitions", "0", "--partitions", str(N + 2))
    assert proc.returncode != 0
    assert "kstate-rebuild: error: --only-partitions needs the layout unchanged" in proc.stderr
    # the failure report, with its version and (new) error code
    assert report == {
        "format": "kstate-app-failure/1",
        "ok": False,
        "error": report["error"],
        "error_code": "bad-input",
    }


@pytest.mark.integration
@pytest.mark.spark
@pytest.mark.chaos  # 48 s; make test: test_state_maintenance's auto re-key after a partition increase
def test_rekey_to_more_partitions(changelog: Changelog, work: Path) -> None:
    uri = work / "rekeyed"
    target = N + 2
    proc, report = run_rebuild(changelog, str(uri), "--partitions", str(target))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert report["layout"] == target
    assert_snapshot_is_truth(uri, changelog, target)
    manifest = read_manifest(str(data(uri)))
    lso = kafka_io.list_offsets(changelog.kafka_config, changelog.topic, list(range(N)))
    assert manifest.end_offsets == {**{p: hi for p, (_, hi) in lso.items()}, N: 0, N + 1: 0}
    proc, check = run_check(changelog, str(uri))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert check["ok"], json.dumps(check, indent=1)[:3000]
    assert check["layout"] == target


@pytest.mark.integration
@pytest.mark.spark
def test_bad_inputs_fail_clearly_and_leave_the_snapshot_alone(changelog: Changelog, work: Path) -> None:
    uri = work / "snap"
    before = fingerprint(uri)

    proc, report = run_rebuild(changelog, str(uri), topic=changelog.topic + "-missing")
    assert proc.returncode != 0
    assert "kstate-rebuild: error: topic" in proc.stderr and "does not exist" in proc.stderr
    assert report["ok"] is False
    assert fingerprint(uri) == before

    broken = work / "broken"
    shutil.copytree(uri, broken)
    (data(broken) / MANIFEST_NAME).write_text('{"format": "kstate-snapshot/1", "topic"')
    broken_before = fingerprint(broken)
    proc, report = run_check(changelog, str(broken))
    assert proc.returncode == 0, proc.stderr[-2000:]  # a failed report naming the whole snapshot, not a crash
    assert not report["ok"] and not report["snapshot_ok"] and "manifest is corrupt" in report["problems"][0]
    assert fingerprint(broken) == broken_before


@pytest.mark.integration
@pytest.mark.spark
@pytest.mark.chaos  # 20 s; make test keeps the missing topic and the corrupt manifest above
def test_an_unreachable_kafka_and_an_unusable_uri_fail_clearly_without_the_secret(
    changelog: Changelog, work: Path
) -> None:
    uri = work / "snap"
    before = fingerprint(uri)
    unreachable = work / "unreachable.json"
    unreachable.write_text(json.dumps({"bootstrap.servers": "127.0.0.1:1", "sasl.password": "s3cret"}))
    args = ["--kafka-config-file", str(unreachable), "--topic", changelog.topic, "--snapshot-uri", str(uri)]
    proc, report = submit("rebuild.py", *args, "--report-file", str(work / "r.json"))
    assert proc.returncode != 0 and "cannot reach Kafka at 127.0.0.1:1" in proc.stderr
    assert "s3cret" not in proc.stderr + proc.stdout + json.dumps(report)
    assert fingerprint(uri) == before

    proc, report = run_rebuild(changelog, "nosuchscheme://bucket/snap")
    assert proc.returncode != 0
    assert "kstate-rebuild: error: snapshot URI nosuchscheme://bucket/snap is not usable" in proc.stderr


@pytest.mark.integration
def test_not_compacted_changelog_is_warned(changelog: Changelog, admin: AdminClient, work: Path) -> None:
    topic = f"kstate-test-spark-delete-{uuid.uuid4().hex[:8]}"
    for f in admin.create_topics([NewTopic(topic, 2, 1, config={"cleanup.policy": "delete"})]).values():
        f.result(timeout=30)
    try:
        args = rebuild.parse_args(
            ["--kafka-config-file", changelog.cfg_file, "--topic", topic, "--snapshot-uri", str(work / "x")]
            + ["--report-file", str(work / "x.json")]
        )
        plan = rebuild.make_plan(args)
        assert any("cleanup.policy=delete, not compact" in w for w in plan.warnings), plan.warnings
        assert kafka_io.compaction_warnings(changelog.kafka_config, changelog.topic) == []
    finally:
        for f in admin.delete_topics([topic]).values():
            f.result(timeout=30)


def _hadoop_crc(data: bytes, chunk: int = 512) -> bytes:
    """The ``.NAME.crc`` side file Hadoop's LocalFileSystem keeps beside a file: ``crc\\0``, the chunk size,
    then the CRC32 of every ``chunk`` bytes (big-endian)."""
    sums = b"".join(zlib.crc32(data[i : i + chunk]).to_bytes(4, "big") for i in range(0, len(data), chunk))
    return b"crc\0" + chunk.to_bytes(4, "big") + sums


@pytest.mark.integration
@pytest.mark.spark
@pytest.mark.chaos  # 60 s; make test keeps test_snapshot_faults' fast-check cases and test_state_maintenance's heal
def test_every_file_fault_is_damage_to_a_named_partition_and_a_rebuild_heals_it(
    changelog: Changelog, work: Path
) -> None:
    """Issue 10: a file rewritten outside Spark (stale checksum), truncated, overwritten with random bytes,
    deleted, a foreign file, a deleted partition directory: the deep check names each partition and why
    instead of crashing, and a rebuild of just those partitions heals the snapshot."""
    snap = work / "faults"
    shutil.copytree(work / "snap", snap)
    files = {p: sorted((data(snap) / f"partition={p}").glob("*.parquet")) for p in range(N)}
    assert all(files[p] for p in range(N)), files
    # 0: rewritten by another tool (rows dropped) under a checksum of the old bytes: the .crc is stale
    first = files[0][0]
    crc = first.with_name(f".{first.name}.crc")
    crc.write_bytes(_hadoop_crc(first.read_bytes()))
    table = pq.read_table(first)
    pq.write_table(table.slice(1), first)
    assert crc.read_bytes() != _hadoop_crc(first.read_bytes())  # the fault is real: the checksum is stale
    # 1: truncated; 2: random bytes of the same size
    raw = files[1][0].read_bytes()
    files[1][0].write_bytes(raw[: len(raw) // 2])
    files[2][0].write_bytes(os.urandom(files[2][0].stat().st_size))
    assert not files[2][0].read_bytes().startswith(b"PAR1")
    # 3: a data file deleted; 4: a foreign file beside the data; 5: the partition directory deleted
    for f in files[3]:
        f.unlink()
    (data(snap) / "partition=4" / "notes.txt").write_text("a note somebody left beside the data files")
    shutil.rmtree(data(snap) / "partition=5")

    proc, check = run_check(changelog, str(snap))
    assert proc.returncode == 0, proc.stderr[-3000:]  # a report, not a crash
    assert "ChecksumException" not in proc.stderr + proc.stdout
    assert not check["ok"] and sorted(check["failed_partitions"]) == list(range(N)), json.dumps(check)[:3000]
    problems = {p: " | ".join(check["partitions"][str(p)]["problems"]) for p in range(N)}
    assert "checksum (.crc) is stale" in problems[0] and "differs from its manifest entry" in problems[0]
    assert f"unreadable data file {files[1][0].name}" in problems[1], problems[1]
    assert "not a Parquet file" in problems[2], problems[2]
    assert (
        "differs from its manifest entry" in problems[3] and "differs from its manifest entry" in problems[5]
    )
    assert "unreadable data file notes.txt: not a Parquet file" in problems[4], problems[4]
    assert check["partitions"]["4"]["snapshot_rows"] == check["partitions"]["4"]["manifest_rows"]

    only = ",".join(str(p) for p in check["failed_partitions"])
    proc, report = run_rebuild(changelog, str(snap), "--only-partitions", only)
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc, check = run_check(changelog, str(snap))
    assert proc.returncode == 0 and check["ok"], json.dumps(check)[:3000]
