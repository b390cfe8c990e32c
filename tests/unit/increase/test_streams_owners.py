"""Issue 40, item 3: a Kafka Streams application's topics are what the broker says, never a name prefix.

``counts`` and ``counts-v2`` are two applications; every internal topic of ``counts-v2`` is named
``counts-...``. The rule of before (``{application.id}-...-changelog`` / ``-repartition`` is the
application's) takes them as ``counts``'s: the first test shows it does, on the topics two real ``count``
applications create (tests/integration/test_streams_neighbours.py runs them). The plan now reads an
application's topics from the broker: a streams group's described topology (StreamsGroupDescribe), a running
classic application's members' subscriptions (DescribeGroups), its committed offsets; where only names remain
(a classic application's changelogs, a stopped application) an internal topic is the application's whose id
is the **longest** listed group id prefixing it (:func:`owner`)."""

from __future__ import annotations

from typing import Any

import pytest
from kstate_support.fakes import plan_request

from airflow_provider_kstate.errors import UnsupportedGroupTypeError
from airflow_provider_kstate.increase.model import GroupInfo, Member
from airflow_provider_kstate.increase.plan import build_plan, describe
from airflow_provider_kstate.increase.streams_apps import StreamsDescription, StreamsTopology, owner
from tests.unit.increase.test_streams_apps import StreamsCluster

STORE = "KSTREAM-AGGREGATE-STATE-STORE-0000000001"
APP, NEIGHBOUR = "counts", "counts-v2"
#: Growing ``words`` to 4 partitions, the application acknowledged.
ACKNOWLEDGED = plan_request("words", 4, acknowledge_streams_groups=[APP])
CHANGELOG, N_CHANGELOG = f"{APP}-{STORE}-changelog", f"{NEIGHBOUR}-{STORE}-changelog"
N_REPARTITION = f"{NEIGHBOUR}-KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition"


class DescribedCluster(StreamsCluster):
    """:class:`StreamsCluster` that also answers as ClusterAdmin's wire reads do: the topics each classic
    group's members subscribe (``subscribed``) and the streams groups' descriptions (``streams``)."""

    def __init__(self, *args: Any, subscribed: Any = None, streams: Any = None) -> None:
        super().__init__(*args)
        self.subscribed: dict[str, frozenset[str]] = dict(subscribed or {})
        self.streams: dict[str, StreamsDescription] = dict(streams or {})
        self.asked: list[list[str]] = []

    def subscriptions(self, groups: list[str]) -> dict[str, frozenset[str]]:
        self.asked.append(list(groups))
        return {g: self.subscribed[g] for g in groups if g in self.subscribed}

    def describe_streams_groups(self, groups: list[str], topic: str) -> dict[str, StreamsDescription]:
        return {g: self.streams[g] for g in groups if g in self.streams}


def neighbours(kind: str = "CLASSIC", **kw: Any) -> DescribedCluster:
    """``counts`` on ``words`` and ``counts-v2`` on ``words2``, both running ``count`` (classic protocol)."""
    topics = {
        "words": (2, "delete"),
        "words2": (2, "delete"),
        CHANGELOG: (2, "compact"),
        N_CHANGELOG: (2, "compact"),
        N_REPARTITION: (2, "delete"),
    }
    assignor = "stream" if kind == "CLASSIC" else ""
    groups = {APP: (kind, "STABLE", assignor), NEIGHBOUR: (kind, "STABLE", assignor)}
    committed = {APP: {"words"}, NEIGHBOUR: {"words2", N_REPARTITION}}
    return DescribedCluster(topics, groups, committed, **kw)


def test_the_rule_of_before_takes_the_neighbours_topics_and_the_longest_id_does_not() -> None:
    names = list(neighbours().topics)
    by_prefix = [t for t in names if t.startswith(f"{APP}-") and t.endswith(("-changelog", "-repartition"))]
    assert by_prefix == [CHANGELOG, N_CHANGELOG, N_REPARTITION]  # the scenario: the neighbour's are taken
    listed = [APP, NEIGHBOUR, "other"]
    assert {t: owner(t, listed) for t in names} == {
        "words": None,
        "words2": None,
        CHANGELOG: APP,
        N_CHANGELOG: NEIGHBOUR,
        N_REPARTITION: NEIGHBOUR,
    }
    # a dash ends the id: "counts-v" prefixes nothing here, "count" is a shorter prefix than "counts"
    assert owner(N_CHANGELOG, ["count", "counts-v", APP]) == APP
    assert owner(CHANGELOG, []) is None


def test_a_classic_application_keeps_only_its_own_changelog_and_repartition_topics() -> None:
    cluster = neighbours(
        subscribed={APP: frozenset({"words"}), NEIGHBOUR: frozenset({"words2", N_REPARTITION})}
    )
    plan = build_plan(cluster, "words", ACKNOWLEDGED)
    app = plan.streams_apps[APP]
    assert [c.topic for c in app.changelogs] == [CHANGELOG]
    assert (app.sources, app.repartitions) == (["words"], [])
    assert app.grown == ["words", CHANGELOG] and NEIGHBOUR not in plan.streams_apps
    assert cluster.asked == [[APP]]  # the subscriptions of the application planned, in one read
    # stopped (no subscription read): its committed offsets and the longest-id rule give the same topics
    stopped = neighbours()
    assert build_plan(stopped, "words", ACKNOWLEDGED).streams_apps[APP] == app


def test_a_running_classic_application_s_repartition_topics_are_those_its_members_subscribe() -> None:
    mine = f"{APP}-KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition"
    left = f"{APP}-KSTREAM-AGGREGATE-STATE-STORE-0000000009-repartition"  # of a topology it no longer runs
    cluster = neighbours(subscribed={APP: frozenset({"words", mine})})
    cluster.topics.update({mine: (2, "delete"), left: (5, "delete")})
    app = build_plan(cluster, "words", ACKNOWLEDGED).streams_apps[APP]
    assert (app.sources, app.repartitions) == (["words"], [mine])
    # stopped, its subscriptions unknown: every repartition topic the longest-id rule gives it counts (the
    # leftover, on 5 partitions, is then refused rather than left behind)
    cluster.subscribed.clear()
    with pytest.raises(Exception, match=left):
        build_plan(cluster, "words", ACKNOWLEDGED)


def test_a_plain_consumer_group_is_not_taken_for_a_stopped_application_by_a_neighbour_s_topics() -> None:
    # "counts" is a plain consumer group, EMPTY (no assignor): only the neighbour's topics carry its name.
    cluster = neighbours()
    cluster.groups[APP] = ("CLASSIC", "EMPTY", "")
    del cluster.topics[CHANGELOG]
    plan = build_plan(cluster, "words", plan_request("words", 4))
    assert plan.groups[APP].role != "streams" and not plan.streams_apps
    # with a changelog of its own it is a stopped Streams application (unacknowledged: refused)
    cluster.topics[CHANGELOG] = (2, "compact")
    with pytest.raises(UnsupportedGroupTypeError, match="Kafka Streams application"):
        build_plan(cluster, "words", plan_request("words", 4))


def test_a_streams_group_s_topics_are_its_described_topology() -> None:
    member = Member("m1", f"{APP}-StreamThread-1-consumer", "/127.0.0.1", (0, 1))
    info = GroupInfo(APP, "STABLE", "STREAMS", "streams", (member,))
    topology = StreamsTopology(sources=["words"], repartitions=[], changelogs=[CHANGELOG])
    n_info = GroupInfo(NEIGHBOUR, "STABLE", "STREAMS", "streams", ())
    n_topology = StreamsTopology(sources=["words2"], repartitions=[N_REPARTITION], changelogs=[N_CHANGELOG])
    cluster = neighbours(
        "STREAMS",
        streams={APP: StreamsDescription(info, topology), NEIGHBOUR: StreamsDescription(n_info, n_topology)},
    )
    cluster.committed[APP] = set()  # no commit yet: the topology alone says it reads "words"
    plan = build_plan(cluster, "words", ACKNOWLEDGED)
    app = plan.streams_apps[APP]
    assert (app.protocol, app.sources, app.repartitions) == ("streams", ["words"], [])
    assert [c.topic for c in app.changelogs] == [CHANGELOG] and NEIGHBOUR not in plan.streams_apps
    # described: its state and its member (the line said "0 members" before)
    assert plan.groups[APP].state == "STABLE" and plan.groups[APP].member_count == 1
    line = next(line for line in describe(plan) if line.startswith(f"  group {APP}:"))
    assert "1 members" in line and "stopped, seeded and started by its driver" in line and "pause" not in line


def test_the_resize_steps_name_no_replacer() -> None:
    # The plan does not know whether Spark or the worker re-places the changelogs (replacer=spark|local).
    app = build_plan(neighbours(), "words", ACKNOWLEDGED).streams_apps[APP]
    step = next(a for a in app.actions if a.startswith("grow changelog"))
    assert "re-place it (each moved key's latest value to murmur2(key) % 4" in step and "Spark" not in step
