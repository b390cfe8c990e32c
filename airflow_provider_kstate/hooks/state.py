"""The state-store hook: where a snapshot lives, how Spark gets the Kafka config, and the fast check.

The fast check runs in the Airflow worker and costs O(partitions): it reads the snapshot's manifest
(``_kstate_manifest.json``) and asks the cluster for every partition's log start and high watermark in one
batched ListOffsets round per bound. It catches

* a missing, unreadable or malformed snapshot (a failed check, never a crash: ``rebuild=auto`` builds it);
* a snapshot of another topic or another partitioner;
* a store left behind by a partition increase (manifest partition count != the topic's);
* a truncated or recreated changelog (the snapshot covers offsets the log no longer has:
  ``end_offset > high_watermark``), and a resume offset the log has already deleted (``end_offset < log_start``).

It does not read rows: dropped rows or values taken from aborted transactions are the deep check's job.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse

from airflow.sdk import BaseHook

from airflow_provider_kstate.exceptions import KStateConfigError, SnapshotError, SnapshotMissingError

#: The manifest's file name in the snapshot root (mirrors ``spark_apps.manifest.MANIFEST_NAME``).
MANIFEST_NAME = "_kstate_manifest.json"
#: URI schemes of snapshot locations: the worker reads the manifest with pyarrow, Spark the rows, so only
#: schemes both understand (for ``s3://`` Spark needs ``spark.hadoop.fs.s3.impl`` set, e.g. to S3A).
SCHEMES = ("file", "s3", "gs", "hdfs", "abfs", "abfss")


class AdminLike(Protocol):
    """What the fast check needs of :class:`~airflow_provider_kstate.hooks.admin.KStateAdminHook`."""

    def partition_count(self, topic: str) -> int: ...

    def watermarks(self, topic: str, partitions: list[int]) -> dict[int, tuple[int, int]]: ...


@dataclass(frozen=True)
class PartitionStats:
    """What a manifest says about one partition of the snapshot."""

    start_offset: int
    end_offset: int
    rows: int | None = None


@dataclass(frozen=True)
class ManifestView:
    """The fields of a manifest the fast check uses, independent of the manifest class."""

    topic: str
    partitions: int
    partitioner: str
    stats: dict[int, PartitionStats] = field(default_factory=dict)
    written_at: str | None = None


def check_uri(uri: str) -> str:
    """Validate a snapshot URI and return it: a local path, or a URI of a filesystem pyarrow and Spark read.

    :param uri: the snapshot URI.
    :raises KStateConfigError: when the URI is empty or its scheme is not one the package reads.
    :raises SnapshotError: when a local URI names a file instead of a snapshot directory.
    """
    if not isinstance(uri, str) or not uri.strip():
        raise KStateConfigError(
            "snapshot_uri is empty: give a directory path or a file://, s3://, gs:// or hdfs:// URI"
        )
    scheme = urlparse(uri).scheme.lower()
    if len(scheme) > 1 and scheme not in SCHEMES:
        raise KStateConfigError(
            f"snapshot_uri {uri!r}: unsupported scheme {scheme!r}; use a local path or one of "
            f"{', '.join(s + '://' for s in SCHEMES)}"
        )
    root = local_path(uri)
    if root is not None and root.exists() and not root.is_dir():
        raise SnapshotError(f"snapshot_uri {uri!r} is a file, not a snapshot directory")
    return uri


def local_path(uri: str) -> Path | None:
    """Return the local directory of a plain path or ``file://`` URI, None for a remote URI."""
    parsed = urlparse(uri)
    if len(parsed.scheme) <= 1:  # none, or a Windows drive letter
        return Path(uri)
    if parsed.scheme.lower() == "file":
        return Path(parsed.path)
    return None


def load_manifest(uri: str) -> ManifestView:
    """Read and validate the manifest of the snapshot at ``uri``.

    :param uri: the snapshot URI.
    :raises SnapshotError: when the manifest is missing, unreadable, not JSON or has bad fields; the
        message names which.
    :raises KStateConfigError: when the URI itself is wrong.
    """
    from airflow_provider_kstate.spark_apps.manifest import ManifestError, read_manifest

    check_uri(uri)
    root = local_path(uri)
    if root is not None and not (root / MANIFEST_NAME).exists():
        where = "directory does not exist" if not root.exists() else f"no {MANIFEST_NAME} in it"
        raise SnapshotMissingError(
            f"snapshot missing at {uri!r}: {where} (never built, or an unfinished build)"
        )
    try:
        return _view(read_manifest(uri))
    except ManifestError as exc:
        raise SnapshotError(f"snapshot at {uri!r} is unusable: {exc}") from exc


def _view(manifest: Any) -> ManifestView:
    """Adapt a ``spark_apps.manifest.Manifest`` to the fields the fast check uses."""
    stats = {
        int(p): PartitionStats(int(s.start_offset), int(s.end_offset), int(s.rows))
        for p, s in manifest.partition_stats.items()
    }
    return ManifestView(
        topic=manifest.topic,
        partitions=manifest.partitions,
        partitioner=manifest.partitioner,
        stats=stats,
        written_at=manifest.written_at or None,
    )


# -- the fast check --------------------------------------------------------------------------------------


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


def fast_check(admin: AdminLike, topic: str, snapshot_uri: str) -> dict[str, Any]:
    """Run the fast check of the store at ``snapshot_uri`` against changelog ``topic``; return the report.

    A missing or malformed snapshot gives ``ok: False`` (with ``snapshot_ok: False``), not an exception.

    :param admin: the admin hook (or anything with ``partition_count`` and ``watermarks``).
    :param topic: the changelog topic.
    :param snapshot_uri: where the snapshot lives.
    :raises TopicNotFoundError: when the changelog topic does not exist.
    :raises KStateConfigError: when the URI is not one the worker can read.
    """
    started = time.monotonic()
    check_uri(snapshot_uri)  # a wrong URI is bad input, not a bad store
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
        manifest: ManifestView | None = load_manifest(snapshot_uri)
    except SnapshotError as exc:
        manifest = None
        report.update(
            snapshot_ok=False, snapshot_missing=isinstance(exc, SnapshotMissingError), problems=[str(exc)]
        )
    if manifest is not None:
        report["snapshot_partitions"] = manifest.partitions
        report["written_at"] = manifest.written_at
        layout = _layout_problems(manifest, topic, count)
        report.update(layout_ok=not layout, problems=layout)
        marks = admin.watermarks(topic, list(range(count)))
        report["partitions"] = {
            str(p): check_partition(p, manifest.stats.get(p), *marks[p]) for p in range(count)
        }
    return _finish(report, started)


def _finish(report: dict[str, Any], started: float) -> dict[str, Any]:
    failed = [int(p) for p, entry in report["partitions"].items() if not entry["ok"]]
    report["failed_partitions"] = failed
    report["ok"] = not report["problems"] and not failed
    report["seconds"] = round(time.monotonic() - started, 3)
    return report


# -- the hook ---------------------------------------------------------------------------------------------


class KStateSnapshotHook(BaseHook):
    """A thin hook over a state store: its changelog on the ``kafka`` connection and its snapshot.

    :param kafka_config_id: the Airflow connection of the Kafka cluster (conn type ``kafka``).
    :param timeout: seconds to wait for each admin request.
    """

    conn_name_attr = "kafka_config_id"
    default_conn_name = "kafka_default"
    conn_type = "kafka"
    hook_name = "Kafka State snapshot"

    def __init__(self, kafka_config_id: str = default_conn_name, timeout: float = 30.0) -> None:
        super().__init__()
        self.kafka_config_id = kafka_config_id
        self.timeout = timeout
        self._admin: Any = None

    @property
    def admin(self) -> Any:
        """The :class:`~airflow_provider_kstate.hooks.admin.KStateAdminHook` of the connection."""
        if self._admin is None:
            from airflow_provider_kstate.hooks.admin import KStateAdminHook

            self._admin = KStateAdminHook(kafka_config_id=self.kafka_config_id, timeout=self.timeout)
        return self._admin

    def get_conn(self) -> Any:
        """Return the AdminClient of the connection."""
        return self.admin.get_conn()

    def fast_check(self, topic: str, snapshot_uri: str) -> dict[str, Any]:
        """Run :func:`fast_check` against the connection's cluster."""
        return fast_check(self.admin, topic, snapshot_uri)

    def manifest(self, snapshot_uri: str) -> ManifestView:
        """Return the validated manifest of the snapshot; raise SnapshotError naming the problem."""
        return load_manifest(snapshot_uri)

    @contextlib.contextmanager
    def kafka_config_file(self) -> Iterator[str]:
        """Write the connection's librdkafka config to a 0600 JSON file in a 0700 directory; yield its path.

        This is how Spark applications get the config: it holds SASL secrets, so it never goes on a
        command line or in a log. The file is removed on exit.
        """
        config = {k: v for k, v in self.admin.client_config().items() if not callable(v)}
        with tempfile.TemporaryDirectory(prefix="kstate-cfg-") as tmp:
            path = os.path.join(tmp, "kafka.json")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(config, out)
            yield path
