"""Unit tests of operators/guard.py for a plan of several topics: it decides over the set (fakes)."""

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
    released = False

    def release(self) -> None:
        self.released = True


def _plan() -> Plan:
    entry = GroupPlan(cls=GroupClass.EMPTY, state="EMPTY", pause=True, seed=True)
    groups = {"join": entry, "audit": entry.replace(topics=("orders",))}
    return Plan("orders", 4, 8, groups, owner="d/r", topics={"orders": 4, "payments": 4})


def _guard(cluster: Admin) -> tuple[Any, Control]:
    from airflow_provider_kstate.operators.guard import KStateFailureGuardOperator

    guard = KStateFailureGuardOperator(task_id="failure_guard", plan_task_id="plan")
    control = Control()
    guard.__dict__.update(admin=cluster, control=control)
    guard.plan = _plan().to_dict()  # read from the plan task's XCom when it runs
    return guard, control


full = {p: 0 for p in range(8)}
old = {p: 0 for p in range(4)}


def test_nothing_created_on_any_topic_resumes_everyone_and_releases_the_set() -> None:
    guard, control = _guard(Admin({"orders": 4, "payments": 4}, {}))
    keeper = Keeper()
    with pytest.raises(KStateError, match="before partitions of .*orders.*payments.* were created"):
        guard._guard_set(_plan(), "d/r", keeper)
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
        guard._guard_set(_plan(), "d/r", keeper)
    assert control.calls == [("resume", ["audit"])], "audit reads only orders, seeded there: resumed"
    assert not keeper.released


def test_every_group_seeded_on_every_topic_it_reads_is_resumed() -> None:
    offsets = {"join": {"orders": full, "payments": full}, "audit": {"orders": full}}
    guard, control = _guard(Admin({"orders": 8, "payments": 8}, offsets))
    with pytest.raises(KStateError, match="every group was seeded on every topic"):
        guard._guard_set(_plan(), "d/r", Keeper())
    assert control.calls == [("resume", ["audit", "join"])]
