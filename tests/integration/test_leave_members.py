"""A member the coordinator keeps after its client is gone (a ghost: its LeaveGroup lost, or its process
killed) is removed by the run's LeaveGroup (:meth:`ClusterAdmin.leave_members`) at once, instead of after its
session (issue 41, item 5). On the real broker: the scenario first (a consumer process SIGKILLed stays listed),
then the removal. Classic members, and KIP-848 consumer-protocol members (Kafka 4.0+, KAFKA-18188)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from typing import Any

import pytest
from kstate_support.fixtures import wait_until

from airflow_provider_kstate.cluster.admin import ClusterAdmin

pytestmark = pytest.mark.integration

#: A consumer that joins its group, says so, and polls until it is killed (no LeaveGroup is ever sent).
MEMBER = textwrap.dedent(
    """
    import sys
    from confluent_kafka import Consumer
    consumer = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "client.id": "ghost-1",
                         "session.timeout.ms": 45000, "heartbeat.interval.ms": 1000})
    consumer.subscribe([sys.argv[3]])
    while not consumer.assignment():
        consumer.poll(0.1)
    print("joined", flush=True)
    while True:
        consumer.poll(0.1)
    """
)


#: The same member on KIP-848's protocol (``group.protocol=consumer``: the broker's
#: ``group.consumer.session.timeout.ms``, 45 s by default, ends it; the client sets no session).
MEMBER_848 = MEMBER.replace(
    '"session.timeout.ms": 45000, "heartbeat.interval.ms": 1000', '"group.protocol": "consumer"'
)


@pytest.mark.parametrize(
    ("member_script", "group_type"),
    [(MEMBER, "CLASSIC"), (MEMBER_848, "CONSUMER")],
    ids=["classic", "kip-848"],
)
def test_a_killed_member_stays_until_its_session_ends_unless_the_run_removes_it(
    kafka_config: dict[str, Any],
    make_topic: Callable[..., str],
    unique: Callable[[str], str],
    member_script: str,
    group_type: str,
) -> None:
    """A SIGKILLed member stays listed (the scenario), and the run's LeaveGroup removes it at once: a classic
    group, and a KIP-848 consumer group (``increase/ghosts.py``'s ``REMOVABLE_TYPES``; Kafka 4.0+'s
    ``GroupMetadataManager.classicGroupLeaveToConsumerGroup`` fences any member named in a LeaveGroup, where
    3.7 to 3.9 answered UNKNOWN_MEMBER_ID for a member not on the classic protocol). Passed on Kafka 4.4."""
    topic = make_topic("ghost", partitions=2)
    group = unique("ghost")
    member = subprocess.Popen(
        [sys.executable, "-c", member_script, kafka_config["bootstrap.servers"], group, topic],
        stdout=subprocess.PIPE,
        text=True,
    )
    admin = ClusterAdmin(kafka_config, timeout=10.0)
    try:
        assert member.stdout is not None and member.stdout.readline().strip() == "joined"
        member.send_signal(signal.SIGKILL)
        member.wait(10)
        time.sleep(2.0)
        (info,) = admin.describe_groups([group], topic).values()
        assert info.type.upper() == group_type, info.type
        assert [m.client_id for m in info.members] == ["ghost-1"], "the scenario: the killed member stays"
        answer = admin.leave_members(group, [m.member_id for m in info.members], "kstate: test")
        assert list(answer.values()) == [0], "removed (a consumer-protocol member: fenced, Kafka 4.0+)"
        # a timeout contract: removed at once, not after its 45 s session
        took = wait_until(lambda: not admin.describe_groups([group], topic)[group].members, timeout=10)
        assert took < 10
        assert admin.describe_groups([group], topic)[group].state == "EMPTY"
        assert admin.leave_members(group, [info.members[0].member_id], "again") == {
            info.members[0].member_id: 25
        }, "a member already gone is answered UNKNOWN_MEMBER_ID"
    finally:
        if member.poll() is None:
            member.kill()
