"""Leadership and ISR before an increase (issue 33): the plan refuses partitions offline or below
``min.insync.replicas`` before anyone is paused, warns of under-replicated ones, and the increase waits for the
new partitions' leaders (unit fakes; the 3-node cluster's side is tests/integration/test_replication.py)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import pytest

from airflow_provider_kstate import errors
from airflow_provider_kstate.increase.model import PartitionReplicas, TopicReplicas
from airflow_provider_kstate.increase.plan import GroupClass, GroupPlan, Plan, build_plan, describe
from airflow_provider_kstate.increase.replicas import (
    ReplicationState,
    check_replication,
    judge,
    wait_for_leaders,
)
from airflow_provider_kstate.increase.steps import TopicSteps
from tests.unit.increase.test_seed_created import Admin as Admin4


def _topic(
    isr: dict[int, tuple[int, ...]], leaders: dict[int, int] | None = None, **kw: Any
) -> TopicReplicas:
    """Six partitions on brokers 1-3 (RF 3, min ISR 2 unless given) with the ISR of each partition given."""
    leaders = leaders or {}
    in_sync = {p: isr.get(p, (1, 2, 3)) for p in range(6)}
    parts = tuple(
        PartitionReplicas(p, leaders.get(p, (*in_sync[p], -1)[0]), (1, 2, 3), in_sync[p]) for p in range(6)
    )
    return TopicReplicas("orders", parts, kw.pop("min_isr", 2), frozenset(kw.pop("down", ())))


class Admin:
    """Answers ``topic_replicas`` from a fixed state; counts the calls of everything else (none expected)."""

    def __init__(self, replicas: TopicReplicas) -> None:
        self.replicas = replicas
        self.calls: list[str] = []

    def topic_replicas(self, topic: str, leaders_only: bool = False) -> TopicReplicas:
        self.calls.append(f"topic_replicas(leaders_only={leaders_only})")
        return self.replicas

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the check must not call {name}: it changes nothing and reads only replicas")


def test_every_partition_in_sync_passes_without_a_warning() -> None:
    state = check_replication(Admin(_topic({})), "orders")  # type: ignore[arg-type]
    assert state == ReplicationState(replication_factor=3, min_insync_replicas=2)
    assert state.describe() == "replication: factor 3, min.insync.replicas 2; every partition in sync"


def test_under_replicated_at_or_above_min_isr_is_a_warning_naming_the_partitions() -> None:
    lagging = check_replication(Admin(_topic({p: (1, 2) for p in (0, 1, 2, 5)})), "orders")  # type: ignore[arg-type]
    assert lagging.under_replicated == "0-2,5" and lagging.brokers_down == []
    assert "partitions 0-2,5 (4) are under-replicated" in lagging.warning
    assert "acks=all writes still succeed, so the run goes on" in lagging.warning
    # broker 3 does not answer: it counts out of every ISR it is still in (3 and 4 here)
    down = check_replication(Admin(_topic({p: (1, 2) for p in (0, 1, 2, 5)}, down={3})), "orders")  # type: ignore[arg-type]
    assert down.under_replicated == "0-5" and down.brokers_down == [3]
    assert "brokers not answering: 3" in down.warning
    assert "WARNING under-replicated partitions 0-5; brokers not answering: 3" in down.describe()


def test_below_min_isr_refuses_naming_the_partitions_and_what_to_do() -> None:
    replicas = _topic({0: (1,), 1: (1,), 2: (1,), 4: (1, 2)})
    with pytest.raises(errors.PartitionsUnavailableError) as caught:
        check_replication(Admin(replicas), "orders")  # type: ignore[arg-type]
    message = str(caught.value)
    assert "partitions 0-2 (3) have 1 in-sync replica (fewest), below min.insync.replicas=2" in message
    assert "NOT_ENOUGH_REPLICAS" in message and "partitions 4 are under-replicated" in message
    assert "Bring the brokers back" in message and "wait for the replicas to catch up" in message
    assert "Do not lower min.insync.replicas" in message
    assert "Nothing was changed; nobody was paused." in message


def test_offline_partitions_refuse_no_leader_or_a_leader_that_does_not_answer() -> None:
    replicas = _topic({0: (), 3: (2, 1)}, leaders={0: -1, 3: 2}, down={2, 3})
    verdict = judge(replicas)
    assert verdict.offline == [0, 3]  # no leader; a leader (2) that does not answer
    assert verdict.below_min_isr == {1: 1, 2: 1, 4: 1, 5: 1}  # 2 and 3 in the ISR do not answer
    message = verdict.refusal()
    assert "partitions 0,3 (2) are offline" in message and "Brokers not answering: 2, 3." in message


def test_a_frozen_metadata_with_dead_brokers_still_in_the_isr_refuses() -> None:
    """Two of three KRaft combined nodes down: the quorum is lost and the metadata keeps the last committed ISR
    (1, 2) and leader 2 (measured on Apache Kafka 4.4.0); broker 2 does not answer, so it counts out."""
    replicas = _topic({p: (2, 1) if p % 2 else (1, 2) for p in range(6)}, down={2, 3})
    verdict = judge(replicas)
    assert verdict.offline == [1, 3, 5] and sorted(verdict.below_min_isr) == [0, 2, 4]


def test_refusal_is_retryable_a_broker_that_comes_back_heals_it() -> None:
    assert errors.PartitionsUnavailableError.retryable
    assert issubclass(errors.PartitionsUnavailableError, errors.KStateError)


def test_the_plan_keeps_the_replication_and_writes_it_only_when_checked() -> None:
    state = ReplicationState(
        replication_factor=3, min_insync_replicas=2, under_replicated="1", brokers_down=[3]
    )
    plan = Plan("orders", 2, 4, {}, planned_at="now", replication=state)
    assert plan.to_dict()["replication"]["under_replicated"] == "1"
    assert Plan.from_dict(plan.to_dict()) == plan
    assert "replication" not in Plan("orders", 2, 4, {}).to_dict()  # a plan written before: as it was
    assert describe(plan)[-1].startswith("replication: factor 3, min.insync.replicas 2; WARNING")


def test_build_plan_attaches_the_replication_it_is_given() -> None:
    from kstate_support.fakes import FakeHook, plan_request

    state = ReplicationState(replication_factor=3, min_insync_replicas=2)
    assert build_plan(FakeHook(), "orders", plan_request("orders", 4), replication=state).replication == state  # type: ignore[arg-type]
    assert build_plan(FakeHook(), "orders", plan_request("orders", 4)).replication is None  # type: ignore[arg-type]


class Growing(Admin4):
    """A topic grown 4 -> 8 whose new partitions get leaders after ``late`` looks at the metadata."""

    def __init__(self, late: int) -> None:
        super().__init__()
        self.late, self.looks = late, 0

    def topic_replicas(self, topic: str, leaders_only: bool = False) -> TopicReplicas:
        assert leaders_only, "the wait reads the metadata alone"
        self.looks += 1
        leader = 1 if self.looks > self.late else -1
        parts = [
            PartitionReplicas(p, 1 if p < 4 else leader, (1, 2, 3), (1, 2, 3)) for p in range(self.count)
        ]
        return TopicReplicas(topic, tuple(parts[:5] if self.looks <= self.late // 2 else parts))


def _steps(cluster: Any) -> TopicSteps:
    groups = {"billing": GroupPlan(cls=GroupClass.EMPTY, state="EMPTY", pause=True, seed=True)}
    plan = Plan("orders", 4, 8, groups, planned_at="now", owner="run-1")
    return TopicSteps(plan, cluster, None, logging.getLogger("test_replicas"), "run-1")  # type: ignore[arg-type]


def test_the_wait_for_leaders_returns_once_every_new_partition_has_one() -> None:
    admin = Growing(late=6)
    admin.count = 8  # created: the metadata shows them late, then without a leader, then with one
    took = wait_for_leaders(admin, "orders", range(4, 8), timeout=5)  # type: ignore[arg-type]
    assert admin.looks == 7 and took >= 0


def test_the_increase_does_not_wait_for_leaders_in_the_pause_window(caplog: pytest.LogCaptureFixture) -> None:
    """Nothing up to the resume needs the new partitions' leaders: verify waits for them (after the resume)."""
    admin = Growing(late=10**9)
    with caplog.at_level(logging.INFO, "test_replicas"):
        out = _steps(admin).increase(timeout=5)
    assert admin.looks == 0 and out == {"created": True, "partitions": 8}
    assert "created partitions 4-7 (4)" in caplog.text


def test_new_partitions_without_a_leader_past_the_timeout_fail_retryably_naming_them() -> None:
    with pytest.raises(errors.KStateError) as caught:
        wait_for_leaders(Growing(late=10**9), "orders", range(4, 6), timeout=0.05)  # type: ignore[arg-type]
    assert type(caught.value) is errors.KStateError and caught.value.retryable
    assert "partitions 4-5 (2) have no leader serving them 0.05s after the create" in str(caught.value)


class Loading(Growing):
    """Leaders in the metadata at once; the broker serves partitions 4-7 only from the third look."""

    def __init__(self) -> None:
        super().__init__(late=0)
        self.count, self.asked = 8, 0

    def unloaded(self, topic: str, partitions: Iterable[int]) -> list[int]:
        self.asked += 1
        return [] if self.asked >= 3 else list(partitions)


def test_the_wait_for_leaders_waits_until_the_leaders_serve_them() -> None:
    admin = Loading()
    wait_for_leaders(admin, "orders", range(4, 8), timeout=5)  # type: ignore[arg-type]
    assert admin.asked == 3
