"""The Spark applications under each Spark release ``make compat`` names (pyspark 3.5.x and 4.3.x cells).

Each cell's virtualenv holds that pyspark alone (no pyspark-client over it), the provider without Airflow
(the applications import none: on a cluster they run in the cluster's own Spark) and the test tools. On the
changelog of ``test_spark_apps`` (upserts, tombstones, a committed and an ABORTED transaction) and its truth
folded independently: a rebuild equals the truth, the deep check agrees on every digest and finds a
dropped row, and ``load_snapshot`` returns the truth's rows and the changelog's end offsets.

Marked ``compat``: deselected in ``make test``, where ``test_spark_apps`` runs the same apps on the pinned
pyspark; ``scripts/compat.py`` runs it in each Spark cell (``KSTATE_COMPAT=1``).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from airflow_provider_kstate.spark_apps import kafka_io
from airflow_provider_kstate.store.manifest import read_manifest
from tests.integration import test_spark_apps as apps
from tests.integration.test_spark_apps import (
    Changelog,
    N,
    assert_snapshot_is_truth,
    data,
    read_snapshot,
    rewrite_partition,
    run_check,
    run_rebuild,
)

#: The changelog (and its truth) and the snapshot folder: the fixtures of test_spark_apps, reused.
changelog = apps.changelog
work = apps.work

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.compat]


def _pyspark_version() -> str:
    import pyspark

    return str(pyspark.__version__)


def test_rebuild_deep_check_and_load_snapshot_equal_the_truth(changelog: Changelog, work: Path) -> None:
    print(f"pyspark {_pyspark_version()} on Python {sys.version.split()[0]}")
    snap = work / "snap"
    proc, report = run_rebuild(changelog, str(snap))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert report["ok"] and report["records_read"] == changelog.records
    assert report["rows"] == len(changelog.truth)
    assert_snapshot_is_truth(snap, changelog)
    lso = kafka_io.list_offsets(changelog.kafka_config, changelog.topic, list(range(N)))
    ends = {p: hi for p, (_, hi) in lso.items()}
    assert read_manifest(str(data(snap))).end_offsets == ends

    proc, check = run_check(changelog, str(snap))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert check["ok"] and check["records_read"] == changelog.records, json.dumps(check)[:3000]
    for p, entry in check["partitions"].items():
        assert entry["changelog_digest"] == entry["snapshot_digest"] == entry["manifest_digest"], p

    # the check can fail: one row dropped from a copy is found in that partition only
    bad = work / "bad"
    shutil.copytree(snap, bad)
    rows = read_snapshot(bad)
    victim = max(rows, key=lambda p: len(rows[p]))
    dropped = sorted(rows[victim])[0]
    rewrite_partition(bad, victim, {k: v for k, v in rows[victim].items() if k != dropped})
    proc, check = run_check(changelog, str(bad))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not check["ok"] and check["failed_partitions"] == [victim], json.dumps(check)[:3000]
    assert check["partitions"][str(victim)]["missing_keys"] == [repr(dropped)]

    _load_snapshot_equals_the_truth(snap, changelog, ends)


def _load_snapshot_equals_the_truth(snap: Path, log: Changelog, ends: dict[int, int]) -> None:
    from pyspark.sql import SparkSession

    from airflow_provider_kstate.spark_apps.reader import load_snapshot

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("kstate-compat-load-snapshot")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    try:
        frame, offsets = load_snapshot(spark, str(snap))
        rows = frame.select("partition", "key", "value", "offset").collect()
    finally:
        spark.stop()
    assert offsets == ends
    got: dict[int, dict[bytes, bytes]] = {}
    for row in rows:
        got.setdefault(int(row["partition"]), {})[bytes(row["key"])] = bytes(row["value"])
    truth = log.by_partition()
    assert {p: got.get(p, {}) for p in range(N)} == truth
    assert sum(len(v) for v in got.values()) == len(log.truth) == len(rows)
    assert all(row["offset"] == log.truth[bytes(row["key"])][0] for row in rows)
