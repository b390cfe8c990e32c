"""The run's progress document (increase/events.py): what the kstate page watches while a run goes."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from airflow_provider_kstate.errors import ReportError
from airflow_provider_kstate.increase.events import (
    Events,
    GroupState,
    ProducerState,
    ProgressFile,
    RunProgress,
)
from airflow_provider_kstate.increase.plan import GroupClass, GroupPlan, Plan

LOG = logging.getLogger("test_events")


def _plan() -> Plan:
    live = GroupPlan(cls=GroupClass.ACTIVE, state="STABLE", pause=True, seed=True, wait=True)
    idle = GroupPlan(cls=GroupClass.EMPTY, state="EMPTY", pause=True, seed=True)
    return Plan("orders", 2, 4, {"billing": live, "audit": idle})


def test_a_group_s_downtime_runs_from_its_leave_to_its_resume_and_later_tasks_continue_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = str(tmp_path / "orders" / "run-1" / "progress.json")
    clock = [0]
    monkeypatch.setattr("airflow_provider_kstate.increase.events.now_ms", lambda: clock[0])

    def at(ms: int) -> None:
        clock[0] = ms

    window = ProgressFile(None, uri, _plan(), "dag/run-1")
    window.step("pause")
    at(1000)
    window.groups(["billing"], GroupState.STOPPING)
    at(1500)
    window.groups(["billing"], GroupState.PAUSED)  # still out since the stop: not a new leave
    at(1700)
    window.groups(["billing", "audit"], GroupState.SEEDED)
    window.producers(ProducerState.PINNED)
    at(3000)
    window.groups(["billing", "audit"], GroupState.RESUMED)
    verify = ProgressFile(None, uri, _plan(), "dag/run-1")  # a later task of the same run
    verify.finish("success")
    shown = RunProgress.from_json(Path(uri).read_bytes())
    assert shown.groups["billing"].downtime_s(9000) == 2.0  # 1000 -> 3000
    assert shown.groups["audit"].out_since == 1700  # seeded while offline: out from there
    assert shown.outcome == "success" and shown.step == "pause"  # ended: no longer running
    assert shown.producers == "pinned"
    other = ProgressFile(None, uri, _plan(), "dag/run-2")  # another run starts its own document
    assert other.progress.run == "dag/run-2" and other.progress.groups["billing"].state == "planned"


def test_a_group_out_of_its_group_shows_its_downtime_so_far() -> None:
    progress = RunProgress.of_plan(_plan(), "dag/run-1")
    progress.groups["billing"].out_since = 10_000
    assert progress.groups["billing"].downtime_s(12_500) == 2.5
    assert not progress.outcome  # running


def test_not_a_progress_document_is_named_and_a_failing_sink_never_fails_the_run(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match="not a run progress document"):
        RunProgress.from_json(b'{"kind": "something-else", "v": 1}')
    with pytest.raises(ReportError, match="not a run progress document"):
        RunProgress.from_json(b"not json")

    class Broken:
        def step(self, name: str) -> None:
            raise OSError("disk full")

    good = ProgressFile(None, str(tmp_path / "p.json"), _plan(), "dag/run-1")
    events = Events([Broken(), good], LOG)  # type: ignore[list-item]
    events.step("seed")
    events.step("resume")
    assert events.sinks == [good] and good.progress.step == "resume"
