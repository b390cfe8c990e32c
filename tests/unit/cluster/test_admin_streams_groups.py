"""ClusterAdmin's group descriptions (issue 40). Groups are described by the wire client (DescribeGroups,
ConsumerGroupDescribe, StreamsGroupDescribe), never by confluent-kafka's ``describe_consumer_groups``, which
librdkafka 2.16 can abort the process on (tests/integration/test_describe_groups_abort.py); confluent-kafka
only where the wire client cannot talk to the listener. A KIP-1071 streams group has its state, its members
and their partitions of the topic (a STABLE group showed "0 members"); a classic group's members'
subscriptions are read with DescribeGroups. The wire client is replaced by the answers it gave on Apache
Kafka 4.4 (tests/integration/test_streams_neighbours.py reads them from a broker)."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_provider_kstate.cluster import admin as admin_module
from airflow_provider_kstate.cluster.admin import ClusterAdmin
from airflow_provider_kstate.doctor import wire
from airflow_provider_kstate.increase.streams_apps import StreamsTopology

TOPIC = "words"
CHANGELOG = "app-KSTREAM-AGGREGATE-STATE-STORE-0000000001-changelog"


def _done(value: Any) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_result(value)
    return future


class Describing:
    """confluent-kafka's describe: every group DEAD without members (as it describes a streams group)."""

    def describe_consumer_groups(self, groups: list[str], request_timeout: float) -> dict[str, Future[Any]]:
        return {
            g: _done(
                SimpleNamespace(
                    group_id=g,
                    state=SimpleNamespace(name="DEAD"),
                    type=SimpleNamespace(name="UNKNOWN"),
                    is_simple_consumer_group=False,
                    members=[],
                    partition_assignor="",
                )
            )
            for g in groups
        }


def _streams_group(state: str = "Stable") -> wire.StreamsGroup:
    return wire.StreamsGroup(
        "app",
        state,
        (
            wire.Subtopology("0", (TOPIC,), ("app-X-repartition",), (), ()),
            wire.Subtopology("1", (), (), (CHANGELOG,), ("app-X-repartition",)),
        ),
        (
            wire.StreamsMember(
                "m1", "app-StreamThread-1-consumer", "/10.0.0.1", (("0", (0, 1)), ("1", (1,)))
            ),
            wire.StreamsMember("m2", "app-StreamThread-2-consumer", "/10.0.0.2", (("1", (0,)),)),
        ),
    )


class NeverDescribing:
    """A client whose ``describe_consumer_groups`` must not be called."""

    def describe_consumer_groups(self, groups: list[str], request_timeout: float) -> Any:
        raise AssertionError("describe_consumer_groups called: librdkafka may abort the process on it")


def test_groups_of_every_type_are_described_by_the_wire_client(monkeypatch: pytest.MonkeyPatch) -> None:
    member = wire.GroupMember("m", "c", "/h", (TOPIC,), ((TOPIC, (0, 2)), ("other", (1,))))
    answers = {
        "classic": wire.GroupDescription("classic", "PreparingRebalance", "consumer", "range", (member,)),
        "kip848": wire.GroupDescription(
            "kip848", "Reconciling", "consumer", "uniform", (member,), "consumer"
        ),
        "app": _streams_group(),
        "gone": wire.GroupDescription("gone", "Dead", "", "", ()),
    }
    monkeypatch.setattr(admin_module.wire, "usable", lambda config, timeout: None)
    monkeypatch.setattr(admin_module.wire, "describe_any_groups", lambda config, groups, timeout: answers)
    admin = ClusterAdmin({"bootstrap.servers": "b:1"}, timeout=2.0, client=NeverDescribing())
    infos = admin.describe_groups(list(answers), TOPIC)
    described = {
        g: (i.state, i.type, i.protocol_type, i.assignor, [m.partitions for m in i.members])
        for g, i in infos.items()
    }
    assert described == {
        "classic": ("PREPARING_REBALANCE", "CLASSIC", "consumer", "range", [(0, 2)]),
        "kip848": ("RECONCILING", "CONSUMER", "consumer", "uniform", [(0, 2)]),
        "app": ("STABLE", "STREAMS", "streams", "", [(0, 1), ()]),
        "gone": ("DEAD", "CLASSIC", "", "", []),
    }


def test_a_listener_the_wire_client_cannot_use_is_described_by_the_client(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    probes = []

    def unsupported(config: Any, timeout: float) -> None:
        probes.append(config)
        raise wire.WireUnsupported("SASL mechanism SCRAM-SHA-512 is not supported by the wire client")

    monkeypatch.setattr(admin_module.wire, "usable", unsupported)
    monkeypatch.setattr(ClusterAdmin, "_broker_states", lambda self, infos, groups: {})
    admin = ClusterAdmin({"bootstrap.servers": "b:1"}, timeout=2.0, client=Describing())
    assert admin.describe_groups(["g"], TOPIC)["g"].state == "DEAD"
    assert admin.describe_groups(["g"], TOPIC)["g"].state == "DEAD" and len(probes) == 1  # asked once
    assert admin.describe_streams_groups(["g"], TOPIC) == {} and admin.subscriptions(["g"]) == {}


def test_a_streams_group_s_topology_is_its_subtopologies_topics(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(admin_module.wire, "usable", lambda config, timeout: None)
    monkeypatch.setattr(
        admin_module.wire,
        "describe_streams_groups",
        lambda config, groups, timeout: {"app": _streams_group()},
    )
    admin = ClusterAdmin({"bootstrap.servers": "b:1"}, timeout=2.0, client=NeverDescribing())
    described = admin.describe_streams_groups(["app", "plain"], TOPIC)
    assert list(described) == ["app"] and len(described["app"].info.members) == 2
    assert described["app"].topology == StreamsTopology(
        sources=[TOPIC], repartitions=["app-X-repartition"], changelogs=[CHANGELOG]
    )


def test_a_streams_group_without_a_topology_and_a_broker_that_cannot_say(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(admin_module.wire, "usable", lambda config, timeout: None)
    monkeypatch.setattr(
        admin_module.wire,
        "describe_streams_groups",
        lambda config, groups, timeout: {"app": wire.StreamsGroup("app", "NotReady", None, ())},
    )
    admin = ClusterAdmin({"bootstrap.servers": "b:1"}, timeout=2.0, client=Describing())
    described = admin.describe_streams_groups(["app"], TOPIC)["app"]
    assert described.topology is None and described.info.state == "NOT_READY"

    def unavailable(config: Any, groups: list[str], timeout: float) -> Any:
        raise wire.WireUnavailable("the coordinators of ['app'] kept moving or did not answer for 2.0s")

    monkeypatch.setattr(admin_module.wire, "describe_streams_groups", unavailable)
    monkeypatch.setattr(admin_module.wire, "describe_classic_groups", unavailable)
    assert admin.describe_streams_groups(["app"], TOPIC) == {} and admin.subscriptions(["app"]) == {}


def test_subscriptions_are_the_topics_the_members_of_a_consumer_group_subscribe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def member(topics: tuple[str, ...]) -> wire.GroupMember:
        return wire.GroupMember("m", "c", "/h", topics)

    groups = {
        "app": wire.GroupDescription(
            "app", "Stable", "consumer", "stream", (member((TOPIC,)), member(("app-X-repartition",)))
        ),
        "stopped": wire.GroupDescription("stopped", "Empty", "consumer", "", ()),
        "connect": wire.GroupDescription("connect", "Stable", "connect", "sessioned", (member(()),)),
    }
    monkeypatch.setattr(admin_module.wire, "usable", lambda config, timeout: None)
    monkeypatch.setattr(admin_module.wire, "describe_classic_groups", lambda config, asked, timeout: groups)
    admin = ClusterAdmin({"bootstrap.servers": "b:1"}, timeout=2.0, client=Describing())
    assert admin.subscriptions(list(groups)) == {"app": frozenset({TOPIC, "app-X-repartition"})}
