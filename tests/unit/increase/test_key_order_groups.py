"""Unit tests of the barrier's view of the groups (increase/key_order.py): who holds, who is waited for.

A group the plan marked ``relaxed`` (no client piece; its consumers stopped and started by the user's own
tasks) cannot hold at the barrier: the switch must not put it among the offline groups that hold at start,
and verify must report it relaxed at once instead of waiting ``barrier_timeout`` for it (issue 30: 300 s
per run, holding the lease).
"""

from __future__ import annotations

from typing import Any

from airflow_provider_kstate.client_piece.protocol import Barrier
from airflow_provider_kstate.increase.key_order import classify_groups, watch_release
from airflow_provider_kstate.increase.plan import GroupClass, GroupPlan, Plan

WHY = "1 of 1 live members never acknowledged on the control topic (client ids kcat)"


def _plan() -> Plan:
    def seeded(mark: str, why: str = "") -> GroupPlan:
        return GroupPlan(
            cls=GroupClass.ACTIVE, state="STABLE", pause=True, seed=True, wait=True,
            key_order=mark, key_order_reason=why,
        )  # type: ignore[arg-type]  # fmt: skip

    groups = {"held": seeded("barrier"), "kcat": seeded("relaxed", WHY), "idle": seeded("offline")}
    return Plan("orders", 2, 4, groups, owner="run-1")


def test_a_group_the_plan_marked_relaxed_is_relaxed_even_when_offline_at_the_switch() -> None:
    groups = classify_groups(_plan(), acked={"held"}, live=["held"])
    assert groups.held == ["held"]
    assert groups.offline == ["idle"]
    assert list(groups.relaxed) == ["kcat"]
    assert WHY in groups.relaxed["kcat"]
    # Live without an acknowledgement: relaxed, whatever the plan said.
    assert "did not acknowledge" in classify_groups(_plan(), set(), ["held", "kcat"]).relaxed["held"]


class _Watch:
    def __init__(self, barrier: Barrier) -> None:
        self.state: dict[str, Any] = {barrier.key: barrier}

    def close(self) -> None:
        pass


class _Control:
    def __init__(self, barrier: Barrier) -> None:
        self.barrier = barrier
        self.released: list[str] = []

    def watch(self) -> _Watch:
        return _Watch(self.barrier)

    def release_group(self, topic: str, group: str, epoch: int, owner: str) -> None:
        self.released.append(group)


class _Admin:
    """Every group below the barrier: a group waited for would be waited for until the timeout."""

    def __init__(self) -> None:
        self.asked: list[list[str]] = []

    def committed_offsets_many(self, groups: list[str], topic: str, count: int) -> Any:
        self.asked.append(list(groups))
        return iter([(g, {}) for g in groups])


class _Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, msg: str, *args: Any) -> None:
        self.lines.append(msg % args)

    warning = info


def test_verify_reports_a_relaxed_group_at_once_and_waits_only_for_those_that_hold() -> None:
    # An old switch (before classify_groups) put the offline kcat group among the barrier's groups.
    barrier = Barrier(topic="orders", epoch=7, offsets=[5, 5], groups=["held", "kcat"], issuer="run-1")
    control, admin, log = _Control(barrier), _Admin(), _Log()
    out = watch_release(admin, control, _plan(), log, "run-1", 0.3, live=["held", "kcat"])  # type: ignore[arg-type]
    assert all("kcat" not in asked for asked in admin.asked)  # never waited for
    assert out["groups"]["kcat"]["relaxed"].startswith("the plan marked it relaxed")
    assert out["groups"]["kcat"]["plan"] == "relaxed"
    assert "pending" in out["groups"]["held"]  # the group that holds was waited for (and is still below)
    assert any("kcat is relaxed" in line for line in log.lines)
