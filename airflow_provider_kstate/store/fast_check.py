"""The fast check: a snapshot's manifest against its changelog's offsets and layout, O(partitions).

It reads the manifest (``_kstate_manifest.json``) and asks the cluster for every partition's log start and
high watermark in one batched ListOffsets round per bound. It catches

* a missing, unreadable or malformed snapshot (a failed check, never a crash: ``rebuild=auto`` builds it);
* a snapshot of another topic or another partitioner;
* a store left behind by a partition increase (manifest partition count != the topic's);
* a truncated or recreated changelog (the snapshot covers offsets the log no longer has:
  ``end_offset > high_watermark``), and a resume offset the log has already deleted (``end_offset < log_start``);
* a changelog deleted and created again since the snapshot was built, even one that has reached the same
  offsets: the manifest's topic id (KIP-516) differs from the topic's now (a store-wide problem: a full
  rebuild). An id that cannot be read (a broker without ids, no DESCRIBE permission, a manifest written
  before ids were recorded) is a named warning, and the snapshot is judged by its offsets alone;

* damaged data files, one listing of the snapshot's files plus two small reads per file (O(files)): a
  data file missing, foreign, or of another size than the manifest records (truncated, or rewritten
  outside the rebuild, which also leaves Hadoop's ``.crc`` stale), a file without Parquet framing (random
  bytes), a deleted partition directory, and data files outside any ``partition=N`` directory. Each is
  damage to the partition whose directory holds the file; manifests written before file lists were
  recorded still get the framing and empty-partition checks.

It does not read rows: dropped rows or values taken from aborted transactions are the deep check's job.
No Airflow and no Spark here; the caller validates the URI first (:func:`.uri.uri_problem`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from airflow_provider_kstate.store import contract
from airflow_provider_kstate.store.layout import (
    SnapshotAbsent,
    SnapshotUnreadable,
    framing_problem,
    is_version_name,
    partition_of,
    resolve,
)
from airflow_provider_kstate.store.manifest import (
    Manifest,
    ManifestError,
    PartitionStats,
    read_manifest,
)
from airflow_provider_kstate.store.results import CheckReport, PartitionEntry
from airflow_provider_kstate.store.topic_id import compare_ids, unknown_now
from airflow_provider_kstate.store.uri import filesystem as uri_filesystem
from airflow_provider_kstate.store.uri import join, local_path


class AdminLike(Protocol):
    """What the fast check needs of :class:`~airflow_provider_kstate.hooks.admin.KStateAdminHook`."""

    def partition_count(self, topic: str) -> int: ...

    def watermarks(self, topic: str, partitions: list[int]) -> dict[int, tuple[int, int]]: ...

    def topic_ids(self, topics: list[str]) -> dict[str, str]: ...


def load_manifest(uri: str, storage_options: Mapping[str, Any] | None = None) -> Manifest:
    """Read and validate the manifest of the snapshot at ``uri`` (its current version, see :mod:`.layout`).

    :param uri: the snapshot URI (validated by the caller).
    :param storage_options: credentials of a remote filesystem (see :func:`.uri.filesystem`).
    :raises SnapshotAbsent: when there is no snapshot; :raises SnapshotUnreadable: when its pointer or
        manifest is bad.
    """
    root = local_path(uri)
    if root is not None and not root.exists():
        raise SnapshotAbsent(f"snapshot missing at {uri!r}: directory does not exist (never built)")
    current = resolve(uri, storage_options)
    try:
        found = read_manifest(current.uri, storage_options)
    except ManifestError as exc:
        raise SnapshotUnreadable(f"snapshot at {uri!r} is unusable: {exc}") from exc
    return found.at_version(current.version)


def check_partition(
    partition: int, stats: PartitionStats | None, log_start: int, high: int, files: list[str] | None = None
) -> PartitionEntry:
    """Return the fast-check entry of one partition: its offsets and the problems found.

    :param partition: the partition number.
    :param stats: what the manifest says of it (None when the manifest does not cover it).
    :param log_start: the changelog partition's log start offset now.
    :param high: the changelog partition's high watermark now.
    :param files: the problems of its data files (:func:`file_problems`), counted in ``file_problems``.
    """
    fields: dict[str, Any] = {"log_start": log_start, "high_watermark": high}
    if stats is None:
        problems = [f"partition {partition} is not in the snapshot"]
    else:
        fields.update(start_offset=stats.start_offset, end_offset=stats.end_offset, rows=stats.rows)
        fields["lag"] = max(high - stats.end_offset, 0)
        problems = _offset_problems(partition, stats, log_start, high)
    if files:
        problems += files
        fields["file_problems"] = len(files)
    return PartitionEntry(ok=not problems, problems=problems, **fields)


def _offset_problems(partition: int, stats: PartitionStats, log_start: int, high: int) -> list[str]:
    problems = []
    if stats.start_offset < 0 or stats.end_offset < stats.start_offset:
        problems.append(
            f"partition {partition}: manifest offsets are inconsistent "
            f"(start_offset {stats.start_offset}, end_offset {stats.end_offset})"
        )
    if stats.end_offset > high:
        problems.append(
            f"partition {partition}: snapshot covers offsets up to {stats.end_offset} but the changelog ends at "
            f"{high}: the changelog was truncated or recreated after the snapshot"
        )
    elif stats.end_offset < log_start:
        problems.append(
            f"partition {partition}: snapshot resumes at offset {stats.end_offset} but the changelog starts at "
            f"{log_start}: records the snapshot never applied were deleted"
        )
    return problems


def _layout_problems(manifest: Manifest, topic: str, partitions: int) -> list[str]:
    problems = []
    if manifest.topic != topic:
        problems.append(f"snapshot is of topic {manifest.topic!r}, not {topic!r}")
    if manifest.partitioner != "murmur2":
        problems.append(f"snapshot keys are placed by {manifest.partitioner!r}, not 'murmur2'")
    if manifest.partitions != partitions:
        problems.append(
            f"snapshot has {manifest.partitions} partitions but topic {topic!r} has {partitions}: "
            "the store was left behind by a partition change; rebuild it for the new count"
        )
    extra = sorted(p for p in manifest.partition_stats if p >= partitions or p < 0)
    if extra:
        problems.append(f"snapshot has partitions {extra} that topic {topic!r} does not have")
    return problems


@dataclass
class SnapshotListing:
    """The data files found under a snapshot version's directory.

    :ivar files: ``{partition: {file name: size}}`` under ``partition=N`` directories.
    :ivar framing: ``{partition: {file name: why it is not Parquet}}``.
    :ivar stray: data files outside any ``partition=N`` directory (relative paths).
    """

    files: dict[int, dict[str, int]] = field(default_factory=dict)
    framing: dict[int, dict[str, str]] = field(default_factory=dict)
    stray: list[str] = field(default_factory=list)


def _read_framing(fs: Any, path: str, size: int) -> str:
    if size < 12:
        return framing_problem(b"", b"", size)
    with fs.open_input_file(path) as stream:
        head = stream.read_at(4, 0)
        tail = stream.read_at(8, size - 8)
    return framing_problem(bytes(head), bytes(tail), size)


def list_snapshot(data_uri: str, storage_options: Mapping[str, Any] | None = None) -> SnapshotListing:
    """List the data files of the snapshot version at ``data_uri`` and check each one's Parquet framing.

    Hidden entries (``_*``, ``.*``: the manifest, ``_SUCCESS``, Hadoop's ``.crc`` files) are skipped.

    :param data_uri: the directory holding the data and the manifest (:func:`.layout.resolve`'s ``uri``).
    :param storage_options: credentials of a remote filesystem (see :func:`.uri.filesystem`).
    """
    from pyarrow import fs as pafs

    fs, root = uri_filesystem(data_uri, storage_options)
    root = root.rstrip("/")
    found = SnapshotListing()
    for info in fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True)):
        rel = info.path[len(root) :].lstrip("/")
        parts = rel.split("/")
        if info.type != pafs.FileType.File or any(x.startswith(("_", ".")) for x in parts):
            continue
        if is_version_name(parts[0]):  # a killed rebuild's leftover beside a legacy root: not this snapshot
            continue
        partition = partition_of(parts[0]) if len(parts) == 2 else None
        if partition is None:
            found.stray.append(rel)
            continue
        found.files.setdefault(partition, {})[parts[1]] = int(info.size)
        problem = _read_framing(fs, info.path, int(info.size))
        if problem:
            found.framing.setdefault(partition, {})[parts[1]] = problem
    return found


def file_problems(stats: PartitionStats | None, partition: int, listing: SnapshotListing) -> list[str]:
    """Return the problems of one partition's data files: the manifest's file list (when it has one)
    against the listing, each file's framing, and rows recorded with no file to hold them.

    :param stats: the manifest's entry of the partition (None: not in the manifest).
    :param partition: the partition number.
    :param listing: what :func:`list_snapshot` found.
    """
    found = listing.files.get(partition, {})
    problems = [
        f"partition {partition}: data file {name}: {why}"
        for name, why in sorted(listing.framing.get(partition, {}).items())
    ]
    recorded = None if stats is None else stats.files
    if recorded is not None:
        problems += _against_manifest(partition, recorded, found)
    elif stats is not None and stats.rows and not found:
        problems.append(
            f"partition {partition}: the manifest records {stats.rows} rows but there is no data file "
            "(partition directory or files deleted)"
        )
    return problems


def _against_manifest(partition: int, recorded: Mapping[str, int], found: Mapping[str, int]) -> list[str]:
    problems = []
    for name in sorted(set(recorded) - set(found)):
        problems.append(f"partition {partition}: data file {name} ({recorded[name]} bytes) is missing")
    for name in sorted(set(found) - set(recorded)):
        problems.append(f"partition {partition}: file {name} is not in the manifest (foreign or left over)")
    for name in sorted(set(found) & set(recorded)):
        if found[name] != recorded[name]:
            problems.append(
                f"partition {partition}: data file {name} is {found[name]} bytes, the manifest records "
                f"{recorded[name]}: truncated or rewritten outside the rebuild"
            )
    return problems


def files_by_partition(
    manifest: Manifest, listing: SnapshotListing, count: int
) -> tuple[dict[int, list[str]], list[str]]:
    """Return the data-file problems per partition of the topic, and the store-wide ones: files outside
    any partition of the topic (a stray file, or one in a partition the topic does not have). A partition
    counts its file problems in ``file_problems`` (damage a partial rebuild of that partition repairs,
    unlike an offset finding).

    :param count: the topic's partition count (the partitions that have an entry).
    """
    store = [f"a data file outside any partition directory: {rel}" for rel in listing.stray]
    found: dict[int, list[str]] = {}
    for p in sorted(set(manifest.partition_stats) | set(listing.files)):
        problems = file_problems(manifest.partition_stats.get(p), p, listing)
        if problems and 0 <= p < count:
            found[p] = problems
        else:
            store += problems
    return found, store


def list_files(
    snapshot_uri: str, manifest: Manifest, storage_options: Mapping[str, Any] | None = None
) -> tuple[SnapshotListing | None, str | None]:
    """List the data files of the version ``manifest`` was read from (the pointer is not read again, so
    files and manifest are of one version even if a rebuild commits meanwhile); a listing that fails is a
    store-wide problem (its text), never an exception."""
    data_uri = join(snapshot_uri, manifest.version) if manifest.version else snapshot_uri
    try:
        return list_snapshot(data_uri, storage_options), None
    except (OSError, ValueError) as exc:
        return None, f"could not list the snapshot's data files: {exc}"


def _identity(topic: str, manifest: Manifest, now: str) -> dict[str, Any]:
    """The report's fields on the changelog's identity: the ids at build and now, whether the topic was
    recreated, and what could not be checked; a recreated topic is a store-wide problem (a full rebuild)."""
    verdict = compare_ids(topic, manifest.topic_id, now, "the snapshot's manifest", manifest.written_at)
    return {
        "snapshot_topic_id": verdict.recorded or None,
        "topic_recreated": verdict.recreated,
        "warnings": verdict.warnings,
        "problems": [verdict.problem] if verdict.problem else [],
    }


def _checked(
    admin: AdminLike,
    topic: str,
    count: int,
    manifest: Manifest,
    snapshot_uri: str,
    storage_options: Any,
    topic_id: str = "",
) -> dict[str, Any]:
    """The fields of the report on a readable snapshot: identity, layout, per-partition entries, data files.

    :param topic_id: the changelog's topic id now (``""``: unknown).
    """
    problems = _layout_problems(manifest, topic, count)
    fields: dict[str, Any] = {"layout_ok": not problems, "problems": problems}
    if manifest.topic == topic:  # another topic's snapshot is refused by its name already
        identity = _identity(topic, manifest, topic_id)
        problems[:0] = identity.pop("problems")
        fields.update(identity)
    marks = admin.watermarks(topic, list(range(count)))
    listing, failure = list_files(snapshot_uri, manifest, storage_options)
    damaged: dict[int, list[str]] = {}
    if listing is None:
        problems.append(str(failure))
    else:
        damaged, store = files_by_partition(manifest, listing, count)
        problems += store
    fields["partitions"] = {
        p: check_partition(p, manifest.partition_stats.get(p), *marks[p], damaged.get(p))
        for p in range(count)
    }
    fields.update(written_at=manifest.written_at or None, snapshot_version=manifest.version)
    if listing is not None:
        fields["data_files"] = sum(len(names) for names in listing.files.values())
    return fields


def fast_check(
    admin: AdminLike, topic: str, snapshot_uri: str, storage_options: Mapping[str, Any] | None = None
) -> CheckReport:
    """Run the fast check of the store at ``snapshot_uri`` against changelog ``topic``; return the report.

    A missing or malformed snapshot gives ``ok: False`` (with ``snapshot_ok: False``), not an exception.

    :param admin: anything with ``partition_count``, ``watermarks`` and ``topic_ids`` (the admin hook).
    :param topic: the changelog topic.
    :param snapshot_uri: where the snapshot lives (validated by the caller).
    :param storage_options: credentials of a remote filesystem (see :func:`.uri.filesystem`).
    """
    started = time.monotonic()
    count = admin.partition_count(topic)
    topic_id = admin.topic_ids([topic]).get(topic, "")
    fields: dict[str, Any] = {
        "check": "fast",
        "topic": topic,
        "snapshot_uri": snapshot_uri,
        "topic_id": topic_id or None,
        "topic_partitions": count,
        "snapshot_partitions": None,
        "snapshot_ok": True,
        "snapshot_missing": False,
        "layout_ok": True,
        "problems": [],
        "partitions": {},
    }
    try:
        manifest = load_manifest(snapshot_uri, storage_options)
    except SnapshotUnreadable as exc:
        fields.update(
            snapshot_ok=False, snapshot_missing=isinstance(exc, SnapshotAbsent), problems=[str(exc)]
        )
        fields["warnings"] = [] if topic_id else [unknown_now(topic)]
    else:
        fields["snapshot_partitions"] = manifest.partitions
        fields.update(_checked(admin, topic, count, manifest, snapshot_uri, storage_options, topic_id))
    failed = sorted(p for p, e in fields["partitions"].items() if not e.ok)
    fields[contract.FAILED_FIELD] = failed
    fields["ok"] = not fields["problems"] and not failed
    fields["seconds"] = round(time.monotonic() - started, 3)
    return CheckReport(**fields)


def partial_scope(report: CheckReport) -> list[int] | None:
    """Return the partitions a partial rebuild repairs after this fast-check ``report``, None when only a
    full rebuild does.

    Only damage to data files is partition-local. A bad or missing manifest, a changed layout, a
    store-wide problem (a stray file, a failed listing) or any offset finding (the changelog was recreated,
    truncated or trimmed: a topic-wide event that can make every partition wrong) needs a full rebuild.
    """
    if not report.snapshot_ok or report.layout_ok is False or report.problems:
        return None
    failed = report.failed_partitions
    for p in failed:
        entry = report.entry(p)
        if (entry.file_problems or 0) != len(entry.problems) or not entry.problems:
            return None
    return failed
