"""A run in progress on the kstate page (plugins/watch.py): the progress documents the runs write, read
back as the page shows them, with a fixed clock."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_kstate.increase.events import GroupState, ProducerState, ProgressFile
from airflow_provider_kstate.increase.plan import GroupClass, GroupPlan, Plan
from airflow_provider_kstate.increase.report import progress_location
from airflow_provider_kstate.plugins import views, watch


def _plan() -> Plan:
    live = GroupPlan(cls=GroupClass.ACTIVE, state="STABLE", pause=True, seed=True, wait=True)
    idle = GroupPlan(cls=GroupClass.EMPTY, state="EMPTY", pause=True, seed=True)
    return Plan("orders", 2, 4, {"billing": live, "audit": idle})


class Clock:
    """The events module's clock, fixed and moved by hand."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.ms = 1_000_000
        monkeypatch.setattr("airflow_provider_kstate.increase.events.now_ms", lambda: self.ms)


def _run(base: Path, owner: str, clock: Clock) -> ProgressFile:
    """A run's progress document as the plan and the window write it: billing is out since +1 s."""
    doc = ProgressFile(None, progress_location(str(base), "orders", owner), _plan(), owner)
    doc.step("planned")
    clock.ms += 500
    doc.step("pause")
    doc.producers(ProducerState.PINNED)
    clock.ms += 500
    doc.groups(["billing"], GroupState.STOPPING)
    return doc


def _folder(owner: str) -> str:
    return views.owner_folder(*owner.split("/", 1))


def _age(path: Path, seconds: float) -> None:
    """Date every file of a run folder ``seconds`` in the past (the list's order is by modification)."""
    for f in path.iterdir():
        os.utime(f, (f.stat().st_mtime - seconds, f.stat().st_mtime - seconds))


def test_a_run_in_progress_shows_its_step_and_each_group_s_downtime_so_far(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock(monkeypatch)
    _run(tmp_path, "increase/manual__1", clock)
    out_since = clock.ms
    view = watch.progress_view(str(tmp_path), "orders", _folder("increase/manual__1"), now=out_since + 2_250)
    assert (view["phase"], view["running"], view["step"], view["outcome"]) == ("running", True, "pause", "")
    assert (view["original_partitions"], view["target_partitions"], view["producers"]) == (2, 4, "pinned")
    assert view["owner"] == "increase/manual__1" and view["now"] == out_since + 2_250
    groups = {g["group"]: g for g in view["groups"]}
    billing, audit = groups["billing"], groups["audit"]
    assert (billing["state"], billing["out"], billing["ticking"], billing["still_out"]) == (
        "stopping",
        True,
        True,
        False,
    )
    assert billing["downtime_s"] == 2.25 and billing["out_since"] == out_since and billing["back_at"] is None
    assert (audit["state"], audit["downtime_s"], audit["ticking"]) == ("planned", None, False)
    assert view["groups_out"] == 1 and view["max_downtime_s"] == 2.25
    assert view["elapsed_s"] == 3.25  # from the plan's first write
    later = watch.progress_view(str(tmp_path), "orders", _folder("increase/manual__1"), now=out_since + 5_000)
    assert {g["group"]: g["downtime_s"] for g in later["groups"]} == {"billing": 5.0, "audit": None}


def test_an_ended_run_shows_each_group_s_final_downtime(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock(monkeypatch)
    doc = _run(tmp_path, "increase/manual__1", clock)
    out_since = clock.ms
    clock.ms += 1_500
    doc.groups(["billing"], GroupState.PAUSED)
    doc.step("seed")
    doc.groups(["billing", "audit"], GroupState.SEEDED)
    clock.ms += 1_000
    doc.groups(["billing"], GroupState.RESUMED)  # audit never resumed: the run failed after its seed
    doc.finish("failed")
    ended_at = clock.ms
    view = watch.progress_view(str(tmp_path), "orders", _folder("increase/manual__1"), now=ended_at + 60_000)
    assert (view["phase"], view["running"], view["outcome"], view["step"]) == (
        "ended",
        False,
        "failed",
        "seed",
    )
    groups = {g["group"]: g for g in view["groups"]}
    assert groups["billing"]["downtime_s"] == 2.5 and groups["billing"]["back_at"] == out_since + 2_500
    assert not groups["billing"]["ticking"] and not groups["billing"]["still_out"]
    # audit is still out: counted to the document's last write, not to now (no resume was recorded)
    assert groups["audit"]["still_out"] and not groups["audit"]["ticking"]
    assert groups["audit"]["downtime_s"] == 1.0 and view["groups_out"] == 1
    assert view["elapsed_s"] == round((ended_at - (out_since - 1_000)) / 1000, 3)


def test_a_run_without_an_outcome_whose_airflow_run_ended_is_interrupted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock(monkeypatch)
    _run(tmp_path, "increase/manual__1", clock)
    asked: list[str] = []

    def airflow(state: str) -> Any:
        def lookup(owner: str) -> dict[str, Any]:
            asked.append(owner)
            return {"dag_id": "increase", "run_id": "manual__1", "state": state}

        return lookup

    folder = _folder("increase/manual__1")
    running = watch.progress_view(str(tmp_path), "orders", folder, airflow=airflow("running"), now=clock.ms)
    killed = watch.progress_view(str(tmp_path), "orders", folder, airflow=airflow("failed"), now=clock.ms)
    assert asked == ["increase/manual__1"] * 2, "looked up by the document's owner"
    assert (running["phase"], running["running"], running["airflow"]["state"]) == ("running", True, "running")
    assert (killed["phase"], killed["running"]) == ("interrupted", False)
    billing = next(g for g in killed["groups"] if g["group"] == "billing")
    assert billing["still_out"] and not billing["ticking"], "counted to the last write, not ticking"
    assert watch.run_status(str(tmp_path), "orders", folder, "failed") == {
        "phase": "interrupted",
        "step": "pause",
        "outcome": "",
    }


def test_the_run_list_shows_runs_in_progress_newest_first_with_their_step_and_outcome(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock(monkeypatch)
    base = str(tmp_path)
    ended = _run(tmp_path, "increase/manual__1", clock)
    ended.step("verify")
    ended.finish("success")
    (Path(ended.uri).parent / "verify.jsonl.gz").write_bytes(b"")
    old = tmp_path / "orders" / "increase_manual__0"  # a run of an older version: reports, no progress
    old.mkdir()
    (old / "verify.jsonl.gz").write_bytes(b"")
    _age(old, 120)
    _age(Path(ended.uri).parent, 60)
    _run(tmp_path, "increase/manual__2", clock)  # the newest: in its pause window
    listed = views.list_runs(base, "orders")
    folders = [r["run"] for r in listed["runs"]]
    assert folders == ["increase_manual__2", "increase_manual__1", "increase_manual__0"], folders
    statuses = [watch.run_status(base, "orders", f) for f in folders]
    assert statuses == [
        {"phase": "running", "step": "pause", "outcome": ""},
        {"phase": "ended", "step": "verify", "outcome": "success"},
        None,
    ]
    assert watch.progress_view(base, "orders", "increase_manual__0")["phase"] == "absent"


@pytest.mark.parametrize(
    "text",
    [
        b'{"kind":"kstate-increase-progress","v":1,"topic":"orders","run":"d/r","groups":{"billing":{"sta',
        b"",
        b"\xff\xfe not utf-8",
        json.dumps({"kind": "something-else", "v": 1}).encode(),
        json.dumps(
            {
                "kind": "kstate-increase-progress",
                "v": 1,
                "topic": "orders",
                "run": "d/r",
                "original_partitions": 2,
                "target_partitions": 4,
                "groups": {"billing": {"state": "stopping", "out_since": "yesterday"}},
            }
        ).encode(),
    ],
    ids=["torn", "empty", "binary", "foreign", "wrong-type"],
)
def test_an_unreadable_progress_document_shows_as_unreadable(tmp_path: Path, text: bytes) -> None:
    folder = tmp_path / "orders" / "d_r"
    folder.mkdir(parents=True)
    (folder / "progress.json").write_bytes(text)
    view = watch.progress_view(str(tmp_path), "orders", "d_r", now=5)
    assert (view["phase"], view["running"]) == ("unreadable", False), view
    assert view["problem"], view
    status = watch.run_status(str(tmp_path), "orders", "d_r")
    assert status is not None and status["phase"] == "unreadable" and status["problem"], status


def test_a_progress_document_too_large_or_a_folder_name_that_leaves_the_base_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "orders" / "d_r"
    folder.mkdir(parents=True)
    (folder / "progress.json").write_bytes(b" " * 64)
    monkeypatch.setattr(watch, "MAX_BYTES", 10)
    view = watch.progress_view(str(tmp_path), "orders", "d_r")
    assert view["phase"] == "unreadable" and "64 bytes" in view["problem"]
    for topic, run in (("orders", ".."), ("..", "orders"), ("orders", "a/b"), ("/etc", "x")):
        with pytest.raises(ValueError, match="not a report folder name"):
            watch.progress_view(str(tmp_path), topic, run)


def test_a_run_of_several_topics_shows_once_under_each_topic_naming_them_all(tmp_path: Path) -> None:
    from airflow_provider_kstate.increase.events import RunProgress
    from airflow_provider_kstate.plugins import watch as watching

    doc = RunProgress(
        topic="orders",
        run="increase/m1",
        original_partitions=4,
        target_partitions=8,
        topics=["orders", "payments"],
    )
    assert RunProgress.from_json(doc.to_json()).topics == ["orders", "payments"]
    for topic in ("orders", "payments"):
        folder = tmp_path / topic / "increase_m1"
        folder.mkdir(parents=True)
        (folder / "progress.json").write_text(doc.to_json())
    for topic in ("orders", "payments"):
        status = watching.run_status(str(tmp_path), topic, "increase_m1")
        assert status is not None and status["topics"] == ["orders", "payments"]
        assert watching.progress_view(str(tmp_path), topic, "increase_m1")["topics"] == ["orders", "payments"]
