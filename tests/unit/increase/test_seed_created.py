"""Partitions this run created are not waited for: the seed commits 0 on them without asking their log start
(only the old partitions' gaps are asked), the barrier asks their ends once (unit fakes; the real broker's side
is in the integration tests and bench/bench_increase_scale.py)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import pytest

from airflow_provider_kstate.increase.key_order import KeyOrderSwitch
from airflow_provider_kstate.increase.model import GroupInfo, PartitionReplicas, TopicReplicas
from airflow_provider_kstate.increase.plan import GroupClass, GroupPlan, Plan
from airflow_provider_kstate.increase.steps import TopicSteps


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


def _steps(fake: Admin) -> TopicSteps:
    plans = {"billing": GroupPlan(cls=GroupClass.EMPTY, state="EMPTY", member_count=0, pause=True, seed=True)}
    plan = Plan("orders", 4, 8, plans, planned_at="now", owner="run-1")
    control: Any = None
    return TopicSteps(plan, fake, control, logging.getLogger("test_seed"), "run-1")  # type: ignore[arg-type]


def test_partitions_this_run_created_are_seeded_at_0_without_asking() -> None:
    admin = Admin()
    steps = _steps(admin)
    steps.increase(timeout=5)
    result = steps.seed()
    assert admin.asked == [{1}], "only the old partition's gap is asked its log start"
    assert admin.seeded == {"billing": {1: 50, 4: 0, 5: 0, 6: 0, 7: 0}}
    assert result.groups["billing"]["seeded"] == 5
    # what the group holds once seeded, for the services' watch (not read again): kept, then seeded
    assert dict(steps.held["billing"]) == {0: 70, 2: 70, 3: 70, 1: 50, 4: 0, 5: 0, 6: 0, 7: 0}


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
    # asked together (one round trip over a network), each once
    assert sorted(fake.calls) == [("loaded_ends", [4, 5, 6, 7]), ("watermarks", [0, 1, 2, 3])]


class Loading(Admin):
    """Partitions 4-7 exist but their leader loads them over three looks (Apache Kafka 4.4 under many
    partitions); the producers' switch is recorded with what was still loading then."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 8
        self.looks = 0
        self.events: list[str] = []

    def unloaded(self, topic: str, partitions: Iterable[int]) -> list[int]:
        self.looks += 1
        waiting = [p for p in partitions if self.looks < 3]
        self.events.append(f"look {waiting}")
        return waiting


def test_producers_switch_only_once_the_new_partitions_leaders_serve_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """KAFKA-15591 (Apache Kafka 4.4): an idempotent producer's first batch to a partition its leader has not
    loaded yet can retry with OUT_OF_ORDER_SEQUENCE_NUMBER until its delivery timeout and be lost: the switch
    waits for every new partition's leader first (the consumers are back; the producers stay on the old
    partitions meanwhile)."""
    admin = Loading()
    steps = _steps(admin)
    steps.known = {"billing": 8}

    class Switch:
        def switch(self, live: list[str]) -> dict[str, Any]:
            admin.events.append("switch")
            return {"epoch": 2}

    monkeypatch.setattr(TopicSteps, "key_order_switch", lambda self: Switch())
    assert steps.scale([])["epoch"] == 2
    assert admin.events == ["look [4, 5, 6, 7]", "look [4, 5, 6, 7]", "look []", "switch"], admin.events


def test_a_switch_whose_new_partitions_never_load_fails_before_switching(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from airflow_provider_kstate.errors import KStateError

    admin = Loading()
    admin.looks = -(10**6)  # never loaded within the timeout
    steps = _steps(admin)
    steps.known, steps.leader_timeout = {"billing": 8}, 0.05
    monkeypatch.setattr(TopicSteps, "key_order_switch", lambda self: (_ for _ in ()).throw(AssertionError))
    with pytest.raises(KStateError, match="no leader serving them") as failed:
        steps.scale([])
    assert failed.value.retryable, "the retry continues once the brokers serve them"
