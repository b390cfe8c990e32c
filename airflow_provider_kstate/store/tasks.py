"""The decisions of the state tasks (the fast and deep checks, the rebuild), without Airflow: which inputs
are acceptable, the Spark applications' arguments, and the verdict on what a check or a rebuild reported.

The operators (``operators/snapshot.py``) gather the inputs (templated parameters, the cluster's partition
count, the snapshot's manifest), call these, and log and raise what they return.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from airflow_provider_kstate.errors import KStateConfigError, SnapshotError, StateCheckFailed
from airflow_provider_kstate.store import results
from airflow_provider_kstate.store.results import CheckReport, RebuildReport
from airflow_provider_kstate.store.submission import BOUND_DEVIATIONS

#: How the changelog is read when the task does not say (the faster, ``bench/results/changelog_reader.json``).
DEFAULT_CHANGELOG_READER = "confluent"


def progress_seconds(value: Any) -> float:
    """Return ``progress_interval`` as seconds between two ``PROGRESS`` lines (0: off).

    :raises KStateConfigError: when it is negative or not a number of seconds.
    """
    if not float(value) >= 0:
        raise KStateConfigError(f"progress_interval must be 0 (off) or more seconds, got {value!r}")
    return float(value)


def app_subject(app_name: str, topic: str) -> str:
    """Return what the broker doctor names a refused application run (``the rebuild of 'orders'``)."""
    return f"the {app_name.removesuffix('.py').replace('_', ' ')} of {topic!r}"


def accepted_deviations(broken: Iterable[str], allow: Sequence[str]) -> list[str]:
    """Return the broker's broken promises that ``allow_broker_deviation`` accepts, in the verdict's order."""
    return [p for p in broken if p in allow]


def store_args(
    topic: str,
    snapshot_uri: str,
    *,
    progress_interval: float,
    changelog_reader: str,
    accepted: Sequence[str] | None,
    allow_non_compacted: bool,
) -> list[str]:
    """Return the arguments the deep check and the rebuild share (see
    :mod:`~airflow_provider_kstate.store.contract`).

    :param accepted: the broker's broken promises the task accepts; those the application can bound its
        reads by (:data:`~airflow_provider_kstate.store.submission.BOUND_DEVIATIONS`) are passed on.
    :param allow_non_compacted: let the application read a non-compacted changelog whose log moved.
    """
    args = ["--topic", topic, "--snapshot-uri", snapshot_uri]
    args += ["--progress-interval", f"{progress_interval:g}"]
    if changelog_reader != DEFAULT_CHANGELOG_READER:
        args += ["--changelog-reader", changelog_reader]
    bounds = [p for p in accepted or [] if p in BOUND_DEVIATIONS]
    if bounds:  # the app then bounds a disagreeing partition's read by where its fetch ends
        args += ["--allow-broker-deviation", ",".join(bounds)]
    if allow_non_compacted:  # the app refuses a non-compacted changelog whose log moved
        args.append("--allow-non-compacted")
    return args


def deep_check_args(base: list[str], sample_keys: int) -> list[str]:
    """Return the deep check application's arguments: the shared ones and how many keys to sample."""
    return [*base, "--sample-keys", str(sample_keys)]


def rebuild_args(base: list[str], target: int, only: list[int] | None, keep: int | None = None) -> list[str]:
    """Return the rebuild application's arguments for a target count, a partition list and (when given)
    how many versions to keep."""
    args = [*base, "--partitions", str(target)]
    if only:
        args += ["--only-partitions", ",".join(str(p) for p in only)]
    return [*args, "--keep-versions", str(keep)] if keep is not None else args


def rebuild_target(topic: str, current: int, requested: int | None) -> int:
    """Return the partition count a rebuild keys the snapshot for: ``requested``, or the topic's ``current``.

    :raises KStateConfigError: when it is fewer than the topic's (Kafka cannot shrink a topic).
    """
    target = requested or current
    if target < current:
        raise KStateConfigError(
            f"partitions={target} is fewer than topic {topic!r}'s {current}: Kafka cannot shrink "
            "a topic, so a store keyed for fewer partitions would be wrong at once"
        )
    return target


def rebuild_scope(
    target: int, only: list[int] | None, snapshot_partitions: Callable[[], int]
) -> list[int] | None:
    """Return the partitions a rebuild rebuilds, ``only`` (None or empty: all), once it is checked.

    :param target: the partition count the rebuild keys the snapshot for (:func:`rebuild_target`).
    :param snapshot_partitions: reads the snapshot's partition count (its manifest), only when ``only``
        needs it (a missing snapshot raises there).
    :raises KStateConfigError: a partition outside the target layout, or a partial rebuild of a changed
        layout.
    """
    if not only:
        return only
    out_of_range = [p for p in only if p >= target]
    if out_of_range:
        raise KStateConfigError(f"only_partitions {out_of_range} do not exist in a {target}-partition layout")
    layout = snapshot_partitions()
    if layout != target:
        raise KStateConfigError(
            f"only_partitions needs an unchanged layout, but the snapshot has {layout} "
            f"partitions and the target is {target}: rebuild all partitions"
        )
    return only


def keep_count(keep: int | None, given: Any) -> int:
    """Return how many snapshot versions a rebuild keeps, the current one included.

    :param keep: the parsed ``keep_versions``; :param given: as the task was given it (for the message).
    :raises KStateConfigError: when it is not at least 1.
    """
    if keep is None or keep < 1:
        raise KStateConfigError(f"keep_versions must be at least 1, got {given!r}")
    return keep


def scope_text(only: list[int] | None) -> str:
    """Return how the rebuild's log line names its partitions."""
    return f"only partitions {only}" if only else "all partitions"


def rebuild_intent(target: int, only: list[int] | None, keep: int) -> str:
    """Return how the rebuild's log line says what it is about to do (after ``Rebuilding snapshot S of T for``)."""
    return f"{target} partitions ({scope_text(only)}) into a new version; keeping {keep} versions"


def rebuilt_text(report: RebuildReport) -> str:
    """Return how the rebuild's log line sums up what it committed (after ``Rebuilt <snapshot_uri>: ``)."""
    return (
        f"version {report.snapshot_version}, {report.records_read} changelog records read, {report.rows} rows "
        f"in {len(report.partitions)} partitions, {report.seconds}s; previous: {report.previous}"
    )


def check_failure(kind: str, snapshot_uri: str, topic: str, report: CheckReport) -> StateCheckFailed | None:
    """Return the error a failing check raises (when the task fails on a bad store), None when it passed.

    :param kind: ``fast`` or ``deep``, as the error names the check.
    """
    if report.ok:
        return None
    return StateCheckFailed(
        f"{kind} check of {snapshot_uri!r} against {topic!r} failed "
        f"(partitions {report.failed_partitions}): {results.summary(report)}"
    )


def rebuilt(written: Mapping[str, Any], snapshot_uri: str, topic: str) -> RebuildReport:
    """Return the rebuild application's report, typed.

    :raises SnapshotError: when it reported failure (the previous snapshot is then unchanged).
    """
    if not written.get("ok"):
        raise SnapshotError(
            f"rebuild of {snapshot_uri!r} from {topic!r} reported failure: "
            f"{written.get('error') or written}; the previous snapshot is unchanged"
        )
    return RebuildReport.from_dict(written)
