"""The changelog read through Spark's own Kafka source (``--changelog-reader spark``, spark-sql-kafka-0-10 from
Maven Central shipped with ``--jars``) gives what the confluent-kafka reader gives, on a real broker.

One changelog (6 partitions, compacted by the real log cleaner) holds upserts, tombstones, a committed and an
ABORTED transaction of a real transactional producer (confluent-kafka ``transactional.id``). Rebuilds and deep
checks run with each reader: the snapshots equal the truth and each other, the deep check's reports are
identical (a good snapshot, a damaged one, a re-keyed layout with strays resolved). ``confluent`` is the
default (the faster: ``bench/bench_changelog_reader.py``); ``spark`` without the connector fails clearly.
"""

from __future__ import annotations

import json
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kstate_support import spark_kafka

from airflow_provider_kstate.client_piece.murmur2 import partition_for
from airflow_provider_kstate.spark_apps import kafka_io
from airflow_provider_kstate.store.manifest import read_manifest
from tests.integration.test_spark_apps import (
    Changelog,
    N,
    assert_snapshot_is_truth,
    data,
    read_snapshot,
    rewrite_partition,
    submit,
    write_history,
)

pytestmark = [pytest.mark.integration, pytest.mark.spark]

#: The cleaner may compact a segment as soon as it is rolled (every 200 ms of writes).
COMPACT_FAST = {
    "cleanup.policy": "compact",
    "segment.ms": "200",
    "min.cleanable.dirty.ratio": "0.001",
    "min.compaction.lag.ms": "0",
}


def offsets_seen(kafka_config: dict[str, Any], topic: str) -> dict[int, list[int]]:
    """Every offset a read_committed read returns, per partition (gaps: aborted, markers, compacted)."""
    consumer = Consumer(
        {
            **kafka_config,
            "group.id": f"seen-{uuid.uuid4().hex}",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    seen: dict[int, list[int]] = {p: [] for p in range(N)}
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(N)])
        todo = set(range(N))
        deadline = time.monotonic() + 60
        while todo and time.monotonic() < deadline:
            for m in consumer.consume(1000, timeout=0.5):
                if m.error() is not None:
                    assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                    todo.discard(m.partition())
                else:
                    seen[m.partition()].append(m.offset())
    finally:
        consumer.close()
    return seen


@pytest.fixture(scope="module")
def changelog(kafka_config: dict[str, Any], admin: AdminClient, tmp_path_factory: Any) -> Iterator[Changelog]:
    tag = uuid.uuid4().hex[:8]
    topic = f"kstate-test-source-log-{tag}"
    for f in admin.create_topics([NewTopic(topic, N, 1, config=COMPACT_FAST)]).values():
        f.result(timeout=30)
    cfg = tmp_path_factory.mktemp("cfg") / "kafka.json"
    cfg.write_text(json.dumps(kafka_config))
    log = Changelog(topic, kafka_config, str(cfg))
    write_history(log, tag, pause_s=0.5)
    # the cleaner compacts the rolled segments: superseded records disappear, their offsets become gaps
    deadline = time.monotonic() + 90
    while True:
        time.sleep(0.5)
        log.produce([(b"roll", b"%d" % time.monotonic_ns())])  # writes roll the active segment
        seen = offsets_seen(kafka_config, topic)
        if sum(map(len, seen.values())) < log.records * 0.8:
            break
        assert time.monotonic() < deadline, "the log cleaner did not compact the changelog within 90 s"
    yield log
    for f in admin.delete_topics([topic]).values():
        try:
            f.result(timeout=30)
        except Exception:  # noqa: BLE001 - best-effort clean-up
            pass


@pytest.fixture(scope="module")
def work(tmp_path_factory: Any) -> Path:
    return tmp_path_factory.mktemp("source-snapshots")


def run(app: str, log: Changelog, uri: str, reader: str, *extra: str, jars: bool = True) -> tuple[Any, dict]:
    """spark-submit ``app`` with ``--changelog-reader reader`` (the connector's jars shipped when ``jars``)."""
    report = f"{uri}.{app}.{reader}.json"
    args = ["--kafka-config-file", log.cfg_file, "--topic", log.topic, "--snapshot-uri", uri]
    args += ["--report-file", report, "--changelog-reader", reader, *extra]
    proc, out = submit(app, *args, spark_args=spark_kafka.submit_args() if jars else [])
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, out


def state(partitions: dict[Any, Any]) -> dict[str, tuple[Any, ...]]:
    """Each partition's offsets, rows and digest (not its data files, whose names and sizes differ)."""
    names = ("start_offset", "end_offset", "rows", "digest")
    return {
        str(p): tuple(s[n] if isinstance(s, dict) else getattr(s, n) for n in names)
        for p, s in partitions.items()
    }


def same_check(a: dict[str, Any], b: dict[str, Any]) -> None:
    """Two deep-check reports say the same thing (all but the time they took)."""
    a, b = dict(a), dict(b)
    for report in (a, b):
        report.pop("seconds", None)
    assert a == b


def test_the_changelog_has_gaps_from_compaction_and_transactions(changelog: Changelog) -> None:
    seen = offsets_seen(changelog.kafka_config, changelog.topic)
    gaps = {p: sum(b - a - 1 for a, b in zip(offs, offs[1:], strict=False)) for p, offs in seen.items()}
    assert all(gaps.values()), gaps
    assert not any(v is not None and v.startswith(b"aborted-") for _, v in changelog.truth.values())


def test_rebuilds_with_either_reader_equal_the_truth_and_each_other(changelog: Changelog, work: Path) -> None:
    proc, conf = run("rebuild.py", changelog, str(work / "confluent"), "confluent", jars=False)
    assert "changelog reader: confluent (the default)" in proc.stderr
    proc, spark = run("rebuild.py", changelog, str(work / "spark"), "spark")
    assert "changelog reader: spark (requested)" in proc.stderr
    assert conf["ok"] and spark["ok"], (conf, spark)
    assert spark["records_read"] == conf["records_read"] > 0
    assert state(spark["partitions"]) == state(conf["partitions"])
    for name in ("confluent", "spark"):
        assert_snapshot_is_truth(work / name, changelog)
    assert read_snapshot(work / "spark") == read_snapshot(work / "confluent")
    manifests = [read_manifest(str(data(work / n))) for n in ("confluent", "spark")]
    assert state(manifests[0].partition_stats) == state(manifests[1].partition_stats)
    assert manifests[0].end_offsets == manifests[1].end_offsets


@pytest.mark.chaos  # 70 s: make chaos (make test keeps the rebuilds' equality)
def test_the_deep_check_is_identical_either_way_good_and_damaged(changelog: Changelog, work: Path) -> None:
    _, good_c = run("deep_check.py", changelog, str(work / "confluent"), "confluent", "--sample-keys", "50")
    _, good_s = run("deep_check.py", changelog, str(work / "confluent"), "spark", "--sample-keys", "50")
    assert good_c["ok"] and good_s["ok"]
    same_check(good_c, good_s)

    bad = work / "bad"
    shutil.copytree(work / "confluent", bad)
    snap = read_snapshot(bad)
    truth = changelog.by_partition()
    a = next(p for p in range(N) if len(snap.get(p, {})) > 3)
    b = next(p for p in range(N) if p != a and any(k in truth[p] for k in changelog.aborted))
    rewrite_partition(bad, a, {k: v for k, v in snap[a].items() if k not in sorted(snap[a])[:3]})
    overwritten = next(k for k in sorted(changelog.aborted) if k in truth[b])
    rows_b = dict(snap[b])
    rows_b[overwritten] = (rows_b[overwritten][0], changelog.aborted[overwritten])  # a value never committed
    rewrite_partition(bad, b, rows_b)
    _, bad_c = run("deep_check.py", changelog, str(bad), "confluent", "--sample-keys", "50")
    _, bad_s = run("deep_check.py", changelog, str(bad), "spark", "--sample-keys", "50")
    assert not bad_c["ok"] and sorted(bad_c["failed_partitions"]) == sorted([a, b])
    assert repr(overwritten) in bad_c["partitions"][str(b)]["changed_keys"]
    same_check(bad_c, bad_s)


@pytest.mark.chaos  # 40 s: make chaos
def test_a_rekeyed_rebuild_resolves_strays_the_same_way(changelog: Changelog, work: Path) -> None:
    _, conf = run("rebuild.py", changelog, str(work / "rekey-c"), "confluent", "--partitions", "8")
    _, spark = run("rebuild.py", changelog, str(work / "rekey-s"), "spark", "--partitions", "8")
    assert conf["ok"] and spark["ok"] and conf["layout"] == spark["layout"] == 8
    assert state(spark["partitions"]) == state(conf["partitions"])
    assert read_snapshot(work / "rekey-s") == read_snapshot(work / "rekey-c")
    assert_snapshot_is_truth(work / "rekey-s", changelog, 8)
    assert all(partition_for(k, 8) == p for p, rows in read_snapshot(work / "rekey-s").items() for k in rows)


def test_spark_requested_without_the_connector_fails_clearly(changelog: Changelog, work: Path) -> None:
    uri = str(work / "none")
    args = ["--kafka-config-file", changelog.cfg_file, "--topic", changelog.topic, "--snapshot-uri", uri]
    proc, report = submit("rebuild.py", *args, "--report-file", f"{uri}.json", "--changelog-reader", "spark")
    assert proc.returncode != 0 and not report["ok"]
    assert "spark-sql-kafka-0-10_2.13" in report["error"] and "not on the classpath" in report["error"]
    assert kafka_io.topic_partition_count(changelog.kafka_config, changelog.topic) == N
