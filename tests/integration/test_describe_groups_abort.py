"""Issue 40: librdkafka 2.16 aborts a process in ``AdminClient.describe_consumer_groups`` and in
``AdminClient.alter_consumer_group_offsets`` (``rd_kafka_enq_once_del_source_return: Assertion 'eonce->refcnt
> 0' failed``, SIGABRT; upstream issue 4605, open); the provider's group descriptions and its seed no longer
call them (the seed commits through a consumer of the group that never joins: the same OffsetCommit).

On a three-node Apache Kafka cluster, two consumers join a new group every 4 s while a node is SIGKILLed every
15 s and started again (the coordinators move). Two processes describe the groups every 0.1 s with a 1 s request
timeout, each started again whenever it dies: one through confluent-kafka's ``describe_consumer_groups`` (the
provider's call before), one through :meth:`ClusterAdmin.describe_groups`. The test first waits until the
first one has aborted (the scenario: measured 6 aborts in 1,128 calls over 3 minutes); then the provider's
has made its calls through the same faults without one abort.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic
from kstate_support import apache_kafka, broker

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

#: Describes (or seeds) the groups named in a file every 0.1 s, forever; prints each call made ("client":
#: confluent-kafka's call, "provider": ClusterAdmin.describe_groups or seed_offsets; the seeded groups never
#: have members). A provider error (a broker down) is no abort.
DESCRIBER = textwrap.dedent(
    """
    import sys, time
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient
    from airflow_provider_kstate.cluster.admin import ClusterAdmin
    from airflow_provider_kstate.errors import KStateError

    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    kind, call, bootstrap, groups_file, topic = sys.argv[1:6]
    config = {"bootstrap.servers": bootstrap, "log_level": 0}
    client, cluster = AdminClient(config), ClusterAdmin(config, timeout=1.0)
    while True:
        groups = open(groups_file).read().split()
        if call == "seed":
            groups = [f"{topic}-seed-{i}" for i in range(6)]  # never joined: EMPTY, on every coordinator
        if groups:
            try:
                if kind == "client" and call == "describe":
                    for future in client.describe_consumer_groups(groups, request_timeout=1.0).values():
                        future.exception()
                elif kind == "client":
                    asked = [ConsumerGroupTopicPartitions(g, [TopicPartition(topic, 0, 0)]) for g in groups]
                    for request in asked:
                        for future in client.alter_consumer_group_offsets(
                            [request], request_timeout=1.0
                        ).values():
                            future.exception()
                elif call == "describe":
                    cluster.describe_groups(groups, "t")
                else:
                    cluster.seed_offsets_many(topic, {g: {0: 0} for g in groups})
            except (KafkaException, KStateError):
                pass
            print("call", flush=True)
        time.sleep(0.1)
    """
)


class Describer:
    """One describing process, started again each time it dies; counts its calls and its deaths."""

    def __init__(self, kind: str, call: str, bootstrap: str, groups_file: Path, topic: str) -> None:
        self.argv = [sys.executable, "-c", DESCRIBER, kind, call, bootstrap, str(groups_file), topic]
        self.calls = 0
        self.deaths: list[tuple[int, str]] = []
        self.proc = self._start()

    def _start(self) -> subprocess.Popen[str]:
        proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # noqa: S603
        threading.Thread(target=self._count, args=(proc,), daemon=True).start()
        return proc

    def _count(self, proc: subprocess.Popen[str]) -> None:
        for _line in proc.stdout or ():
            self.calls += 1

    def check(self) -> None:
        """Record a death (its exit code and the end of its stderr) and start it again."""
        if self.proc.poll() is not None:
            self.deaths.append(
                (self.proc.returncode, (self.proc.stderr.read() if self.proc.stderr else "")[-300:])
            )
            self.proc = self._start()

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


@pytest.fixture
def three_nodes(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    if broker.kind() != "kafka":
        pytest.skip("starts its own Apache Kafka cluster: not under KSTATE_BROKER=noida")
    data_dir = tmp_path / "cluster"
    bootstrap = broker.up(data_dir, nodes=3)
    try:
        yield data_dir, bootstrap
    finally:
        broker.down(data_dir)


def _join(bootstrap: str, group: str, topic: str, seconds: float) -> None:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "session.timeout.ms": 6000, "log_level": 0}
    )
    consumer.subscribe([topic])
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        consumer.poll(0.2)
    consumer.close()


@pytest.mark.parametrize("call", ["describe", "seed"])
def test_describing_and_seeding_groups_while_coordinators_die_never_aborts(
    three_nodes: tuple[Path, str], tmp_path: Path, call: str
) -> None:
    data_dir, bootstrap = three_nodes
    topic = f"abort-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 6, 3)])[topic].result(30)
    groups_file = tmp_path / "groups"
    groups_file.write_text("")
    client = Describer("client", call, bootstrap, groups_file, topic)
    provider = Describer("provider", call, bootstrap, groups_file, topic)
    nodes = [n.node_id for n in apache_kafka.nodes_of(apache_kafka.read_layout(data_dir) or {})]
    kills = 0
    deadline = time.monotonic() + 300
    try:
        last_kill = time.monotonic()
        while time.monotonic() < deadline and not (client.deaths and kills >= 4):
            groups = [f"abort-g-{uuid.uuid4().hex[:8]}" for _ in range(2)]
            groups_file.write_text("\n".join(groups))
            joins = [
                threading.Thread(target=_join, args=(bootstrap, g, topic, 4.0))
                for g in groups
                for _ in range(2)
            ]
            for join in joins:
                join.start()
            for join in joins:
                join.join()
            if time.monotonic() - last_kill > 15:
                apache_kafka.kill_node(data_dir, nodes[kills % len(nodes)])
                time.sleep(2)
                apache_kafka.start(data_dir, nodes=3)
                kills, last_kill = kills + 1, time.monotonic()
            client.check()
            provider.check()
    finally:
        client.stop()
        provider.stop()
    print(
        {
            "call": call,
            "kills": kills,
            "client": (client.calls, client.deaths),
            "provider": (provider.calls, provider.deaths),
        }
    )
    # the scenario: confluent-kafka's call aborted the process (SIGABRT, librdkafka's assertion)
    if not client.deaths:
        pytest.skip(
            f"the scenario did not happen: confluent-kafka's call survived {client.calls} calls, {kills} kills"
        )
    assert any(rc == -6 and "refcnt" in err for rc, err in client.deaths), client.deaths
    # the provider's describe made its calls through the same kills and never died
    assert provider.deaths == [] and provider.calls > 100, (provider.calls, provider.deaths)
