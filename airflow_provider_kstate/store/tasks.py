"""The decisions of the state tasks (the fast and deep checks, the rebuild), without Airflow: which inputs
are acceptable, the Spark applications' arguments, and the verdict on what a check or a rebuild reported;
and those of the state-maintenance flow: whether a bad store is rebuilt, and which partitions (:func:`verdict`).

The operators (``operators/fast_check.py``, ``deep_check.py``, ``rebuild.py``, ``maintenance.py``) gather
the inputs (templated parameters, the checks' reports, the cluster's partition count, the snapshot's
manifest), call these, and log and raise what they return.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from airflow_provider_kstate.enums import StrEnum
from airflow_provider_kstate.errors import KStateConfigError, SnapshotError, StateCheckFailed
from airflow_provider_kstate.params import as_choice, as_optional_count, as_partitions

if TYPE_CHECKING:
    # the reports are pydantic models (about 50 ms to import): the operators import this module at parse
    from airflow_provider_kstate.store.results import CheckReport, RebuildReport

#: How the changelog is read when the task does not say (the faster, ``bench/results/changelog_reader.json``).
DEFAULT_CHANGELOG_READER = "confluent"

#: The promises that let a deviating broker's reads be bounded by where its fetches end instead of by
#: its ListOffsets (passed on to the Spark applications when both are accepted).
BOUND_DEVIATIONS = ("latest_offset", "last_stable_offset")


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
        reads by (:data:`BOUND_DEVIATIONS`) are passed on.
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


class ChangelogRead(Protocol):
    """How a Spark state task (the deep check, the rebuild) reads the changelog: its (rendered) parameters
    (:class:`~airflow_provider_kstate.operators.store_spark.KStateStoreSparkOperator` documents each)."""

    @property
    def topic(self) -> str: ...

    @property
    def snapshot_uri(self) -> str: ...

    @property
    def progress_interval(self) -> float: ...

    @property
    def changelog_reader(self) -> str: ...

    @property
    def allow_non_compacted_changelog(self) -> bool: ...


def read_args(task: ChangelogRead, accepted: Sequence[str] | None, log: Any) -> list[str]:
    """Return the arguments the deep check and the rebuild share, from ``task``'s parameters
    (:func:`store_args`); a non-compacted changelog it accepts is logged as ``RISK ACCEPTED``.

    :param accepted: the broker's broken promises the task accepts (:func:`accepted_deviations`).
    """
    if task.allow_non_compacted_changelog:
        log.warning(
            "RISK ACCEPTED: allow_non_compacted_changelog=True for %s: a changelog that retention trimmed "
            "may lack keys, so the snapshot may miss state",
            task.topic,
        )
    return store_args(
        task.topic,
        task.snapshot_uri,
        progress_interval=task.progress_interval,
        changelog_reader=task.changelog_reader,
        accepted=accepted,
        allow_non_compacted=task.allow_non_compacted_changelog,
    )


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


@dataclass(frozen=True)
class RebuildPlan:
    """What a rebuild does, its inputs checked (:func:`plan_rebuild`).

    :param target: the partition count it keys the snapshot for.
    :param only: the partitions it rebuilds (None: all).
    :param keep: how many versions stay, the current one included.
    """

    target: int
    only: list[int] | None
    keep: int

    def intent(self) -> str:
        """How the rebuild's log line says what it is about to do (:func:`rebuild_intent`)."""
        return rebuild_intent(self.target, self.only, self.keep)

    def args(self, base: list[str]) -> list[str]:
        """The rebuild application's arguments after the shared ``base`` (:func:`read_args`)."""
        return rebuild_args(base, self.target, self.only, self.keep)


def plan_rebuild(
    topic: str,
    given: Mapping[str, Any],
    partition_count: Callable[[], int],
    snapshot_partitions: Callable[[], int],
) -> RebuildPlan:
    """Return what a rebuild of ``topic`` does, each input checked before Spark starts.

    :param given: the task's (rendered) ``partitions``, ``only_partitions`` and ``keep_versions``.
    :param partition_count: reads the topic's partition count now (a missing topic raises there).
    :param snapshot_partitions: reads the snapshot's partition count, only when ``only_partitions`` needs it.
    :raises KStateConfigError: ``keep_versions`` below 1, a target below the topic's count, a partition
        outside the target layout, or a partial rebuild of a changed layout.
    """
    kept = given.get("keep_versions")
    keep = keep_count(as_optional_count("keep_versions", kept), kept)
    target = rebuild_target(
        topic, partition_count(), as_optional_count("partitions", given.get("partitions"))
    )
    only = rebuild_scope(
        target, as_partitions("partitions", given.get("only_partitions")), snapshot_partitions
    )
    return RebuildPlan(target, only, keep)


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
    from airflow_provider_kstate.store.results import summary

    if report.ok:
        return None
    return StateCheckFailed(
        f"{kind} check of {snapshot_uri!r} against {topic!r} failed "
        f"(partitions {report.failed_partitions}): {summary(report)}"
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
    from airflow_provider_kstate.store.results import RebuildReport

    return RebuildReport.from_dict(written)


# ------------------------------------------------------------------------- the maintenance flow's verdict


class RebuildMode(StrEnum):
    """The ``rebuild`` param: rebuild a bad store (``auto``), fail the run instead (``never``), or always
    rebuild (``force``)."""

    AUTO = "auto"
    NEVER = "never"
    FORCE = "force"


def check_report(xcom: Any, check: str = "deep") -> CheckReport | None:
    """Parse a check task's report (its XCom, rendered) into a :class:`CheckReport`, None when the task
    pushed none (skipped).

    :param check: ``fast`` or ``deep``, when the report does not say.
    """
    from airflow_provider_kstate.store.results import CheckReport

    return CheckReport.read(xcom, check=check) if xcom else None


def partial_rebuild(fast: CheckReport, deep: CheckReport | None, target: int | None = None) -> list[int]:
    """Return the partitions a partial rebuild covers, [] for a full rebuild.

    The deep check's failed partitions, plus the fast check's when all it found is damage to those
    partitions' data files (:func:`~airflow_provider_kstate.store.fast_check.partial_scope`). Any other
    fast-check failure, or a re-key to another partition count (``target``), needs a full rebuild.
    """
    from airflow_provider_kstate.store.fast_check import partial_scope

    if target and target != fast.topic_partitions:
        return []
    scope = [] if fast.ok else partial_scope(fast)
    if scope is None:
        return []
    return sorted(set(scope) | set(deep.failed_partitions if deep is not None else []))


def verdict(
    fast: CheckReport, deep: CheckReport | None, mode: str, target: int | None = None
) -> tuple[str, list[int]]:
    """Return the branch (``store_ok``, ``store_bad`` or ``rebuild``) and the partitions a partial rebuild covers.

    ``auto`` rebuilds only the failing partitions when :func:`partial_rebuild` allows it; ``force`` always
    rebuilds everything.

    :param target: the partition count to key the rebuild for (the ``partitions`` param), None: unchanged.
    """
    rebuild = as_choice("rebuild", mode, RebuildMode)
    bad = not fast.ok or (deep is not None and not deep.ok)
    only = partial_rebuild(fast, deep, target) if rebuild == RebuildMode.AUTO and bad else []
    if rebuild == RebuildMode.FORCE:
        return "rebuild", only
    if not bad:
        return "store_ok", only
    return ("rebuild" if rebuild == RebuildMode.AUTO else "store_bad"), only


def store_bad(reports: Iterable[Any]) -> StateCheckFailed:
    """The error that fails a run whose store is bad while ``rebuild`` is ``never``, quoting each failed check
    of ``reports`` (the checks' XComs; a skipped check's is None)."""
    pulled = (check_report(report) for report in reports)
    details = "; ".join(
        f"{r.check} check: problems {r.problems}, failed partitions {r.failed_partitions}"
        for r in pulled
        if r is not None and not r.ok
    )
    return StateCheckFailed(f"the state store is bad and rebuild=never: {details}")
