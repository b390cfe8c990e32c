"""Runs in progress on the kstate page: what a run's progress document (``progress.json``) says, as
JSON-safe dicts. No FastAPI here (see :mod:`airflow_provider_kstate.plugins.app`); read-only.

Each run of the increase keeps :class:`~airflow_provider_kstate.increase.events.RunProgress` in its report
folder (``<base>/<topic>/<dag_id>_<run_id>/progress.json``, beside the seed and verify reports the proof is
read from), written at every event of the run. A run of several co-partitioned topics keeps the same
document in each topic's folder (each beside that topic's reports): the run shows once under each topic,
naming them all (``topics``). A run is in one of these **phases**:

* ``running`` - the document has no outcome yet (and its Airflow run, when known, has not ended);
* ``ended`` - the document has its outcome (``success`` or ``failed``);
* ``interrupted`` - no outcome, but its Airflow run ended (a task killed before the guard could write);
* ``unreadable`` - the document does not parse (torn, foreign, too large): shown as such, never an error;
* ``absent`` - no progress document (a run of an older version, or one whose plan has not finished).

A group's **downtime** runs from the moment the run asked it to leave to the moment its service worked
again (every partition held and a record processed, as the broker showed it; until the run saw that, to the
moment it was asked back: :meth:`~airflow_provider_kstate.increase.events.GroupProgress.downtime_s`). While the run goes, a group
still out counts up to now (``ticking``: the page adds the time since it asked); once the run ended, up to
the document's last update (``still_out``: no resume was recorded).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from airflow_provider_kstate.errors import ReportError
from airflow_provider_kstate.increase.events import OUT, RunProgress, now_ms
from airflow_provider_kstate.increase.report import PROGRESS_NAME
from airflow_provider_kstate.plugins.views import _safe_child

#: A progress document larger than this is not read (a few KB with 100 groups).
MAX_BYTES = 8 << 20
#: Airflow DAG-run states after which nothing writes the document any more.
ENDED_RUN_STATES = ("success", "failed")

#: Looks up a run's Airflow DAG run by its owner (``dag_id/run_id``): ``{dag_id, run_id, state}`` or None.
AirflowLookup = Callable[[str], dict[str, Any] | None]


def progress_path(base: str, topic: str, run: str) -> Path:
    """Return the progress document of report folder ``run`` of ``topic`` (never a path from elsewhere)."""
    return _safe_child(Path(base), topic, run) / PROGRESS_NAME


def read_progress(path: Path) -> RunProgress:
    """Read a progress document; :class:`ReportError` naming what is wrong when it cannot be read."""
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise ReportError(f"{PROGRESS_NAME} is {size:,} bytes (more than {MAX_BYTES:,})")
        data = path.read_bytes()
    except OSError as exc:
        raise ReportError(f"{PROGRESS_NAME}: {exc.strerror or exc}") from exc
    return RunProgress.from_json(data)


def phase_of(progress: RunProgress, airflow_state: str | None = None) -> str:
    """Return ``running``, ``ended`` or ``interrupted`` (no outcome, but the Airflow run ended)."""
    if progress.outcome:
        return "ended"
    return "interrupted" if str(airflow_state or "") in ENDED_RUN_STATES else "running"


def run_status(base: str, topic: str, run: str, airflow_state: str | None = None) -> dict[str, Any] | None:
    """Return what the run list shows of a run's progress (``phase``, ``step``, ``outcome``; ``problem``
    when unreadable), or None when the run has no progress document."""
    path = progress_path(base, topic, run)
    if not path.is_file():
        return None
    try:
        view = summarize(read_progress(path), now_ms(), airflow_state)
    except (ReportError, TypeError, ValueError) as exc:
        return {"phase": "unreadable", "problem": str(exc), "step": None, "outcome": None}
    status = {"phase": view["phase"], "step": view["step"], "outcome": view["outcome"]}
    if len(view["topics"]) > 1:  # a run of several co-partitioned topics: the list names them all
        status["topics"] = view["topics"]
    return status


def group_rows(progress: RunProgress, now: int, running: bool) -> list[dict[str, Any]]:
    """Return each group of the run (in the document's order) with its downtime: up to ``now`` while the
    run goes, up to the document's last update once it ended."""
    until = now if running else progress.updated_at
    rows = []
    for name, group in progress.groups.items():
        away = group.out_since is not None and group.back_at is None
        rows.append(
            {
                "group": name,
                "state": group.state,
                "out": group.state in OUT,
                "driver": group.driver,
                "key_order": group.key_order,
                "out_since": group.out_since,
                "back_at": group.back_at,
                "held_at": group.held_at,
                "processing_at": group.processing_at,
                "downtime_s": group.downtime_s(until),
                "ticking": running and away,
                "still_out": not running and away,
            }
        )
    return rows


def summarize(progress: RunProgress, now: int, airflow_state: str | None = None) -> dict[str, Any]:
    """Return the page's view of a readable progress document at ``now`` (ms)."""
    phase = phase_of(progress, airflow_state)
    running = phase == "running"
    groups = group_rows(progress, now, running)
    downtimes = [g["downtime_s"] for g in groups if g["downtime_s"] is not None]
    return {
        "phase": phase,
        "running": running,
        "owner": progress.run,
        "step": progress.step,
        "outcome": progress.outcome,
        "original_partitions": progress.original_partitions,
        "target_partitions": progress.target_partitions,
        # a run of several co-partitioned topics: every one (the same document is in each topic's folder)
        "topics": list(progress.topics) or [progress.topic],
        "started_at": progress.started_at,
        "updated_at": progress.updated_at,
        "elapsed_s": round(((now if running else progress.updated_at) - progress.started_at) / 1000.0, 3),
        "producers": progress.producers,
        "producers_since": progress.producers_since,
        "groups": groups,
        "groups_out": sum(1 for g in groups if g["ticking"] or g["still_out"]),
        "max_downtime_s": max(downtimes, default=None),
    }


def progress_view(
    base: str, topic: str, run: str, airflow: AirflowLookup | None = None, now: int | None = None
) -> dict[str, Any]:
    """Return a run's progress as the page shows it (see the module's phases); ``now`` in ms (the clock
    the downtime so far is counted to, returned so the page ticks from it).

    :param airflow: looks up the run's Airflow DAG run by its owner (``dag_id/run_id``); None: not looked
        up (a run without an outcome is then ``running``).
    :raises ValueError: ``topic`` or ``run`` is not a report folder name.
    """
    at = now_ms() if now is None else now
    path = progress_path(base, topic, run)
    out: dict[str, Any] = {"topic": topic, "run": run, "now": at}
    if not path.is_file():
        return {**out, "phase": "absent", "running": False}
    try:
        progress = read_progress(path)
        dag_run = airflow(progress.run) if airflow else None
        view = summarize(progress, at, (dag_run or {}).get("state"))
    except (ReportError, TypeError, ValueError) as exc:  # a field of the wrong type: unreadable too
        return {**out, "phase": "unreadable", "running": False, "problem": str(exc)}
    return {**out, **view, "airflow": dag_run}


def dag_run(owner: str) -> dict[str, Any] | None:
    """Return the Airflow DAG run of a run's owner (``dag_id/run_id``): ``{dag_id, run_id, state}``, or
    None when this Airflow does not know it (one indexed lookup: the page polls it)."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from sqlalchemy import select

    dag_id, _, run_id = owner.partition("/")
    if not run_id:
        return None
    with create_session() as session:
        state = session.scalar(
            select(DagRun.state).where(DagRun.dag_id == dag_id).where(DagRun.run_id == run_id)
        )
    if state is None:
        return None
    return {"dag_id": dag_id, "run_id": run_id, "state": str(state)}
