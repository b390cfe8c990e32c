"""The state-maintenance DAG end to end: a real broker, real ``dag.test()`` runs, real local Spark.

The example pipeline (running totals per account) builds a changelog; ``kstate_state_maintenance`` builds
the first snapshot (a missing snapshot is a failed check). Then the store is broken in each way the checks
must catch - rows dropped, a value taken from an aborted transaction, a stale manifest, the changelog
recreated, the topic's partitions increased - and each time the right check fails naming the partition,
``rebuild=auto`` repairs it, the re-checks pass, and the snapshot equals the changelog's truth computed
here independently (a plain confluent-kafka read_committed fold). ``rebuild=never`` on a bad store fails
the run; bad input gives clear errors and leaves the snapshot intact.

The tests of this module share one store and run in order.
"""

from __future__ import annotations

import json
import random
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kstate_support.statsd_listener import StatsdListener, airflow_statsd

from airflow_provider_kstate.client_piece.murmur2 import partition_for
from airflow_provider_kstate.spark_apps.kafka_io import list_offsets
from airflow_provider_kstate.store import layout
from airflow_provider_kstate.store.manifest import MANIFEST_NAME
from airflow_provider_kstate.store.uri import local_path

pytestmark = [pytest.mark.integration, pytest.mark.spark]

MAINTENANCE = "kstate_state_maintenance"
PIPELINE = "kstate_example_pipeline"
LOG_PARTITIONS = 4
STORE = "airflow.kstate.store."


# -- Kafka helpers --------------------------------------------------------------------------------------


def create_topic(
    admin: AdminClient, name: str, partitions: int, config: dict[str, str] | None = None
) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            for f in admin.create_topics([NewTopic(name, partitions, 1, config=config or {})]).values():
                f.result(timeout=30)
            break
        except Exception as exc:  # noqa: BLE001 - a just-deleted topic may still be marked for deletion
            if time.monotonic() > deadline:
                raise
            if "already exists" not in str(exc) and "marked for deletion" not in str(exc):
                raise
            time.sleep(0.5)
    _wait(lambda: len(admin.list_topics(name, timeout=10).topics[name].partitions) == partitions)


def delete_topic(admin: AdminClient, name: str) -> None:
    for f in admin.delete_topics([name]).values():
        f.result(timeout=30)
    _wait(lambda: name not in admin.list_topics(timeout=10).topics)


def _wait(condition: Any, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def produce(kafka_config: dict[str, Any], topic: str, records: list[tuple[bytes, bytes | None]]) -> None:
    producer = Producer({**kafka_config, "partitioner": "murmur2_random"})
    for key, value in records:
        producer.produce(topic, key=key, value=value)
    assert producer.flush(30) == 0


def changelog_truth(kafka_config: dict[str, Any], topic: str) -> dict[bytes, bytes]:
    """Fold the whole changelog read_committed: key -> latest value, tombstones delete."""
    consumer = Consumer(
        {
            **kafka_config,
            "group.id": f"truth-{uuid.uuid4().hex}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        todo = {
            p for p in parts if consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] > 0
        }
        consumer.assign([TopicPartition(topic, p, 0) for p in todo])
        latest: dict[Any, tuple[Any, Any, Any]] = {}
        deadline = time.monotonic() + 60
        while todo:
            assert time.monotonic() < deadline, f"changelog {topic} not read to its end: {todo}"
            for m in consumer.consume(500, timeout=1.0):
                err = m.error()
                if err is not None:
                    assert err.code() == KafkaError._PARTITION_EOF, err
                    todo.discard(m.partition())
                    continue
                latest[m.key()] = (m.partition(), m.offset(), m.value())
    finally:
        consumer.close()
    return {k: v for k, (_p, _o, v) in latest.items() if v is not None}


def expected_totals(events: list[tuple[bytes, bytes]]) -> dict[bytes, bytes]:
    totals: dict[bytes, int] = {}
    for key, value in events:
        if value == b"CLOSE":
            totals.pop(key, None)
        else:
            totals[key] = totals.get(key, 0) + int(value)
    return {k: str(v).encode() for k, v in totals.items()}


# -- snapshot helpers -----------------------------------------------------------------------------------


def data(uri: str) -> Path:
    """The directory holding the snapshot's current data and manifest (its pointer's version)."""
    return Path(layout.resolve(uri).uri)


def snapshot_rows(uri: str) -> dict[int, dict[bytes, bytes]]:
    table = ds.dataset(str(data(uri)), format="parquet", partitioning="hive").to_table()
    rows: dict[int, dict[bytes, bytes]] = {}
    for p, k, v in zip(
        table.column("partition").to_pylist(),
        table.column("key").to_pylist(),
        table.column("value").to_pylist(),
        strict=True,
    ):
        assert k not in rows.setdefault(int(p), {}), f"key {k!r} twice in partition {p}"
        rows[int(p)][k] = v
    return rows


def manifest(uri: str) -> dict[str, Any]:
    return json.loads((data(uri) / MANIFEST_NAME).read_text())


def assert_snapshot_is_truth(uri: str, kafka_config: dict[str, Any], topic: str) -> None:
    """The snapshot holds exactly the changelog's live keys, each in its murmur2 home, at the log's end."""
    truth = changelog_truth(kafka_config, topic)
    man = manifest(uri)
    n = man["partitions"]
    want: dict[int, dict[bytes, bytes]] = {}
    for key, value in truth.items():
        want.setdefault(partition_for(key, n), {})[key] = value
    got = snapshot_rows(uri)
    for p in range(n):
        assert got.get(p, {}) == want.get(p, {}), f"partition {p} differs from the changelog"
        assert man["partition_stats"][str(p)]["rows"] == len(want.get(p, {}))


def partition_files(uri: str, p: int) -> list[Path]:
    return sorted((data(uri) / f"partition={p}").glob("*.parquet"))


def rewrite_partition(uri: str, p: int, change: Any) -> None:
    """Replace partition ``p``'s Parquet files with one file of ``change(rows)`` (same schema)."""
    files = partition_files(uri, p)
    table = pa.concat_tables([pq.read_table(f, partitioning=None) for f in files])
    new = change(table)
    for f in files:
        f.unlink()
        drop_crc(f)
    pq.write_table(new, data(uri) / f"partition={p}" / "part-00000-corrupted.parquet")
    doc = manifest(uri)  # the tool also fixed the manifest's file list: only the rows are wrong (deep check)
    if "files" in doc["partition_stats"][str(p)]:
        doc["partition_stats"][str(p)]["files"] = {f.name: f.stat().st_size for f in partition_files(uri, p)}
        write_manifest_json(uri, doc)


def drop_crc(path: Path) -> None:
    """Remove Hadoop's checksum sidecar of a file the test changes behind Spark's back.

    Otherwise Spark reports a ChecksumException instead of what the check is meant to find.
    """
    (path.parent / f".{path.name}.crc").unlink(missing_ok=True)


def write_manifest_json(uri: str, doc: Any) -> None:
    path = data(uri) / MANIFEST_NAME
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    drop_crc(path)


def ti_state(dr: Any, task_id: str) -> str | None:
    (ti,) = [t for t in dr.get_task_instances() if t.task_id == task_id]
    return None if ti.state is None else str(ti.state)


def xcom(dr: Any, task_id: str, key: str = "return_value") -> Any:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = (
            session.query(XComModel)
            .filter_by(dag_id=dr.dag_id, run_id=dr.run_id, task_id=task_id, key=key)
            .one_or_none()
        )
        return None if row is None else XComModel.deserialize_value(row)


# -- the shared store -----------------------------------------------------------------------------------


class Store:
    def __init__(self, tag: str, root: Path) -> None:
        self.input = f"kstate-test-payments-{tag}"
        self.log = f"kstate-test-totals-{tag}"
        self.group = f"kstate-test-totals-{tag}"
        self.uri = str(root / f"snapshot-{tag}")
        self.events: list[tuple[bytes, bytes]] = []

    def conf(self, **overrides: Any) -> dict[str, Any]:
        return {"changelog_topic": self.log, "snapshot_uri": self.uri, **overrides}

    def pipeline_conf(self) -> dict[str, Any]:
        return {"input_topic": self.input, "changelog_topic": self.log, "group": self.group}


@pytest.fixture(scope="module")
def store(admin: AdminClient, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    s = Store(uuid.uuid4().hex[:8], tmp_path_factory.mktemp("kstate-snapshots"))
    create_topic(admin, s.input, 3)
    create_topic(admin, s.log, LOG_PARTITIONS, {"cleanup.policy": "compact"})
    yield s
    for f in admin.delete_topics([s.input, s.log]).values():
        try:
            f.result(timeout=30)
        except Exception:  # noqa: BLE001 - best-effort clean-up
            pass


def payments(seed: int, n: int) -> list[tuple[bytes, bytes]]:
    rnd = random.Random(seed)
    events = []
    for _ in range(n):
        account = f"acct-{rnd.randrange(40):03d}".encode()
        events.append((account, b"CLOSE" if rnd.random() < 0.04 else str(rnd.randrange(-20, 100)).encode()))
    return events


def assert_progress_logged(
    capfd: pytest.CaptureFixture[str], store: Store, kafka_config: dict[str, Any], dr: Any
) -> None:
    """The rebuild's and the deep check's driver logged PROGRESS lines into the task log (through the
    Spark provider's hook): from 0 to the total of the changelog's offset ranges, the last with the records."""
    out, err = capfd.readouterr()
    lso = list_offsets(kafka_config, store.log, list(range(LOG_PARTITIONS)))
    total = sum(hi - lo for lo, hi in lso.values())
    for kind, task in (("rebuild", "rebuild"), ("deep check", "recheck_deep")):
        head = f"PROGRESS {kind} {store.log}: "
        lines = [line[line.index(head) :] for line in (out + err).splitlines() if head in line]
        assert lines and lines[0].startswith(
            f"{head}0 of {total:,} offsets (0.0%) in {LOG_PARTITIONS} partitions"
        )
        records = xcom(dr, task)["records_read"]
        assert lines[-1].startswith(f"{head}{total:,} of {total:,} offsets (100.0%), "), lines
        assert f": {records:,} records" in lines[-1], lines


# -- the tests ------------------------------------------------------------------------------------------


def test_pipeline_builds_the_store_and_auto_builds_the_first_snapshot(
    store: Store, kafka_config: dict[str, Any], run_dag: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    for seed in (1, 2):  # two runs: the second resumes from the offsets the first committed
        batch = payments(seed, 150)
        produce(kafka_config, store.input, batch)  # type: ignore[arg-type]
        store.events += batch
        dr = run_dag(PIPELINE, store.pipeline_conf())
        assert str(dr.state) == "success"
    report = xcom(dr, "running_totals")
    assert report["ok"] and report["offsets_consumed"] == 150
    assert report["payments_read"] == 150  # what the reads returned, counted (issue 17)
    assert changelog_truth(kafka_config, store.log) == expected_totals(store.events)

    capfd.readouterr()
    dr = run_dag(MAINTENANCE, store.conf(deep=False, rebuild="auto"))
    assert str(dr.state) == "success"
    assert_progress_logged(capfd, store, kafka_config, dr)
    fast = xcom(dr, "fast_check")
    assert not fast["ok"] and fast["snapshot_missing"] and "snapshot missing" in fast["problems"][0]
    assert ti_state(dr, "deep_check") == "skipped" and ti_state(dr, "store_bad") == "skipped"
    for task in ("rebuild", "recheck_fast", "recheck_deep"):
        assert ti_state(dr, task) == "success", task
    assert xcom(dr, "recheck_deep")["ok"]
    assert_snapshot_is_truth(store.uri, kafka_config, store.log)

    dr = run_dag(MAINTENANCE, store.conf(deep=False, rebuild="never"))  # a good store: nothing to do
    assert str(dr.state) == "success" and ti_state(dr, "store_ok") == "success"
    assert ti_state(dr, "rebuild") == "skipped" and xcom(dr, "fast_check")["ok"]


def test_dropped_rows_aborted_write_and_stale_manifest_are_found_and_repaired(
    store: Store, kafka_config: dict[str, Any], run_dag: Any
) -> None:
    rows = snapshot_rows(store.uri)
    full = sorted(p for p in range(LOG_PARTITIONS) if len(rows.get(p, {})) >= 2)
    assert len(full) >= 3, rows
    dropped_p, aborted_p, stale_p = full[:3]

    # 1. rows dropped from one partition
    dropped_key = sorted(rows[dropped_p])[0]
    rewrite_partition(store.uri, dropped_p, lambda t: t.filter(pa.compute.not_equal(t["key"], dropped_key)))

    # 2. a value the snapshot took from an aborted transaction
    aborted_key = sorted(rows[aborted_p])[0]
    producer = Producer(
        {
            **kafka_config,
            "transactional.id": f"kstate-test-aborter-{store.group}",
            "partitioner": "murmur2_random",
        }
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(store.log, key=aborted_key, value=b"999999")
    producer.flush(30)
    producer.abort_transaction(30)

    def take_aborted(t: pa.Table) -> pa.Table:
        values = [
            b"999999" if k == aborted_key else v
            for k, v in zip(t["key"].to_pylist(), t["value"].to_pylist(), strict=True)
        ]
        return t.set_column(
            t.schema.get_field_index("value"), "value", pa.array(values, t.schema.field("value").type)
        )

    rewrite_partition(store.uri, aborted_p, take_aborted)

    # 3. a stale manifest: partition stats from before the partition's last change
    man = manifest(store.uri)
    stats = man["partition_stats"][str(stale_p)]
    stats["rows"] += 1
    stats["digest"] = "0123456789abcdef"
    write_manifest_json(store.uri, man)

    with StatsdListener() as listener, airflow_statsd(listener):  # Airflow's own metrics path (StatsD)
        dr = run_dag(MAINTENANCE, store.conf(deep=True, rebuild="auto"))
        listener.wait(lambda got: len(got.samples(f"{STORE}check.")) >= 8)
    assert str(dr.state) == "success"
    assert xcom(dr, "fast_check")["ok"]  # nothing the manifest-and-offsets check can see
    deep = xcom(dr, "deep_check")
    assert not deep["ok"] and deep["failed_partitions"] == sorted([dropped_p, aborted_p, stale_p]), deep
    assert dropped_key.decode() in json.dumps(deep["partitions"][str(dropped_p)]), deep
    assert aborted_key.decode() in json.dumps(deep["partitions"][str(aborted_p)]), deep
    assert deep["partitions"][str(stale_p)]["problems"], deep
    assert xcom(dr, "decide", "only_partitions") == ",".join(
        map(str, sorted([dropped_p, aborted_p, stale_p]))
    )
    rebuilt = xcom(dr, "rebuild")
    assert rebuilt["only_partitions"] == sorted([dropped_p, aborted_p, stale_p])  # the others were kept
    assert manifest(str(local_path(rebuilt["previous"]))) == man  # the bad snapshot is kept aside, untouched
    assert ti_state(dr, "recheck_fast") == "success" and ti_state(dr, "recheck_deep") == "success"
    assert_snapshot_is_truth(store.uri, kafka_config, store.log)
    assert_store_metrics(listener, dr, store.log, damaged=3)


def assert_store_metrics(listener: StatsdListener, dr: Any, topic: str, damaged: int) -> None:
    """The run's store metrics as StatsD received them: the fast check and both re-checks ok, the deep
    check failed with its damaged partitions, the rebuild's rows and its Spark application's wall time."""
    verdicts = sorted(
        (s.name.removeprefix(STORE), s.value, s.kind) for s in listener.samples(f"{STORE}check.")
    )
    assert verdicts == [
        ("check.failed", 1, "c"),  # deep_check
        (f"check.failed.{topic}.deep", 1, "c"),
        ("check.ok", 1, "c"),  # fast_check, recheck_fast, recheck_deep
        ("check.ok", 1, "c"),
        ("check.ok", 1, "c"),
        (f"check.ok.{topic}.deep", 1, "c"),
        (f"check.ok.{topic}.fast", 1, "c"),
        (f"check.ok.{topic}.fast", 1, "c"),
    ], verdicts
    gauges = [s.value for s in listener.named(f"{STORE}damaged_partitions.{topic}.deep")]
    assert gauges == [damaged, 0]  # the deep check, then the re-check after the rebuild
    rebuilt = xcom(dr, "rebuild")
    (rows,) = listener.named(f"{STORE}rebuild.rows")
    assert (rows.value, rows.kind) == (rebuilt["rows"], "g")
    (took,) = listener.named(f"{STORE}rebuild.duration.{topic}")
    (ti,) = [t for t in dr.get_task_instances() if t.task_id == "rebuild"]
    task_ms = (ti.end_date - ti.start_date).total_seconds() * 1000
    assert took.kind == "ms" and rebuilt["seconds"] * 1000 < took.value < task_ms  # JVM start-up included


@pytest.mark.chaos  # 36 s; make test: the fast check's "recreated" rule in tests/unit/store/test_fast_check_faults.py
def test_recreated_changelog_fails_with_never_and_is_rebuilt_with_auto(
    store: Store, admin: AdminClient, kafka_config: dict[str, Any], run_dag: Any
) -> None:
    before = manifest(store.uri)
    delete_topic(admin, store.log)
    create_topic(admin, store.log, LOG_PARTITIONS, {"cleanup.policy": "compact"})
    fresh = [(f"acct-{i:03d}".encode(), str(i).encode()) for i in range(30)] + [(b"acct-new", b"7")]
    produce(kafka_config, store.log, fresh)  # type: ignore[arg-type]
    marks = {p: admin_high(admin, store.log, p) for p in range(LOG_PARTITIONS)}
    truncated = sorted(
        p for p in range(LOG_PARTITIONS) if before["partition_stats"][str(p)]["end_offset"] > marks[p]
    )
    assert truncated

    dr = run_dag(MAINTENANCE, store.conf(deep=False, rebuild="never"))
    assert str(dr.state) == "failed"
    assert ti_state(dr, "store_bad") == "failed" and ti_state(dr, "rebuild") == "skipped"
    fast = xcom(dr, "fast_check")
    assert fast["failed_partitions"] == truncated
    assert "recreated" in fast["partitions"][str(truncated[0])]["problems"][0]
    assert manifest(store.uri) == before  # rebuild=never leaves the snapshot alone

    dr = run_dag(MAINTENANCE, store.conf(deep=False, rebuild="auto"))
    assert str(dr.state) == "success" and ti_state(dr, "recheck_deep") == "success"
    assert xcom(dr, "decide", "only_partitions") == ""  # a fast-check failure rebuilds everything
    assert xcom(dr, "rebuild")["only_partitions"] is None
    assert_snapshot_is_truth(store.uri, kafka_config, store.log)
    assert {k: v for rows in snapshot_rows(store.uri).values() for k, v in rows.items()} == dict(fresh)


def admin_high(admin: AdminClient, topic: str, p: int) -> int:
    from confluent_kafka.admin import OffsetSpec

    (f,) = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.latest()}).values()
    return int(f.result(timeout=30).offset)


def test_partition_increase_leaves_the_store_behind_and_auto_rekeys_it(
    store: Store, admin: AdminClient, kafka_config: dict[str, Any], run_dag: Any
) -> None:
    assert manifest(store.uri)["partitions"] == LOG_PARTITIONS  # the store an earlier test rebuilt
    for f in admin.create_partitions([NewPartitions(store.log, LOG_PARTITIONS + 2)]).values():
        f.result(timeout=30)
    _wait(
        lambda: (
            len(admin.list_topics(store.log, timeout=10).topics[store.log].partitions) == LOG_PARTITIONS + 2
        )
    )

    dr = run_dag(MAINTENANCE, store.conf(deep=False, rebuild="auto"))
    assert str(dr.state) == "success"
    fast = xcom(dr, "fast_check")
    assert not fast["layout_ok"] and fast["failed_partitions"] == [LOG_PARTITIONS, LOG_PARTITIONS + 1]
    assert f"has {LOG_PARTITIONS} partitions but topic" in fast["problems"][0]
    assert ti_state(dr, "recheck_fast") == "success" and ti_state(dr, "recheck_deep") == "success"
    assert manifest(store.uri)["partitions"] == LOG_PARTITIONS + 2
    assert_snapshot_is_truth(store.uri, kafka_config, store.log)  # every key in its new murmur2 home


def test_bad_input_gives_clear_errors_and_keeps_the_snapshot(
    store: Store, kafka_config: dict[str, Any], run_dag: Any, tmp_path: Path
) -> None:
    from airflow_provider_kstate.compat import AirflowFailException
    from airflow_provider_kstate.errors import KStateConfigError, SnapshotError, TopicNotFoundError
    from airflow_provider_kstate.operators.deep_check import KStateDeepCheckOperator
    from airflow_provider_kstate.operators.fast_check import KStateFastCheckOperator
    from airflow_provider_kstate.operators.rebuild import KStateRebuildOperator

    files = sorted((p, p.stat().st_mtime_ns) for p in Path(store.uri).rglob("*"))
    missing = f"{store.log}-missing"
    with pytest.raises(AirflowFailException, match=missing) as failed:
        KStateFastCheckOperator(task_id="f", topic=missing, snapshot_uri=store.uri).execute({})
    assert isinstance(failed.value.__cause__, TopicNotFoundError)
    with pytest.raises(AirflowFailException, match=missing) as failed:
        KStateRebuildOperator(task_id="r", topic=missing, snapshot_uri=store.uri).execute({})
    assert isinstance(failed.value.__cause__, TopicNotFoundError)
    with pytest.raises(AirflowFailException, match="unsupported scheme 'ftp'") as failed:
        KStateRebuildOperator(task_id="r", topic=store.log, snapshot_uri="ftp://host/snap").execute({})
    assert isinstance(failed.value.__cause__, KStateConfigError)
    with pytest.raises(AirflowFailException, match="unchanged layout") as failed:
        KStateRebuildOperator(
            task_id="r", topic=store.log, snapshot_uri=store.uri, partitions=99, only_partitions=[0]
        ).execute({})
    assert isinstance(failed.value.__cause__, KStateConfigError)
    dr = run_dag(MAINTENANCE, store.conf(changelog_topic=missing))
    assert str(dr.state) == "failed" and ti_state(dr, "fast_check") == "failed"
    assert sorted((p, p.stat().st_mtime_ns) for p in Path(store.uri).rglob("*")) == files

    # a corrupt manifest (in a copy): the fast check reports it, the deep check refuses to start
    copy = tmp_path / "copy"
    shutil.copytree(store.uri, copy)
    write_manifest_json(str(copy), "{not json")
    report = KStateFastCheckOperator(
        task_id="f", topic=store.log, snapshot_uri=str(copy), fail_on_bad=False
    ).execute({})
    assert not report["snapshot_ok"] and "not valid JSON" in report["problems"][0]
    with pytest.raises(SnapshotError, match="corrupt"):
        KStateDeepCheckOperator(task_id="d", topic=store.log, snapshot_uri=str(copy)).execute({})
    (data(str(copy)) / MANIFEST_NAME).unlink()
    (data(str(copy)) / MANIFEST_NAME).mkdir()  # unreadable: a directory where the manifest should be
    report = KStateFastCheckOperator(
        task_id="f", topic=store.log, snapshot_uri=str(copy), fail_on_bad=False
    ).execute({})
    assert not report["snapshot_ok"] and "unreadable" in report["problems"][0]
    dr = run_dag(MAINTENANCE, {"changelog_topic": store.log, "snapshot_uri": str(copy), "rebuild": "never"})
    assert str(dr.state) == "failed" and ti_state(dr, "store_bad") == "failed"


def test_fast_check_of_a_1000_partition_topic_passes_every_partition(make_topic: Any, tmp_path: Path) -> None:
    """The hook's fast check of a real 1,000-partition changelog: every partition in its batched offsets
    rounds, all passed. How long it takes, at 10, 100 and 1,000 partitions, is a benchmark's
    (``bench/bench_state.py --fast-check-only``), not a wall-clock bound in a shared machine's test run."""
    from airflow_provider_kstate.hooks.snapshot import KStateSnapshotHook
    from airflow_provider_kstate.store.manifest import Manifest, PartitionStats, write_manifest

    topic = make_topic("wide", partitions=1000, config={"cleanup.policy": "compact"})
    stats = {p: PartitionStats(0, 0, 0, "0" * 16) for p in range(1000)}
    write_manifest(str(tmp_path / "wide"), Manifest(topic=topic, partitions=1000, partition_stats=stats))
    hook = KStateSnapshotHook()
    _wait(lambda: hook.admin.partition_count(topic) == 1000)  # also opens the admin connection
    # Apache Kafka brings 1,000 new partitions online over a few seconds (ListOffsets answers
    # NOT_LEADER_OR_FOLLOWER until then, and the admin asks again): every partition led before the check.
    hook.admin.log_starts(topic, range(1000))
    report = hook.fast_check(topic, str(tmp_path / "wide")).to_dict()
    assert report["ok"] and len(report["partitions"]) == 1000
