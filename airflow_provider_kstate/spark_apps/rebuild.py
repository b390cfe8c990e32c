"""Rebuild a state snapshot from its compacted changelog topic (a PySpark application).

    spark-submit airflow_provider_kstate/spark_apps/rebuild.py --kafka-config-file CFG.json --topic T \\
        --snapshot-uri URI --report-file R.json [--partitions N] [--only-partitions 0,3] [--keep-versions 3]

1. Capture every changelog partition's log start and last stable offset (driver, one ListOffsets), and
   cross-check each end with where a read_committed fetch from just below it ends: a broker whose
   ListOffsets disagrees with its fetches is refused before anything is read (``OffsetBoundError``).
2. Read the partitions in parallel, one Spark task each (confluent-kafka ``assign()``, read_committed), fold
   to the latest value per key (tombstones delete) and place each key in ``partition_for(key, N)``; N is
   ``--partitions`` (a re-key after a partition increase) or the topic's partition count.
3. Write Parquet (hive-partitioned by ``partition``) straight into a new immutable version directory
   ``URI/v-<UTC ts>-<hex>/``, compute rows and digest per partition from what was written, write its
   manifest, then commit: write the pointer ``URI/_kstate_current.json`` naming it (one small atomic write,
   see ``docs/snapshot-layout.md``). A crash at any point before that leaves the previous version current.
4. After the commit, remove versions beyond ``--keep-versions`` (never the current one), a killed rebuild's
   leftovers, the legacy layout's files (migrated) and old ``URI.staging-*`` / ``URI.previous`` siblings.

While the changelog is read the driver prints a ``PROGRESS`` line every ``--progress-interval`` seconds and
keeps the same numbers in ``URI/_kstate_progress.json`` (see :mod:`.read_progress`), which says ``done`` (with
the version) once the version is committed, or ``failed``.

The changelog's topic id (KIP-516) is read before its offsets and recorded next to its name in the manifest,
the pointer, the report and the progress document; it is read again before the commit, and a changelog
deleted and created again meanwhile is refused (nothing committed). ``--only-partitions`` refuses a current
snapshot built from another incarnation of the topic (its partitions carried over would hold another log's
state): run a full rebuild. An id that cannot be read is a warning of the report.

``--only-partitions`` rebuilds just those partitions (layout unchanged) and carries the others' data and
offsets over from the current version. On bad input the app exits 2 with one ``kstate-rebuild: error:``
line on stderr and the current snapshot untouched. CFG.json holds secrets: it is never printed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if __package__ in (None, ""):  # run as a script by spark-submit
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from airflow_provider_kstate.spark_apps import APP_VERSION, kafka_io
from airflow_provider_kstate.spark_apps.changelog import ReadContext, changelog_frame, resolve_strays
from airflow_provider_kstate.spark_apps.kafka_io import compaction_guard
from airflow_provider_kstate.spark_apps.kafka_source import add_reader_argument, resolve_reader
from airflow_provider_kstate.spark_apps.read_progress import (
    PROGRESS_NAME,
    DriverProgress,
    ProgressDocument,
    add_progress_argument,
)
from airflow_provider_kstate.spark_apps.runtime import (
    current_uri,
    first_line,
    hadoop_fs,
    read_bytes,
    read_manifest_spark,
    spark_session,
    to_stderr,
    write_bytes,
    write_manifest_spark,
)
from airflow_provider_kstate.spark_apps.snapshot_data import partition_stats, snapshot_frame, stats_or_empty
from airflow_provider_kstate.store import layout as layouts
from airflow_provider_kstate.store import uri as uris
from airflow_provider_kstate.store.contract import (
    AppError,
    app_parser,
    error_code,
    fail,
    load_kafka_config,
    write_report,
)
from airflow_provider_kstate.store.manifest import Manifest, ManifestError, PartitionStats, utc_now
from airflow_provider_kstate.store.results import RebuildReport
from airflow_provider_kstate.store.topic_id import compare_ids, unknown_now
from airflow_provider_kstate.store.uri import join, spark_path

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

APP = "airflow_provider_kstate.spark_apps.rebuild"
PREFIX = "kstate-rebuild"
#: Parquet row-group size: the writer buffers one row group per open file, so a bound keeps executor
#: memory flat however large a partition grows (Parquet's default is 128 MiB).
ROW_GROUP_BYTES = 16 * 1024 * 1024


def failpoint(name: str) -> None:
    """Crash tests: SIGKILL the driver at ``name`` when ``KSTATE_FAILPOINT_FILE`` arms it (see
    :mod:`airflow_provider_kstate.failpoints`; imported only then, it is not shipped to clusters)."""
    if os.environ.get("KSTATE_FAILPOINT_FILE"):
        from airflow_provider_kstate.failpoints import failpoint as fire

        fire(name)


class RebuildError(AppError):
    """Bad input: the app stops before touching the current snapshot."""


@dataclass
class RebuildPlan:
    """What to rebuild, decided on the driver before any data is read."""

    topic: str
    uri: str
    kafka_config: dict[str, Any]
    topic_partitions: int
    layout: int
    only: list[int] | None
    offsets: dict[int, tuple[int, int]]
    current: Manifest | None = None
    keep: int = layouts.DEFAULT_KEEP_VERSIONS
    source: str | None = None
    warnings: list[str] = field(default_factory=list)
    progress: DriverProgress = field(default_factory=DriverProgress.off)
    #: ``confluent`` or ``spark`` (see :class:`~.changelog.ReadContext`), decided once the session is up.
    reader: str = "confluent"
    #: The changelog's topic id (KIP-516) when the offsets were taken (``""``: it cannot be read).
    topic_id: str = ""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the command line.

    :param argv: the arguments (default: ``sys.argv[1:]``).
    """
    parser = app_parser("rebuild.py", "Rebuild a kstate snapshot from its changelog.")
    parser.add_argument("--partitions", type=int, default=None, help="re-key to this partition count")
    parser.add_argument("--only-partitions", default=None, help="comma-separated partitions to rebuild")
    parser.add_argument(
        "--keep-versions", type=int, default=layouts.DEFAULT_KEEP_VERSIONS, help="versions to keep (>= 1)"
    )
    kafka_io.add_deviation_argument(parser)
    add_progress_argument(parser)
    add_reader_argument(parser)
    return parser.parse_args(argv)


def parse_only(text: str | None, layout: int) -> list[int] | None:
    """Parse ``--only-partitions``.

    :param text: ``"0,3"`` or None.
    :param layout: the partition count the values must be below.
    """
    if text is None:
        return None
    try:
        parts = sorted({int(p) for p in text.split(",") if p.strip()})
    except ValueError as exc:
        raise RebuildError(f"--only-partitions must be comma-separated integers, got {text!r}") from exc
    bad = [p for p in parts if not 0 <= p < layout]
    if not parts or bad:
        raise RebuildError(f"--only-partitions {text!r}: partitions must be within 0..{layout - 1}")
    return parts


def make_plan(args: argparse.Namespace) -> RebuildPlan:
    """Check the inputs against the cluster and decide partitions, layout and offsets (no Spark yet).

    :param args: the parsed command line.
    """
    conf = load_kafka_config(args.kafka_config_file)
    count = kafka_io.topic_partition_count(conf, args.topic)
    layout = args.partitions or count
    if layout < count:
        raise RebuildError(
            f"--partitions {layout} is below the topic's {count} partitions: Kafka cannot shrink"
        )
    only = parse_only(args.only_partitions, layout)
    if only is not None and layout != count:
        raise RebuildError(
            f"--only-partitions needs the layout unchanged, but --partitions {layout} differs from the topic's {count}"
        )
    if args.keep_versions < 1:
        raise RebuildError(f"--keep-versions must be at least 1, got {args.keep_versions}")
    sources = only if only is not None else list(range(count))
    plan = RebuildPlan(args.topic, args.snapshot_uri, conf, count, layout, only, {}, keep=args.keep_versions)
    plan.topic_id = kafka_io.topic_id(conf, args.topic)  # before the offsets: they are of this id's log
    plan.warnings = compaction_guard(conf, args.topic, args.allow_non_compacted)
    if not plan.topic_id:
        plan.warnings.append(unknown_now(args.topic))
    plan.offsets = kafka_io.checked_offsets(  # refused when a fetch disagrees with them
        conf, args.topic, sources, accept_fetch_ends=kafka_io.accepts_fetch_ends(args), warnings=plan.warnings
    )
    return plan


def check_current(spark: SparkSession, plan: RebuildPlan) -> None:
    """For ``--only-partitions``: load the current snapshot's manifest and check it matches the layout."""
    if plan.only is None:
        return
    plan.source = current_uri(spark, plan.uri)  # the current version, fixed for the whole run
    current = read_manifest_spark(spark, plan.source)
    if current.topic != plan.topic or current.partitions != plan.layout:
        raise RebuildError(
            f"--only-partitions: the current snapshot is of {current.topic!r} with {current.partitions} partitions, "
            f"not {plan.topic!r} with {plan.layout}: run a full rebuild"
        )
    identity = compare_ids(
        plan.topic, current.topic_id, plan.topic_id, "the current snapshot", current.written_at
    )
    if identity.problem:  # the partitions carried over hold another log's state
        raise RebuildError(f"--only-partitions: {identity.problem}: run a full rebuild")
    plan.current = current


def check_same_topic(plan: RebuildPlan) -> None:
    """Before the commit: refuse when the changelog was deleted and created again while it was read (its id
    changed since :func:`make_plan` took the offsets), so no version mixes two logs."""
    if not plan.topic_id:
        return
    now = kafka_io.topic_id(plan.kafka_config, plan.topic)
    identity = compare_ids(plan.topic, plan.topic_id, now, "this rebuild's read")
    if identity.problem:
        raise RebuildError(f"{identity.problem}; nothing was committed: run the rebuild again")


def check_target(spark: SparkSession, uri: str) -> None:
    """Fail early when Spark has no filesystem for the snapshot URI, or a local parent folder is missing."""
    try:
        hadoop_fs(spark, uri)
    except Exception as exc:  # noqa: BLE001 - Py4J: unsupported scheme, bad authority, no credentials
        raise RebuildError(f"snapshot URI {uri} is not usable: {first_line(exc)}") from exc
    root = uris.local_path(uri)
    if root is not None:
        parent = os.path.dirname(os.path.abspath(str(root).rstrip("/")))
        if not os.path.isdir(parent):
            raise RebuildError(f"snapshot URI {uri}: the parent folder {parent} does not exist")


def _read_rows(spark: SparkSession, plan: RebuildPlan, full: bool) -> tuple[DataFrame, ReadContext]:
    sources = sorted(plan.offsets)
    ctx = ReadContext(
        plan.kafka_config, plan.topic, sources, dict(plan.offsets), plan.layout, full=full, reader=plan.reader
    )
    plan.progress.attach(ctx)  # before the frame: its tasks report their position to the driver
    df = changelog_frame(spark, ctx)
    if full:
        df = resolve_strays(df)
    rows = df.select("key", "value", "offset", "partition")
    if plan.only is not None:
        from pyspark.sql import functions as F

        rows = rows.filter(F.col("partition").isin(plan.only))
        kept = snapshot_frame(spark, plan.source or plan.uri).filter(~F.col("partition").isin(plan.only))
        rows = rows.unionByName(kept)
    return rows, ctx


def _write_staging(rows: DataFrame, staging: str) -> None:
    """Write rows hive-partitioned by ``partition`` to ``staging`` (replacing it), row groups bounded."""
    rows.write.mode("overwrite").option("parquet.block.size", ROW_GROUP_BYTES).partitionBy(
        "partition"
    ).parquet(spark_path(staging))


def write_rows(
    spark: SparkSession, plan: RebuildPlan, staging: str
) -> tuple[int, dict[int, tuple[int, str]] | None]:
    """Write the snapshot's rows to ``staging``.

    One pass in the usual case; a second, resolving pass when keys sit outside their home partition.

    :returns: the number of changelog records read, and ``{partition: (rows, digest)}`` when the tasks
        that wrote the rows could compute it (a full single pass), else None (then computed from staging).
    """
    full = plan.layout != plan.topic_partitions
    with plan.progress.reading():
        rows, ctx = _read_rows(spark, plan, full)
        _write_staging(rows, staging)
    totals = ctx.totals()
    strays = totals["strays"]
    stats = ctx.source_stats() if not full and not strays and plan.only is None else None
    if not full and strays:
        plan.warnings.append(
            f"{strays} keys sit outside their murmur2 home partition: resolved across partitions"
        )
        with plan.progress.reading("resolving strays"):
            rows, ctx = _read_rows(spark, plan, True)
            _write_staging(rows, staging)
    if plan.only is not None and strays:
        plan.warnings.append(
            "--only-partitions cannot resolve keys stored in unselected partitions: run a full rebuild"
        )
    if totals["null_keys"]:
        plan.warnings.append(f"{totals['null_keys']} records without a key were skipped")
    return totals["records"], stats


def data_files(spark: SparkSession, uri: str) -> dict[int, dict[str, int]]:
    """Return ``{partition: {file name: size}}`` of the data files under ``partition=N`` directories of
    ``uri`` (hidden files ``_*``, ``.*`` skipped), recorded in the manifest for the fast check.

    :param spark: the session.
    :param uri: the staged snapshot.
    """
    fs, root = hadoop_fs(spark, uri)
    found: dict[int, dict[str, int]] = {}
    if not fs.exists(root):
        return found
    listing = fs.listFiles(root, True)
    while listing.hasNext():
        status = listing.next()
        path = status.getPath()
        name, parent = str(path.getName()), str(path.getParent().getName())
        key, _, value = parent.partition("=")
        if key == "partition" and value.isdigit() and not name.startswith(("_", ".")):
            found.setdefault(int(value), {})[name] = int(status.getLen())
    return found


def build_manifest(
    plan: RebuildPlan,
    stats: dict[int, tuple[int, str]],
    spark_version: str,
    files: dict[int, dict[str, int]] | None = None,
) -> Manifest:
    """Return the manifest of the staged snapshot: offsets from the plan (or the carried-over manifest).

    :param files: the staged data files per partition (:func:`data_files`); None records none.
    """
    entries = {}
    for p in range(plan.layout):
        rows, digest = stats_or_empty(stats, p)
        if plan.only is not None and p not in plan.only and plan.current is not None:
            old = plan.current.partition_stats[p]
            if (old.rows, old.digest) != (rows, digest):
                plan.warnings.append(f"partition {p}: carried-over data differs from its old manifest entry")
            start, end = old.start_offset, old.end_offset
        else:
            start, end = plan.offsets.get(p, (0, 0))
        entries[p] = PartitionStats(start, end, rows, digest, None if files is None else files.get(p, {}))
    extra = set(stats) - set(range(plan.layout))
    if extra:
        raise RebuildError(
            f"rows landed in partitions {sorted(extra)} outside the layout 0..{plan.layout - 1}"
        )
    writer = {"app": APP, "version": APP_VERSION, "spark": spark_version}
    return Manifest(
        topic=plan.topic,
        topic_id=plan.topic_id or None,
        partitions=plan.layout,
        partition_stats=entries,
        written_at=utc_now(),
        writer=writer,
    )


def _names(spark: SparkSession, uri: str) -> list[str]:
    """Return the names of the entries directly under ``uri`` (empty when it does not exist or cannot be
    listed: the clean-up after a commit is best effort, the next rebuild tries again)."""
    try:
        fs, path = hadoop_fs(spark, uri)
        if not fs.exists(path):
            return []
        return [str(status.getPath().getName()) for status in fs.listStatus(path)]
    except Exception as exc:  # noqa: BLE001 - e.g. a bucket root has no listable parent
        to_stderr(f"{PREFIX}: warning: cannot list {uri} for clean-up: {first_line(exc)}")
        return []


def write_pointer(spark: SparkSession, root: str, data: bytes) -> None:
    """Write the pointer atomically: the commit of a version (see ``docs/snapshot-layout.md``)."""
    replace_file(spark, layouts.pointer_uri(root), data)


def replace_file(spark: SparkSession, target: str, data: bytes, durable: bool = True) -> None:
    """Replace a small file atomically: readers see the old content or the new, never a part.

    Local disk: a temporary file beside it (fsync'ed when ``durable``), then ``os.replace``. HDFS: a
    temporary file, then an atomic rename with overwrite. Object stores (S3A, GCS, ABFS): one small object
    written in one ``create``; it appears whole on ``close``.
    """
    local = uris.local_path(target)
    if local is not None:
        temp = f"{local}.tmp-{os.getpid()}"
        with open(temp, "wb") as handle:
            handle.write(data)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.replace(temp, str(local))
        return
    fs, _ = hadoop_fs(spark, target)
    if str(fs.getScheme()) == "hdfs":
        rename_into_place(spark, target, data)
    else:
        write_bytes(spark, target, data)


def rename_into_place(spark: SparkSession, target: str, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``target``, then rename it over ``target`` atomically.

    ``FileContext.rename`` with ``OVERWRITE`` is one NameNode operation on HDFS (``FileSystem.rename``
    refuses an existing destination, and delete-then-rename leaves a gap with no pointer).
    """
    temp = f"{target}.tmp-{os.getpid()}"
    write_bytes(spark, temp, data)
    fs, path = hadoop_fs(spark, target)
    _, temp_path = hadoop_fs(spark, temp)
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    gateway = spark.sparkContext._gateway
    assert gateway is not None
    options = gateway.new_array(jvm.org.apache.hadoop.fs.Options.Rename, 1)
    options[0] = jvm.org.apache.hadoop.fs.Options.Rename.OVERWRITE
    context = jvm.org.apache.hadoop.fs.FileContext.getFileContext(fs.getUri(), fs.getConf())
    context.rename(temp_path, path, options)


def progress_publisher(spark: SparkSession, root: str) -> Any:
    """Return the ``publish`` of the rebuild's :class:`~.read_progress.DriverProgress`: it replaces
    ``root/_kstate_progress.json`` with each document (the snapshot root is created when missing)."""
    target = join(root, PROGRESS_NAME)
    local = uris.local_path(root)

    def publish(doc: ProgressDocument) -> None:
        try:
            if local is not None:
                os.makedirs(str(local), exist_ok=True)
            replace_file(spark, target, doc.to_json(indent=1).encode(), durable=False)
        except Exception as exc:  # noqa: BLE001 - Py4J errors: their first line (the caller reports it)
            raise OSError(f"{target}: {first_line(exc)}") from exc

    return publish


def commit(spark: SparkSession, plan: RebuildPlan, version: str, manifest: Manifest) -> list[str]:
    """Make ``version`` current; return the history written (previously current versions, newest first)."""
    old, history = layouts.read_history(plan.uri, lambda u: read_bytes(spark, u))
    history = [old, *history] if old else []
    writer = {"app": APP, "version": APP_VERSION, "rows": manifest.rows, "partitions": manifest.partitions}
    identity = {"topic": plan.topic, **({"topic_id": plan.topic_id} if plan.topic_id else {})}
    write_pointer(spark, plan.uri, layouts.pointer_bytes(version, history, **identity, writer=writer))
    return history


def clean_up(spark: SparkSession, plan: RebuildPlan, version: str, history: list[str]) -> list[str]:
    """After the commit: remove pruned and leftover versions, migrated legacy files, old siblings.

    :returns: the URIs removed (each also logged on stderr).
    """
    names = _names(spark, plan.uri)
    doomed = [join(plan.uri, v) for v in layouts.to_prune(names, version, history, plan.keep)]
    doomed += [join(plan.uri, n) for n in names if layouts.legacy_entry(n) or layouts.pointer_temp(n)]
    parent = plan.uri.rstrip("/").rsplit("/", 1)[0] if "/" in plan.uri.rstrip("/") else "."
    doomed += [join(parent, n) for n in _names(spark, parent) if layouts.legacy_sibling(plan.uri, n)]
    for where in doomed:
        remove(spark, where)
        to_stderr(
            f"{PREFIX}: removed {where} (not current: pruned beyond --keep-versions {plan.keep}, left by "
            "a killed rebuild, or the migrated legacy layout)"
        )
    return doomed


def remove(spark: SparkSession, uri: str) -> None:
    """Delete a file or directory, best effort."""
    try:
        fs, path = hadoop_fs(spark, uri)
        fs.delete(path, True)
    except Exception:  # noqa: BLE001 - clean-up must not hide the real error
        pass


def rebuild(spark: SparkSession, plan: RebuildPlan) -> RebuildReport:
    """Run the rebuild of ``plan`` and return the report (without ``seconds``)."""
    check_target(spark, plan.uri)
    check_current(spark, plan)
    version = layouts.new_version_name()
    target = join(plan.uri, version)
    plan.progress.extra.update(snapshot_uri=plan.uri, version=version, topic_id=plan.topic_id or None)
    try:
        records, stats = write_rows(spark, plan, target)
        if stats is None:
            stats = partition_stats(snapshot_frame(spark, target))
        manifest = build_manifest(plan, stats, spark.version, data_files(spark, target))
        check_same_topic(plan)
        failpoint("rebuild.before_manifest")
        write_manifest_spark(spark, target, manifest)
        failpoint("rebuild.before_pointer")
        history = commit(spark, plan, version, manifest)
    except BaseException:
        remove(spark, target)
        raise
    plan.progress.finish("done", rows=manifest.rows)
    failpoint("rebuild.before_prune")
    removed = clean_up(spark, plan, version, history)
    return RebuildReport(
        ok=True,
        topic=plan.topic,
        topic_id=plan.topic_id or None,
        snapshot_uri=plan.uri,
        snapshot_version=version,
        records_read=records,
        rows=manifest.rows,
        layout=plan.layout,
        only_partitions=plan.only,
        partitions=dict(sorted(manifest.partition_stats.items())),
        previous=join(plan.uri, history[0]) if history else None,
        removed=removed,
        warnings=plan.warnings,
    )


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``spark-submit rebuild.py``; returns the exit code."""
    args = parse_args(argv)
    progress = DriverProgress.off()
    try:
        plan = make_plan(args)
        early = list(plan.warnings)
        for warning in early:
            to_stderr(f"{PREFIX}: warning: {warning}")
        spark = spark_session("kstate-rebuild")
        plan.reader = resolve_reader(
            spark, args, plan.kafka_config, lambda line: to_stderr(f"{PREFIX}: {line}")
        )
        publish = progress_publisher(spark, plan.uri)
        progress = DriverProgress.for_spark(
            spark, "rebuild", plan.topic, args.progress_interval, publish=publish
        )
        plan.progress = progress
        started = time.monotonic()  # records/s measure the job's work, not JVM start-up
        report = rebuild(spark, plan)
    except Exception as exc:  # noqa: BLE001 - Spark/Py4J errors: one line, not a stack trace
        read = (kafka_io.KafkaReadError, kafka_io.OffsetBoundError, kafka_io.NotCompactedError)
        known = isinstance(exc, (RebuildError, ManifestError, *read))
        message = str(exc) if known else f"{type(exc).__name__}: {first_line(exc)}"
        progress.finish("failed", error=message)
        return fail(args.report_file, message, to_stderr, PREFIX, error_code(exc))
    finally:
        progress.close()
    report = report.model_copy(update={"seconds": round(time.monotonic() - started, 3)})
    write_report(args.report_file, report)
    for warning in report.warnings[len(early) :]:
        to_stderr(f"{PREFIX}: warning: {warning}")
    print(f"{PREFIX}: ok: {report.rows} rows from {report.records_read} records in {report.seconds}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
