"""Typed results of the checks, their JSON round-trips, and how a report reads to an operator.

* :class:`PartitionResult` - the deep check of one partition (changelog, snapshot and manifest sides);
* :class:`CheckReport` - a whole check report (fast or deep), as the operators push it to XCom;
* :func:`summary`, :func:`fast_lines`, :func:`deep_lines` - the runbook text of a report.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_kstate.store.contract import FAILED_FIELD, failed_partitions

#: The digest of no rows.
EMPTY_DIGEST = "0" * 16
#: The kinds of row difference the deep check samples keys of.
KINDS = ("missing", "extra", "changed", "misplaced", "duplicated")
_SAMPLED = ("missing_keys", "extra_keys", "changed_keys", "misplaced_keys")


@dataclass
class Side:
    """Rows and digest of one partition on one side (changelog, snapshot or manifest)."""

    rows: int = 0
    digest: str = EMPTY_DIGEST

    def __str__(self) -> str:
        return f"{self.rows} rows, digest {self.digest}"


@dataclass
class PartitionResult:
    """The deep check of one partition, as reported."""

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

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "ok": self.ok,
            "problems": self.problems,
            "changelog_rows": self.changelog.rows,
            "snapshot_rows": self.snapshot.rows,
            "manifest_rows": None if self.manifest is None else self.manifest.rows,
            "changelog_digest": self.changelog.digest,
            "snapshot_digest": self.snapshot.digest,
            "manifest_digest": None if self.manifest is None else self.manifest.digest,
            "end_offset": self.end_offset,
            "lag": self.lag,
            "notes": self.notes,
            "counts": self.counts,
        }
        for kind in KINDS:
            out[f"{kind}_keys"] = self.samples[kind]
        return out

    @classmethod
    def from_json(cls, partition: int, doc: Mapping[str, Any]) -> PartitionResult:
        """Rebuild a result from :meth:`to_json` (the inverse, except the transient ``misplaced`` count)."""
        manifest = None
        if doc.get("manifest_rows") is not None:
            manifest = Side(int(doc["manifest_rows"]), str(doc.get("manifest_digest") or EMPTY_DIGEST))
        return cls(
            partition=partition,
            changelog=Side(
                int(doc.get("changelog_rows") or 0), str(doc.get("changelog_digest") or EMPTY_DIGEST)
            ),
            snapshot=Side(
                int(doc.get("snapshot_rows") or 0), str(doc.get("snapshot_digest") or EMPTY_DIGEST)
            ),
            manifest=manifest,
            problems=list(doc.get("problems") or []),
            notes=list(doc.get("notes") or []),
            end_offset=int(doc.get("end_offset") or 0),
            lag=int(doc.get("lag") or 0),
            counts=dict(doc.get("counts") or {}),
            samples={k: list(doc.get(f"{k}_keys") or []) for k in KINDS},
        )


#: The fields every check report carries, in the order a report built in Python lists them.
_FIELDS = ("check", "topic", "snapshot_uri", "ok", "problems", "partitions", FAILED_FIELD)
#: The fields the operators add to a report that lacks them (the others stay absent, as read).
_ADDED = ("check", "topic", "snapshot_uri", FAILED_FIELD)


@dataclass
class CheckReport:
    """A check report: the verdict, store-wide problems and one entry per partition.

    The operators parse a check's report document into one (:meth:`from_json`) and push :meth:`to_json` to
    XCom: the same document, key for key and in the same order, with :data:`FAILED_FIELD` set from the
    per-partition entries (or kept as listed when there are none) and ``check``, ``topic`` and
    ``snapshot_uri`` added when absent.

    :param check: ``fast`` or ``deep``.
    :param topic: the changelog topic.
    :param snapshot_uri: the snapshot checked.
    :param ok: the verdict.
    :param problems: store-wide problems.
    :param partitions: per-partition entries (``ok``, ``problems`` and what the check measured), in the
        report's order.
    :param listed: the failed partitions a report lists without per-partition entries.
    :param extra: every other field of the report, kept as is.
    :param order: the report document's field order (empty for a report built in Python).
    """

    check: str
    topic: str
    snapshot_uri: str
    ok: bool
    problems: list[str] = field(default_factory=list)
    partitions: dict[int, dict[str, Any]] = field(default_factory=dict)
    listed: list[int] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    order: tuple[str, ...] = field(default=(), repr=False)

    @property
    def failed_partitions(self) -> list[int]:
        """The partitions found bad: the entries decide when present, else the listed ones (as
        :func:`~airflow_provider_kstate.store.contract.failed_partitions`)."""
        if self.partitions:
            return sorted(p for p, e in self.partitions.items() if not e.get("ok", False))
        return sorted(self.listed)

    def entry(self, partition: int) -> dict[str, Any]:
        """Return a partition's entry (empty when the report has none)."""
        return self.partitions.get(partition, {})

    def _field(self, name: str) -> Any:
        values = {
            "check": self.check,
            "topic": self.topic,
            "snapshot_uri": self.snapshot_uri,
            "ok": self.ok,
            "problems": list(self.problems),
            "partitions": {str(p): dict(e) for p, e in self.partitions.items()},
            FAILED_FIELD: self.failed_partitions,
        }
        return values[name] if name in values else self.extra[name]

    def to_json(self) -> dict[str, Any]:
        """Return the report document (the XCom): the fields in the order read, then the added ones."""
        names = list(self.order or _FIELDS)
        names += [k for k in (*_ADDED, *self.extra) if k not in names]
        return {name: self._field(name) for name in names if name in _FIELDS or name in self.extra}

    @classmethod
    def from_json(
        cls, doc: Mapping[str, Any], check: str = "deep", topic: str = "", snapshot_uri: str = ""
    ) -> CheckReport:
        """Read a report document (one listing failed partitions without per-partition entries too).

        :param check: ``fast`` or ``deep``, when the document does not say.
        :param topic: the topic, when the document does not say.
        :param snapshot_uri: the snapshot, when the document does not say.
        """
        entries = doc.get("partitions") or {}
        return cls(
            check=str(doc.get("check") or check),
            topic=str(doc.get("topic") or topic),
            snapshot_uri=str(doc.get("snapshot_uri") or snapshot_uri),
            ok=bool(doc.get("ok")),
            problems=list(doc.get("problems") or []),
            partitions={int(p): dict(e) for p, e in entries.items()},
            listed=[] if entries else failed_partitions(doc),
            extra={k: v for k, v in doc.items() if k not in _FIELDS},
            order=tuple(doc),
        )


# -- the runbook text of a report -------------------------------------------------------------------------


def samples(entry: Mapping[str, Any]) -> str:
    """Return `` (sample keys: ...)`` of a partition entry, or ``""`` when it has none."""
    parts = []
    for kind in _SAMPLED:
        keys = entry.get(kind)
        if isinstance(keys, list) and keys:
            parts.append(f"{kind}={keys[:5]}")
    return f" (sample keys: {', '.join(parts)})" if parts else ""


def summary(report: CheckReport, limit: int = 3) -> str:
    """Return a one-paragraph statement of what failed: global problems, then each failing partition."""
    lines = list(report.problems)
    for p in report.failed_partitions:
        entry = report.entry(p)
        detail = "; ".join(str(x) for x in entry.get("problems", [])[:limit]) or "failed"
        lines.append(f"partition {p}: {detail}{samples(entry)}")
    return " | ".join(lines) or "no details in the report"


def fast_lines(report: CheckReport) -> list[tuple[bool, str]]:
    """Return the fast check's log lines as ``(is_warning, text)``: verdict, problems, the fix."""
    extra = report.extra
    lines = [
        (
            False,
            f"Fast check of snapshot {report.snapshot_uri} against {report.topic} "
            f"({extra['topic_partitions']} partitions, snapshot {extra.get('snapshot_partitions')}): "
            f"{'OK' if report.ok else 'FAILED'} in {extra['seconds']:.3f}s",
        )
    ]
    lines += [(True, f"  store: {problem}") for problem in report.problems]
    for p in report.failed_partitions:
        lines += [(True, f"  {problem}") for problem in report.entry(p).get("problems", [])]
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
            f"{'OK' if report.ok else 'FAILED'} ({report.extra.get('records_read')} changelog records read "
            f"in {report.extra.get('seconds')}s)",
        )
    ]
    lines += [(True, f"  store: {problem}") for problem in report.problems]
    failed = report.failed_partitions
    for p in failed:
        entry = report.entry(p)
        lines += [(True, f"  partition {p}: {problem}") for problem in entry.get("problems", [])]
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
