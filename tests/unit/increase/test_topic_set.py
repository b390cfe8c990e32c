"""Unit tests of increase/topic_set.py: several co-partitioned topics in one run (fakes; the real broker's
side is tests/integration/test_multi_topic_increase.py)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import pytest
from kstate_support.fakes import PLAN, healthy_replicas
from kstate_support.fakes import group_info as _info

from airflow_provider_kstate.errors import (
    InternalTopicError,
    InvalidArgumentError,
    TopicNotFoundError,
    UnequalPartitionCountsError,
    UnprotectedGroupError,
)
from airflow_provider_kstate.increase.model import GroupInfo, TopicReplicas
from airflow_provider_kstate.increase.plan import Plan, describe
from airflow_provider_kstate.increase.planner import plan_increase
from airflow_provider_kstate.increase.request import PlanRequest
from airflow_provider_kstate.increase.run import IncreaseRun, drains_by_topic
from airflow_provider_kstate.increase.steps import TopicSteps
from airflow_provider_kstate.increase.topic_set import (
    check_counts,
    topic_set,
)


class Cluster:
    """Topics with partition counts, groups with their offsets per topic (``{group: {topic: {p: offset}}}``)."""

    def __init__(self, counts: dict[str, int], reads: dict[str, dict[str, dict[int, int]]]) -> None:
        self.counts = dict(counts)
        self.offsets = reads
        self.infos = {g: _info(g, "STABLE", 1) for g in reads}
        self.calls: list[tuple[str, Any]] = []

    # -- what the plan asks
    def partition_count(self, topic: str) -> int:
        if topic not in self.counts:
            raise TopicNotFoundError(f"topic {topic!r} does not exist on the cluster")
        return self.counts[topic]

    def groups_on_topic(self, topic: str, partitions: int | None = None) -> list[str]:
        return sorted(g for g, topics in self.offsets.items() if topic in topics)

    def group_types(self) -> dict[str, str]:
        return dict.fromkeys(self.offsets, "CLASSIC")

    def share_groups_on_topic(self, topic: str, types: dict[str, str]) -> dict[str, str] | None:
        return {}

    def describe_groups(self, groups: list[str], topic: str) -> dict[str, GroupInfo]:
        return {g: self.infos.get(g, GroupInfo(g, "DEAD", "CLASSIC", "")) for g in groups}

    def topic_replicas(self, topic: str, leaders_only: bool = False) -> TopicReplicas:
        return healthy_replicas(topic, self.partition_count(topic))

    def topic_ids(self, topics: Iterable[str]) -> dict[str, str]:
        return {t: f"id-{t}" for t in topics}

    def unloaded(self, topic: str, partitions: Iterable[int]) -> list[int]:
        return []

    # -- what the steps do
    def increase_partitions(self, topic: str, total: int, validate_only: bool = False) -> None:
        if not validate_only:
            self.calls.append(("create", topic))
            self.counts[topic] = total

    def committed_offsets_many(
        self, groups: Iterable[str], topic: str, partitions: int | None = None
    ) -> Iterator[tuple[str, dict[int, int]]]:
        for g in groups:
            yield g, dict(self.offsets.get(g, {}).get(topic, {}))

    def log_starts(self, topic: str, partitions: Iterable[int]) -> dict[int, int]:
        return dict.fromkeys(partitions, 0)

    def watermarks(self, topic: str, partitions: Iterable[int]) -> dict[int, tuple[int, int]]:
        return {p: (0, 10 if p < 4 else 0) for p in partitions}

    def seed_offsets_many(self, topic: str, offsets: Mapping[str, Mapping[int, int]]) -> None:
        self.calls.append(("seed", topic, sorted(offsets)))
        for g, o in offsets.items():
            self.offsets.setdefault(g, {}).setdefault(topic, {}).update(o)


class Control:
    def __init__(self, calls: list[tuple[str, Any]]) -> None:
        self.calls = calls

    def follow(self) -> None:
        self.calls.append(("follow",))

    def pause(self, groups: list[str], topic: str, issuer: str) -> int:
        self.calls.append(("pause", sorted(groups)))
        for g in groups:  # they leave
            self.infos[g] = _info(g, "EMPTY")
        return 1

    def resume(self, groups: list[str], topic: str, issuer: str) -> int:
        self.calls.append(("resume", sorted(groups)))
        return 2

    def set_layout(self, topic: str, partitions: int, issuer: str) -> int:
        self.calls.append(("layout", topic, partitions))
        return 3

    def acks(self, epoch: int, group: str = "", topic: str = "", refresh: bool = True) -> list[Any]:
        """The pause's acknowledgements: ``left`` for each client of :attr:`committing` until it has been
        asked :attr:`looks` times, ``paused`` after."""
        from airflow_provider_kstate.client_piece.protocol import Ack

        self.calls.append(("acks", group, refresh))
        looked = sum(1 for c in self.calls if c[:2] == ("acks", group))
        state = "left" if looked <= self.looks else "paused"
        return [Ack(client=c, epoch=epoch, state=state, group=group) for c in self.committing.get(group, [])]

    infos: dict[str, GroupInfo] = {}
    committing: dict[str, list[str]] = {}
    looks = 0


def _cluster() -> Cluster:
    """orders and payments (4 each); join reads both, audit only orders."""
    full = {p: 10 for p in range(4)}
    return Cluster(
        {"orders": 4, "payments": 4, "refunds": 6},
        {"join": {"orders": dict(full), "payments": dict(full)}, "audit": {"orders": dict(full)}},
    )


def _plan_set(cluster: Cluster, topics: list[str], target: int, groups: Iterable[str] = ()) -> Plan:
    """The plan of ``topics`` through the one planner (no client piece seen on the control topic)."""
    request = PlanRequest(topics=tuple(topics), partitions=target, consumer_groups=tuple(groups))
    return plan_increase(cluster, request, dict)  # type: ignore[arg-type]


def test_the_set_is_read_in_order_and_bad_input_is_named() -> None:
    assert topic_set("orders", ["payments"]) == ["orders", "payments"]
    assert topic_set(None, ["orders", "payments"]) == ["orders", "payments"]
    assert topic_set("orders") == ["orders"]
    with pytest.raises(InvalidArgumentError, match="no topic"):
        topic_set(None, [])
    with pytest.raises(InvalidArgumentError, match=r"\['orders'\] are named twice"):
        topic_set("orders", ["orders", "payments"])
    with pytest.raises(InternalTopicError, match="__consumer_offsets"):
        topic_set(None, ["orders", "__consumer_offsets"])
    with pytest.raises(InvalidArgumentError, match="non-empty"):
        topic_set(None, ["orders", " "])


def test_unequal_counts_are_refused_naming_each_unless_the_others_are_at_the_target() -> None:
    check_counts({"orders": 4, "payments": 4}, 8)
    check_counts({"orders": 4, "payments": 8}, 8)  # a crashed run created payments: a repair there
    check_counts({"orders": 8, "payments": 8}, 8)
    with pytest.raises(UnequalPartitionCountsError, match="orders: 4, payments: 6") as refused:
        check_counts({"orders": 4, "payments": 6}, 8)
    assert not refused.value.retryable


def test_the_plan_names_every_topic_and_every_group_once_with_the_topics_it_reads() -> None:
    cluster = _cluster()
    plan = _plan_set(cluster, ["orders", "payments"], 8)
    assert plan.several and plan.topic == "orders" and plan.topics == {"orders": 4, "payments": 4}
    assert plan.where("pause") == ["audit", "join"], "each group once"
    assert plan.groups["audit"].topics == ("orders",) and plan.groups["join"].topics == ()
    views = {v.topic: v for v in plan.views()}
    assert list(views["orders"].groups) == ["audit", "join"] and list(views["payments"].groups) == ["join"]
    assert views["payments"].new_partitions == range(4, 8) and not views["payments"].several
    text = "\n".join(describe(plan))
    assert "co-partitioned topics orders, payments" in text and "topic payments: 4 -> 8" in text
    assert "group audit: active" in text and "on orders\n" in text + "\n"


def test_bad_sets_change_nothing_and_name_the_problem() -> None:
    cluster = _cluster()
    with pytest.raises(UnequalPartitionCountsError, match="orders: 4, refunds: 6"):
        _plan_set(cluster, ["orders", "refunds"], 8)
    with pytest.raises(TopicNotFoundError, match="'nope'"):
        _plan_set(cluster, ["orders", "nope"], 8)
    with pytest.raises(InvalidArgumentError, match="twice"):
        _plan_set(cluster, ["orders", "orders"], 8)
    # a group at risk on any topic of the set must be named when groups are named
    with pytest.raises(UnprotectedGroupError, match="audit"):
        _plan_set(cluster, ["orders", "payments"], 8, ["join"])
    assert cluster.calls == []


def test_the_plan_round_trips_and_an_old_plan_of_one_topic_still_reads() -> None:
    plan = _plan_set(_cluster(), ["orders", "payments"], 8)
    data = json.loads(json.dumps(plan.to_dict()))
    assert data["topics"] == {"orders": 4, "payments": 4} and data["groups"]["audit"]["topics"] == ["orders"]
    assert "topics" not in data["groups"]["join"], "a group reading every topic writes nothing more"
    assert Plan.from_dict(data) == plan
    old = Plan.from_dict(PLAN)
    assert not old.several and old.topic_names == [old.topic] and old.for_topic(old.topic) is old
    assert "topics" not in old.to_dict()
    repair = _plan_set(_cluster(), ["orders", "payments"], 4)
    assert repair.mode == "repair"
    half = Cluster({"orders": 4, "payments": 8}, {})
    assert _plan_set(half, ["orders", "payments"], 8).mode == "increase"


def test_the_drain_of_each_topic_is_read_from_the_window_or_the_scale_step() -> None:
    """The window's XCom and the scale step's have one shape: each topic's switch under ``topics`` ->
    topic -> ``switch``; only the topics that drain a group are returned, each with its own offsets."""
    plan = _plan_set(_cluster(), ["orders", "payments"], 8)
    drain = {"groups": ["join"], "offsets": [5, 6], "stopped_at": 1, "backlog": {"join": 3}}
    window = {
        "topics": {"orders": {"seeded": 1, "switch": {"drain": drain}}, "payments": {"switch": {"epoch": 4}}},
        "seeded": 1,
    }
    scale = {"topics": {"orders": {"switch": {"drain": drain}}, "payments": {"switch": {"epoch": 4}}}}
    assert drains_by_topic(plan, window) == {"orders": drain}
    assert drains_by_topic(plan, scale) == {"orders": drain}
    assert drains_by_topic(plan, {}) == {} and drains_by_topic(plan, None) == {}


def _set_steps(cluster: Cluster, plan: Plan) -> IncreaseRun:
    control: Any = Control(cluster.calls)
    control.infos = cluster.infos
    log = logging.getLogger("test_topic_set")
    renewals: list[int] = []
    options: dict[str, Any] = {"key_order": "relax", "lease_check": lambda: renewals.append(1)}
    return IncreaseRun(plan, cluster, control, log, "d/r", **options)  # type: ignore[arg-type]


def test_one_window_pauses_once_creates_every_topic_seeds_each_group_where_it_reads_and_resumes_once() -> (
    None
):
    cluster = _cluster()
    plan = _plan_set(cluster, ["orders", "payments"], 8)
    steps = _set_steps(cluster, plan)
    live = plan.where("seed")
    steps.pause()
    steps.wait_empty(5)
    steps.increase(5)
    seeded = steps.seed(live, {})
    steps.resume(live)
    steps.scale(live)
    kinds = [c[0] for c in cluster.calls]
    assert kinds.count("pause") == 1 and kinds.count("resume") == 1, cluster.calls
    assert kinds.index("follow") == kinds.index("pause") - 1, "the acks followed before the pause record"
    assert ("create", "orders") in cluster.calls and ("create", "payments") in cluster.calls
    assert ("seed", "orders", ["audit", "join"]) in cluster.calls
    assert ("seed", "payments", ["join"]) in cluster.calls, "audit reads only orders: not seeded on payments"
    assert kinds.index("resume") > max(i for i, k in enumerate(kinds) if k == "seed")
    assert ("layout", "orders", 8) in cluster.calls and ("layout", "payments", 8) in cluster.calls
    assert seeded["payments"].groups["join"]["seeded"] == 4
    assert sorted(cluster.offsets["join"]["payments"]) == list(range(8))
    assert "payments" not in cluster.offsets["audit"]


def test_no_group_resumes_while_it_lacks_an_offset_on_any_topic() -> None:
    from airflow_provider_kstate.errors import UnsafeResumeError

    cluster = _cluster()
    plan = _plan_set(cluster, ["orders", "payments"], 8)
    steps = _set_steps(cluster, plan)
    steps.pause()
    steps.increase(5)
    steps.topics[0].seed(plan.where("seed"))  # orders only: payments' new partitions have no offsets
    with pytest.raises(UnsafeResumeError, match="payments"):
        steps.resume(plan.where("seed"))
    assert [c for c in cluster.calls if c[0] == "resume"] == []


@pytest.mark.parametrize(("looks", "within", "resumed_after"), [(3, 10.0, 4), (10**6, 0.05, None)])
def test_the_resume_waits_for_the_commits_of_clients_that_left_before_committing(
    looks: int, within: float, resumed_after: int | None, caplog: pytest.LogCaptureFixture
) -> None:
    """A client that acknowledged the pause ``left`` commits once the group is EMPTY: the resume waits for
    its ``paused`` (another member rejoining first would make the broker refuse that commit), up to
    ``COMMITS_WITHIN``; past it the clients are named and the groups resumed all the same."""
    cluster = _cluster()
    plan = _plan_set(cluster, ["orders", "payments"], 8)
    steps = _set_steps(cluster, plan)
    control: Any = steps.control
    control.committing, control.looks = {"join": ["c0"]}, looks
    steps.pause()
    steps.increase(5)
    live = plan.where("seed")
    steps.seed(live, {})
    steps.commits_within = within
    steps.resume(live)
    kinds = [c for c in cluster.calls if c[0] in ("acks", "resume")]
    asked = [c for c in kinds if c[:2] == ("acks", "join")]
    assert kinds[-1][0] == "resume", "resumed in the end either way"
    assert kinds[:2] == [("acks", "audit", True), ("acks", "join", False)], "one read of the topic a look"
    if resumed_after is not None:
        assert len(asked) == resumed_after and "still commit" not in caplog.text
    else:
        assert "clients {'join': ['c0']} still commit after leaving" in caplog.text


def test_nothing_is_created_when_a_topic_changed_behind_the_run() -> None:
    from airflow_provider_kstate.errors import TopicChangedError

    cluster = _cluster()
    plan = _plan_set(cluster, ["orders", "payments"], 8)
    steps = _set_steps(cluster, plan)
    cluster.counts["payments"] = 5
    with pytest.raises(TopicChangedError, match="'payments' has 5"):
        steps.increase(5)
    assert [c for c in cluster.calls if c[0] == "create"] == []
    assert not steps.created_nothing(), "a topic changed: the window does not undo, the guard decides"
    fresh = _set_steps(_cluster(), plan)
    assert fresh.created_nothing()
    fresh.undo_before_create()  # every group resumes once; every topic's producers on its layout
    calls = fresh.admin.calls  # type: ignore[attr-defined]
    assert calls == [("resume", ["audit", "join"]), ("layout", "orders", 4), ("layout", "payments", 4)]


def test_a_drain_holds_each_draining_topic_s_producers_and_stops_and_starts_the_services_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """audit (orders only) is drained: only orders' producers are held before the create (payments'
    switch through their barrier), the producer services stop once and start once, after which orders'
    producers go to the target layout and each topic's cost is reported; an undo starts them once too."""
    from airflow_provider_kstate.increase.drivers import CommandDriver

    cluster = _cluster()
    planned = _plan_set(cluster, ["orders", "payments"], 8)
    plan = planned.replace(
        groups={**planned.groups, "audit": planned.groups["audit"].replace(key_order="drained")},
        producers={"billing": CommandDriver(name="billing", stop="stop-it", start="start-it")},
    )
    held: list[str] = []

    class Switch:
        def __init__(self, topic: str) -> None:
            self.topic = topic

        def hold_for_drain(self, hold_s: float) -> dict[str, Any]:
            held.append(self.topic)
            return {"hold_epoch": 7, "producers": [], "producers_held": []}

        def announce(self) -> None:
            pass

    monkeypatch.setattr(TopicSteps, "key_order_switch", lambda self: Switch(self.topic))
    runs: list[tuple[str, str]] = []
    steps = _set_steps(cluster, plan)
    monkeypatch.setattr(steps.commands, "stop", lambda c, kind: runs.append(("stop", kind)))
    monkeypatch.setattr(steps.commands, "start", lambda c, kind: runs.append(("start", kind)) or [])
    out = steps.pause()
    assert held == ["orders"] and out["producers_stopped"]["services"] == ["billing"]
    assert runs == [("stop", "producer")], runs
    assert ("layout", "payments", 4) in cluster.calls and ("layout", "orders", 4) not in cluster.calls
    steps.increase(5)
    steps.seed(plan.where("seed"), {})
    drain = {"groups": ["audit"], "offsets": [10] * 4, "stopped_at": 1, "backlog": {"audit": 3}}
    started = steps.start_producers({"orders": drain})
    assert set(started["topics"]) == {"orders"} and started["topics"]["orders"]["backlog_at_switch"] == 3
    assert ("layout", "orders", 8) in cluster.calls
    assert runs == [("stop", "producer"), ("start", "producer")], runs
    fresh = _set_steps(_cluster(), plan)
    monkeypatch.setattr(fresh.commands, "stop", lambda c, kind: runs.append(("stop", kind)))
    monkeypatch.setattr(fresh.commands, "start", lambda c, kind: runs.append(("start", kind)) or [])
    fresh.pause()
    fresh.undo_before_create()
    assert [r for r in runs[2:] if r[1] == "producer"] == [("stop", "producer"), ("start", "producer")], runs


def test_around_another_reader_s_grow_the_groups_leave_once_are_seeded_back_and_drain_before_producers() -> (
    None
):
    """The run of the other readers of a Kafka Streams application's input (the resize grows the topics
    itself): they leave and are waited for, are seeded on each new partition of each topic they read after
    the grow, rejoin once, their ControlledProducers' layout goes to the target, and the drain is judged
    against the old partitions' ends (join and audit hold 10 on each: drained)."""
    cluster = _cluster()
    plan = _plan_set(cluster, ["orders", "payments"], 8)
    run = _set_steps(cluster, plan)
    out = run.leave_for_grow()
    assert out["groups"] == 2 and [c for c in cluster.calls if c[0] == "pause"] == [
        ("pause", ["audit", "join"])
    ]
    cluster.counts.update(orders=8, payments=8)  # the application's resize grew them
    back = run.back_after_grow()
    assert (
        back["topics"]["orders"]["groups"]["audit"]["seeded"] == 4
        and "audit" not in back["topics"]["payments"]["groups"]
    )
    assert back["topics"]["payments"]["switch"]["partitions"] == 8 and back["resumed"]["groups"] == 2
    assert sorted(cluster.offsets["join"]["payments"]) == list(range(8))
    drained = run.wait_drained(0.5)
    assert drained["drained"] and drained["behind"] == {}, drained
    cluster.offsets["audit"]["orders"][3] = 7  # behind on an old partition
    late = run.wait_drained(0.3)
    assert not late["drained"] and late["behind"] == {
        "audit on orders": {"records_behind": 3, "partitions": "3"}
    }
