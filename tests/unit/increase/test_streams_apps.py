"""Issue 32, item 2: the plan recognizes a Kafka Streams application reading the topic, names its topology
(application id, co-partitioned sources, changelogs and their store types, repartition topics) and what the
resize does, and refuses at plan time a topology the run cannot resize, naming why and what to do.

The fake cluster answers as ClusterAdmin does (the real application's topics and configs are those measured
on Apache Kafka 4.4.0 in tests/integration/test_streams_resize.py)."""

from __future__ import annotations

from typing import Any

import pytest
from kstate_support.fakes import plan_request

from airflow_provider_kstate.errors import UnsupportedGroupTypeError, UnsupportedStreamsTopologyError
from airflow_provider_kstate.increase.model import GroupInfo, Member
from airflow_provider_kstate.increase.plan import Plan, build_plan, describe
from airflow_provider_kstate.increase.streams_apps import (
    KEY_SUFFIX,
    StoreType,
    record_key,
    store_type,
)

APP = "wordcount"
COUNT_STORE = f"{APP}-KSTREAM-AGGREGATE-STATE-STORE-0000000001-changelog"


class StreamsCluster:
    """Topics ``{name: (partitions, cleanup.policy)}``, groups ``{group: (TYPE, state, assignor)}`` and the
    committed topics of each group; ``listed``: the groups the client lists (not KIP-1071 streams groups)."""

    def __init__(
        self,
        topics: dict[str, tuple[int, str]],
        groups: dict[str, tuple[str, str, str]],
        committed: dict[str, set[str]],
    ) -> None:
        self.topics = topics
        self.groups = groups
        self.committed = committed

    def partition_count(self, topic: str) -> int:
        return self.topics[topic][0]

    def list_topics(self) -> list[str]:
        return sorted(self.topics)

    def topic_config(self, topic: str) -> dict[str, str]:
        return {"cleanup.policy": self.topics[topic][1]}

    def group_types(self) -> dict[str, str]:
        return {g: t for g, (t, _s, _a) in self.groups.items()}

    def groups_on_topic(self, topic: str, partitions: int | None = None) -> list[str]:
        # the client lists classic and consumer groups only
        return sorted(
            g
            for g, (t, _s, _a) in self.groups.items()
            if t != "STREAMS" and topic in self.committed.get(g, ())
        )

    def share_groups_on_topic(self, topic: str, types: dict[str, str]) -> dict[str, str] | None:
        return {}

    def committed_offsets_many(self, groups: Any, topic: str, partitions: int | None = None) -> Any:
        count = self.topics[topic][0] if partitions is None else partitions
        for g in groups:
            yield g, ({p: 5 for p in range(count)} if topic in self.committed.get(g, ()) else {})

    def describe_groups(self, groups: list[str], topic: str) -> dict[str, GroupInfo]:
        out = {}
        for g in groups:
            kind, state, assignor = self.groups.get(g, ("CLASSIC", "DEAD", ""))
            if kind == "STREAMS":  # confluent-kafka cannot describe a streams group
                out[g] = GroupInfo(g, "DEAD", "CLASSIC", "")
                continue
            members = (
                (Member("m0", f"{g}-StreamThread-1-consumer", "/127.0.0.1", (0, 1)),)
                if state == "STABLE"
                else ()
            )
            out[g] = GroupInfo(g, state, kind, "consumer", members, assignor)
        return out


def count_app(**changes: Any) -> StreamsCluster:
    """A ``groupByKey().count()`` application on ``words`` (2 partitions), classic protocol, running."""
    topics = {"words": (2, "delete"), "counts": (2, "delete"), COUNT_STORE: (2, "compact")}
    groups = {APP: ("CLASSIC", "STABLE", "stream")}
    committed = {APP: {"words"}}
    cluster = StreamsCluster(topics, groups, committed)
    for name, value in changes.items():
        getattr(cluster, name).update(value)
    return cluster


def test_store_type_rule() -> None:
    assert store_type("KSTREAM-AGGREGATE-STATE-STORE-0000000001", "compact") == (StoreType.KEY_VALUE, "")
    assert store_type("KSTREAM-JOINTHIS-0000000004-store", "delete") == (StoreType.WINDOW, "")
    assert store_type("clicks-per-window", "compact,delete")[0] == StoreType.WINDOW
    assert store_type("sessions-of-users", "delete,compact")[0] == StoreType.SESSION
    for name, policy, why in [
        ("KSTREAM-AGGREGATE-STATE-STORE-0000000003", "compact,delete", "tells neither"),
        ("KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-0000000010", "compact", "combined key"),
        ("KTABLE-SUPPRESS-STATE-STORE-0000000004", "compact", "in flight"),
        ("KSTREAM-OUTERSHARED-0000000004-store", "delete", "timestamp before the key"),
    ]:
        kind, reason = store_type(name, policy)
        assert kind is None and why in reason, (name, reason)
    assert KEY_SUFFIX == {"key-value": 0, "window": 12, "session": 16}
    window_key = b"k001" + (1_700_000_000_000).to_bytes(8, "big") + (7).to_bytes(4, "big")
    assert record_key(window_key, 12) == b"k001" and record_key(b"k001", 0) == b"k001"


def test_the_plan_names_a_classic_streams_application_and_what_the_resize_does() -> None:
    cluster = count_app(
        topics={f"{APP}-KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition": (2, "delete")},
        committed={APP: {"words", f"{APP}-KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition"}},
    )
    plan = build_plan(cluster, "words", plan_request("words", 4, acknowledge_streams_groups=[APP]))
    app = plan.streams_apps[APP]
    assert (app.application_id, app.protocol, app.sources) == (APP, "classic", ["words"])
    assert [(c.topic, c.store, c.store_type, c.cleanup_policy) for c in app.changelogs] == [
        (COUNT_STORE, "KSTREAM-AGGREGATE-STATE-STORE-0000000001", "key-value", "compact")
    ]
    assert app.repartitions == [f"{APP}-KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition"]
    assert (app.partitions, app.target) == (2, 4)
    assert app.grown == ["words", app.repartitions[0], COUNT_STORE]
    text = "\n".join(app.actions)
    for step in (
        "stop the producers",
        "stop the application by its driver",
        "grow the sources words 2 -> 4",
        "repartition topics",
        "re-place it",
        "murmur2(key) % 4",
        "seed group 'wordcount'",
        "start the application",
    ):
        assert step in text, step
    lines = "\n".join(describe(plan))
    assert f"streams application {APP} (classic protocol): sources words" in lines
    assert "1. stop the producers" in lines
    # the wire form carries it, and reads back the same; a plan without one writes nothing new
    again = Plan.from_dict(plan.to_dict())
    assert again.streams_apps == plan.streams_apps
    assert (
        "streams_apps"
        not in build_plan(
            count_app(groups={APP: ("CLASSIC", "STABLE", "range")}), "words", plan_request("words", 4)
        ).to_dict()
    )


def test_a_streams_application_unacknowledged_is_still_refused() -> None:
    with pytest.raises(UnsupportedGroupTypeError, match="acknowledge_streams_groups=\\['wordcount'\\]"):
        build_plan(count_app(), "words", plan_request("words", 4))


def test_a_kip_1071_streams_group_is_found_by_its_offsets() -> None:
    # The client lists no streams group and describes it DEAD: its type and its offsets find it.
    cluster = count_app(groups={APP: ("STREAMS", "STABLE", "")})
    assert cluster.groups_on_topic("words") == []
    with pytest.raises(UnsupportedGroupTypeError, match="Kafka Streams application"):
        build_plan(cluster, "words", plan_request("words", 4))
    plan = build_plan(cluster, "words", plan_request("words", 4, acknowledge_streams_groups=[APP]))
    assert plan.groups[APP].role == "streams" and plan.groups[APP].type == "STREAMS"
    assert plan.streams_apps[APP].protocol == "streams"


def test_a_stopped_classic_application_is_told_by_its_internal_topics() -> None:
    # An EMPTY classic group names no assignor: its changelog says it is a Streams application.
    cluster = count_app(groups={APP: ("CLASSIC", "EMPTY", "")})
    with pytest.raises(UnsupportedGroupTypeError, match="Kafka Streams application"):
        build_plan(cluster, "words", plan_request("words", 4))
    plan = build_plan(cluster, "words", plan_request("words", 4, acknowledge_streams_groups=[APP]))
    assert plan.groups[APP].cls == "empty" and APP in plan.streams_apps


def test_a_join_grows_both_inputs_and_names_its_window_stores() -> None:
    stores = {
        f"{APP}-KSTREAM-JOIN{side}-000000000{i}-store-changelog": (2, "delete")
        for side, i in (("THIS", 4), ("OTHER", 5))
    }
    cluster = count_app(topics={"clicks": (2, "delete"), **stores}, committed={APP: {"words", "clicks"}})
    del cluster.topics[COUNT_STORE]
    plan = build_plan(cluster, "words", plan_request("words", 4, acknowledge_streams_groups=[APP]))
    app = plan.streams_apps[APP]
    assert app.sources == ["clicks", "words"]
    assert {c.store_type for c in app.changelogs} == {"window"} and len(app.changelogs) == 2
    assert "murmur2(key without its 12 window bytes) % 4" in " ".join(app.actions)


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        (
            {"topics": {"clicks": (3, "delete")}, "committed": {APP: {"words", "clicks"}}},
            "not co-partitioned",
        ),
        (
            {
                "topics": {"clicks": (2, "delete")},
                "committed": {APP: {"words", "clicks"}, "audit": {"clicks"}},
                "groups": {"audit": ("CLASSIC", "EMPTY", "")},
            },
            "groups ['audit'] read 'clicks' too",
        ),
        (
            {"topics": {f"{APP}-KSTREAM-AGGREGATE-STATE-STORE-0000000002-changelog": (2, "compact,delete")}},
            "tells neither",
        ),
        ({"topics": {COUNT_STORE: (3, "compact")}}, "has 3 partitions, its sources 2"),
        (
            {"topics": {f"{APP}-KSTREAM-REDUCE-STATE-STORE-0000000005-repartition": (6, "delete")}},
            "Repartitioned",
        ),
    ],
    ids=[
        "not-co-partitioned",
        "co-source-read-by-others",
        "unknown-store",
        "changelog-count",
        "repartition-count",
    ],
)
def test_a_topology_the_run_cannot_resize_is_refused_at_plan_time(changes: dict[str, Any], why: str) -> None:
    cluster = count_app(**changes)
    with pytest.raises(UnsupportedStreamsTopologyError) as info:
        build_plan(cluster, "words", plan_request("words", 4, acknowledge_streams_groups=[APP]))
    message = str(info.value)
    assert why in message and APP in message
    assert "Nothing was paused or changed" in message
    assert f"exclude_groups=['{APP}']" in message or "exclude those groups" in message or "Grow" in message
    # excluded, it is left alone and not refused
    plan = build_plan(
        cluster,
        "words",
        plan_request("words", 4, exclude_groups=[APP] + (["audit"] if "audit" in cluster.groups else [])),
    )
    assert APP not in plan.streams_apps and plan.groups[APP].cls == "excluded"
