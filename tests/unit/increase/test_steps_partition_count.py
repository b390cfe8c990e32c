"""Metadata answers that go back after a create (issue 33): on a 3-node cluster each broker applies the create
in its own time, and a count of 8 was followed by 4 from another broker. The seed and the resume rule use the
most partitions the run has seen, never fewer (unit fakes; the cluster's side is
tests/integration/test_broker_faults.py)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import Any

import pytest

from airflow_provider_kstate.errors import BrokerUnavailableError, UnsafeResumeError
from airflow_provider_kstate.increase.plan import GroupClass, GroupPlan, Plan
from airflow_provider_kstate.increase.steps import TopicSteps
from tests.unit.increase.test_seed_created import Admin


class Lagging(Admin):
    """After the create, the metadata answers 8 once (the increase sees it), then 4 (a lagging broker)."""

    def __init__(self) -> None:
        super().__init__()
        self.answers: list[int] = []

    def partition_count(self, topic: str) -> int:
        return self.answers.pop(0) if self.answers else self.count

    def increase_partitions(self, topic: str, total: int, validate_only: bool = False) -> None:
        if not validate_only:
            self.answers = [total]  # then back to self.count: 4

    def committed_offsets_many(
        self, groups: Iterable[str], topic: str, partitions: int | None = None
    ) -> Iterator[tuple[str, dict[int, int]]]:
        for g in groups:  # what the broker holds: the old partitions and whatever was seeded
            yield g, {**{p: 70 for p in range(4)}, **self.seeded.get(g, {})}


def _steps(fake: Admin) -> TopicSteps:
    plans = {"billing": GroupPlan(cls=GroupClass.EMPTY, state="EMPTY", member_count=0, pause=True, seed=True)}
    plan = Plan("orders", 4, 8, plans, planned_at="now", owner="run-1")
    control: Any = None
    return TopicSteps(plan, fake, control, logging.getLogger("test_lagging"), "run-1")  # type: ignore[arg-type]


def test_the_seed_after_a_create_covers_the_new_partitions_when_the_metadata_goes_back() -> None:
    admin = Lagging()
    steps = _steps(admin)
    steps.increase(timeout=5)
    assert admin.partition_count("orders") == 4  # a lagging broker's answer now
    result = steps.seed()
    assert result.partitions == 8 and admin.seeded == {"billing": dict.fromkeys(range(4, 8), 0)}
    assert steps.missing(["billing"]) == {}


def test_the_resume_rule_does_not_pass_on_a_lagging_answer() -> None:
    admin = Lagging()
    steps = _steps(admin)
    admin.answers = [8]
    assert steps.partition_count() == 8  # the run saw 8 partitions (its create, or a retry's look)
    with pytest.raises(UnsafeResumeError, match="billing: 4-7"):
        steps.require_offsets(["billing"])  # the metadata says 4 now: the rule still asks for 8


def test_a_create_without_an_answer_is_marked_unknown() -> None:
    class Dying(Lagging):
        def increase_partitions(self, topic: str, total: int, validate_only: bool = False) -> None:
            if not validate_only:
                raise BrokerUnavailableError("create partitions of 'orders': no answer")

    steps = _steps(Dying())
    with pytest.raises(BrokerUnavailableError):
        steps.increase(timeout=5)
    assert steps.create_unknown and steps.created_from is None
