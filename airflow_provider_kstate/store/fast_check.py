"""The fast check: a snapshot's manifest against its changelog's offsets and layout, O(partitions).

It reads the manifest (``_kstate_manifest.json``) and asks the cluster for every partition's log start and
high watermark in one batched ListOffsets round per bound. It catches

* a missing, unreadable or malformed snapshot (a failed check, never a crash: ``rebuild=auto`` builds it);
* a snapshot of another topic or another partitioner;
* a store left behind by a partition increase (manifest partition count != the topic's);
* a truncated or recreated changelog (the snapshot covers offsets the log no longer has:
  ``end_offset > high_watermark``), and a resume offset the log has already deleted (``end_offset < log_start``).

It does not read rows: dropped rows or values taken from aborted transactions are the deep check's job.
No Airflow and no Spark here; the caller validates the URI first (:func:`.uri.uri_problem`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from airflow_provider_kstate.store import contract
from airflow_provider_kstate.store.layout import SnapshotAbsent, SnapshotUnreadable, resolve
from airflow_provider_kstate.store.manifest import (
    Manifest,
    ManifestError,
    PartitionStats,
    read_manifest,
)
from airflow_provider_kstate.store.uri import local_path


class AdminLike(Protocol):
    """What the fast check needs of :class:`~airflow_provider_kstate.hooks.admin.KStateAdminHook`."""

    def partition_count(self, topic: str) -> int: ...

    def watermarks(self, topic: str, partitions: list[int]) -> dict[int, tuple[int, int]]: ...


@dataclass(frozen=True)
class ManifestView:
    """The fields of a manifest the fast check uses, independent of the manifest class."""

    topic: str
    partitions: int
    partitioner: str
    stats: dict[int, PartitionStats] = field(default_factory=dict)
    written_at: str | None = None
    version: str | None = None


def load_manifest(uri: str, storage_options: Mapping[str, Any] | None = None) -> ManifestView:
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
        found = view(read_manifest(current.uri, storage_options))
    except ManifestError as exc:
        raise SnapshotUnreadable(f"snapshot at {uri!r} is unusable: {exc}") from exc
    return replace(found, version=current.version)


def view(manifest: Manifest) -> ManifestView:
    """Adapt a :class:`~.manifest.Manifest` to the fields the fast check uses."""
    stats = {int(p): s for p, s in manifest.partition_stats.items()}
    return ManifestView(
        topic=manifest.topic,
        partitions=manifest.partitions,
        partitioner=manifest.partitioner,
        stats=stats,
        written_at=manifest.written_at or None,
    )


def check_partition(
    partition: int, stats: PartitionStats | None, log_start: int, high: int
) -> dict[str, Any]:
    """Return the fast-check entry of one partition: its offsets and the problems found.

    :param partition: the partition number.
    :param stats: what the manifest says of it (None when the manifest does not cover it).
    :param log_start: the changelog partition's log start offset now.
    :param high: the changelog partition's high watermark now.
    """
    entry: dict[str, Any] = {"ok": True, "problems": [], "log_start": log_start, "high_watermark": high}
    if stats is None:
        entry["problems"].append(f"partition {partition} is not in the snapshot")
    else:
        entry.update(start_offset=stats.start_offset, end_offset=stats.end_offset, rows=stats.rows)
        entry["lag"] = max(high - stats.end_offset, 0)
        entry["problems"].extend(_offset_problems(partition, stats, log_start, high))
    entry["ok"] = not entry["problems"]
    return entry


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


def _layout_problems(manifest: ManifestView, topic: str, partitions: int) -> list[str]:
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
    extra = sorted(p for p in manifest.stats if p >= partitions or p < 0)
    if extra:
        problems.append(f"snapshot has partitions {extra} that topic {topic!r} does not have")
    return problems


def fast_check(
    admin: AdminLike, topic: str, snapshot_uri: str, storage_options: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Run the fast check of the store at ``snapshot_uri`` against changelog ``topic``; return the report.

    A missing or malformed snapshot gives ``ok: False`` (with ``snapshot_ok: False``), not an exception.

    :param admin: anything with ``partition_count`` and ``watermarks`` (the admin hook).
    :param topic: the changelog topic.
    :param snapshot_uri: where the snapshot lives (validated by the caller).
    :param storage_options: credentials of a remote filesystem (see :func:`.uri.filesystem`).
    """
    started = time.monotonic()
    count = admin.partition_count(topic)
    report: dict[str, Any] = {
        "check": "fast",
        "topic": topic,
        "snapshot_uri": snapshot_uri,
        "topic_partitions": count,
        "snapshot_partitions": None,
        "snapshot_ok": True,
        "snapshot_missing": False,
        "layout_ok": True,
        "problems": [],
        "partitions": {},
    }
    try:
        manifest: ManifestView | None = load_manifest(snapshot_uri, storage_options)
    except SnapshotUnreadable as exc:
        manifest = None
        report.update(
            snapshot_ok=False, snapshot_missing=isinstance(exc, SnapshotAbsent), problems=[str(exc)]
        )
    if manifest is not None:
        report["snapshot_partitions"] = manifest.partitions
        report["written_at"] = manifest.written_at
        report["snapshot_version"] = manifest.version
        layout = _layout_problems(manifest, topic, count)
        report.update(layout_ok=not layout, problems=layout)
        marks = admin.watermarks(topic, list(range(count)))
        report["partitions"] = {
            str(p): check_partition(p, manifest.stats.get(p), *marks[p]) for p in range(count)
        }
    return _finish(report, started)


def _finish(report: dict[str, Any], started: float) -> dict[str, Any]:
    report[contract.FAILED_FIELD] = contract.failed_partitions(report)
    report["ok"] = not report["problems"] and not report[contract.FAILED_FIELD]
    report["seconds"] = round(time.monotonic() - started, 3)
    return report
