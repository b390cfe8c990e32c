"""Runbook lines and report files that stay small at any size.

Logs carry one line per group, with partition ranges (``64-4095``), and list exceptions one by one up to a
cap. The per-group, per-partition evidence goes to a report file: gzip-compressed JSON Lines, one row per
group and partition, written to a local folder (default ``$AIRFLOW_HOME/kstate-reports``) or to any URI
its :class:`~airflow_provider_kstate.increase.ports.ReportStorage` reaches: :class:`LocalReportStorage`
here (the worker's disk), :class:`~airflow_provider_kstate.hooks.reports.ObjectStorageReports` for what
Airflow's ``ObjectStoragePath`` reaches (``s3://``, ``gs://`` ...). XCom carries the summary and the
report's URI.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import urlparse

from airflow_provider_kstate.errors import ReportError

if TYPE_CHECKING:
    from airflow_provider_kstate.increase.ports import ReportStorage

#: Exceptions (kept offsets, gaps on old partitions, lag, problems) listed one by one per step, at most.
EXCEPTION_CAP = 50
#: Range segments written out in one log line, at most.
RANGE_CAP = 12
#: The format of a seed report's index (``seed.evidence.json``).
EVIDENCE_FORMAT = "kstate-seed-evidence/1"


def ranges(partitions: Iterable[int], cap: int = RANGE_CAP) -> str:
    """Return ``[0, 1, 2, 5, 7, 8]`` as ``"0-2,5,7-8"`` (``"none"`` when empty), at most ``cap`` segments."""
    segments: list[str] = []
    start = prev = None
    for p in sorted(set(partitions)):
        if prev is not None and p == prev + 1:
            prev = p
            continue
        if start is not None:
            segments.append(_segment(start, prev))
        start = prev = p
    if start is not None:
        segments.append(_segment(start, prev))
    if not segments:
        return "none"
    if len(segments) > cap:
        return ",".join(segments[:cap]) + f",... ({len(segments) - cap} more ranges)"
    return ",".join(segments)


def _segment(start: int, end: Any) -> str:
    return str(start) if start == end else f"{start}-{end}"


class Exceptions:
    """Collect exception lines and log at most ``cap`` of them, then how many more the report holds."""

    def __init__(self, log: Any, prefix: str, cap: int = EXCEPTION_CAP) -> None:
        self.log = log
        self.prefix = prefix
        self.cap = cap
        self.count = 0

    def add(self, text: str, *args: Any) -> None:
        self.count += 1
        if self.count <= self.cap:
            self.log.warning(f"{self.prefix} {text}", *args)

    def close(self, report_uri: str) -> None:
        if self.count > self.cap:
            self.log.warning(
                "%s ... and %s more exceptions: every one is in the report %s",
                self.prefix,
                f"{self.count - self.cap:,}",
                report_uri,
            )


def default_report_base() -> str:
    """Return the default report location: ``$AIRFLOW_HOME/kstate-reports`` on the worker's disk."""
    home = os.environ.get("AIRFLOW_HOME") or str(Path.home() / "airflow")
    return str(Path(home) / "kstate-reports")


#: A run's progress document in its report folder.
PROGRESS_NAME = "progress.json"


def topic_folder(base: str, topic: str) -> str:
    """Return ``BASE/TOPIC``: the folder of the report folders of a topic's runs."""
    return f"{(base or default_report_base()).rstrip('/')}/{topic}"


def run_folder_name(owner: str) -> str:
    """Return the name of a run's report folder under its topic's folder (the owner, made path-safe)."""
    return re.sub(r"[^A-Za-z0-9._=-]+", "_", owner) or "manual"


def report_location(base: str, topic: str, owner: str, step: str) -> str:
    """Return the report file's URI for one step of one run: ``BASE/TOPIC/OWNER/STEP.jsonl.gz``."""
    return f"{topic_folder(base, topic)}/{run_folder_name(owner)}/{step}.jsonl.gz"


def progress_location(base: str, topic: str, owner: str) -> str:
    """Return the URI of a run's progress document: ``BASE/TOPIC/OWNER/progress.json``."""
    return f"{topic_folder(base, topic)}/{run_folder_name(owner)}/{PROGRESS_NAME}"


def is_local(uri: str) -> bool:
    """Whether ``uri`` is a path on this machine's disk (no scheme, or ``file://``)."""
    return urlparse(uri).scheme in ("", "file")


def local_report_path(uri: str) -> Path:
    """The path on this disk of a local report URI (a path, or ``file://``)."""
    parsed = urlparse(uri)
    return Path(parsed.path if parsed.scheme == "file" else uri)


class LocalReportStorage:
    """Report files on this machine's disk (a path or a ``file://`` URI); a written one appears under its
    name only when complete. Other URIs need a storage that reaches them."""

    @contextmanager
    def open(self, uri: str, mode: str) -> Iterator[IO[bytes]]:
        """Open the report at ``uri`` in binary ``mode`` (``"r"`` or ``"w"``)."""
        if not is_local(uri):
            raise ReportError(f"report {uri}: not a local path; pass a ReportStorage that reaches it")
        path = local_report_path(uri)
        if "w" not in mode:
            with open(path, "rb") as handle:
                yield handle
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.partial")
        try:
            with open(partial, "wb") as handle:
                yield handle
            os.replace(partial, path)
        finally:
            partial.unlink(missing_ok=True)

    def remove(self, uri: str) -> None:
        """Remove the file at ``uri`` if there is one."""
        if not is_local(uri):
            raise ReportError(f"report {uri}: not a local path; pass a ReportStorage that reaches it")
        local_report_path(uri).unlink(missing_ok=True)


#: The storage of a report whose caller names none: this machine's disk.
LOCAL = LocalReportStorage()


@contextmanager
def _open_binary(uri: str, mode: str, storage: ReportStorage | None) -> Iterator[IO[bytes]]:
    try:
        with (storage or LOCAL).open(uri, mode) as handle:
            yield handle
    except OSError as exc:
        raise ReportError(f"report {uri}: {exc}") from exc


class ReportWriter:
    """Write report rows to an open text stream as JSON Lines.

    A seed step also notes, per group, the partitions it seeded (:meth:`note_seeded`): that index is written
    beside the report (:func:`evidence_uri`) so ``verify`` need not parse every row to learn it.
    """

    def __init__(self, handle: IO[str]) -> None:
        self._handle = handle
        self.rows = 0
        self.seeded: dict[str, str] = {}

    def note_seeded(self, group: str, partitions: Iterable[int]) -> None:
        """Record the partitions of ``group`` this step seeded (as ranges, uncapped)."""
        self.seeded[group] = ranges(partitions, cap=sys.maxsize)

    def write(self, row: dict[str, Any]) -> None:
        """Write one row (any JSON-safe dict)."""
        self._handle.write(json.dumps(row, separators=(",", ":")))
        self._handle.write("\n")
        self.rows += 1

    def write_lines(self, lines: list[str]) -> None:
        """Write rows already formatted as JSON lines (each ending in a newline): the hot path, one
        f-string per row, for the per-partition rows of large groups."""
        self._handle.write("".join(lines))
        self.rows += len(lines)


@contextmanager
def write_report(
    uri: str,
    storage: ReportStorage | None = None,
    evidence: bool = False,
    topic_ids: Mapping[str, str] | None = None,
) -> Iterator[ReportWriter]:
    """Open ``uri`` for writing report rows (gzip JSON Lines).

    :param storage: where the report lives (None: this machine's disk).
    :param evidence: a seed report: remove the index beside it first (so an index never describes an older
        report), and write the groups' seeded partitions there once the report is complete.
    :param topic_ids: ``{topic: KIP-516 id}`` the report's offsets belong to (the plan's ``topic_ids``),
        recorded in the seed report's index next to the names; None or empty: not recorded (unknown).
    """
    if evidence:
        _remove(evidence_uri(uri), storage)
    with _open_binary(uri, "w", storage) as raw:
        with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1) as zipped:
            with io.TextIOWrapper(zipped, encoding="utf-8") as text:
                writer = ReportWriter(text)
                yield writer
    if evidence:
        index = {"format": EVIDENCE_FORMAT, "report_uri": uri, "rows": writer.rows, "seeded": writer.seeded}
        if topic_ids:
            index["topic_ids"] = dict(topic_ids)
        with _open_binary(evidence_uri(uri), "w", storage) as raw:
            raw.write(json.dumps(index, separators=(",", ":")).encode())


@contextmanager
def seed_reports(
    uris: Mapping[str, str], ids: Callable[[str], Mapping[str, str]], storage: ReportStorage | None = None
) -> Iterator[tuple[dict[str, str], dict[str, ReportWriter]]]:
    """Open a run's seed report of every topic (``uris``: ``{topic: uri}``, :func:`report_location`'s);
    yield ``({topic: uri}, {topic: writer})``, every report complete (its index written) once the body ends.

    :param ids: a topic's ids its offsets belong to (``Plan.ids_of``; recorded in its report's index).
    :param storage: where the reports live (None: this machine's disk).
    """
    with ExitStack() as stack:
        writers = {
            topic: stack.enter_context(write_report(uri, storage, evidence=True, topic_ids=ids(topic)))
            for topic, uri in uris.items()
        }
        yield dict(uris), writers


def evidence_uri(report_uri: str) -> str:
    """Return where the index of the seed report at ``report_uri`` lives (``seed.evidence.json``)."""
    return re.sub(r"\.jsonl\.gz$", "", report_uri) + ".evidence.json"


def read_evidence(report_uri: str, storage: ReportStorage | None = None) -> dict[str, Any] | None:
    """Return the index beside a seed report, or None when there is none (an older run: parse the report).

    :raises ReportError: the index exists but is unreadable or of another format.
    """
    try:
        with _open_binary(evidence_uri(report_uri), "r", storage) as raw:
            index = json.loads(raw.read())
    except ReportError as exc:
        if isinstance(exc.__cause__, FileNotFoundError):
            return None
        raise
    except ValueError as exc:
        raise ReportError(f"the seed report's index {evidence_uri(report_uri)} is unreadable: {exc}") from exc
    if not isinstance(index, dict) or index.get("format") != EVIDENCE_FORMAT:
        raise ReportError(f"the seed report's index {evidence_uri(report_uri)} is not {EVIDENCE_FORMAT}")
    return index


def expand(text: str) -> Iterator[int]:
    """Yield the partitions of a ranges text (``"0-2,5"`` -> 0, 1, 2, 5); ``"none"`` yields nothing."""
    if text == "none":
        return
    for segment in text.split(","):
        first, _, last = segment.partition("-")
        yield from range(int(first), int(last or first) + 1)


def _remove(uri: str, storage: ReportStorage | None) -> None:
    try:
        (storage or LOCAL).remove(uri)
    except OSError as exc:
        raise ReportError(f"report {uri}: {exc}") from exc


def read_report(
    uri: str, storage: ReportStorage | None = None, block: int = 1 << 20
) -> Iterator[dict[str, Any]]:
    """Yield the rows of the report at ``uri``, parsing ``block`` bytes at a time with one ``json.loads``.

    :raises ReportError: the report is missing or unreadable.
    """
    with _open_binary(uri, "r", storage) as raw:
        try:
            with gzip.GzipFile(fileobj=raw, mode="rb") as zipped:
                carry = b""
                for chunk in iter(lambda: zipped.read(block), b""):
                    head, _, carry = (carry + chunk).rpartition(b"\n")
                    yield from _rows_of(head)
                yield from _rows_of(carry)
        except (OSError, EOFError, ValueError) as exc:
            raise ReportError(f"report {uri} is unreadable: {exc}") from exc


def _rows_of(data: bytes) -> list[dict[str, Any]]:
    lines = [line for line in data.decode("utf-8").split("\n") if line.strip()]
    return json.loads("[" + ",".join(lines) + "]") if lines else []
