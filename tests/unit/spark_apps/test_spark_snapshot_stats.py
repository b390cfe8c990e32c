"""The deep check's one-pass snapshot stats, as its Python workers compute them (no Spark, no broker)."""

from __future__ import annotations

import pyarrow as pa

from airflow_provider_kstate.client_piece.murmur2 import partition_for
from airflow_provider_kstate.spark_apps.deep_check import _snapshot_stats_task
from airflow_provider_kstate.store.digest import SPARK_SEED, combine, digest_hex, digest_rows, xxh64

LAYOUT = 4


def _batch(rows: list[tuple[int | None, bytes | None, bytes | None]]) -> pa.RecordBatch:
    parts, keys, values = zip(*rows, strict=True)
    return pa.RecordBatch.from_arrays(
        [pa.array(parts, pa.int32()), pa.array(keys, pa.binary()), pa.array(values, pa.binary())],
        names=["partition", "key", "value"],
    )


def _stats(batches: list[pa.RecordBatch]) -> dict[int, tuple[int, str, int]]:
    (out,) = list(_snapshot_stats_task(iter(batches), LAYOUT))
    return {
        p: (rows, digest, misplaced)
        for p, rows, digest, misplaced in zip(*(out.column(i).to_pylist() for i in range(4)), strict=True)
    }


def test_rows_digest_and_misplaced_per_partition_across_batches() -> None:
    rows = [(b"key-%d" % i, b"value-%d" % i) for i in range(300)]
    placed = [(partition_for(k, LAYOUT), k, v) for k, v in rows]
    moved = [((p + 1) % LAYOUT, k, v) for p, k, v in placed[:7]]  # 7 rows outside their home
    table = moved + placed[7:]
    stats = _stats([_batch(table[:120]), _batch(table[120:])])
    for p in range(LAYOUT):
        mine = [(k, v) for q, k, v in table if q == p]
        misplaced = sum(1 for q, k, _ in table if q == p and partition_for(k, LAYOUT) != p)
        assert stats[p] == (len(mine), digest_rows(mine), misplaced)
    assert sum(s[2] for s in stats.values()) == 7


def test_null_columns_hash_like_spark_xxhash64() -> None:
    # Spark's xxhash64(key, value) passes the running seed through a null column.
    stats = _stats([_batch([(0, b"k", None), (0, None, b"v"), (0, None, None), (0, b"a", b"b")])])
    expected = combine(
        [xxh64(b"k", SPARK_SEED), xxh64(b"v", SPARK_SEED), SPARK_SEED, xxh64(b"b", xxh64(b"a", SPARK_SEED))]
    )
    assert stats[0][:2] == (4, digest_hex(expected))


def test_a_task_without_rows_reports_nothing() -> None:
    assert _stats([]) == {}
