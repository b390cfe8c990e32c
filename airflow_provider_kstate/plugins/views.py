"""What the kstate page shows, as JSON-safe dicts: a topic's live plan, the increase runs and their proof, the
snapshots. No FastAPI here (see :mod:`airflow_provider_kstate.plugins.app`); read-only everywhere.

* **Topics** - the plan of a run to N partitions computed as a dry run (the one planner, ``plan_increase``: no lease,
  nothing changed), each group's committed-offset lag, and the broker check's last verdict (never probed here).
* **Runs** - one per report folder ``<base>/<topic>/<dag_id>_<run_id>/`` (``seed.jsonl.gz``,
  ``verify.jsonl.gz``, and ``progress.json`` while and after it runs: :mod:`.watch`): the list pages
  through folders and reads nothing large; a run's proof is summarized
  per group (partition ranges) in one streaming pass over its verify report, cached by file size and
  mtime, then paged. The base is the deployment's (``[kstate] report_base``, else
  ``$AIRFLOW_HOME/kstate-reports``), never a path from the request.
* **Snapshots** - the ``kstate-snapshot`` Assets' URIs: current version and history from the pointer,
  rows and offsets from the manifest, the last fast and deep check (their XComs) and the partitions they
  found damaged, and a running (or the last) rebuild's progress (:mod:`.rebuild_progress`).

No secret is returned: connections are used, never shown (only the first bootstrap server names a
cluster).
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.increase.report import default_report_base, ranges, read_report
from airflow_provider_kstate.plugins.rebuild_progress import snapshot_progress
from airflow_provider_kstate.store.contract import AppReportError
from airflow_provider_kstate.store.results import CheckReport

if TYPE_CHECKING:
    from airflow_provider_kstate.doctor.verdict import Verdict
    from airflow_provider_kstate.increase.plan import Plan

#: Runs per page, at most.
MAX_LIMIT = 200
#: Verify-report summaries kept in memory (one per run; each is a few KB per group).
CACHE_RUNS = 16
#: The maintenance DAG's check tasks whose XComs are a snapshot's check history.
CHECK_TASKS = ("fast_check", "deep_check", "recheck_fast", "recheck_deep")
#: Recent XComs scanned for checks and verifications.
XCOM_SCAN = 500


def _page(offset: int, limit: int) -> tuple[int, int]:
    return max(int(offset), 0), min(max(int(limit), 1), MAX_LIMIT)


# --------------------------------------------------------------------------------------------- topics


def last_verdict(conn_id: str) -> Verdict | None:
    """Return the broker check's last verdict for the connection (None: not checked yet, or no doctor
    module). Never probes the broker."""
    try:
        from airflow_provider_kstate.hooks.doctor import KStateDoctorHook  # type: ignore[import-not-found]
    except ImportError:
        return None
    return KStateDoctorHook(conn_id).last_verdict()


def broker_verdict(conn_id: str) -> dict[str, Any]:
    """Return the broker check's last verdict as the page shows it, or ``{"checked": False}`` ("not checked
    yet"). Never probes the broker."""
    verdict = last_verdict(conn_id)
    return {"checked": False} if verdict is None else verdict.shown()


def client_piece_clients(conn_id: str) -> dict[str, set[str]]:
    """``{group: client ids}`` of the consumers that acknowledged on the default control topic (read only:
    the control topic is not created when it does not exist)."""
    from airflow_provider_kstate.hooks.control import KStateControlHook

    return KStateControlHook(conn_id, request_timeout=10.0).client_piece_clients()


def topic_view(
    admin: Any, conn_id: str, topic: str, target: int | None, topics: list[str] | None = None
) -> dict[str, Any]:
    """Return the live plan of ``topic`` as a dry run to ``target`` partitions (None: the current count):
    the document ``kstate plan`` prints too (:mod:`airflow_provider_kstate.increase.preview`). With
    ``topics`` (co-partitioned with ``topic``, grown together in one run): the one plan of the set, each
    topic with its count now and after (``topics``), every group once with the topics it reads.

    :param admin: a :class:`~airflow_provider_kstate.hooks.admin.KStateAdminHook` (or anything with its
        verbs).
    """
    from airflow_provider_kstate.increase.topic_set import preview_topic_set

    plan, verdict = topic_plan(admin, conn_id, [topic, *(t for t in topics or [] if t != topic)], target)
    shown = {"checked": False} if verdict is None else verdict.shown()
    return {**preview_topic_set(admin, plan, shown), "conn_id": conn_id}


def topic_plan(admin: Any, conn_id: str, names: list[str], target: int | None) -> tuple[Plan, Verdict | None]:
    """The page's plan of ``names`` to ``target`` (the one planner; the broker doctor's cached verdict, never
    probed) and that verdict."""
    from airflow_provider_kstate.doctor.promises import SHARE_NEW_PARTITIONS
    from airflow_provider_kstate.increase.planner import plan_increase
    from airflow_provider_kstate.increase.request import PlanRequest

    verdict = last_verdict(conn_id)
    request = PlanRequest(
        topics=tuple(names),
        partitions=target,
        share_new_partitions_kept=verdict is not None and verdict.kept(SHARE_NEW_PARTITIONS),
    )
    return plan_increase(admin, request, lambda: client_piece_clients(conn_id)), verdict


# ----------------------------------------------------------------------------------------------- runs


def report_base() -> str:
    """Return the deployment's report base: ``[kstate] report_base``, else ``$AIRFLOW_HOME/kstate-reports``."""
    try:
        from airflow.configuration import conf

        configured = conf.get("kstate", "report_base", fallback="")
    except Exception:  # noqa: BLE001 - no Airflow config (a unit test): the default
        configured = ""
    return configured or default_report_base()


def owner_folder(dag_id: str, run_id: str) -> str:
    """Return the report folder name of a DAG run (as :func:`~.report.report_location` writes it)."""
    return re.sub(r"[^A-Za-z0-9._=-]+", "_", f"{dag_id}/{run_id}") or "manual"


def _safe_child(base: Path, *names: str) -> Path:
    """Return ``base/names...``, refusing anything that leaves ``base`` (``..``, absolute names)."""
    for name in names:
        if not name or name in (".", "..") or "/" in name or "\\" in name:
            raise ValueError(f"not a report folder name: {name!r}")
    path = base.joinpath(*names)
    if os.path.commonpath([base.resolve(), path.resolve()]) != str(base.resolve()):
        raise ValueError(f"not a report folder name: {names!r}")
    return path


def list_topics_with_runs(base: str) -> list[str]:
    """Return the topics that have report folders under ``base`` (local bases only)."""
    root = Path(base)
    return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def list_runs(base: str, topic: str, offset: int = 0, limit: int = 20) -> dict[str, Any]:
    """Return a page of ``topic``'s increase runs, newest first: folder, files, when (no report is read)."""
    offset, limit = _page(offset, limit)
    folder = _safe_child(Path(base), topic)
    entries: list[dict[str, Any]] = []
    if folder.is_dir():
        for run in folder.iterdir():
            files = {f.name: f.stat() for f in run.iterdir() if f.is_file()} if run.is_dir() else {}
            if not files:
                continue
            entries.append(
                {
                    "run": run.name,
                    "modified": max(s.st_mtime for s in files.values()),
                    "seed_report": "seed.jsonl.gz" in files,
                    "verify_report": "verify.jsonl.gz" in files,
                    "bytes": sum(s.st_size for s in files.values()),
                }
            )
    entries.sort(key=lambda e: e["modified"], reverse=True)
    return {
        "topic": topic,
        "total": len(entries),
        "offset": offset,
        "limit": limit,
        "runs": entries[offset : offset + limit],
    }


class _GroupProof:
    """What one group's verify rows proved, accumulated row by row."""

    __slots__ = ("group", "lag", "max_lag", "new", "no_offset", "partitions", "problems", "seeded")

    def __init__(self, group: str) -> None:
        self.group = group
        self.partitions = 0
        self.lag = 0
        self.max_lag = 0
        self.problems: list[int] = []
        self.seeded: list[int] = []
        self.new: list[int] = []
        self.no_offset = 0

    def add(self, row: dict[str, Any]) -> None:
        p = row["partition"]
        self.partitions += 1
        lag = row.get("lag") or 0
        self.lag += lag
        self.max_lag = max(self.max_lag, lag)
        if row.get("problem"):
            self.problems.append(p)
        if row.get("seeded"):
            self.seeded.append(p)
        if row.get("new"):
            self.new.append(p)
        if row.get("committed") is None:
            self.no_offset += 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "partitions": self.partitions,
            "ok": not self.problems,
            "skipping_partitions": ranges(self.problems),
            "problems": len(self.problems),
            "seeded_by_run": ranges(self.seeded),
            "seeded": len(self.seeded),
            "new_partitions": ranges(self.new),
            "without_offset": self.no_offset,
            "lag": self.lag,
            "max_lag": self.max_lag,
        }


def summarize_verify(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return, per group (in report order), what a verify report proved, with partition ranges."""
    proofs: dict[str, _GroupProof] = {}
    for row in rows:
        group = row["group"]
        proof = proofs.get(group)
        if proof is None:
            proof = proofs[group] = _GroupProof(group)
        proof.add(row)
    return [p.to_dict() for p in proofs.values()]


#: The verify report's columns the proof needs (others are ignored).
_VERIFY_COLUMNS = (
    ("group", "string"),
    ("partition", "int64"),
    ("committed", "int64"),
    ("lag", "int64"),
    ("new", "bool_"),
    ("seeded", "bool_"),
    ("problem", "string"),
)


def _np_ranges(values: Any, cap: int = 12) -> str:
    """Return sorted partitions (a numpy array) as ``ranges()`` text: ``"0-2,5"``, ``"none"`` when empty."""
    import numpy as np

    if not len(values):
        return "none"
    breaks = np.flatnonzero(np.diff(values) != 1)
    starts = np.concatenate(([values[0]], values[breaks + 1]))
    ends = np.concatenate((values[breaks], [values[-1]]))
    segments = [
        str(a) if a == b else f"{a}-{b}"
        for a, b in zip(starts[:cap].tolist(), ends[:cap].tolist(), strict=True)
    ]
    more = len(starts) - cap
    return ",".join(segments) + (f",... ({more} more ranges)" if more > 0 else "")


def _per_group(idx: Any, partitions: Any, mask: Any, count: int) -> list[Any]:
    """Return, per group index, the sorted partitions of the rows where ``mask`` holds."""
    import numpy as np

    g, p = idx[mask], partitions[mask]
    order = np.lexsort((p, g))
    g, p = g[order], p[order]
    cuts = np.searchsorted(g, np.arange(count + 1))
    return [p[cuts[i] : cuts[i + 1]] for i in range(count)]


def summarize_verify_file(path: str) -> list[dict[str, Any]]:
    """Return :func:`summarize_verify` of a local verify report, parsed and aggregated in pyarrow and
    numpy (C++ JSON parsing on all cores: 4,096 x 100 rows in a fraction of the pure-Python pass)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyarrow import json as pj

    schema = pa.schema([(name, getattr(pa, kind)()) for name, kind in _VERIFY_COLUMNS])
    options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    with pa.input_stream(path, compression="gzip") as stream:
        table = pj.read_json(stream, read_options=pj.ReadOptions(block_size=1 << 20), parse_options=options)
    groups = pc.unique(table["group"])  # in order of first appearance: the report's group order
    names = groups.to_pylist()
    idx = pc.index_in(table["group"], value_set=groups).to_numpy(zero_copy_only=False).astype("int64")
    count = len(names)
    parts = table["partition"].to_numpy()
    lag = table["lag"].fill_null(0).to_numpy()
    rows = np.bincount(idx, minlength=count)
    lag_sum = np.bincount(idx, weights=lag, minlength=count)
    lag_max = np.zeros(count, dtype=np.int64)
    np.maximum.at(lag_max, idx, lag)
    no_offset = np.bincount(idx[table["committed"].is_null().to_numpy(zero_copy_only=False)], minlength=count)
    flag = lambda column: table[column].fill_null(False).to_numpy(zero_copy_only=False)  # noqa: E731
    problems = _per_group(idx, parts, table["problem"].is_valid().to_numpy(zero_copy_only=False), count)
    seeded, new = _per_group(idx, parts, flag("seeded"), count), _per_group(idx, parts, flag("new"), count)
    return [
        {
            "group": names[i],
            "partitions": int(rows[i]),
            "ok": not len(problems[i]),
            "skipping_partitions": _np_ranges(problems[i]),
            "problems": len(problems[i]),
            "seeded_by_run": _np_ranges(seeded[i]),
            "seeded": len(seeded[i]),
            "new_partitions": _np_ranges(new[i]),
            "without_offset": int(no_offset[i]),
            "lag": int(lag_sum[i]),
            "max_lag": int(lag_max[i]),
        }
        for i in range(count)
    ]


def summarize_report(path: str) -> list[dict[str, Any]]:
    """Summarize a verify report: in pyarrow when it parses there, else row by row in Python."""
    try:
        return summarize_verify_file(path)
    except Exception:  # noqa: BLE001 - an unusual report (older format, odd types): the plain pass
        from airflow_provider_kstate.hooks.reports import ObjectStorageReports

        return summarize_verify(read_report(path, ObjectStorageReports()))


class _SummaryCache:
    """Verify-report summaries by (path, size, mtime), the newest ``size`` kept; thread-safe."""

    def __init__(self, size: int = CACHE_RUNS) -> None:
        self.size = size
        self._items: OrderedDict[tuple[str, int, int], list[dict[str, Any]]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, path: Path) -> list[dict[str, Any]]:
        stat = path.stat()
        key = (str(path), stat.st_size, stat.st_mtime_ns)
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        summary = summarize_report(str(path))
        with self._lock:
            self._items[key] = summary
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return summary


SUMMARIES = _SummaryCache()


def run_proof(base: str, topic: str, run: str, offset: int = 0, limit: int = 50) -> dict[str, Any]:
    """Return what one run proved, per group (a page of groups), from its verify and seed reports.

    A run of several co-partitioned topics (its progress document names them) is shown as the one run it
    was, whichever topic it is opened from: ``topics`` names them all, ``per_topic`` has each topic's
    verdict, and each group appears once, proved on every topic it reads (``topics``), its lag summed."""
    offset, limit = _page(offset, limit)
    folder = _safe_child(Path(base), topic, run)
    verify, seed = folder / "verify.jsonl.gz", folder / "seed.jsonl.gz"
    out: dict[str, Any] = {"topic": topic, "run": run, "offset": offset, "limit": limit}
    index = folder / "seed.evidence.json"
    if index.is_file():
        evidence = json.loads(index.read_text())
        out["seed"] = {"rows": evidence.get("rows"), "groups": len(evidence.get("seeded") or {})}
    elif seed.is_file():
        out["seed"] = {"rows": None, "groups": None}
    names = run_topics(base, topic, run)
    if len(names) > 1:
        return _set_proof(base, names, run, out)
    if not verify.is_file():
        out.update(verified=False, total=0, groups=[])
        return out
    summary = SUMMARIES.get(verify)
    out.update(
        verified=True,
        ok=all(g["ok"] for g in summary),
        total=len(summary),
        partitions=max((g["partitions"] for g in summary), default=0),
        groups=summary[offset : offset + limit],
    )
    return out


def run_topics(base: str, topic: str, run: str) -> list[str]:
    """The topics of a run, from its progress document (``[topic]`` without one, or for a run of one)."""
    from airflow_provider_kstate.errors import ReportError
    from airflow_provider_kstate.increase.events import RunProgress
    from airflow_provider_kstate.increase.report import PROGRESS_NAME

    path = _safe_child(Path(base), topic, run) / PROGRESS_NAME
    try:
        progress = RunProgress.from_json(path.read_bytes())
    except (OSError, ReportError, TypeError, ValueError):
        return [topic]
    return list(progress.topics) or [topic]


def _set_proof(base: str, names: list[str], run: str, out: dict[str, Any]) -> dict[str, Any]:
    """The proof of a run of several topics: every topic's verify report, each group once."""
    offset, limit = out["offset"], out["limit"]
    per_topic: list[dict[str, Any]] = []
    merged: dict[str, dict[str, Any]] = {}
    for name in names:
        verify = _safe_child(Path(base), name, run) / "verify.jsonl.gz"
        if not verify.is_file():
            per_topic.append({"topic": name, "verified": False})
            continue
        summary = SUMMARIES.get(verify)
        per_topic.append(
            {
                "topic": name,
                "verified": True,
                "ok": all(g["ok"] for g in summary),
                "partitions": max((g["partitions"] for g in summary), default=0),
                "groups": len(summary),
            }
        )
        for row in summary:
            entry = merged.get(row["group"])
            if entry is None:
                merged[row["group"]] = {**row, "topics": [name], "by_topic": {name: row}}
                continue
            entry["topics"].append(name)
            entry["by_topic"][name] = row
            entry["ok"] = entry["ok"] and row["ok"]
            entry["partitions"] = max(entry["partitions"], row["partitions"])
            entry["lag"] += row["lag"]
            entry["max_lag"] = max(entry["max_lag"], row["max_lag"])
            entry["problems"] += row["problems"]
            entry["seeded"] += row["seeded"]
            entry["without_offset"] += row["without_offset"]
    for entry in merged.values():  # the ranges of several topics: each named
        for key in ("skipping_partitions", "seeded_by_run", "new_partitions"):
            if len(entry["topics"]) > 1:
                entry[key] = "; ".join(f"{t}: {r[key]}" for t, r in entry["by_topic"].items() if r[key])
        del entry["by_topic"]
    groups = list(merged.values())
    verified = all(t["verified"] for t in per_topic)
    out.update(
        topics=names,
        per_topic=per_topic,
        verified=verified,
        ok=verified and all(t["ok"] for t in per_topic),
        total=len(groups),
        partitions=max((t.get("partitions", 0) for t in per_topic), default=0),
        groups=groups[offset : offset + limit],
    )
    return out


# ------------------------------------------------------------------------------------------ airflow db


def recent_return_values(task_suffixes: tuple[str, ...], scan: int = XCOM_SCAN) -> Iterator[dict[str, Any]]:
    """Yield recent ``return_value`` XComs of tasks whose id ends with one of ``task_suffixes``, newest
    first, as ``{"dag_id", "run_id", "task_id", "timestamp", "value"}``."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import or_, select

    with create_session() as session:
        rows = session.execute(
            select(
                XComModel.dag_id, XComModel.run_id, XComModel.task_id, XComModel.timestamp, XComModel.value
            )
            .where(XComModel.key == "return_value")
            .where(or_(*[XComModel.task_id.like(f"%{s}") for s in task_suffixes]))
            .order_by(XComModel.timestamp.desc())
            .limit(scan)
        ).all()
    for dag_id, run_id, task_id, ts, raw in rows:
        value = _decode(raw)
        if isinstance(value, dict):
            yield {
                "dag_id": dag_id,
                "run_id": run_id,
                "task_id": task_id,
                "timestamp": str(ts),
                "value": value,
            }


def _decode(raw: Any) -> Any:
    for _ in range(2):  # XCom values are JSON; some backends store a JSON string of JSON
        if not isinstance(raw, (str, bytes)):
            return raw
        try:
            raw = json.loads(raw)
        except ValueError:
            return None
    return raw


def dag_runs_by_folder(limit: int = 2000) -> dict[str, dict[str, Any]]:
    """Return recent DAG runs by their report folder name: ``{folder: {dag_id, run_id, state}}``."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.execute(
            select(DagRun.dag_id, DagRun.run_id, DagRun.state).order_by(DagRun.id.desc()).limit(limit)
        ).all()
    return {owner_folder(d, r): {"dag_id": d, "run_id": r, "state": str(s)} for d, r, s in rows}


# ------------------------------------------------------------------------------------------ snapshots


def snapshot_uris() -> list[str]:
    """Return the URIs of the snapshots the deployment knows: the ``kstate-snapshot`` Assets, and the
    ones named by recent checks."""
    from airflow.models.asset import AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    from airflow_provider_kstate.assets import GROUP

    with create_session() as session:
        uris = list(session.scalars(select(AssetModel.uri).where(AssetModel.group == GROUP)))
    uris += [
        r.snapshot_uri for _, r in _check_reports(list(recent_return_values(CHECK_TASKS))) if r.snapshot_uri
    ]
    return sorted(set(_normal(u) for u in uris))


def _normal(uri: str) -> str:
    from airflow_provider_kstate.assets import snapshot_uri_of

    return snapshot_uri_of(uri)


def snapshot_view(uri: str, checks: list[dict[str, Any]]) -> dict[str, Any]:
    """Return one snapshot: current version, history, rows and offsets per partition, the last fast and
    deep check among ``checks`` (recent check XComs) and the partitions they found damaged."""
    from airflow_provider_kstate.store.fast_check import SnapshotUnreadable, load_manifest
    from airflow_provider_kstate.store.layout import read_history, resolve

    out: dict[str, Any] = {"uri": uri}
    try:
        manifest = load_manifest(uri)
    except SnapshotUnreadable as exc:
        out.update(readable=False, problem=str(exc))
    else:
        current = resolve(uri)
        _version, history = read_history(uri, lambda u: _read_local(u))
        out.update(
            readable=True,
            topic=manifest.topic,
            version=manifest.version,
            legacy=current.legacy,
            history=history,
            written_at=manifest.written_at or None,
            partitions=manifest.partitions,
            rows=sum(s.rows for s in manifest.partition_stats.values()),
            offsets={
                str(p): {"start": s.start_offset, "end": s.end_offset, "rows": s.rows}
                for p, s in sorted(manifest.partition_stats.items())
            },
        )
    mine = [(c, r) for c, r in _check_reports(checks) if _normal(r.snapshot_uri) == uri]
    for kind in ("fast", "deep"):
        last = next(((c, r) for c, r in mine if r.check == kind), None)
        out[f"last_{kind}_check"] = _check_summary(*last) if last else None
    out["damaged_partitions"] = mine[0][1].failed_partitions if mine else []
    out["progress"] = snapshot_progress(uri)  # a running (or the last) rebuild's, see .progress
    return out


def _check_reports(checks: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], CheckReport]]:
    """Read the check XComs among ``checks`` (newest first) as :class:`CheckReport`, once, here."""
    for xcom in checks:
        value = xcom["value"]
        if isinstance(value, dict) and value.get("check") in ("fast", "deep"):
            try:
                report = CheckReport.read(value, check=value["check"])
            except AppReportError:  # not a check report after all: not shown
                continue
            yield xcom, report


def _check_summary(xcom: dict[str, Any], report: CheckReport) -> dict[str, Any]:
    return {
        "ok": report.ok,
        "failed_partitions": report.failed_partitions,
        "problems": report.problems[:10],
        "version": report.snapshot_version,
        "dag_id": xcom["dag_id"],
        "run_id": xcom["run_id"],
        "task_id": xcom["task_id"],
        "at": xcom["timestamp"],
    }


def _read_local(uri: str) -> bytes | None:
    from airflow_provider_kstate.store.uri import local_path

    path = local_path(uri)
    if path is None or not path.is_file():
        return None
    return path.read_bytes()
