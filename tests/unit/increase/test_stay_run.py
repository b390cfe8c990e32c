"""Unit tests of the run's wait for the staying groups' positions (``IncreaseRun.wait_positions``) on fakes:
evidence ends the wait, no evidence in time or a record on a new partition pauses and seeds those groups
alone, a group the run cannot pause fails the run with the producers still on the old layout."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from kstate_support.fakes import FakeHook, group_info

from airflow_provider_kstate.errors import PositionsTimeoutError
from airflow_provider_kstate.increase.drivers import CONTROL, CommandDriver
from airflow_provider_kstate.increase.plan import Plan
from airflow_provider_kstate.increase.planner import plan_increase
from airflow_provider_kstate.increase.request import PlanRequest
from airflow_provider_kstate.increase.run import IncreaseRun

JAVA = CommandDriver(name="java", stop="systemctl stop java-svc", start="systemctl start java-svc")


def staying_plan(**choices: Any) -> Plan:
    """``piece`` (client piece) and ``java`` (named as committing; a command pair stops it unless
    ``group_drivers`` says otherwise) stay."""
    cluster = FakeHook(
        4,
        {
            "piece": group_info("piece", "STABLE", 2, (0, 1, 2, 3)),
            "java": group_info("java", "STABLE", 1, (0, 1, 2, 3)),
        },
    )
    request = PlanRequest(
        topics=("orders",),
        partitions=8,
        consumers_stay="auto",
        committing_groups=("java",),
        **{
            "key_order": "relax",
            "group_drivers": {"java": JAVA},
            "producer_drivers": {"w": CONTROL},
            **choices,
        },
    )
    return plan_increase(cluster, request, lambda: {"piece": {"c0", "c1"}})


class Steps:
    """One topic's steps: the partitions each group lacks at each look, and the records on new partitions."""

    topic = "orders"

    def __init__(self, looks: list[dict[str, list[int]]], stray: list[int] | None = None) -> None:
        self.looks = looks
        self.stray = stray or [0] * len(looks)
        self.plan: Any = None

    def positions_missing(self, groups: list[str]) -> dict[str, list[int]]:
        missing = self.looks.pop(0) if len(self.looks) > 1 else self.looks[0]
        return {g: p for g, p in missing.items() if g in groups}

    def stray_records(self) -> int:
        return self.stray.pop(0) if len(self.stray) > 1 else self.stray[0]


class Run(IncreaseRun):
    """The run with the window's own steps recorded instead of run."""

    def leave(self, groups: list[str]) -> int:
        self.calls.append(("leave", groups))
        return 1

    def wait_empty(self, timeout: float, max_interval: float = 1.0, groups: Any = None) -> dict[str, Any]:
        self.calls.append(("wait_empty", groups))
        return {}

    def seed(self, groups: Any = None, reports: Any = None) -> dict[str, Any]:
        self.calls.append(("seed", groups))
        return {}

    def resume(self, groups: Any = None) -> dict[str, Any]:
        self.calls.append(("resume", groups))
        return {}


def run_of(plan: Plan, steps: Steps, timeout: float = 5.0) -> Run:
    steps.plan = plan
    run = Run(
        plan=plan,
        admin=object(),  # type: ignore[arg-type]
        control=object(),  # type: ignore[arg-type]
        log=logging.getLogger("test"),
        owner="dag/run",
        topics=[steps],  # type: ignore[list-item]
        positions_timeout=timeout,
    )
    run.calls = []  # type: ignore[attr-defined]
    return run


def test_the_wait_ends_once_every_staying_group_holds_an_offset_everywhere() -> None:
    plan = staying_plan()
    assert sorted(plan.staying()) == ["java", "piece"]
    run = run_of(plan, Steps([{"piece": [6, 7], "java": [4, 5, 6, 7]}, {"java": [7]}, {}]))
    stayed = run.wait_positions()
    assert sorted(stayed["positioned"]) == ["java", "piece"] and stayed["fell_back"] == [] and run.calls == []
    assert run.wait_positions() is stayed, "once per run"


def test_a_group_without_evidence_in_time_is_paused_and_seeded_alone() -> None:
    run = run_of(staying_plan(), Steps([{"java": [4, 5, 6, 7]}]), timeout=0.2)
    stayed = run.wait_positions()
    assert stayed["positioned"] == ["piece"] and stayed["fell_back"] == ["java"]
    assert [c[0] for c in run.calls] == ["leave", "wait_empty", "seed", "resume"]
    assert all(c[1] == ["java"] for c in run.calls), run.calls


def test_a_record_on_a_new_partition_ends_the_wait_at_once() -> None:
    run = run_of(staying_plan(), Steps([{"java": [4]}], stray=[3]), timeout=60.0)
    stayed = run.wait_positions()
    assert (
        stayed["stray_records"] == 3 and stayed["fell_back"] == ["java"] and stayed["positioned_after_s"] < 5
    )


def test_a_group_the_run_cannot_pause_fails_the_run_naming_it() -> None:
    # the control record would not make its consumers leave (no client piece), and no command pair is given
    run = run_of(staying_plan(group_drivers={}), Steps([{"java": [4, 5]}]), timeout=0.1)
    with pytest.raises(PositionsTimeoutError, match=r"\['java'\].*nothing written so far is lost"):
        run.wait_positions()
    assert run.calls == []


class Control:
    """Records the layouts and announcements the steps publish."""

    def __init__(self) -> None:
        self.layouts: list[int] = []
        self.announced: list[tuple[list[str], int, int]] = []

    def set_layout(self, topic: str, partitions: int, issuer: str) -> int:
        self.layouts.append(partitions)
        return 1

    def announce_barrier(
        self, topic: str, groups: list[str], issuer: str, partitions: int = 0, grown_from: int = 0
    ) -> int:
        self.announced.append((groups, partitions, grown_from))
        return 2


def test_with_groups_that_stay_a_drained_group_leaves_the_pin_to_the_pin_and_the_grow_is_announced() -> None:
    """Found by the Java stay proof: with a drained group the pin was skipped (a drain's hold pins the
    producers), but with groups that stay the hold comes only after their positions, so nothing pinned the
    producers before the create. The pin is skipped only once this run's hold published it."""
    from airflow_provider_kstate.increase.steps import TopicSteps

    plan = staying_plan(key_order="preserve")
    assert plan.marked("drained") == ["java"] and sorted(plan.staying()) == ["java", "piece"]
    control = Control()
    steps = TopicSteps(plan, admin=object(), control=control, log=logging.getLogger("t"), owner="o")  # type: ignore[arg-type]
    steps.pin()
    assert control.layouts == [4] and control.announced == [], (
        "pinned; the barrier is announced after the create"
    )
    steps.announce_grow()
    assert control.announced == [(["piece"], 8, 4)], "the grow goes to the groups that hold at the barrier"
    held = TopicSteps(plan, admin=object(), control=Control(), log=logging.getLogger("t"), owner="o")  # type: ignore[arg-type]
    held.held_for_drain = True
    held.pin()
    assert held.control.layouts == [], "the drain's hold pinned them already"  # type: ignore[attr-defined]


def test_a_retryable_failure_is_tried_again_inside_the_task_and_a_fatal_one_is_not() -> None:
    """Issue 41, item 5: a step of the window that fails with a retryable error (a broker down) is tried
    again in the task after a short wait, not after Airflow's retry delay; a fatal one fails at once; the
    time is bounded by ``retry_within``."""
    from airflow_provider_kstate.errors import BrokerUnavailableError, GroupNeverLeftError

    run = run_of(staying_plan(), Steps([{}]))
    attempts: list[int] = []

    def flaky() -> str:
        attempts.append(1)
        if len(attempts) < 3:
            raise BrokerUnavailableError("cluster unreachable within 0.1s")
        return "done"

    assert run.again("increase", flaky) == "done" and len(attempts) == 3
    assert [(s, e) for s, e, _ in run.retried] == [("increase", "BrokerUnavailableError")] * 2

    def fatal() -> None:
        attempts.append(1)
        raise GroupNeverLeftError("a member never left")

    attempts.clear()
    with pytest.raises(GroupNeverLeftError):
        run.again("wait_empty", fatal)
    assert len(attempts) == 1, "not retryable: never tried again"

    run.retry_within = 0.5
    attempts.clear()

    def down() -> None:
        attempts.append(1)
        raise BrokerUnavailableError("down")

    with pytest.raises(BrokerUnavailableError):
        run.again("seed", down)
    assert len(attempts) == 2, "0.2 s, then 0.4 s would pass the 0.5 s: the second failure is raised"


def test_a_fall_back_that_failed_is_done_again_when_the_switch_is_tried_again() -> None:
    from airflow_provider_kstate.errors import BrokerUnavailableError

    class Flaky(Run):
        def leave(self, groups: list[str]) -> int:
            self.calls.append(("leave", groups))
            if len(self.calls) == 1:
                raise BrokerUnavailableError("the coordinator went away")
            return 1

    steps = Steps([{"java": [4, 5, 6, 7]}])
    steps.plan = staying_plan()
    run = Flaky(
        plan=steps.plan,
        admin=object(),  # type: ignore[arg-type]
        control=object(),  # type: ignore[arg-type]
        log=logging.getLogger("test"),
        owner="dag/run",
        topics=[steps],  # type: ignore[list-item]
        positions_timeout=0.1,
    )
    run.calls = []  # type: ignore[attr-defined]
    stayed = run.again("scale", run.wait_positions)
    assert stayed["fell_back"] == ["java"] and [c[0] for c in run.calls] == [
        "leave",
        "leave",
        "wait_empty",
        "seed",
        "resume",
    ], run.calls


def test_producer_services_the_layout_cannot_pin_stop_before_the_create_and_start_after_the_switch() -> None:
    """Issue 41, item 2: a producer service named with a command pair is not pinned by the layout (only
    ControlledProducers are): with groups that stay it is stopped before the create and started after the
    switch, its downtime reported; with a drain the drain's start does it."""

    class Pairs:
        def __init__(self) -> None:
            self.calls: list[tuple[str, list[str]]] = []

        def stop(self, drivers: dict[str, Any], kind: str) -> None:
            self.calls.append(("stop", sorted(drivers)))

        def start(self, drivers: dict[str, Any], kind: str) -> list[Any]:
            self.calls.append(("start", sorted(drivers)))
            return []

    writer = CommandDriver(name="writer", stop="systemctl stop writer", start="systemctl start writer")
    plan = staying_plan(producer_drivers={"writer": writer})
    pairs = Pairs()
    run = run_of(plan, Steps([{}]))
    run.pairs = pairs  # type: ignore[assignment]
    run.stop_services()
    run.stop_services()
    assert pairs.calls == [("stop", ["writer"])], "stopped once"
    started = run.start_services()
    assert pairs.calls[-1] == ("start", ["writer"]) and started["services_stopped_s"] >= 0
    drained = run_of(staying_plan(producer_drivers={"writer": writer}, key_order="preserve"), Steps([{}]))
    drained.pairs = Pairs()  # type: ignore[assignment]
    assert drained.drains and drained.start_services() == {}, "a drain starts them after it"
