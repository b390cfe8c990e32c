"""Snapshots and changelogs as Spark DataFrames: :func:`load_snapshot`, and the pieces the apps share.

* :func:`load_snapshot` returns a snapshot as a DataFrame plus the offsets to resume its changelog from.
* :func:`changelog_frame` reads changelog partitions in parallel, one Spark task per partition (confluent-kafka
  ``assign()`` inside ``mapInArrow``), folds each to its latest value per key and yields Arrow batches.
* :func:`changelog_stats` folds them and returns only rows and digest per partition (no row leaves the
  Python workers); :func:`changelog_frame` records the same per-partition stats while it yields rows.
* :func:`partition_stats` computes rows and digest per partition of any frame inside the JVM (only the
  small result reaches the driver).

Placement: a snapshot with layout ``n`` keeps each key in ``partition_for(key, n)`` (its *home*). A key
whose final record sits in another changelog partition (a *stray*: after a partition increase, or a
producer not using murmur2) is resolved across partitions: a record in the key's home partition wins over
any elsewhere (it was written after the increase), otherwise the highest offset wins. The fast path reads
each partition once and only falls back to that resolution when strays exist.

No Airflow import here.
"""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.spark_apps import kafka_io
from airflow_provider_kstate.store.layout import (
    LEGACY_MESSAGE,
    POINTER_NAME,
    SnapshotUnreadable,
    SnapshotVersion,
    is_version_name,
    resolve_with,
)
from airflow_provider_kstate.store.manifest import (
    Manifest,
    ManifestError,
    digest_from_halves,
    digest_hex,
    digest_sum,
    loads_manifest,
    manifest_uri,
)
from airflow_provider_kstate.store.uri import join, local_path, spark_path

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, SparkSession

SNAPSHOT_DDL = "key binary, value binary, offset long, partition int"
FAST_DDL = "partition int, key binary, value binary, offset long, source int"
FULL_DDL = FAST_DDL + ", at_home boolean"
STATS_DDL = "source int, records long, null_keys long, strays long, rows long, digest string"
EMPTY_DIGEST = "0" * 16
_CHUNK = 100_000


# --------------------------------------------------------------------------------------------- session


def spark_session(app_name: str) -> SparkSession:
    """Return the application's SparkSession (master from spark-submit, ``local[*]`` otherwise).

    :param app_name: the Spark application name.
    """
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if "PYSPARK_GATEWAY_PORT" not in os.environ:  # not under spark-submit: no master was given
        builder = builder.master(os.environ.get("KSTATE_SPARK_MASTER", "local[*]"))
    spark = builder.config("spark.ui.enabled", "false").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


# -------------------------------------------------------------------------------------------- snapshot


def snapshot_frame(spark: SparkSession, uri: str, files: list[str] | None = None) -> DataFrame:
    """Return the snapshot's Parquet rows (``key, value, offset, partition``); empty when it has none.

    :param spark: the session.
    :param uri: the snapshot root (its current version is read, see :mod:`~airflow_provider_kstate.store.layout`)
        or a version directory.
    :param files: read only these data files (those :func:`snapshot_files` found sound); None: all.
    """
    reader = spark.read.schema(SNAPSHOT_DDL)
    if files is None:
        data = current_uri(spark, uri)
        fs, root = hadoop_fs(spark, data)
        # only the partition=N directories: a legacy root may also hold a killed rebuild's v-* leftovers
        dirs = [
            str(s.getPath().toString())
            for s in fs.listStatus(root)
            if partition_of(str(s.getPath().getName())) is not None
        ]
        if not dirs:
            return spark.createDataFrame([], SNAPSHOT_DDL)
        return reader.option("basePath", spark_path(data)).parquet(*dirs)
    if not files:
        return spark.createDataFrame([], SNAPSHOT_DDL)
    return reader.option("basePath", spark_path(current_uri(spark, uri))).parquet(*files)


#: The first and last 4 bytes of every Parquet file.
PARQUET_MAGIC = b"PAR1"


@dataclass
class SnapshotFiles:
    """A snapshot's data files after a check of each one's Parquet framing.

    :ivar good: files to read.
    :ivar damaged: ``{partition: ["file: why"]}`` for files that are not sound Parquet (truncated,
        overwritten, foreign): reported as damage to that partition instead of failing the read.
    :ivar stray: data files outside any ``partition=N`` directory (damage to the whole snapshot).
    """

    good: list[str] = field(default_factory=list)
    damaged: dict[int, list[str]] = field(default_factory=dict)
    stray: list[str] = field(default_factory=list)


def snapshot_files(spark: SparkSession, uri: str) -> SnapshotFiles:
    """List the snapshot's data files through Hadoop and check each one's Parquet framing: ``PAR1`` at
    both ends and a footer that fits (two small reads per file; hidden files ``_*``, ``.*`` are skipped).

    :param spark: the session.
    :param uri: the snapshot root.
    """
    fs, root = hadoop_fs(spark, current_uri(spark, uri))
    found = SnapshotFiles()
    if not fs.exists(root):
        return found
    listing = fs.listFiles(root, True)
    while listing.hasNext():
        status = listing.next()
        if _under_version(str(root.toString()), str(status.getPath().toString())):
            continue  # a killed rebuild's leftover beside a legacy root: not part of this snapshot
        _classify(spark, fs, status, found)
    return found


def _under_version(root: str, path: str) -> bool:
    """Whether ``path`` sits in a version directory below ``root`` (``root/v-*/...``)."""
    rel = path[len(root.rstrip("/")) :].lstrip("/") if path.startswith(root.rstrip("/")) else path
    return is_version_name(rel.split("/", 1)[0])


def _classify(spark: SparkSession, fs: Any, status: Any, found: SnapshotFiles) -> None:
    path = status.getPath()
    name = str(path.getName())
    if name.startswith(("_", ".")):
        return
    partition = partition_of(str(path.getParent().getName()))
    if partition is None:
        found.stray.append(str(path.toString()))
        return
    problem = parquet_framing_problem(spark, fs, path, int(status.getLen())) or stale_checksum_problem(
        str(path.toString())
    )
    if problem:
        found.damaged.setdefault(partition, []).append(f"{name}: {problem}")
    else:
        found.good.append(str(path.toString()))


def partition_of(directory: str) -> int | None:
    """Return N of a ``partition=N`` directory name, else None."""
    key, _, value = directory.partition("=")
    return int(value) if key == "partition" and value.isdigit() else None


def stale_checksum_problem(uri: str, chunk_cap: int = 1 << 20) -> str:
    """Return why a local file's Hadoop checksum side file (``.NAME.crc``) does not match it, or "".

    Spark on the local filesystem verifies every read against that side file; a file rewritten by another
    tool (pyarrow, a copy) leaves it stale, and the read then fails with ``ChecksumException`` for the
    whole job. Such a file is named as damage and left out of the read instead. Remote filesystems keep no
    side files: "".

    :param uri: the data file's URI.
    """
    path = local_path(uri)
    if path is None:
        return ""
    side = path.with_name(f".{path.name}.crc")
    try:
        recorded = side.read_bytes()
    except OSError:
        return ""
    if recorded[:4] != b"crc\0" or len(recorded) < 8:
        return "its checksum side file is not Hadoop's format"
    size = int.from_bytes(recorded[4:8], "big")
    if not 0 < size <= chunk_cap:
        return f"its checksum side file has a bad chunk size {size}"
    with open(path, "rb") as handle:
        sums = b"".join(
            zlib.crc32(block).to_bytes(4, "big") for block in iter(lambda: handle.read(size), b"")
        )
    if sums != recorded[8:]:
        return "rewritten outside Spark: its Hadoop checksum (.crc) is stale"
    return ""


def parquet_framing_problem(spark: SparkSession, fs: Any, path: Any, size: int) -> str:
    """Return why the file at ``path`` is not sound Parquet framing, or "" when it is."""
    if size < 12:
        return f"{size} bytes: too short for a Parquet file (truncated)"
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    stream = fs.open(path)
    try:
        head = bytes(jvm.org.apache.commons.io.IOUtils.toByteArray(stream, 4))
        stream.seek(size - 8)
        tail = bytes(jvm.org.apache.commons.io.IOUtils.toByteArray(stream, 8))
    finally:
        stream.close()
    if head != PARQUET_MAGIC or tail[4:] != PARQUET_MAGIC:
        return "not a Parquet file: no PAR1 at both ends (truncated, overwritten or foreign)"
    footer = int.from_bytes(tail[:4], "little")
    if not 0 < footer <= size - 12:
        return f"corrupt Parquet footer: length {footer} in a {size}-byte file"
    return ""


def load_snapshot(spark: SparkSession, uri: str) -> tuple[DataFrame, dict[int, int]]:
    """Return the snapshot at ``uri`` as a DataFrame and the changelog offsets to resume from.

    The manifest is read (through Hadoop, so any Spark filesystem works) and validated first
    (:class:`~.manifest.ManifestError` when it is missing, unreadable, corrupt or invalid); the offsets are
    its ``end_offset`` per partition.

    :param spark: the session.
    :param uri: the snapshot root: a local path or any filesystem URI Spark understands.
    """
    current = resolve_spark(spark, uri).uri
    manifest = read_manifest_spark(spark, current)
    return snapshot_frame(spark, current), manifest.end_offsets


def resolve_spark(spark: SparkSession, uri: str) -> SnapshotVersion:
    """Resolve the snapshot's current version through Hadoop (the pointer, else the legacy layout).

    :param spark: the session.
    :param uri: the snapshot root.
    :raises ManifestError: no snapshot, a garbled pointer or one naming a missing version.
    """

    def exists(child: str) -> bool:
        fs, path = hadoop_fs(spark, child)
        return bool(fs.exists(path))

    try:
        found = resolve_with(uri, lambda child: read_bytes(spark, child), exists)
    except SnapshotUnreadable as exc:
        raise ManifestError(str(exc)) from exc
    if found.legacy:
        to_stderr(f"kstate: {uri}: {LEGACY_MESSAGE}")
    return found


def current_uri(spark: SparkSession, uri: str) -> str:
    """Return the directory holding the data: the pointer's version when ``uri`` has a pointer, else ``uri``.

    :param spark: the session.
    :param uri: a snapshot root or a version directory.
    """
    fs, path = hadoop_fs(spark, join(uri, POINTER_NAME))
    return resolve_spark(spark, uri).uri if fs.exists(path) else uri


# --------------------------------------------------------------------------------------------- changelog


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
    """Fold one changelog partition and yield its rows (or its stats) as Arrow batches, see :class:`ReadContext`."""
    import numpy as np
    import pyarrow as pa

    start, end = ctx.ranges[source]
    fold = kafka_io.fold_partition(ctx.kafka_config, ctx.topic, source, start, end, ctx.timeout)
    keys, value_list, offset_list = fold.columns()
    fold.latest.clear()
    values = pa.array(value_list, pa.binary())
    homes = kafka_io.partitions_for(keys, ctx.layout)
    at_home = homes == source
    strays = len(keys) - int(at_home.sum())
    keep = at_home if values.null_count == 0 else at_home & values.is_valid().to_numpy(False)
    rows, digest = _home_rows(keys, value_list, keep) if not ctx.full else (0, EMPTY_DIGEST)
    stats = (fold.records, fold.null_keys, strays, rows, digest)
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
    ids = spark.range(0, len(ctx.sources), 1, tasks)
    schema = STATS_DDL if ctx.stats_only else FULL_DDL if ctx.full else FAST_DDL
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


# ------------------------------------------------------------------------------------------------ stats


def digest_columns(prefix: str = "") -> list[Column]:
    """Return the aggregate columns ``rows``, ``lo``, ``hi`` of the manifest digest (see :mod:`.manifest`).

    :param prefix: a prefix for the output column names.
    """
    from pyspark.sql import functions as F

    h = F.xxhash64("key", "value")
    return [
        F.count(F.lit(1)).alias(prefix + "rows"),
        F.sum(h.bitwiseAND(F.lit(0xFFFFFFFF))).alias(prefix + "lo"),
        F.sum(F.shiftrightunsigned(h, 32)).alias(prefix + "hi"),
    ]


def partition_stats(df: DataFrame) -> dict[int, tuple[int, str]]:
    """Return ``{partition: (rows, digest)}`` of a frame with ``partition, key, value``; only stats reach the driver.

    :param df: the rows.
    """
    out = {}
    for row in df.groupBy("partition").agg(*digest_columns()).collect():
        out[int(row["partition"])] = (int(row["rows"]), digest_from_halves(int(row["lo"]), int(row["hi"])))
    return out


def stats_or_empty(stats: Mapping[int, tuple[int, str]], partition: int) -> tuple[int, str]:
    """Return a partition's ``(rows, digest)``, with the empty digest for a partition without rows.

    :param stats: from :func:`partition_stats`.
    :param partition: the partition.
    """
    return stats.get(partition, (0, EMPTY_DIGEST))


# ------------------------------------------------------------------------------------------- filesystem


def hadoop_fs(spark: SparkSession, uri: str) -> tuple[Any, Any]:
    """Return the Hadoop ``(FileSystem, Path)`` of ``uri`` through the JVM gateway (raw for local files).

    :param spark: the session.
    :param uri: a local path or filesystem URI.
    """
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    path = jvm.org.apache.hadoop.fs.Path(spark_path(uri))
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    fs = path.getFileSystem(conf)
    if fs.getScheme() == "file":
        fs = jvm.org.apache.hadoop.fs.FileSystem.getLocal(conf).getRawFileSystem()  # no .crc side files
    return fs, path


def read_bytes(spark: SparkSession, uri: str) -> bytes | None:
    """Return a file's bytes through Hadoop (any filesystem Spark has), or None when it does not exist.

    :param spark: the session.
    :param uri: the file's path or URI.
    """
    fs, path = hadoop_fs(spark, uri)
    if not fs.exists(path):
        return None
    stream = fs.open(path)
    try:
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        return bytes(jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
    finally:
        stream.close()


def write_bytes(spark: SparkSession, uri: str, data: bytes) -> None:
    """Write (replace) a file through Hadoop.

    :param spark: the session.
    :param uri: the file's path or URI.
    :param data: the content.
    """
    fs, path = hadoop_fs(spark, uri)
    out = fs.create(path, True)
    try:
        out.write(bytearray(data))
    finally:
        out.close()


def read_manifest_spark(spark: SparkSession, uri: str) -> Manifest:
    """Read and validate a snapshot's manifest through Hadoop (so every Spark filesystem works).

    :param spark: the session.
    :param uri: the snapshot root (its current version's manifest is read) or a version directory.
    :raises ManifestError: when it is missing, unreadable, corrupt or invalid, or the pointer is bad.
    """
    where = manifest_uri(current_uri(spark, uri))
    try:
        raw = read_bytes(spark, where)
    except Exception as exc:  # noqa: BLE001 - Py4J errors: report the first line only
        raise ManifestError(f"{where}: manifest is unreadable: {first_line(exc)}") from exc
    if raw is None:
        raise ManifestError(f"{where}: manifest is missing (no snapshot here, or an unfinished one)")
    return loads_manifest(raw, where)


def write_manifest_spark(spark: SparkSession, uri: str, manifest: Manifest) -> None:
    """Write the manifest into the snapshot root through Hadoop (call it LAST).

    :param spark: the session.
    :param uri: the snapshot root.
    :param manifest: the manifest.
    """
    write_bytes(spark, manifest_uri(uri), json.dumps(manifest.to_json(), indent=2).encode())


def first_line(exc: BaseException) -> str:
    """Return a one-line description of an exception (Py4J errors carry whole Java stack traces).

    :param exc: the exception.
    """
    text = str(exc).strip()
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("An error occurred while calling"):
            return line[:500]
    return type(exc).__name__


def to_stderr(line: str) -> None:
    """Print one line on the application's stderr.

    Under ``spark-submit`` the Python driver's own stderr is merged into the launcher's stdout, so the line
    is printed by the driver JVM (``System.err``) through the already running Py4J gateway instead.

    :param line: the text (one line; never a secret).
    """
    import sys

    if os.environ.get("PYSPARK_GATEWAY_PORT"):
        try:
            from pyspark.java_gateway import launch_gateway  # connects to spark-submit's gateway

            err = launch_gateway().jvm.System.err
            err.println(line)
            err.flush()
            return
        except Exception:  # noqa: BLE001 - fall back to Python's stderr
            pass
    print(line, file=sys.stderr, flush=True)
