"""The changelog as Spark DataFrames: partitions read in parallel and folded to their latest value per key.

* :func:`changelog_frame` reads changelog partitions in parallel, one Spark task per partition (confluent-kafka
  ``assign()`` inside ``mapInArrow``), folds each to its latest value per key and yields Arrow batches.
* :func:`changelog_stats` folds them and returns only rows and digest per partition (no row leaves the
  Python workers); :func:`changelog_frame` records the same per-partition stats while it yields rows.

Placement: a snapshot with layout ``n`` keeps each key in ``partition_for(key, n)`` (its *home*). A key
whose final record sits in another changelog partition (a *stray*: after a partition increase, or a
producer not using murmur2) is resolved across partitions: a record in the key's home partition wins over
any elsewhere (it was written after the increase), otherwise the highest offset wins. The fast path reads
each partition once and only falls back to that resolution (:func:`resolve_strays`) when strays exist.

No Airflow import here.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.client_piece.murmur2 import partitions_for
from airflow_provider_kstate.spark_apps import kafka_io
from airflow_provider_kstate.spark_apps.read_progress import Address, task_reporter
from airflow_provider_kstate.store.digest import digest_hex, digest_sum
from airflow_provider_kstate.store.results import EMPTY_DIGEST

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

FAST_DDL = "partition int, key binary, value binary, offset long, source int"
FULL_DDL = FAST_DDL + ", at_home boolean"
STATS_DDL = "source int, records long, null_keys long, strays long, rows long, digest string"
_CHUNK = 100_000


@dataclass
class ReadContext:
    """What every changelog task needs (pickled to the executors; ``kafka_config`` is never logged).

    :param kafka_config: librdkafka settings.
    :param topic: the changelog topic.
    :param sources: the changelog partitions to read, task ``i`` reads ``sources[i]``.
    :param ranges: ``{partition: (start, end)}`` offsets to read.
    :param layout: the snapshot's partition count: keys are placed by ``partition_for(key, layout)``.
    :param full: emit every final state (tombstones and strays too) for cross-partition resolution.
    :param timeout: read timeout per partition, see :func:`.kafka_io.read_batches`.
    :param stats_only: emit one :data:`STATS_DDL` row per source partition instead of its rows.
    :param progress: where the tasks report their position (set by
        :meth:`.read_progress.DriverProgress.attach`; None: no reports).
    :param reader: ``confluent`` (confluent-kafka ``assign()`` in the tasks) or ``spark`` (Spark's own Kafka
        source, :mod:`.kafka_source`): the same rows and stats either way.
    """

    kafka_config: dict[str, Any]
    topic: str
    sources: list[int]
    ranges: dict[int, tuple[int, int]]
    layout: int
    full: bool = False
    timeout: float = kafka_io.DEFAULT_TIMEOUT
    accumulators: dict[str, Any] = field(default_factory=dict)
    stats_only: bool = False
    progress: Address | None = None
    reader: str = "confluent"

    def totals(self) -> dict[str, int]:
        """Return ``records``, ``null_keys`` and ``strays`` summed over the sources read so far."""
        acc = self.accumulators.get("sources")
        per_source = acc.value if acc is not None else {}
        names = ("records", "null_keys", "strays")
        return {name: sum(int(stats[i]) for stats in per_source.values()) for i, name in enumerate(names)}

    def source_stats(self) -> dict[int, tuple[int, str]]:
        """Return ``{partition: (rows, digest)}`` recorded by the tasks (fast path: partition == source)."""
        acc = self.accumulators.get("sources")
        return {p: (int(s[3]), str(s[4])) for p, s in (acc.value if acc is not None else {}).items()}


def _latest_wins() -> Any:
    """Return an AccumulatorParam merging ``{source: stats}`` dicts, a later value replacing an earlier one.

    A retried or speculative task folds the same fixed offset range again and reports the same stats, so
    replacing (not adding) keeps the totals exact.
    """
    from pyspark.accumulators import AccumulatorParam

    class LatestWins(AccumulatorParam):  # type: ignore[type-arg]
        def zero(self, value: Any) -> dict[int, Any]:
            return {}

        def addInPlace(self, value1: dict[int, Any], value2: dict[int, Any]) -> dict[int, Any]:
            value1.update(value2)
            return value1

    return LatestWins()


def _stats_batch(source: int, stats: tuple[int, int, int, int, str]) -> pa.RecordBatch:
    import pyarrow as pa

    names = ["source", "records", "null_keys", "strays", "rows", "digest"]
    types = [pa.int32(), pa.int64(), pa.int64(), pa.int64(), pa.int64(), pa.string()]
    arrays = [pa.array([v], t) for v, t in zip((source, *stats), types, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, names=names)


def _home_rows(keys: list[bytes], values: list[bytes | None], keep: Any) -> tuple[int, str]:
    """Return ``(rows, digest)`` of the kept rows (``keep``: a numpy bool mask, False for tombstones)."""
    from itertools import compress

    mask = keep.tolist()
    return int(keep.sum()), digest_hex(digest_sum(compress(keys, mask), compress(values, mask)))  # type: ignore[arg-type]


def _fold_batches(ctx: ReadContext, source: int) -> Iterator[pa.RecordBatch]:
    """Fold one changelog partition with confluent-kafka and yield its rows (or its stats) as Arrow batches,
    see :class:`ReadContext`."""
    start, end = ctx.ranges[source]
    with task_reporter(ctx.progress, source) as report:
        fold = kafka_io.fold_partition(ctx.kafka_config, ctx.topic, source, start, end, ctx.timeout, report)
        if report is not None:
            report(end)  # read to its end: the last report
    keys, value_list, offset_list = fold.columns()
    fold.latest.clear()
    yield from _emit(ctx, source, keys, value_list, offset_list, (fold.records, fold.null_keys))


def _emit(
    ctx: ReadContext,
    source: int,
    keys: list[bytes],
    value_list: list[bytes | None],
    offset_list: list[int],
    counts: tuple[int, int],
) -> Iterator[pa.RecordBatch]:
    """Record one folded partition's stats and yield its rows (or its stats row), whichever reader folded it.

    :param keys: the partition's keys, each with its final value (None: a tombstone) and offset.
    :param counts: ``(records, null_keys)`` read.
    """
    import numpy as np
    import pyarrow as pa

    values = pa.array(value_list, pa.binary())
    homes = partitions_for(keys, ctx.layout)
    at_home = homes == source
    strays = len(keys) - int(at_home.sum())
    keep = at_home if values.null_count == 0 else at_home & values.is_valid().to_numpy(False)
    rows, digest = _home_rows(keys, value_list, keep) if not ctx.full else (0, EMPTY_DIGEST)
    stats = (counts[0], counts[1], strays, rows, digest)
    ctx.accumulators["sources"].add({source: stats})
    if ctx.stats_only:
        yield _stats_batch(source, stats)
        return
    if not keys:
        return
    columns = [pa.array(homes, pa.int32()), pa.array(keys, pa.binary()), values]
    columns += [pa.array(offset_list, pa.int64()), pa.array(np.full(len(keys), source, dtype=np.int32))]
    names = ["partition", "key", "value", "offset", "source"]
    if ctx.full:
        table = pa.Table.from_arrays([*columns, pa.array(at_home)], names=[*names, "at_home"])
    else:
        table = pa.Table.from_arrays(columns, names=names).filter(pa.array(keep))
    yield from table.to_batches(max_chunksize=_CHUNK)


@dataclass
class _ArrowFold:
    """One partition folded from the Kafka source's Arrow batches: key -> (value, offset), later wins."""

    latest: dict[bytes, tuple[bytes | None, int]] = field(default_factory=dict)
    records: int = 0
    null_keys: int = 0
    report: Any = None


def _fold_arrow(batch: pa.RecordBatch, fold: _ArrowFold) -> None:
    """Fold one batch of one partition (``partition, key, value, offset``, in offset order) into ``fold``."""
    import pyarrow.compute as pc

    keys = batch.column(1)
    if keys.null_count:
        fold.null_keys += keys.null_count
        batch = batch.filter(pc.is_valid(keys))
        keys = batch.column(1)
    offsets = batch.column(3).to_pylist()
    fold.latest.update(
        zip(keys.to_pylist(), zip(batch.column(2).to_pylist(), offsets, strict=True), strict=True)
    )
    fold.records += len(offsets)


def _spark_source_task(batches: Iterator[pa.RecordBatch], ctx: ReadContext) -> Iterator[pa.RecordBatch]:
    """Fold the Kafka source's batches of each partition this task holds (one, normally) and emit them."""
    import contextlib

    import pyarrow.compute as pc

    folds: dict[int, _ArrowFold] = {}
    with contextlib.ExitStack() as stack:
        for batch in batches:
            if not batch.num_rows:
                continue
            parts = batch.column(0)
            low, high = pc.min_max(parts).values()
            for part in range(low.as_py(), high.as_py() + 1):
                one = batch if low == high else batch.filter(pc.equal(parts, part))
                if not one.num_rows:
                    continue
                fold = folds.get(part)
                if fold is None:
                    fold = folds[part] = _ArrowFold()
                    fold.report = stack.enter_context(task_reporter(ctx.progress, part))
                _fold_arrow(one, fold)
                if fold.report is not None:
                    fold.report(int(one.column(3)[-1].as_py()) + 1)
        for part, fold in folds.items():
            if fold.report is not None:
                fold.report(ctx.ranges[part][1])  # read to its end: the last report
    for part, fold in sorted(folds.items()):
        keys = list(fold.latest)
        finals = list(fold.latest.values())
        fold.latest.clear()
        yield from _emit(
            ctx, part, keys, [v for v, _ in finals], [o for _, o in finals], (fold.records, fold.null_keys)
        )


def _source_frame(spark: SparkSession, ctx: ReadContext, schema: str) -> DataFrame:
    """The folded changelog through Spark's Kafka source: the empty ranges are recorded on the driver."""
    from airflow_provider_kstate.spark_apps.kafka_source import range_frame

    ranges = {p: ctx.ranges[p] for p in ctx.sources}
    empty = [p for p, (lo, hi) in ranges.items() if lo >= hi]
    if empty:
        ctx.accumulators["sources"].add({p: (0, 0, 0, 0, EMPTY_DIGEST) for p in empty})
    if len(empty) == len(ranges):
        frame = spark.createDataFrame([], schema)
        if ctx.stats_only:
            rows = [(p, 0, 0, 0, 0, EMPTY_DIGEST) for p in sorted(empty)]
            frame = spark.createDataFrame(rows, schema)
        return frame
    folded = range_frame(spark, ctx.kafka_config, ctx.topic, ranges).mapInArrow(
        lambda it: _spark_source_task(it, ctx), schema
    )
    if ctx.stats_only and empty:
        rows = [(p, 0, 0, 0, 0, EMPTY_DIGEST) for p in sorted(empty)]
        folded = folded.unionByName(spark.createDataFrame(rows, schema))
    return folded


def _changelog_task(batches: Iterator[pa.RecordBatch], ctx: ReadContext) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        for index in batch.column(0).to_pylist():
            yield from _fold_batches(ctx, ctx.sources[int(index)])


def changelog_frame(spark: SparkSession, ctx: ReadContext) -> DataFrame:
    """Return the folded changelog partitions of ``ctx`` as a DataFrame, one Spark task per partition.

    Without ``ctx.full``: live rows at home only (``partition, key, value, offset, source``); strays are
    counted, and rows and digest per partition recorded, see :meth:`ReadContext.totals` and
    :meth:`ReadContext.source_stats`. With it: every final state plus ``at_home``, to be resolved by
    :func:`resolve_strays`. With ``ctx.stats_only``: one :data:`STATS_DDL` row per source.

    :param spark: the session.
    :param ctx: the read context; its ``accumulators`` are created here when missing.
    """
    sc = spark.sparkContext
    ctx.accumulators.setdefault("sources", sc.accumulator({}, _latest_wins()))
    tasks = max(1, len(ctx.sources))
    schema = STATS_DDL if ctx.stats_only else FULL_DDL if ctx.full else FAST_DDL
    if ctx.reader == "spark":
        return _source_frame(spark, ctx, schema)
    ids = spark.range(0, len(ctx.sources), 1, tasks)
    return ids.mapInArrow(lambda it: _changelog_task(it, ctx), schema)


def changelog_stats(spark: SparkSession, ctx: ReadContext) -> dict[int, tuple[int, str]]:
    """Fold the changelog partitions of ``ctx`` and return ``{partition: (rows, digest)}`` of their live rows.

    Only the stats leave the Python workers. Valid when no key is a stray (``ctx.totals()['strays']`` is
    0 afterwards); otherwise fold with ``full`` and resolve (:func:`resolve_strays`, :func:`partition_stats`).

    :param spark: the session.
    :param ctx: the read context (``full`` False); ``stats_only`` is set here.
    """
    ctx.stats_only = True
    out = {}
    for row in changelog_frame(spark, ctx).collect():
        out[int(row["source"])] = (int(row["rows"]), str(row["digest"]))
    return out


def resolve_strays(df: DataFrame) -> DataFrame:
    """Resolve a ``full`` changelog frame to one live row per key: home records first, then highest offset.

    :param df: a frame from :func:`changelog_frame` with ``ctx.full``.
    """
    from pyspark.sql import functions as F

    winner = F.max_by(F.struct("value", "offset", "source"), F.struct("at_home", "offset")).alias("w")
    best = df.groupBy("partition", "key").agg(winner)
    return best.select(
        "partition",
        "key",
        F.col("w.value").alias("value"),
        F.col("w.offset").alias("offset"),
        F.col("w.source").alias("source"),
    ).filter(F.col("value").isNotNull())
