"""Typed reports of the checks and the rebuild, and how a check report reads to an operator.

* :class:`PartitionEntry` - one partition of a check report (the fast check's offsets, the deep check's
  three sides);
* :class:`CheckReport` - a whole check report (fast or deep; document ``store/check-report``), as the fast
  check and the deep check application build it and the operators push it to XCom;
* :class:`PartitionResult` - the deep check's working result of one partition (its entry: :meth:`to_entry`);
* :class:`RebuildReport` - the rebuild application's report (document ``store/rebuild-report``);
* :func:`summary`, :func:`fast_lines`, :func:`deep_lines` - the runbook text of a report.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr
from pydantic.json_schema import JsonDict

from airflow_provider_kstate.documents import OrderedDocument
from airflow_provider_kstate.store.contract import FAILED_FIELD, AppReportError
from airflow_provider_kstate.store.manifest import PartitionStats

#: The digest of no rows.
EMPTY_DIGEST = "0" * 16
#: The kinds of row difference the deep check samples keys of.
KINDS = ("missing", "extra", "changed", "misplaced", "duplicated")
_SAMPLED = ("missing_keys", "extra_keys", "changed_keys", "misplaced_keys")
#: The check report's version.
CHECK_FORMAT: Final = "kstate-check-report/1"
#: The rebuild report's version.
REBUILD_FORMAT: Final = "kstate-rebuild-report/1"
#: Partition-keyed objects: the keys are partition numbers.
_PARTITION_KEYS: JsonDict = {"propertyNames": {"pattern": "^[0-9]+$"}}

R = TypeVar("R", bound="CheckReport")


class PartitionEntry(BaseModel):
    """One partition of a check report: the verdict, the problems and what the check measured.

    The fast check writes ``log_start``, ``high_watermark``, the manifest's ``start_offset``,
    ``end_offset``, ``rows``, the ``lag`` and ``file_problems``; the deep check the ``changelog``,
    ``snapshot`` and ``manifest`` rows and digests, ``end_offset``, ``lag``, ``notes``, ``counts`` and sample
    keys per kind of difference. An entry holds the fields it was read or built with and no others (a
    field a check did not measure is absent, not null). An entry without ``ok`` is a failed one.
    """

    model_config = ConfigDict(
        frozen=True,
        extra="allow",
        title="one partition of a kstate check report",
        json_schema_extra={
            "description": "The partition's verdict, its problems and what the check measured (fields marked "
            "fast: the fast check's, deep: the deep check's). A field a check did not measure is absent; an "
            "entry without ok is a failed one."
        },
    )

    ok: bool = Field(default=False, description="whether the partition passed")
    problems: list[str] = Field(default_factory=list, description="what is wrong, one sentence each")
    changelog_rows: int | None = Field(default=None, description="deep: live rows of the folded changelog")
    snapshot_rows: int | None = Field(default=None, description="deep: rows in the snapshot's files")
    manifest_rows: int | None = Field(
        default=None, description="deep: rows the manifest records (null: none)"
    )
    changelog_digest: str | None = Field(default=None, description="deep: digest of the folded changelog")
    snapshot_digest: str | None = Field(default=None, description="deep: digest of the snapshot's rows")
    manifest_digest: str | None = Field(default=None, description="deep: the manifest's digest (null: none)")
    log_start: int | None = Field(default=None, description="fast: the changelog's log start offset now")
    high_watermark: int | None = Field(default=None, description="fast: the changelog's high watermark now")
    start_offset: int | None = Field(default=None, description="fast: the manifest's start offset")
    end_offset: int | None = Field(default=None, description="the manifest's end offset (resume point)")
    rows: int | None = Field(default=None, description="fast: the rows the manifest records")
    lag: int | None = Field(default=None, description="records the changelog has past the end offset")
    file_problems: int | None = Field(
        default=None, description="fast: how many of the problems are damaged data files"
    )
    notes: list[str] | None = Field(default=None, description="deep: remarks that are not problems")
    counts: dict[str, int] | None = Field(default=None, description="deep: differing rows per kind")
    missing_keys: list[str] | None = Field(
        default=None, description="deep: sample keys only the changelog has"
    )
    extra_keys: list[str] | None = Field(default=None, description="deep: sample keys only the snapshot has")
    changed_keys: list[str] | None = Field(default=None, description="deep: sample keys whose values differ")
    misplaced_keys: list[str] | None = Field(
        default=None, description="deep: sample keys outside their home partition"
    )
    duplicated_keys: list[str] | None = Field(
        default=None, description="deep: sample keys stored more than once"
    )

    def to_dict(self) -> dict[str, Any]:
        """The entry as the report carries it (its fields, in the reports' order)."""
        return self.model_dump(mode="json", exclude_unset=True)

    @classmethod
    def from_dict(cls, data: Any) -> PartitionEntry:
        """Read an entry (an entry already typed is returned as is)."""
        return data if isinstance(data, cls) else cls.model_validate(data)


_NO_ENTRY = PartitionEntry()


@dataclass
class Side:
    """Rows and digest of one partition on one side (changelog, snapshot or manifest)."""

    rows: int = 0
    digest: str = EMPTY_DIGEST

    def __str__(self) -> str:
        return f"{self.rows} rows, digest {self.digest}"


@dataclass
class PartitionResult:
    """The deep check of one partition while it runs; :meth:`to_entry` is its report entry."""

    partition: int
    changelog: Side = field(default_factory=Side)
    snapshot: Side = field(default_factory=Side)
    manifest: Side | None = None
    misplaced: int = 0
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    end_offset: int = 0
    lag: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    samples: dict[str, list[str]] = field(default_factory=lambda: {k: [] for k in KINDS})

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def needs_detail(self) -> bool:
        return (self.changelog.rows, self.changelog.digest) != (
            self.snapshot.rows,
            self.snapshot.digest,
        ) or bool(self.misplaced)

    def to_entry(self) -> PartitionEntry:
        """The partition's entry in the deep check's report."""
        return PartitionEntry(
            ok=self.ok,
            problems=self.problems,
            changelog_rows=self.changelog.rows,
            snapshot_rows=self.snapshot.rows,
            manifest_rows=None if self.manifest is None else self.manifest.rows,
            changelog_digest=self.changelog.digest,
            snapshot_digest=self.snapshot.digest,
            manifest_digest=None if self.manifest is None else self.manifest.digest,
            end_offset=self.end_offset,
            lag=self.lag,
            notes=self.notes,
            counts=self.counts,
            missing_keys=self.samples["missing"],
            extra_keys=self.samples["extra"],
            changed_keys=self.samples["changed"],
            misplaced_keys=self.samples["misplaced"],
            duplicated_keys=self.samples["duplicated"],
        )

    def to_dict(self) -> dict[str, Any]:
        """The entry's dict (:meth:`to_entry`)."""
        return self.to_entry().to_dict()

    @classmethod
    def from_dict(cls, partition: int, doc: PartitionEntry | Mapping[str, Any]) -> PartitionResult:
        """Rebuild a result from its entry (the inverse of :meth:`to_entry`, except the transient
        ``misplaced`` count)."""
        entry = PartitionEntry.from_dict(doc)
        manifest = None
        if entry.manifest_rows is not None:
            manifest = Side(entry.manifest_rows, entry.manifest_digest or EMPTY_DIGEST)
        return cls(
            partition=partition,
            changelog=Side(entry.changelog_rows or 0, entry.changelog_digest or EMPTY_DIGEST),
            snapshot=Side(entry.snapshot_rows or 0, entry.snapshot_digest or EMPTY_DIGEST),
            manifest=manifest,
            problems=list(entry.problems),
            notes=list(entry.notes or []),
            end_offset=entry.end_offset or 0,
            lag=entry.lag or 0,
            counts=dict(entry.counts or {}),
            samples={k: list(getattr(entry, f"{k}_keys") or []) for k in KINDS},
        )


#: The fields a report built in Python carries even when left at their defaults (one read carries the
#: fields it was read with).
_ALWAYS_BUILT = ("problems", "partitions")


class CheckReport(OrderedDocument):
    """A check report (document ``store/check-report``): the verdict, store-wide problems and one
    :class:`PartitionEntry` per partition, plus what each check measured.

    The fast check (:func:`~airflow_provider_kstate.store.fast_check.fast_check`) and the deep check
    application build one; the operators read it (:meth:`read`) and push :meth:`to_dict` to XCom: the same
    document, key for key and in the same order (:class:`~airflow_provider_kstate.documents.OrderedDocument`),
    with :data:`FAILED_FIELD` set from the per-partition entries (or kept as listed when there are none) and
    ``check``, ``topic`` and ``snapshot_uri`` added when absent. A report read without ``ok`` is a failed
    one (an entry too).
    """

    model_config = ConfigDict(
        extra="allow",
        title="kstate check report (fast or deep)",
        json_schema_extra={
            "description": "The XCom of the fast and deep check operators, and the report the deep check "
            "application writes (without check). Fields a check did not measure are absent; a report "
            "without ok is a failed one. failed_partitions lists the partitions whose entry is not ok (the "
            "listed ones when there are no entries)."
        },
    )
    schema_name = "store/check-report"
    read_error = AppReportError

    format: Literal["kstate-check-report/1"] = Field(default=CHECK_FORMAT, description="the report's version")
    check: Literal["fast", "deep"] | None = Field(
        default=None, description="which check (the deep check application's own report leaves it out)"
    )
    topic: str = Field(description="the changelog topic")
    snapshot_uri: str = Field(description="the snapshot checked")
    topic_id: str | None = Field(
        default=None, description="the changelog's topic id (KIP-516) now (null: it cannot be read)"
    )
    snapshot_topic_id: str | None = Field(
        default=None,
        description="the topic id the snapshot's manifest records (null: unknown, written before ids were "
        "recorded)",
    )
    topic_recreated: bool | None = Field(
        default=None,
        description="true: the changelog was deleted and created again since the snapshot was built (the "
        "ids differ); null: cannot tell (an id unknown, see warnings)",
    )
    ok: bool = Field(default=False, description="the verdict")
    problems: list[str] = Field(default_factory=list, description="store-wide problems")
    partitions: dict[int, PartitionEntry] = Field(
        default_factory=dict, description="one entry per partition checked", json_schema_extra=_PARTITION_KEYS
    )
    listed: list[int] = Field(
        default_factory=list,
        alias="failed_partitions",  # FAILED_FIELD
        description="the partitions found bad (written from the entries when there are any)",
    )
    topic_partitions: int | None = Field(default=None, description="fast: the topic's partition count")
    snapshot_partitions: int | None = Field(default=None, description="fast: the snapshot's partition count")
    snapshot_ok: bool | None = Field(
        default=None, description="false: no usable snapshot (missing, unreadable)"
    )
    snapshot_missing: bool | None = Field(default=None, description="fast: there is no snapshot at all")
    layout_ok: bool | None = Field(default=None, description="fast: the snapshot's layout fits the topic")
    written_at: str | None = Field(default=None, description="fast: when the manifest was written")
    snapshot_version: str | None = Field(default=None, description="the version checked (null: legacy)")
    data_files: int | None = Field(default=None, description="fast: the data files listed")
    layout: int | None = Field(default=None, description="deep: the snapshot's partition count")
    records_read: int | None = Field(default=None, description="deep: changelog records read")
    warnings: list[str] | None = Field(
        default=None,
        description="risks accepted, what could not be checked (a topic id unknown) and the like",
    )
    seconds: int | float | None = Field(default=None, description="how long the check took")

    _read: bool = PrivateAttr(default=False)

    @property
    def failed_partitions(self) -> list[int]:
        """The partitions found bad: the entries decide when present, else the listed ones (as
        :func:`~airflow_provider_kstate.store.contract.failed_partitions`)."""
        if self.partitions:
            return sorted(p for p, e in self.partitions.items() if not e.ok)
        return sorted(self.listed)

    @property
    def extra(self) -> dict[str, Any]:
        """The report's fields besides the verdict, the problems and the entries, as read."""
        core = {"format", "check", "topic", "snapshot_uri", "ok", "problems", "partitions", "listed"}
        values = {name: getattr(self, name) for name in self.model_fields_set if name not in core}
        return {**values, **(self.model_extra or {})}

    def entry(self, partition: int) -> PartitionEntry:
        """Return a partition's entry (an empty, failed one when the report has none)."""
        return self.partitions.get(partition, _NO_ENTRY)

    def to_dict(self) -> dict[str, Any]:
        """The report document (the XCom): the fields in the order read (or built), the version first, then
        the added ones."""
        out = super().to_dict()
        if not self._read:
            for name in _ALWAYS_BUILT:
                out.setdefault(name, [] if name == "problems" else {})
        out[FAILED_FIELD] = self.failed_partitions
        return out

    @classmethod
    def from_dict(cls: type[R], data: Any) -> R:
        """Read (and validate) a report document as it is (see :meth:`read` for one that may lack the check,
        topic or snapshot)."""
        if isinstance(data, cls):
            return data
        report = super().from_dict(data)
        report._read = True
        return report

    @classmethod
    def read(cls: type[R], doc: Any, check: str = "deep", topic: str = "", snapshot_uri: str = "") -> R:
        """Read a report document (one listing failed partitions without per-partition entries too).

        :param check: ``fast`` or ``deep``, when the document does not say.
        :param topic: the topic, when the document does not say.
        :param snapshot_uri: the snapshot, when the document does not say.
        :raises AppReportError: when it is not a valid report.
        """
        if isinstance(doc, Mapping):
            doc = dict(doc)
            for name, value in (("check", check), ("topic", topic), ("snapshot_uri", snapshot_uri)):
                if not doc.get(name):
                    doc[name] = value
        return cls.from_dict(doc)


class RebuildReport(OrderedDocument):
    """The rebuild application's report (document ``store/rebuild-report``): the version it committed,
    what it read and wrote, per partition the new manifest's entry, and what it removed after the commit.
    The rebuild operator pushes it to XCom as written."""

    model_config = ConfigDict(
        extra="allow",
        title="kstate rebuild report",
        json_schema_extra={
            "description": "The report the rebuild application writes when it committed a version, and the "
            "rebuild operator's XCom: the version, what it read and wrote, per partition the new manifest's "
            "entry, and what the clean-up after the commit removed."
        },
    )
    schema_name = "store/rebuild-report"
    read_error = AppReportError

    format: Literal["kstate-rebuild-report/1"] = Field(
        default=REBUILD_FORMAT, description="the report's version"
    )
    ok: Literal[True] = Field(default=True, description="a rebuild that failed writes an app-failure instead")
    topic: str = Field(description="the changelog topic")
    topic_id: str | None = Field(
        default=None,
        description="the changelog's topic id (KIP-516) the rows were read from (null: it could not be read)",
    )
    snapshot_uri: str = Field(description="the snapshot root")
    snapshot_version: str = Field(description="the version committed (now current)")
    records_read: int = Field(description="changelog records read")
    rows: int = Field(description="live rows written")
    layout: int = Field(description="the partition count the rows are placed for")
    only_partitions: list[int] | None = Field(
        default=None, description="the partitions rebuilt (null: all); the others were carried over"
    )
    partitions: dict[int, PartitionStats] = Field(
        description="the new manifest's entry of each partition", json_schema_extra=_PARTITION_KEYS
    )
    previous: str | None = Field(default=None, description="the version current before (null: none)")
    removed: list[str] = Field(default_factory=list, description="what the clean-up after the commit removed")
    warnings: list[str] = Field(default_factory=list, description="risks accepted and the like")
    seconds: int | float | None = Field(default=None, description="how long the rebuild took, in the app")


def store_report(doc: Any) -> CheckReport | RebuildReport:
    """Read a store task's XCom: a check report (it names its ``check``) or a rebuild report.

    :raises AppReportError: when it is neither.
    """
    if isinstance(doc, (CheckReport, RebuildReport)):
        return doc
    if isinstance(doc, Mapping) and doc.get("check"):
        return CheckReport.read(doc)
    return RebuildReport.from_dict(doc)


# -- the runbook text of a report -------------------------------------------------------------------------


def samples(entry: PartitionEntry) -> str:
    """Return `` (sample keys: ...)`` of a partition entry, or ``""`` when it has none."""
    parts = []
    for kind in _SAMPLED:
        keys = getattr(entry, kind)
        if keys:
            parts.append(f"{kind}={keys[:5]}")
    return f" (sample keys: {', '.join(parts)})" if parts else ""


def summary(report: CheckReport, limit: int = 3) -> str:
    """Return a one-paragraph statement of what failed: global problems, then each failing partition."""
    lines = list(report.problems)
    for p in report.failed_partitions:
        entry = report.entry(p)
        detail = "; ".join(str(x) for x in entry.problems[:limit]) or "failed"
        lines.append(f"partition {p}: {detail}{samples(entry)}")
    return " | ".join(lines) or "no details in the report"


def fast_lines(report: CheckReport) -> list[tuple[bool, str]]:
    """Return the fast check's log lines as ``(is_warning, text)``: verdict, problems, the fix."""
    lines = [
        (
            False,
            f"Fast check of snapshot {report.snapshot_uri} against {report.topic} "
            f"({report.topic_partitions} partitions, snapshot {report.snapshot_partitions}): "
            f"{'OK' if report.ok else 'FAILED'} in {report.seconds or 0:.3f}s",
        )
    ]
    lines += [(True, f"  store: {problem}") for problem in report.problems]
    for p in report.failed_partitions:
        lines += [(True, f"  {problem}") for problem in report.entry(p).problems]
    lines += [(True, f"  warning: {warning}") for warning in report.warnings or []]
    if not report.ok:
        lines.append(
            (True, "  next: rebuild the snapshot (KStateRebuildOperator, or the DAG with rebuild=auto)")
        )
    return lines


def deep_lines(report: CheckReport) -> list[tuple[bool, str]]:
    """Return the deep check's log lines as ``(is_warning, text)``: verdict, per failing partition what
    and which keys, the fix."""
    lines = [
        (
            False,
            f"Deep check of snapshot {report.snapshot_uri} against {report.topic}: "
            f"{'OK' if report.ok else 'FAILED'} ({report.records_read} changelog records read "
            f"in {report.seconds}s)",
        )
    ]
    lines += [(True, f"  store: {problem}") for problem in report.problems]
    lines += [(True, f"  warning: {warning}") for warning in report.warnings or []]
    failed = report.failed_partitions
    for p in failed:
        entry = report.entry(p)
        lines += [(True, f"  partition {p}: {problem}") for problem in entry.problems]
        if samples(entry):
            lines.append((True, f"  partition {p}:{samples(entry)}"))
    if failed:
        lines.append(
            (
                True,
                f"  next: rebuild only these partitions (KStateRebuildOperator only_partitions={failed}) "
                "or the DAG with rebuild=auto",
            )
        )
    return lines
