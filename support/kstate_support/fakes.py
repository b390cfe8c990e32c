"""Fakes for the unit tests of the safe increase: a plan as its XCom carries it and an admin hook answering from
fixed data (no broker)."""

from __future__ import annotations

from typing import Any

from airflow_provider_kstate.increase.model import GroupInfo, Member, PartitionReplicas, TopicReplicas
from airflow_provider_kstate.increase.request import PlanRequest

#: A plan as the plan step's XCom carries it (written by an earlier version: no member counts).
PLAN: dict[str, Any] = {
    "topic": "orders",
    "original_partitions": 2,
    "target_partitions": 4,
    "new_partitions": [2, 3],
    "groups": {
        "live": {
            "class": "active",
            "pause": True,
            "seed": True,
            "wait": True,
            "state": "STABLE",
            "members": ["c"],
        },
        "idle": {
            "class": "empty",
            "pause": True,
            "seed": True,
            "wait": False,
            "state": "EMPTY",
            "members": [],
        },
        "spark-kafka-source-1": {
            "class": "spark",
            "pause": False,
            "seed": False,
            "wait": False,
            "state": "EMPTY",
            "members": [],
        },
    },
}


class FakeHook:
    """Answers like KStateAdminHook from fixed data."""

    def __init__(self, partitions: int = 2, groups: dict[str, GroupInfo] | None = None) -> None:
        self.partitions = partitions
        self.groups = groups or {}
        #: ``(topic, total)`` of every creation the broker was asked to validate (``validate_only``).
        self.validated: list[tuple[str, int]] = []

    def topic_replicas(self, topic: str, leaders_only: bool = False) -> TopicReplicas:
        return healthy_replicas(topic, self.partitions)

    def topic_ids(self, topics: Any) -> dict[str, str]:
        return {t: f"id-{t}" for t in topics}

    def increase_partitions(self, topic: str, total: int, validate_only: bool = False) -> None:
        if not validate_only:
            raise AssertionError("the fake cluster is never changed")
        self.validated.append((topic, total))

    def partition_count(self, topic: str) -> int:
        return self.partitions

    def groups_on_topic(self, topic: str, partitions: int | None = None) -> list[str]:
        return sorted(self.groups)

    def group_types(self) -> dict[str, str]:
        return {g: info.type for g, info in self.groups.items() if info.state != "DEAD"}

    def share_groups_on_topic(self, topic: str, types: dict[str, str]) -> dict[str, str] | None:
        return {}

    def describe_groups(self, groups: list[str], topic: str) -> dict[str, GroupInfo]:
        return {g: self.groups.get(g, GroupInfo(g, "DEAD", "CLASSIC", "")) for g in groups}


def healthy_replicas(topic: str, partitions: int) -> TopicReplicas:
    """A topic whose every partition is led by broker 1, its only replica (nothing to refuse)."""
    return TopicReplicas(topic, tuple(PartitionReplicas(p, 1, (1,), (1,)) for p in range(partitions)))


def group_info(group: str, state: str, members: int = 0, parts: tuple[int, ...] = ()) -> GroupInfo:
    """A classic consumer group in ``state`` with ``members`` members, each assigned ``parts``."""
    ms = tuple(Member(f"m{i}", f"c{i}", "/127.0.0.1", parts) for i in range(members))
    return GroupInfo(group, state, "CLASSIC", "consumer", ms)


def plan_request(topic: str, target: int | None = None, groups: Any = (), **choices: Any) -> PlanRequest:
    """The request of growing ``topic`` to ``target`` protecting ``groups`` (empty: every group at risk), with
    the other :class:`~airflow_provider_kstate.increase.request.PlanRequest` fields as keywords, for
    :func:`~airflow_provider_kstate.increase.plan.build_plan`."""
    return PlanRequest(topics=(topic,), partitions=target, consumer_groups=groups, **choices)
