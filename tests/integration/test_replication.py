"""Leadership and ISR on a real three-node Apache Kafka cluster (issue 33): the plan warns of an
under-replicated topic, refuses one below ``min.insync.replicas`` before anyone is paused, and once the nodes
are back a safe increase creates partitions with the topic's replication factor, each with a leader.

Topic RF 3 with ``min.insync.replicas=2``: one node SIGKILLed -> under-replicated (a warning); a second ->
the controller quorum is lost too (three combined KRaft nodes), the metadata freezes with the dead brokers
still in the ISR: the plan's broker check counts them out and refuses, naming the partitions, changing
nothing. The topic's ``min.insync.replicas`` may be unknown then: librdkafka sends DescribeConfigs to the
controller the frozen metadata names, often a dead one (it timed out in 4 of 12 plans): the refusal is the
same named :class:`PartitionsUnavailableError`, judged without it (every partition out of sync refused), by
the plan's admin and by a fresh one (a new task's). It starts its own cluster (100-150 s in all on 2
cores): ``make chaos`` / ``KSTATE_CHAOS=1``.
"""

from __future__ import annotations

import contextlib
import logging
import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kstate_support import apache_kafka, broker
from kstate_support.fakes import plan_request
from kstate_support.kafka import commit_as_consumer
from kstate_support.traffic import wait_until

from airflow_provider_kstate.cluster.admin import ClusterAdmin
from airflow_provider_kstate.errors import (
    BrokerUnavailableError,
    PartitionsUnavailableError,
    TopicNotFoundError,
)
from airflow_provider_kstate.increase.plan import build_plan
from airflow_provider_kstate.increase.replicas import check_replication, wait_for_leaders
from airflow_provider_kstate.increase.steps import TopicSteps
from tests.integration.test_apache_kafka_cluster import three_nodes  # noqa: F401 - the fixture, by name

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

TOPIC = "isr-orders"
GROUP = "isr-billing"


def _in_sync(admin: ClusterAdmin) -> bool:
    with contextlib.suppress(TopicNotFoundError):  # just created: not in every broker's metadata yet
        return all(len(p.isr) == 3 for p in admin.topic_replicas(TOPIC, leaders_only=True).partitions)
    return False


def _commit_zeros(bootstrap: str) -> None:
    """Commit offset 0 on every partition for :data:`GROUP` (a group at risk); the consumer waits for its
    coordinator (``__consumer_offsets`` is created on first use)."""
    commit_as_consumer({"bootstrap.servers": bootstrap}, GROUP, TOPIC, dict.fromkeys(range(6), 0), within=90)


def _passes(admin: ClusterAdmin) -> bool:
    try:
        check_replication(admin, TOPIC)
    except (
        PartitionsUnavailableError,
        BrokerUnavailableError,
    ):  # the latter: the killed node was the controller
        return False
    return True


def test_the_plan_warns_then_refuses_and_the_increase_keeps_rf_3(
    request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture
) -> None:
    data_dir, bootstrap = request.getfixturevalue("three_nodes")  # its own cluster, stopped afterwards
    config = {"bootstrap.servers": bootstrap, "log_level": 2}
    client = AdminClient(config)
    for future in client.create_topics([NewTopic(TOPIC, 6, 3, config={"min.insync.replicas": "2"})]).values():
        future.result(timeout=30)
    admin = ClusterAdmin(config, timeout=15, client=client)
    wait_until(lambda: _in_sync(admin), 30)
    _commit_zeros(bootstrap)
    assert check_replication(admin, TOPIC).warning == ""

    apache_kafka.kill_node(data_dir, 3)
    killed = time.monotonic()
    # Broker 3 does not answer at once: the partitions it led are offline (refused) until the controller
    # fences it and elects new leaders (broker.session.timeout.ms, 9 s): the refusal's retry passes then.
    wait_until(lambda: _passes(admin), 60)
    print(f"\nnode 3 killed: the plan passes again (new leaders) after {time.monotonic() - killed:.1f} s")
    state = check_replication(admin, TOPIC)
    assert state.under_replicated == "0-5" and state.brokers_down == [3]
    assert "acks=all writes still succeed, so the run goes on" in state.warning

    apache_kafka.kill_node(data_dir, 2)
    for who in ("the plan's admin", "a fresh admin"):  # each asks the controller the metadata names anew
        asker = admin if who == "the plan's admin" else ClusterAdmin(config, timeout=15)
        asked = time.monotonic()
        with pytest.raises(PartitionsUnavailableError) as caught:
            check_replication(asker, TOPIC)
        message = str(caught.value)
        print(f"refused ({who}, {time.monotonic() - asked:.1f} s): {message}")
        assert "Brokers not answering: 2, 3." in message
        assert "Nothing was changed; nobody was paused." in message
        # each partition is offline (its leader is 2 or 3) or has 1 in-sync replica that answers, of 2
        # required; or, when DescribeConfigs went to a dead controller, is out of sync with it unknown
        assert (
            "are offline" in message
            or "below min.insync.replicas=2" in message
            or "min.insync.replicas is unknown" in message
        )
    assert PartitionsUnavailableError.retryable
    assert admin.partition_count(TOPIC) == 6  # nothing created (the group's coordinator may be down now)

    started = time.monotonic()
    broker.up(data_dir, nodes=3)  # nodes 2 and 3 come back on their own data
    wait_until(lambda: _in_sync(admin), 120)
    healed = time.monotonic() - started
    state = check_replication(admin, TOPIC)
    assert state.warning == "" and state.brokers_down == []
    # nothing was changed by the refusal: the count, the group's offsets and its state are as before
    assert admin.partition_count(TOPIC) == 6
    assert admin.committed_offsets(GROUP, TOPIC, 6) == dict.fromkeys(range(6), 0)
    assert admin.describe_groups([GROUP], TOPIC)[GROUP].state == "EMPTY"

    plan = build_plan(admin, TOPIC, plan_request(TOPIC, 12), replication=state)
    assert plan.replication == state and plan.where("seed") == [GROUP]
    steps = TopicSteps(plan, admin, None, logging.getLogger("isr"), "isr-run")  # type: ignore[arg-type]
    with caplog.at_level(logging.INFO, "isr"):
        out = steps.increase(timeout=60)
    replicas = admin.topic_replicas(TOPIC, leaders_only=True)
    new = [p for p in replicas.partitions if p.partition >= 6]
    assert len(new) == 6 and all(len(p.replicas) == 3 and p.leader >= 0 for p in new)
    assert all(len(p.isr) >= 2 for p in new)
    assert "created partitions 6-11 (6)" in caplog.text and out["created"]
    leaders_s = wait_for_leaders(admin, TOPIC, range(6, 12), timeout=60)  # what verify waits for
    seeded = steps.seed()
    assert seeded.groups[GROUP]["seeded"] == 6  # the new partitions at 0; its old offsets kept
    print(f"nodes back in sync {healed:.1f} s after the restart; 6 -> 12: leaders after {leaders_s:.3f} s")
