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


class GhostHook(FakeHook):
    """A cluster whose coordinator keeps listing the members of group ``live`` (their LeaveGroup lost in a
    broker fault) until they are removed: ``m0`` of client ``c0``, ``m1`` of ``c1`` and, in ``others``, members
    ``x<i>`` of clients that did not acknowledge the pause; ``fail``: what every removal raises.

    :param kind: the group's type as ListGroups names it (``CLASSIC``, ``CONSUMER``, ...).
    """

    def __init__(self, others: tuple[str, ...] = (), kind: str = "CLASSIC", fail: Exception | None = None):
        super().__init__()
        self.listed = {"m0": "c0", "m1": "c1", **{f"x{i}": c for i, c in enumerate(others)}}
        self.kind = kind
        self.fail = fail
        #: ``(group, member ids, reason)`` of every removal asked.
        self.removed: list[tuple[str, list[str], str]] = []

    def describe_groups(self, groups: list[str], topic: str) -> dict[str, GroupInfo]:
        members = tuple(Member(m, c, "/10.0.0.1", (0,)) for m, c in self.listed.items())
        out = {g: GroupInfo(g, "EMPTY", "CLASSIC", "consumer") for g in groups}
        if "live" in out:
            out["live"] = GroupInfo("live", "STABLE" if members else "EMPTY", self.kind, "consumer", members)
        return out

    def leave_members(self, group: str, member_ids: list[str], reason: str) -> dict[str, int]:
        self.removed.append((group, sorted(member_ids), reason))
        if self.fail is not None:
            raise self.fail
        for member in member_ids:
            self.listed.pop(member, None)
        return dict.fromkeys(member_ids, 0)


class PauseAcks:
    """The control channel: the clients that acknowledged the pause of epoch :attr:`EPOCH` ``paused``
    (``fail``: what reading the acknowledgements raises)."""

    #: The pause record's epoch: long past, so its ghosts are due at once.
    EPOCH = 1_700_000_000_000

    def __init__(self, paused: tuple[str, ...] = ("c0", "c1"), fail: Exception | None = None) -> None:
        self.paused = paused
        self.fail = fail
        self.closed = False

    def acks(self, epoch: int, group: str = "", topic: str = "", refresh: bool = True) -> list[Any]:
        from airflow_provider_kstate.client_piece.protocol import Ack

        if self.fail is not None:
            raise self.fail
        if epoch != self.EPOCH:
            return []
        return [Ack(client=c, epoch=epoch, state="paused", group=group) for c in self.paused]

    def close(self) -> None:
        self.closed = True
