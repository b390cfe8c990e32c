"""The seed does not ask the log start of partitions this run created (they start at 0), only of the gaps
on partitions that existed before (unit fakes; the real broker's side is in the integration tests)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from airflow_provider_kstate.increase.model import GroupInfo
from airflow_provider_kstate.increase.plan import GroupClass, GroupPlan, Plan
from airflow_provider_kstate.increase.steps import SafeIncreaseSteps


class Admin:
    """A topic grown 4 -> 8 whose group had no offset on partition 1; old partitions start at 50."""

    def __init__(self) -> None:
        self.asked: list[set[int]] = []
        self.seeded: dict[str, dict[int, int]] = {}
        self.count = 4

    def partition_count(self, topic: str) -> int:
        return self.count

    def increase_partitions(self, topic: str, total: int, validate_only: bool = False) -> None:
        if not validate_only:
            self.count = total

    def describe_groups(self, groups: list[str], topic: str) -> dict[str, GroupInfo]:
        return {g: GroupInfo(g, "EMPTY", "CLASSIC", "consumer", ()) for g in groups}

    def committed_offsets_many(
        self, groups: Iterable[str], topic: str, partitions: int | None = None
    ) -> Iterator[tuple[str, dict[int, int]]]:
        for g in groups:
            yield g, {p: 70 for p in range(min(partitions or self.count, 4)) if p != 1}

    def log_starts(self, topic: str, partitions: Iterable[int]) -> dict[int, int]:
        self.asked.append(set(partitions))
        return dict.fromkeys(self.asked[-1], 50)

    def seed_offsets_many(self, topic: str, offsets: Mapping[str, Mapping[int, int]]) -> None:
        self.seeded = {g: dict(o) for g, o in offsets.items()}


def _steps(fake: Admin) -> SafeIncreaseSteps:
    plans = {"billing": GroupPlan(cls=GroupClass.EMPTY, state="EMPTY", member_count=0, pause=True, seed=True)}
    plan = Plan("orders", 4, 8, plans, planned_at="now", owner="run-1")
    control: Any = None
    return SafeIncreaseSteps(plan, fake, control, logging.getLogger("test_seed"), "run-1")  # type: ignore[arg-type]


def test_partitions_this_run_created_are_seeded_at_0_without_asking() -> None:
    admin = Admin()
    steps = _steps(admin)
    steps.increase(timeout=5)
    result = steps.seed()
    assert admin.asked == [{1}], "only the old partition's gap is asked its log start"
    assert admin.seeded == {"billing": {1: 50, 4: 0, 5: 0, 6: 0, 7: 0}}
    assert result.groups["billing"]["seeded"] == 5


def test_partitions_created_before_this_run_are_asked() -> None:
    admin = Admin()
    admin.count = 8  # an earlier (crashed) run created them: their log start may have moved since
    steps = _steps(admin)
    steps.seed()
    assert admin.asked == [{1, 4, 5, 6, 7}]
    assert admin.seeded == {"billing": dict.fromkeys((1, 4, 5, 6, 7), 50)}
