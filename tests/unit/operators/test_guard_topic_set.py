"""Unit tests of the failure guard (increase/guard.py, the decisions of operators/guard.py) for a plan of
several topics: it decides over the set (fakes)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import pytest

from airflow_provider_kstate.errors import KStateError, UnsafeResumeError
from airflow_provider_kstate.increase.plan import GroupClass, GroupPlan, Plan


class Admin:
    def __init__(self, counts: dict[str, int], offsets: dict[str, dict[str, dict[int, int]]]) -> None:
        self.counts, self.offsets = counts, offsets

    def partition_count(self, topic: str) -> int:
        return self.counts[topic]

    def committed_offsets_many(
        self, groups: Iterable[str], topic: str, partitions: int | None = None
    ) -> Iterator[tuple[str, dict[int, int]]]:
        for g in groups:
            yield g, dict(self.offsets.get(g, {}).get(topic, {}))


class Control:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def resume(self, groups: list[str], topic: str, issuer: str) -> int:
        self.calls.append(("resume", sorted(groups)))
        return 1

    def set_layout(self, topic: str, partitions: int, issuer: str) -> int:
        self.calls.append(("layout", topic, partitions))
        return 2

    def close(self) -> None:
        pass


class Keeper:
    owner = "d/r"
    released = False

    def current(self) -> None:
        return None

    def release(self) -> None:
        self.released = True


def _plan() -> Plan:
    entry = GroupPlan(cls=GroupClass.EMPTY, state="EMPTY", pause=True, seed=True)
    groups = {"join": entry, "audit": entry.replace(topics=("orders",))}
    return Plan("orders", 4, 8, groups, owner="d/r", topics={"orders": 4, "payments": 4})


class Guard:
    """The guard on ``cluster`` with a fake control channel: ``run(plan, keeper)`` decides as the task does."""

    def __init__(self, cluster: Admin, control: Control) -> None:
        self.cluster, self.control = cluster, control

    def run(self, plan: Plan, keeper: Keeper) -> None:
        import logging

        from airflow_provider_kstate.increase.guard import FailureGuard

        FailureGuard(plan, self.cluster, self.control, keeper, logging.getLogger("guard")).run()  # type: ignore[arg-type]


def _guard(cluster: Admin) -> tuple[Guard, Control]:
    control = Control()
    return Guard(cluster, control), control


full = {p: 0 for p in range(8)}
old = {p: 0 for p in range(4)}


def test_nothing_created_on_any_topic_resumes_everyone_and_releases_the_set() -> None:
    guard, control = _guard(Admin({"orders": 4, "payments": 4}, {}))
    keeper = Keeper()
    with pytest.raises(KStateError, match="before partitions of .*orders.*payments.* were created"):
        guard.run(_plan(), keeper)
    assert control.calls == [
        ("resume", ["audit", "join"]),
        ("layout", "orders", 4),
        ("layout", "payments", 4),
    ]
    assert keeper.released


def test_a_group_with_a_gap_on_any_topic_stays_out_and_the_leases_stay_held() -> None:
    offsets = {"join": {"orders": full, "payments": old}, "audit": {"orders": full}}
    guard, control = _guard(Admin({"orders": 8, "payments": 8}, offsets))
    keeper = Keeper()
    with pytest.raises(UnsafeResumeError, match="'payments'.*join"):
        guard.run(_plan(), keeper)
    assert control.calls == [("resume", ["audit"])], "audit reads only orders, seeded there: resumed"
    assert not keeper.released


def test_every_group_seeded_on_every_topic_it_reads_is_resumed() -> None:
    offsets = {"join": {"orders": full, "payments": full}, "audit": {"orders": full}}
    guard, control = _guard(Admin({"orders": 8, "payments": 8}, offsets))
    with pytest.raises(KStateError, match="every group was seeded on every topic"):
        guard.run(_plan(), Keeper())
    assert control.calls == [("resume", ["audit", "join"])]


def test_a_failed_drain_of_a_set_puts_each_drained_topic_s_producers_on_a_safe_layout_and_starts_them_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """audit (orders only) drained: after the create, orders' held producers go to the target when every
    group is seeded there (the old count when one is not), payments' are left to their barrier, and the
    producer services a drain stopped are started once."""
    from airflow_provider_kstate.increase.drivers import CommandDriver, CommandPairs

    started: list[str] = []
    monkeypatch.setattr(CommandPairs, "start", lambda self, commands, kind: started.append(kind) or [])
    plan = _plan()
    plan = plan.replace(
        groups={**plan.groups, "audit": plan.groups["audit"].replace(key_order="drained")},
        producers={"billing": CommandDriver(name="billing", stop="stop-it", start="start-it")},
    )
    for payments, layout in ((full, 8), (old, 8)):
        offsets = {"join": {"orders": full, "payments": payments}, "audit": {"orders": full}}
        guard, control = _guard(Admin({"orders": 8, "payments": 8}, offsets))
        with pytest.raises(KStateError):
            guard.run(plan, Keeper())
        assert [c for c in control.calls if c[0] == "layout"] == [("layout", "orders", layout)], control.calls
    assert started.count("producer") == 2, started  # once per guard run
    offsets = {"join": {"orders": old, "payments": full}, "audit": {"orders": full}}
    guard, control = _guard(Admin({"orders": 8, "payments": 8}, offsets))
    with pytest.raises(UnsafeResumeError):
        guard.run(plan, Keeper())
    assert [c for c in control.calls if c[0] == "layout"] == [("layout", "orders", 4)], (
        "join lacks orders' new"
    )
