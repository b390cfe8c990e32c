"""Partitions this run created are not waited for: the seed commits 0 on them without asking their log start
(only the old partitions' gaps are asked), the barrier asks their ends once (unit fakes; the real broker's side
is in the integration tests and bench/bench_increase_scale.py)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from airflow_provider_kstate.increase.key_order import KeyOrderSwitch
from airflow_provider_kstate.increase.model import GroupInfo, PartitionReplicas, TopicReplicas
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

    def topic_replicas(self, topic: str, leaders_only: bool = False) -> TopicReplicas:
        return TopicReplicas(topic, tuple(PartitionReplicas(p, 1, (1,), (1,)) for p in range(self.count)))

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

    def unloaded(self, topic: str, partitions: Iterable[int]) -> list[int]:
        return []

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


class Ends(Admin):
    """Old partitions end at 90; the new ones are asked once (``loaded_ends``), never waited for."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 8
        self.calls: list[tuple[str, list[int]]] = []

    def watermarks(self, topic: str, partitions: Iterable[int]) -> dict[int, tuple[int, int]]:
        self.calls.append(("watermarks", list(partitions)))
        return {p: (0, 90) for p in self.calls[-1][1]}

    def loaded_ends(self, topic: str, partitions: Iterable[int]) -> dict[int, int]:
        self.calls.append(("loaded_ends", list(partitions)))
        return {p: 0 if p > 4 else 3 for p in self.calls[-1][1]}  # 5-7 not loaded by a leader yet


def test_the_barrier_asks_the_new_partitions_once() -> None:
    fake = Ends()
    switch = KeyOrderSwitch(_steps(fake).plan, fake, None, logging.getLogger("test_seed"), "run-1")  # type: ignore[arg-type]
    assert switch._end_offsets() == [90, 90, 90, 90, 3, 0, 0, 0]
    assert fake.calls == [("watermarks", [0, 1, 2, 3]), ("loaded_ends", [4, 5, 6, 7])]
