"""Every group type on the topic is classified and handled (issue 17): classic and consumer-protocol groups
are paused and seeded; share groups, Streams applications and untyped groups are refused with what to do;
Connect sink groups are named. A never-seen group is unknown whatever state the broker describes.

The fake answers as KStateAdminHook does; its group types are the ones ListGroups v5 returns (see
test_doctor.LIST_GROUPS_V5), and its descriptions the ones DescribeGroups / ConsumerGroupDescribe give.
"""

from __future__ import annotations

import pytest
from kstate_support.fakes import plan_request

from airflow_provider_kstate.errors import UnknownGroupError, UnsupportedGroupTypeError
from airflow_provider_kstate.increase.model import GroupInfo, Member
from airflow_provider_kstate.increase.plan import Plan, build_plan, describe


class TypedFakeHook:
    """A cluster whose groups have types: ``{group: (TYPE, state, members, assignor)}``."""

    def __init__(
        self,
        groups: dict[str, tuple[str, str, int, str]],
        listed: set[str] | None = None,
        shares: dict[str, str] | None = None,
    ) -> None:
        self.groups = groups
        self.listed = set(groups) if listed is None else listed
        self.shares = shares  # {share group reading the topic: its share.auto.offset.reset}; None: unreadable

    def partition_count(self, topic: str) -> int:
        return 4

    def group_types(self) -> dict[str, str]:
        return {g: self.groups[g][0] for g in self.listed}

    def groups_on_topic(self, topic: str, partitions: int | None = None) -> list[str]:
        return sorted(g for g in self.listed if self.groups[g][0] in ("CLASSIC", "CONSUMER"))

    def share_groups_on_topic(self, topic: str, types: dict[str, str]) -> dict[str, str] | None:
        return None if self.shares is None else dict(self.shares)

    def describe_groups(self, groups: list[str], topic: str) -> dict[str, GroupInfo]:
        out = {}
        for g in groups:
            gtype, state, members, assignor = self.groups.get(g, ("CLASSIC", "EMPTY", 0, ""))
            ms = tuple(Member(f"m{i}", f"c{i}", "/10.0.0.1", (i,)) for i in range(members))
            out[g] = GroupInfo(g, state, gtype, "consumer", ms, assignor)
        return out


def test_classic_and_consumer_protocol_groups_are_paused_and_seeded() -> None:
    hook = TypedFakeHook(
        {"billing": ("CLASSIC", "STABLE", 2, "range"), "kip848": ("CONSUMER", "STABLE", 1, "uniform")}
    )
    plan = build_plan(hook, "orders", plan_request("orders", 8))
    assert {g: (e.cls, e.type) for g, e in plan.groups.items()} == {
        "billing": ("active", "CLASSIC"),
        "kip848": ("active", "CONSUMER"),
    }
    assert plan.where("seed") == ["billing", "kip848"]
    assert Plan.from_dict(plan.to_dict()).groups["kip848"].type == "CONSUMER"


def test_a_share_group_whose_topics_cannot_be_read_is_refused_with_the_fix() -> None:
    hook = TypedFakeHook({"billing": ("CLASSIC", "STABLE", 1, "range"), "queue": ("SHARE", "STABLE", 2, "")})
    with pytest.raises(UnsupportedGroupTypeError) as info:
        build_plan(hook, "orders", plan_request("orders", 6, ["billing", "queue"]))
    message = str(info.value)
    assert "'queue' is a share group (KIP-932) that may read 'orders'" in message
    assert "--entity-name queue --alter --add-config share.auto.offset.reset=earliest" in message
    assert "--describe --group queue --offsets lists partitions 4,5" in message
    assert "Nothing was changed" in message
    plan = build_plan(hook, "orders", plan_request("orders", 6, ["billing"], exclude_groups=["queue"]))
    assert plan.groups["queue"].cls == "excluded" and plan.groups["queue"].type == "SHARE"


def test_share_groups_are_judged_by_what_they_read_and_where_they_start_new_partitions() -> None:
    """DescribeShareGroupOffsets says which share groups read the topic: one reading another topic is not
    at risk; one reading it at ``earliest`` is left alone; at ``latest`` it is refused unless the broker
    keeps the share_new_partitions promise (measured: Apache Kafka 4.4.0 keeps it, 4.2.0 breaks it)."""
    groups = {
        "billing": ("CLASSIC", "STABLE", 1, "range"),
        "elsewhere": ("SHARE", "STABLE", 1, ""),
        "early": ("SHARE", "STABLE", 2, ""),
        "late": ("SHARE", "EMPTY", 0, ""),
    }
    hook = TypedFakeHook(groups, shares={"early": "earliest", "late": "latest"})
    with pytest.raises(UnsupportedGroupTypeError) as info:
        build_plan(hook, "orders", plan_request("orders", 6))
    message = str(info.value)
    assert (
        "'late' is a share group (KIP-932) that reads 'orders' with share.auto.offset.reset=latest" in message
    )
    assert "'early'" not in message and "'elsewhere'" not in message
    plan = build_plan(hook, "orders", plan_request("orders", 6, share_new_partitions_kept=True))
    assert set(plan.groups) == {"billing", "early", "late"}, "a share group reading another topic is at risk"
    assert {g: plan.groups[g].cls for g in ("early", "late")} == {"early": "share-safe", "late": "share-safe"}
    assert plan.where("pause") == ["billing"], "a share group is never paused nor seeded"
    again = Plan.from_dict(plan.to_dict())
    assert again.groups["late"].share_reset == "latest" and again.groups["late"].cls == "share-safe"
    lines = "\n".join(describe(plan))
    assert "share.auto.offset.reset=earliest: it reads the new partitions from their first record" in lines
    assert "the broker starts added partitions at their first record (share_new_partitions)" in lines
    named = build_plan(hook, "orders", plan_request("orders", 6, ["billing"], exclude_groups=["late"]))
    assert named.groups["early"].cls == "share-safe" and named.groups["late"].cls == "excluded"


def test_a_streams_application_is_refused_unless_acknowledged() -> None:
    # A Kafka Streams app on the classic protocol: assignor "stream"; on KIP-1071: type STREAMS.
    for spec in (("CLASSIC", "STABLE", 2, "stream"), ("STREAMS", "STABLE", 2, "")):
        hook = TypedFakeHook({"enricher": spec})
        with pytest.raises(UnsupportedGroupTypeError, match="co-partitioned") as info:
            build_plan(hook, "orders", plan_request("orders", 8, ["enricher"]))
        assert "acknowledge_streams_groups=['enricher']" in str(info.value)
        plan = build_plan(
            hook, "orders", plan_request("orders", 8, ["enricher"], acknowledge_streams_groups=["enricher"])
        )
        assert (plan.groups["enricher"].cls, plan.groups["enricher"].role) == ("active", "streams")
        assert plan.where("pause") == ["enricher"]


def test_connect_sink_groups_are_named_and_handled_as_consumer_groups() -> None:
    hook = TypedFakeHook({"connect-s3-sink": ("CLASSIC", "EMPTY", 0, "")})
    plan = build_plan(hook, "orders", plan_request("orders", 8))
    entry = plan.groups["connect-s3-sink"]
    assert (entry.cls, entry.role) == ("empty", "connect-sink")
    assert any("connect-sink group" in line for line in describe(plan))


def test_a_group_of_unknown_type_is_refused() -> None:
    hook = TypedFakeHook({"mystery": ("UNKNOWN", "STABLE", 1, "")})
    with pytest.raises(UnsupportedGroupTypeError, match="cannot tell"):
        build_plan(hook, "orders", plan_request("orders", 8, ["mystery"]))


def test_a_never_seen_group_is_unknown_even_when_described_empty() -> None:
    # Tansu 0.6.0 describes a never-seen group as EMPTY (Kafka: DEAD); it is not listed and has no offsets.
    hook = TypedFakeHook(
        {"billing": ("CLASSIC", "STABLE", 1, "range"), "biling": ("CLASSIC", "EMPTY", 0, "")},
        listed={"billing"},
    )
    with pytest.raises(UnknownGroupError, match="biling"):
        build_plan(hook, "orders", plan_request("orders", 8, ["billing", "biling"]))
    plan = build_plan(
        hook, "orders", plan_request("orders", 8, ["billing", "biling"], allow_unknown_groups=True)
    )
    assert plan.groups["biling"].cls == "absent"


def test_a_listed_group_described_dead_is_refused_not_seeded() -> None:
    # DescribeGroups below v6 describes a KIP-848 group as Dead with no members, although it is listed.
    hook = TypedFakeHook({"kip848": ("CONSUMER", "DEAD", 0, "")})
    with pytest.raises(UnsupportedGroupTypeError, match="ConsumerGroupDescribe"):
        build_plan(hook, "orders", plan_request("orders", 8, ["kip848"]))
    plan = build_plan(hook, "orders", plan_request("orders", 8, ["kip848"], exclude_groups=["kip848"]))
    assert plan.groups["kip848"].cls == "excluded" and plan.where("seed") == []


def test_a_reader_kind_is_one_class_and_its_place_in_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kinds are tried in order and the first that claims a group decides its plan: a new kind (here a
    pretend Flink job, told by its group id) is one subclass of ReaderKind placed before the consumer groups;
    nothing else changes. The registry's order is what the plan's classes have always been."""
    from kstate_support.fakes import group_info

    from airflow_provider_kstate.increase import plan as plans

    names = [type(k).__name__ for k in plans.READER_KINDS]
    assert names == [
        "SparkQuery",
        "AbsentGroup",
        "UndescribedGroup",
        "ShareGroup",
        "UntypedGroup",
        "StreamsApplication",
        "ConsumerGroup",
    ]

    class FlinkJob(plans.ReaderKind):
        cls = plans.GroupClass.EXCLUDED  # left alone, as an excluded group is

        def claims(self, seen: plans.Seen) -> bool:
            return seen.info.group.startswith("flink-")

    info = group_info("flink-orders", "STABLE", 1, (0, 1))
    assert plans.classify(info, ()).cls == plans.GroupClass.ACTIVE
    monkeypatch.setattr(plans, "READER_KINDS", (FlinkJob(), *plans.READER_KINDS))
    flink = plans.classify(info, ())
    assert flink.cls == plans.GroupClass.EXCLUDED and not (flink.pause or flink.seed or flink.wait)
    assert plans.classify(group_info("billing", "STABLE", 1, (0,)), ()).cls == plans.GroupClass.ACTIVE


def test_what_a_named_plan_and_the_prompt_say_of_a_kind_comes_from_the_kind() -> None:
    """A reader kind carries what a plan that names its groups and the approval prompt make of it: adding a
    kind that the run leaves alone is its class, not a list elsewhere to keep in step."""
    from airflow_provider_kstate.increase.plan import LEFT_ALONE, READER_KINDS, UNNAMED_OK, GroupClass

    assert UNNAMED_OK == {
        GroupClass.SPARK,
        GroupClass.UNDESCRIBED,
        GroupClass.SHARE,
        GroupClass.SHARE_SAFE,
        GroupClass.UNKNOWN_TYPE,
    }
    assert set(LEFT_ALONE) == {GroupClass.SPARK, GroupClass.ABSENT, GroupClass.SHARE_SAFE}
    assert all(text.startswith("left alone: ") for text in LEFT_ALONE.values())
    assert {k.cls for k in READER_KINDS} >= UNNAMED_OK - {GroupClass.SHARE_SAFE}
