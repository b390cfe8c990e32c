"""A snapshot's data as Spark sees it: its Parquet rows, its files checked one by one, per-partition digests.

* :func:`snapshot_frame` - the snapshot's rows (``key, value, offset, partition``) as a DataFrame;
* :func:`snapshot_files` - its data files, each one's Parquet framing and Hadoop checksum checked, damage
  named per partition instead of failing the read;
* :func:`partition_stats` - rows and digest per partition of any frame, computed inside the JVM.

No Airflow import here.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.spark_apps.runtime import current_uri, hadoop_fs
from airflow_provider_kstate.store.digest import digest_from_halves
from airflow_provider_kstate.store.layout import framing_problem, is_version_name, partition_of
from airflow_provider_kstate.store.results import EMPTY_DIGEST
from airflow_provider_kstate.store.uri import local_path, spark_path

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

SNAPSHOT_DDL = "key binary, value binary, offset long, partition int"


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
    """Return why the file at ``path`` is not sound Parquet framing, or "" when it is.

    Two small reads through Hadoop; the verdict is :func:`~airflow_provider_kstate.store.layout.framing_problem`.
    """
    if size < 12:
        return framing_problem(b"", b"", size)
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    stream = fs.open(path)
    try:
        head = bytes(jvm.org.apache.commons.io.IOUtils.toByteArray(stream, 4))
        stream.seek(size - 8)
        tail = bytes(jvm.org.apache.commons.io.IOUtils.toByteArray(stream, 8))
    finally:
        stream.close()
    return framing_problem(head, tail, size)


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
