"""Deep-check a state snapshot against its changelog and its manifest (a PySpark application).

    spark-submit airflow_provider_kstate/spark_apps/deep_check.py --kafka-config-file CFG.json --topic T \\
        --snapshot-uri URI --report-file R.json [--sample-keys 5]

For every partition it compares three things:

* the *changelog*: the topic read with read_committed (aborted transactional records never count) from
  its log start up to the MANIFEST's end offsets, folded to the latest value per key and placed by
  ``partition_for(key, manifest.partitions)``;
* the *snapshot*: the rows and digest recomputed from the Parquet files;
* the *manifest*: the rows and digest it records.

and checks every snapshot row sits in its home partition. A snapshot built from a changelog that has since
been deleted and created again (the manifest's topic id differs from the topic's now, KIP-516) is not
compared at all: its offsets point into another log, and the report says so (the ids, ``topic_recreated``),
like the fast check. A mismatched partition is named with samples of
missing keys (in the changelog, not in the snapshot: KAFKA-7672 class), extra keys (in the snapshot only:
aborted or later writes, KAFKA-20685 class), changed values, misplaced and duplicated keys.

A *stale* manifest (the changelog has moved past its end offsets) is not an error: the snapshot is checked
as of its offsets and the lag is reported; resuming replays the rest. Caveat: if compaction has since
removed records below the end offsets that later records supersede, the fold up to the end offsets cannot
be reconstructed exactly; such partitions are flagged with that hint (a rebuild re-baselines them).

The changelog's end offsets are cross-checked with where a read_committed fetch ends before anything is
read, and a read that ends short of its bound fails: a broker whose ListOffsets and fetches disagree
cannot be checked against (exit 2, ``OffsetBoundError``), never a passed check.

While the changelog is read the driver prints a ``PROGRESS`` line every ``--progress-interval`` seconds
(see :mod:`.read_progress`); the check writes nothing next to the snapshot.

Exit code 0 when the check ran (``ok`` says whether it passed); 2 with one ``kstate-deep-check: error:``
line on stderr when it could not run.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

if __package__ in (None, ""):  # run as a script by spark-submit
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from airflow_provider_kstate.client_piece.murmur2 import partitions_for
from airflow_provider_kstate.spark_apps import kafka_io
from airflow_provider_kstate.spark_apps.changelog import (
    ReadContext,
    changelog_frame,
    changelog_stats,
    resolve_strays,
)
from airflow_provider_kstate.spark_apps.kafka_io import compaction_guard
from airflow_provider_kstate.spark_apps.kafka_source import add_reader_argument, resolve_reader
from airflow_provider_kstate.spark_apps.read_progress import DriverProgress, add_progress_argument
from airflow_provider_kstate.spark_apps.runtime import (
    first_line,
    read_manifest_spark,
    resolve_spark,
    spark_session,
    to_stderr,
)
from airflow_provider_kstate.spark_apps.snapshot_data import (
    SnapshotFiles,
    partition_stats,
    snapshot_files,
    snapshot_frame,
)
from airflow_provider_kstate.store.contract import (
    AppError,
    app_parser,
    error_code,
    fail,
    load_kafka_config,
    write_report,
)
from airflow_provider_kstate.store.digest import digest_hex, digest_sum, digest_sum_nullable
from airflow_provider_kstate.store.layout import SnapshotUnreadable, partition_of
from airflow_provider_kstate.store.manifest import Manifest, ManifestError
from airflow_provider_kstate.store.results import EMPTY_DIGEST, KINDS, CheckReport, PartitionResult, Side
from airflow_provider_kstate.store.topic_id import compare_ids, unknown_now

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

PREFIX = "kstate-deep-check"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the command line.

    :param argv: the arguments (default: ``sys.argv[1:]``).
    """
    parser = app_parser("deep_check.py", "Check a kstate snapshot against its changelog.")
    parser.add_argument("--sample-keys", type=int, default=5, help="sample keys per kind and partition")
    kafka_io.add_deviation_argument(parser)
    add_progress_argument(parser)
    add_reader_argument(parser)
    return parser.parse_args(argv)


# ------------------------------------------------------------------------------------------- ranges


def plan_ranges(
    manifest: Manifest, count: int, current: dict[int, tuple[int, int]], results: dict[int, PartitionResult]
) -> dict[int, tuple[int, int]]:
    """Return the offsets to fold per changelog partition (log start .. manifest end) and note anomalies."""
    ranges = {}
    for p, stats in sorted(manifest.partition_stats.items()):
        res = results[p]
        res.end_offset = stats.end_offset
        if p >= count:
            if stats.end_offset > 0:
                res.problems.append(
                    f"the manifest has end offset {stats.end_offset} but the topic has only {count} partitions"
                )
            continue
        low, high = current[p]
        res.lag = max(0, high - stats.end_offset)
        if high < stats.end_offset:
            res.problems.append(
                f"the changelog ends at {high}, below the manifest's end offset {stats.end_offset}: "
                "topic recreated or records deleted?"
            )
        if low > stats.start_offset:
            res.notes.append(
                f"log start moved from {stats.start_offset} to {low} since the snapshot was written"
            )
        if res.lag:
            res.notes.append(
                f"manifest is stale by {res.lag} records: checked as of offset {stats.end_offset}"
            )
        ranges[p] = (low, min(high, stats.end_offset))
    return ranges


# -------------------------------------------------------------------------------------------- sides


def _home_task(batches: Any, layout: int) -> Any:
    import pyarrow as pa

    for batch in batches:
        homes = partitions_for(batch.column("key"), layout)
        yield pa.RecordBatch.from_arrays(
            [
                batch.column("partition"),
                batch.column("key"),
                batch.column("value"),
                pa.array(homes, pa.int32()),
            ],
            names=["partition", "key", "value", "home"],
        )


def snapshot_with_home(
    spark: SparkSession, uri: str, layout: int, files: list[str] | None = None
) -> DataFrame:
    """Return the snapshot's rows with ``home`` = ``partition_for(key, layout)`` (vectorized murmur2)."""
    rows = snapshot_frame(spark, uri, files).select("partition", "key", "value")
    return rows.mapInArrow(
        lambda it: _home_task(it, layout), "partition int, key binary, value binary, home int"
    )


SNAPSHOT_STATS_DDL = "partition int, rows long, digest string, misplaced long"


def _batch_stats(batch: Any, layout: int) -> dict[int, list[int]]:
    """Return ``{partition: [rows, digest sum, misplaced]}`` of one Arrow batch of snapshot rows.

    :param batch: rows with ``partition, key, value``.
    :param layout: the snapshot's partition count (a row is misplaced when its key's home differs).
    """
    import numpy as np
    import pyarrow.compute as pc

    out: dict[int, list[int]] = {}
    parts = batch.column("partition")
    homes = partitions_for(batch.column("key"), layout)
    for part in pc.unique(parts).to_pylist():
        mask = pc.equal(parts, part) if part is not None else pc.is_null(parts)
        rows = batch.filter(mask)
        keys, values = rows.column("key"), rows.column("value")
        key_list, value_list = keys.to_pylist(), values.to_pylist()
        nullable = keys.null_count or values.null_count
        digest = (digest_sum_nullable if nullable else digest_sum)(key_list, value_list)
        misplaced = int(np.count_nonzero(homes[mask.to_numpy(zero_copy_only=False)] != part))
        out[part] = [len(rows), digest, misplaced]
    return out


def _add_stats(totals: dict[int, list[int]], part: int, rows: int, digest: int, misplaced: int) -> None:
    """Add one partial ``(rows, digest, misplaced)`` of ``part`` into ``totals`` (digests are sums: the
    modulo 2**64 is taken by :func:`digest_hex` at the end)."""
    acc = totals.setdefault(part, [0, 0, 0])
    acc[0] += rows
    acc[1] += digest
    acc[2] += misplaced


def _snapshot_stats_task(batches: Any, layout: int) -> Any:
    """Yield one :data:`SNAPSHOT_STATS_DDL` batch with the stats of every partition this task saw.

    :param batches: the task's snapshot rows (``partition, key, value``) as Arrow batches.
    :param layout: the snapshot's partition count.
    """
    import pyarrow as pa

    totals: dict[int, list[int]] = {}
    for batch in batches:
        for part, stats in _batch_stats(batch, layout).items():
            _add_stats(totals, part, *stats)
    parts = list(totals)
    yield pa.RecordBatch.from_arrays(
        [
            pa.array(parts, pa.int32()),
            pa.array([totals[p][0] for p in parts], pa.int64()),
            pa.array([digest_hex(totals[p][1]) for p in parts], pa.string()),
            pa.array([totals[p][2] for p in parts], pa.int64()),
        ],
        names=["partition", "rows", "digest", "misplaced"],
    )


def snapshot_stats(
    spark: SparkSession, uri: str, layout: int, files: list[str] | None = None
) -> dict[int, tuple[int, str, int]]:
    """Return ``{partition: (rows, digest, misplaced rows)}`` of the snapshot's Parquet files.

    One pass, one Spark stage: each task hashes its rows where it reads them (Python workers: murmur2
    placement, xxhash64 digest) and only per-partition partial stats reach the driver, which adds them up
    (a partition's files may be split over several tasks; digests are sums, so the parts add up exactly).

    :param spark: the session.
    :param uri: the snapshot root.
    :param layout: the snapshot's partition count.
    :param files: the sound data files to read (None: all).
    """
    rows = snapshot_frame(spark, uri, files).select("partition", "key", "value")
    partial = rows.mapInArrow(lambda it: _snapshot_stats_task(it, layout), SNAPSHOT_STATS_DDL)
    totals: dict[int, list[int]] = {}
    for r in partial.collect():
        _add_stats(totals, int(r["partition"]), int(r["rows"]), int(r["digest"], 16), int(r["misplaced"]))
    return {p: (rows_, digest_hex(digest), misplaced) for p, (rows_, digest, misplaced) in totals.items()}


@dataclass
class Truth:
    """How the changelog side was read, to re-read it for details."""

    ctx: ReadContext
    stats: dict[int, tuple[int, str]]
    records: int
    progress: DriverProgress = field(default_factory=DriverProgress.off)


def changelog_truth(
    spark: SparkSession,
    kafka_config: dict[str, Any],
    topic: str,
    ranges: dict[int, tuple[int, int]],
    layout: int,
    timeout: float,
    progress: DriverProgress | None = None,
    reader: str = "confluent",
) -> Truth:
    """Fold the changelog up to the manifest's offsets and return its stats per partition.

    :param progress: reports the reads (none when None).
    :param reader: ``confluent`` or ``spark`` (see :class:`~.changelog.ReadContext`).
    """
    progress = progress or DriverProgress.off()
    sources = sorted(ranges)
    ctx = ReadContext(kafka_config, topic, sources, ranges, layout, timeout=timeout, reader=reader)
    with progress.reading():
        progress.attach(ctx)
        stats = changelog_stats(spark, ctx)  # only rows and digests leave the Python workers
    if ctx.totals()["strays"]:
        ctx = ReadContext(
            kafka_config, topic, sources, ranges, layout, full=True, timeout=timeout, reader=reader
        )
        with progress.reading("resolving strays"):
            progress.attach(ctx)
            stats = partition_stats(resolve_strays(changelog_frame(spark, ctx)))
    return Truth(ctx, stats, ctx.totals()["records"], progress)


def truth_frame(spark: SparkSession, truth: Truth, partitions: list[int]) -> DataFrame:
    """Return the changelog's live rows of ``partitions`` again (re-read: only mismatched partitions)."""
    from pyspark.sql import functions as F

    base = truth.ctx
    if base.full:
        ctx = ReadContext(
            base.kafka_config,
            base.topic,
            base.sources,
            base.ranges,
            base.layout,
            True,
            base.timeout,
            reader=base.reader,
        )
        truth.progress.attach(ctx)
        df = resolve_strays(changelog_frame(spark, ctx))
    else:
        sources = [p for p in partitions if p in base.ranges]
        ctx = ReadContext(
            base.kafka_config,
            base.topic,
            sources,
            base.ranges,
            base.layout,
            False,
            base.timeout,
            reader=base.reader,
        )
        truth.progress.attach(ctx)
        df = changelog_frame(spark, ctx)
    return df.filter(F.col("partition").isin(partitions)).select(
        "partition", "key", F.col("value").alias("cv")
    )


# ------------------------------------------------------------------------------------------- details


def differences(
    spark: SparkSession,
    uri: str,
    truth: Truth,
    layout: int,
    partitions: list[int],
    files: list[str] | None = None,
) -> DataFrame:
    """Return ``partition, key, kind`` for every differing row of ``partitions`` (kinds: :data:`KINDS`)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    snap = snapshot_with_home(spark, uri, layout, files).filter(F.col("partition").isin(partitions))
    snap = snap.withColumn("copies", F.count(F.lit(1)).over(Window.partitionBy("partition", "key")))
    joined = truth_frame(spark, truth, partitions).join(
        snap.withColumnRenamed("value", "sv"), ["partition", "key"], "full_outer"
    )
    kinds = F.array_compact(
        F.array(
            F.when(F.col("sv").isNull(), F.lit("missing")),
            F.when(F.col("cv").isNull(), F.lit("extra")),
            F.when(F.col("cv") != F.col("sv"), F.lit("changed")),
            F.when(F.col("home") != F.col("partition"), F.lit("misplaced")),
            F.when(F.col("copies") > 1, F.lit("duplicated")),
        )
    )
    return joined.select("partition", "key", F.explode(kinds).alias("kind")).dropDuplicates(
        ["partition", "key", "kind"]
    )


def add_details(
    spark: SparkSession,
    uri: str,
    truth: Truth,
    layout: int,
    results: dict[int, PartitionResult],
    sample: int,
    files: list[str] | None = None,
) -> None:
    """Fill counts and sample keys of the partitions whose sides differ (one Spark job over just those)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    bad = sorted(p for p, r in results.items() if r.needs_detail)
    if not bad:
        return
    with truth.progress.reading("details of mismatched partitions"):
        diff = differences(spark, uri, truth, layout, bad, files)
        group = Window.partitionBy("partition", "kind")
        ranked = diff.withColumn("n", F.count(F.lit(1)).over(group)).withColumn(
            "rank", F.row_number().over(group.orderBy("key"))
        )
        found = ranked.filter(F.col("rank") <= max(sample, 1)).collect()
    for row in found:
        res = results[int(row["partition"])]
        res.counts[row["kind"]] = int(row["n"])
        if int(row["rank"]) <= sample:
            res.samples[row["kind"]].append(repr(bytes(row["key"])))
    for res in (results[p] for p in bad):
        described = ", ".join(f"{res.counts[k]} {k}" for k in KINDS if res.counts.get(k))
        if described:
            res.problems.append(f"row differences: {described}")


# ------------------------------------------------------------------------------------------- compare


def compare(res: PartitionResult, layout: int, compacted: bool) -> None:
    """Add the problems of one partition from its three sides."""
    p = res.partition
    if p >= layout and res.snapshot.rows:
        res.problems.append(f"the snapshot has rows in partition {p}, outside the manifest's 0..{layout - 1}")
    if (res.changelog.rows, res.changelog.digest) != (res.snapshot.rows, res.snapshot.digest):
        hint = ""
        if res.lag and compacted:
            hint = " (the changelog moved on since the manifest; if compaction ran since, rebuild to re-baseline)"
        res.problems.append(
            f"snapshot ({res.snapshot}) differs from the changelog folded to offset {res.end_offset} ({res.changelog}){hint}"
        )
    man = res.manifest
    if man is not None and (man.rows, man.digest) != (res.snapshot.rows, res.snapshot.digest):
        res.problems.append(
            f"snapshot ({res.snapshot}) differs from its manifest entry ({man}): files changed after it was written"
        )
    if man is not None and (man.rows, man.digest) != (res.changelog.rows, res.changelog.digest):
        res.problems.append(
            f"manifest entry ({man}) differs from the changelog folded to its end offset ({res.changelog})"
        )
    if res.misplaced:
        res.problems.append(
            f"{res.misplaced} rows sit outside their home partition (murmur2(key) % {layout} != {p})"
        )


def damage(results: dict[int, PartitionResult], files: SnapshotFiles) -> None:
    """Name each unsound data file as damage to its partition (its rows were not read)."""
    for p, reasons in sorted(files.damaged.items()):
        res = results.setdefault(p, PartitionResult(p))
        res.problems.extend(f"unreadable data file {reason}" for reason in reasons)


def build_results(manifest: Manifest, snap: dict[int, tuple[int, str, int]]) -> dict[int, PartitionResult]:
    """Create one result per partition named anywhere: manifest or snapshot files."""
    results = {}
    for p in sorted(set(manifest.partition_stats) | set(snap)):
        res = PartitionResult(p)
        stats = manifest.partition_stats.get(p)
        if stats is not None:
            res.manifest = Side(stats.rows, stats.digest)
        if p in snap:
            rows, digest, misplaced = snap[p]
            res.snapshot, res.misplaced = Side(rows, digest), misplaced
        results[p] = res
    return results


def unusable(
    args: argparse.Namespace, version: str | None, problem: str, warnings: list[str], **identity: Any
) -> CheckReport:
    """Return the report of a snapshot that cannot be checked at all (no, a garbled, or another topic's
    manifest, or one built from a changelog since deleted and created again): damage to the whole snapshot,
    which ``rebuild=auto`` rebuilds in full.

    :param identity: the report's ``topic_id``, ``snapshot_topic_id`` and ``topic_recreated``.
    """
    return CheckReport(
        ok=False,
        snapshot_ok=False,
        topic=args.topic,
        **identity,
        snapshot_uri=args.snapshot_uri,
        snapshot_version=version,
        layout=None,
        records_read=0,
        failed_partitions=[],
        problems=[problem],
        partitions={},
        warnings=warnings,
    )


def readable_stats(
    spark: SparkSession, uri: str, layout: int, files: SnapshotFiles
) -> dict[int, tuple[int, str, int]]:
    """Return :func:`snapshot_stats` of the sound files; when a file that passed the framing check still
    fails to read (a Hadoop or Parquet error), read the files one by one and move each one that fails to
    ``files.damaged`` under its partition, so the failure is damage to that partition, never a crash."""
    try:
        return snapshot_stats(spark, uri, layout, files.good)
    except Exception:  # noqa: BLE001 - find the file(s) below
        pass
    for path in list(files.good):
        try:
            snapshot_stats(spark, uri, layout, [path])
        except Exception as exc:  # noqa: BLE001 - Py4J/Hadoop/Parquet errors of one file
            files.good.remove(path)
            name, folder = PurePosixPath(path).name, PurePosixPath(path).parent.name
            partition = partition_of(folder)
            if partition is None:
                files.stray.append(path)
            else:
                files.damaged.setdefault(partition, []).append(
                    f"{name}: unreadable ({type(exc).__name__}: {first_line(exc)})"
                )
    return snapshot_stats(spark, uri, layout, files.good)


def check(
    spark: SparkSession,
    args: argparse.Namespace,
    kafka_config: dict[str, Any],
    count: int,
    progress: DriverProgress | None = None,
) -> CheckReport:
    """Run the deep check and return the report (without ``seconds``).

    :param progress: reports the changelog reads (none when None).
    """
    topic_id = kafka_io.topic_id(kafka_config, args.topic)  # before the offsets: they are of this id's log
    warnings = compaction_guard(kafka_config, args.topic, args.allow_non_compacted)  # refuse before reading
    try:
        resolved = resolve_spark(spark, args.snapshot_uri)  # the pointer's version, or the legacy root
        data = resolved.uri
        manifest = read_manifest_spark(spark, data)
    except (ManifestError, SnapshotUnreadable) as exc:
        warnings += [] if topic_id else [unknown_now(args.topic)]
        return unusable(args, None, f"the snapshot is unusable: {exc}", warnings, topic_id=topic_id or None)
    if manifest.topic != args.topic:
        return unusable(
            args,
            resolved.version,
            f"the snapshot at {args.snapshot_uri} is of topic {manifest.topic!r}, not {args.topic!r}",
            warnings,
            topic_id=topic_id or None,
        )
    identity = compare_ids(
        args.topic, manifest.topic_id, topic_id, "the snapshot's manifest", manifest.written_at
    )
    warnings += identity.warnings
    ids: dict[str, Any] = {
        "topic_id": topic_id or None,
        "snapshot_topic_id": identity.recorded or None,
        "topic_recreated": identity.recreated,
    }
    if identity.problem:  # its offsets point into another log: nothing to compare row by row
        return unusable(args, resolved.version, identity.problem, warnings, **ids)
    layout = manifest.partitions
    files = snapshot_files(spark, data)
    snap = readable_stats(spark, data, layout, files)
    results = build_results(manifest, snap)
    in_topic = [p for p in manifest.partition_stats if p < count]
    current = kafka_io.checked_offsets(  # refused when a fetch disagrees with them
        kafka_config,
        args.topic,
        in_topic,
        accept_fetch_ends=kafka_io.accepts_fetch_ends(args),
        warnings=warnings,
    )
    ranges = plan_ranges(manifest, count, current, results)
    reader = resolve_reader(spark, args, kafka_config, lambda line: to_stderr(f"{PREFIX}: {line}"))
    truth = changelog_truth(spark, kafka_config, args.topic, ranges, layout, args.timeout, progress, reader)
    for p, res in results.items():
        rows, digest = truth.stats.get(p, (0, EMPTY_DIGEST))
        res.changelog = Side(rows, digest)
        compare(res, layout, not warnings)
    add_details(spark, data, truth, layout, results, args.sample_keys, files.good)
    damage(results, files)
    bad = sorted(p for p, r in results.items() if r.problems)
    problems = [f"a data file outside any partition directory: {path}" for path in files.stray]
    return CheckReport(
        ok=not bad and not problems,
        topic=args.topic,
        **ids,
        snapshot_uri=args.snapshot_uri,
        snapshot_version=resolved.version,
        layout=layout,
        records_read=truth.records,
        failed_partitions=bad,
        problems=problems,
        partitions={p: r.to_entry() for p, r in results.items()},
        warnings=warnings,
    )


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``spark-submit deep_check.py``; returns the exit code (0 when the check ran)."""
    args = parse_args(argv)
    try:
        kafka_config = load_kafka_config(args.kafka_config_file)
        count = kafka_io.topic_partition_count(kafka_config, args.topic)
        spark = spark_session("kstate-deep-check")
        progress = DriverProgress.for_spark(spark, "deep check", args.topic, args.progress_interval)
        started = time.monotonic()  # records/s measure the job's work, not JVM start-up
        try:
            report = check(spark, args, kafka_config, count, progress)
        finally:
            progress.close()
    except (
        AppError,
        ManifestError,
        kafka_io.KafkaReadError,
        kafka_io.OffsetBoundError,
        kafka_io.NotCompactedError,
    ) as exc:
        return fail(args.report_file, str(exc), to_stderr, PREFIX, error_code(exc))
    except Exception as exc:  # noqa: BLE001 - Spark/Py4J errors: one line, not a stack trace
        message = f"{type(exc).__name__}: {first_line(exc)}"
        return fail(args.report_file, message, to_stderr, PREFIX, error_code(exc))
    report = report.model_copy(update={"seconds": round(time.monotonic() - started, 3)})
    write_report(args.report_file, report)
    verdict = "ok" if report.ok else f"MISMATCH in partitions {report.failed_partitions}"
    print(f"{PREFIX}: {verdict}: {report.records_read} records checked in {report.seconds}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
