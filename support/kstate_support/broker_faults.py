"""Brokers killed during an increase (issue 33, item 1): what the chaos tests of
``tests/integration/test_broker_faults.py`` share on the 3-node Apache Kafka cluster of
:mod:`kstate_support.apache_kafka`.

* :func:`roles` finds, right before a run, which broker holds each role: the leader of the topic's first
  partition, the active controller (the KRaft quorum's leader: ``kafka-metadata-quorum describe --status``;
  a broker's Metadata and DescribeCluster answers name a random broker as "controller" under KRaft), the
  coordinator of the protected group, the leader of the control topic (and of the lease topic).
* :class:`Faults` kills the broker of one role at one step of the window: at a failpoint boundary of the
  window task (``after_pause``; ``mid_seed``, right before the live groups' resume), or inside a call the
  step makes (``create``: right before the CreatePartitions; ``seed``: right before the offset commits).
* :class:`SafetyWatcher` samples, in this order, the topic's partition count, the group's members, its
  committed offsets: a sample with members while a partition lacks an offset is a resume into the unsafe
  state.
* :func:`restore` restarts the dead nodes on their own data and waits for every replica to be in sync
  again (the time it took is the catch-up).
* :func:`advertise_through` makes one node advertise a proxy's port to clients and to the other brokers
  (its data plane), for a network cut by :class:`kstate_support.tcp_proxy.TcpProxy`; its controller
  listener (the KRaft quorum) stays direct.
* :func:`quorum_through` puts one node's links to the controller quorum behind proxies: cut, the node is
  isolated from the quorum while it still answers clients.
"""

from __future__ import annotations

import contextlib
import logging
import re
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions

from kstate_support import apache_kafka
from kstate_support.tcp_proxy import TcpProxy

#: The provider's own topics (their defaults).
CONTROL_TOPIC = "_kstate_control"
LEASE_TOPIC = "_kstate_leases"
#: The roles a killed broker is chosen by.
ROLES = ("leader", "controller", "coordinator", "control_leader")
#: The steps of the window a broker is killed at.
STEPS = ("after_pause", "create", "seed", "before_resume")
#: The failpoint boundary of the window task each boundary step is (``mid_seed``: the live groups are
#: seeded, their resume is next).
BOUNDARY = {"after_pause": "after_pause", "before_resume": "mid_seed"}


def quorum_leader(data_dir: Path, bootstrap: str, timeout: float = 60.0) -> int:
    """The id of the active controller (the KRaft quorum's leader), as ``kafka-metadata-quorum`` reads it."""
    layout = apache_kafka.read_layout(data_dir) or {}
    release = layout.get("release") or apache_kafka.version()
    cmd = [
        apache_kafka.java(), "-Xmx128m", "-cp", str(apache_kafka.libs(release) / "*"),
        "org.apache.kafka.tools.MetadataQuorumCommand", "--bootstrap-server", bootstrap, "describe", "--status",
    ]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)  # noqa: S603
    found = re.search(r"LeaderId:\s+(\d+)", out.stdout)
    if not found:
        raise RuntimeError(f"kafka-metadata-quorum did not name a leader: {(out.stdout + out.stderr)[-800:]}")
    return int(found.group(1))


def leader_of(admin: Any, topic: str, partition: int = 0) -> int:
    """The leader of ``topic``'s ``partition`` (-1: the topic does not exist yet)."""
    meta = admin.list_topics(timeout=10).topics.get(topic)  # the whole metadata: naming it would create it
    if meta is None or partition not in meta.partitions:
        return -1
    return int(meta.partitions[partition].leader)


def coordinator_of(admin: Any, group: str) -> int:
    return int(admin.describe_consumer_groups([group])[group].result(timeout=10).coordinator.id)


def roles(
    admin: Any, data_dir: Path, bootstrap: str, topic: str, group: str, controller: bool = True
) -> dict[str, int]:
    """Which broker holds each role now (see the module); ``lease_leader`` too. ``controller=False`` skips
    the quorum's leader (-1: a JVM tool, seconds of CPU)."""
    return {
        "leader": leader_of(admin, topic),
        "controller": quorum_leader(data_dir, bootstrap) if controller else -1,
        "coordinator": coordinator_of(admin, group),
        "control_leader": leader_of(admin, CONTROL_TOPIC),
        "lease_leader": leader_of(admin, LEASE_TOPIC),
    }


def out_of_sync(admin: Any, topics: list[str], replicas: int = 3) -> dict[str, list[int]]:
    """``{topic: [partitions]}`` whose in-sync replicas are fewer than ``replicas`` or that lack a leader."""
    meta = admin.list_topics(timeout=10)
    out: dict[str, list[int]] = {}
    for name in topics:
        t = meta.topics.get(name)
        if t is None:
            continue
        bad = [p for p, m in sorted(t.partitions.items()) if len(m.isrs) < replicas or m.leader < 0]
        if bad:
            out[name] = bad
    return out


def restore(
    data_dir: Path, admin: Any, topics: list[str], timeout: float = 180.0
) -> tuple[float, dict[str, list[int]]]:
    """Restart every dead node on its own data and wait until every partition of ``topics`` (and of
    ``__consumer_offsets``) has its 3 replicas in sync again; return the seconds it took and what is still
    out of sync (``{}``: caught up)."""
    started = time.monotonic()
    apache_kafka.start(data_dir, nodes=3)
    wanted = [*topics, "__consumer_offsets"]
    deadline = started + timeout
    left: dict[str, list[int]] = {"?": []}
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            left = out_of_sync(admin, wanted)
            if not left:
                break
        time.sleep(0.5)
    elapsed = time.monotonic() - started
    with contextlib.suppress(Exception):  # leadership back on the preferred replicas: roles spread again
        from confluent_kafka import ElectionType, TopicPartition

        meta = admin.list_topics(timeout=10)
        parts = [TopicPartition(t, p) for t in wanted if t in meta.topics for p in meta.topics[t].partitions]
        admin.elect_leaders(ElectionType.PREFERRED, parts).result(timeout=30)
    return elapsed, left


def advertise_through(data_dir: Path, node_id: int, port: int) -> None:
    """Make node ``node_id`` advertise ``127.0.0.1:port`` (a proxy in front of its client port) to clients
    and to the other brokers (replication), and restart it on its data. Its ``listeners`` and its
    controller listener stay as they are: the node stays a voter of the controller quorum through a cut.

    The file written by :func:`apache_kafka.start` on the first start is edited in place (a restart keeps
    it): only the ``advertised.listeners`` line changes.
    """
    layout = apache_kafka.read_layout(data_dir)
    assert layout is not None, f"no cluster in {data_dir}"
    node = next(n for n in apache_kafka.nodes_of(layout) if n.node_id == node_id)
    path = data_dir / f"node-{node_id}" / "server.properties"
    text = path.read_text()
    line = next(x for x in text.splitlines() if x.startswith("advertised.listeners="))
    changed = line.replace(f"127.0.0.1:{node.port}", f"127.0.0.1:{port}")
    assert changed != line, f"node {node_id} does not advertise 127.0.0.1:{node.port}: {line}"
    apache_kafka.stop_node(data_dir, node_id)
    path.write_text(text.replace(line, changed))
    apache_kafka.start(data_dir, nodes=3)


def quorum_through(data_dir: Path, node_id: int) -> list[TcpProxy]:
    """Put node ``node_id``'s links to the KRaft controller quorum behind TCP proxies the test controls, and
    restart the cluster on its data: the other nodes reach its controller listener through one proxy, it
    reaches theirs through one proxy each (``controller.quorum.voters`` edited in each node's file). Cutting
    the returned proxies isolates the node from the quorum (Raft fetches and votes, its broker heartbeats,
    its metadata) while its client and replication listeners stay as they are.

    The nodes are SIGKILLed for the edit (a static quorum reads its voters at start) and started again; the
    first proxy is the node's own, then the others'.
    """
    layout = apache_kafka.read_layout(data_dir)
    assert layout is not None, f"no cluster in {data_dir}"
    nodes = apache_kafka.nodes_of(layout)
    proxies = {n.node_id: TcpProxy(("127.0.0.1", n.controller_port)) for n in nodes}
    for node in nodes:
        apache_kafka.kill_node(data_dir, node.node_id)
    for node in nodes:
        path = data_dir / f"node-{node.node_id}" / "server.properties"
        text = path.read_text()
        line = next(x for x in text.splitlines() if x.startswith("controller.quorum.voters="))
        voters = []
        for voter in line.split("=", 1)[1].split(","):
            vid = int(voter.split("@", 1)[0])
            # node_id's own entry as the others see it; the others' entries as node_id sees them
            proxied = (vid == node_id) != (node.node_id == node_id)
            voters.append(f"{vid}@127.0.0.1:{proxies[vid].port}" if proxied else voter)
        path.write_text(text.replace(line, "controller.quorum.voters=" + ",".join(voters)))
    apache_kafka.start(data_dir, nodes=len(nodes))
    return [proxies[node_id], *(p for i, p in sorted(proxies.items()) if i != node_id)]


@dataclass
class Kill:
    """One broker killed: which, at which step, the roles it held, and when."""

    step: str
    role: str
    broker: int
    held: list[str]
    at: float


@dataclass
class Faults:
    """Kill the broker of ``role`` at ``step`` (once). ``hooks()`` yields the patches to apply: the window's
    failpoint, ``ClusterAdmin.increase_partitions``, ``ClusterAdmin.seed_offsets_many``.

    :param action: what the fault does instead of a kill (the network cut): called with the broker id.
    :param target: the broker the fault hits whatever it holds (a cut wired to one node); else the holder
        of ``role``.
    """

    data_dir: Path
    step: str
    role: str
    held: dict[str, int]
    action: Callable[[int], None] | None = None
    target: int | None = None
    kills: list[Kill] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def broker(self) -> int:
        return self.target if self.target is not None else self.held[self.role]

    def fire(self, step: str) -> None:
        with self._lock:
            if step != self.step or self.kills:
                return
            broker = self.broker
            held = sorted(r for r, b in self.held.items() if b == broker)
            self.kills.append(Kill(step, self.role, broker, held, time.monotonic()))
        logging.getLogger(__name__).warning("FAULT at %s: broker %s (%s)", step, broker, ", ".join(held))
        if self.action is not None:
            self.action(broker)
        else:
            apache_kafka.kill_node(self.data_dir, broker)

    def patches(self) -> list[tuple[Any, str, Any]]:
        """``(object, attribute, replacement)`` for ``monkeypatch.setattr``."""
        from airflow_provider_kstate.cluster.admin import ClusterAdmin
        from airflow_provider_kstate.increase import window  # the window's sequence and its failpoints

        original_failpoint = window.failpoint
        create, seed = ClusterAdmin.increase_partitions, ClusterAdmin.seed_offsets_many

        def failpoint(name: str) -> None:
            for step, boundary in BOUNDARY.items():
                if boundary == name:
                    self.fire(step)
            original_failpoint(name)

        def increase_partitions(admin: Any, topic: str, total: int, validate_only: bool = False) -> None:
            if not validate_only:
                self.fire("create")
            create(admin, topic, total, validate_only=validate_only)

        def seed_offsets_many(admin: Any, topic: str, offsets: Any) -> None:
            if offsets:
                self.fire("seed")
            seed(admin, topic, offsets)

        return [
            (window, "failpoint", failpoint),
            (ClusterAdmin, "increase_partitions", increase_partitions),
            (ClusterAdmin, "seed_offsets_many", seed_offsets_many),
        ]


class CommittedReader:
    """A group's committed offsets read through a Consumer of that group that never joins it (no subscribe,
    no assign): ``Consumer.committed`` is the consumer group's own OffsetFetch, which finds the coordinator
    again when it moved.

    Not the AdminClient's ListConsumerGroupOffsets: librdkafka (2.16.0 here; upstream issue 5040, open)
    handles an OffsetFetch answered ``NOT_COORDINATOR`` (a coordinator that moved: a broker killed,
    restarted, a preferred leader elected) by asking the client's consumer group to look the coordinator up
    again; an AdminClient has none (``rk_cgrp`` is NULL) and the process dies of SIGSEGV in librdkafka's main
    thread, whose signals are blocked: no Python traceback, no faulthandler. Sampled ten times a second
    across broker kills, it killed the matrix's pytest process (the core: ``rd_kafka_cgrp_op`` <-
    ``rd_kafka_handle_OffsetFetch`` <- ``rd_kafka_ListConsumerGroupOffsetsResponse_parse``).

    Use it from one thread; :meth:`close` it there.
    """

    def __init__(self, config: dict[str, Any], group: str) -> None:
        from confluent_kafka import Consumer

        self.group = group
        self.consumer: Any = Consumer(
            {**config, "group.id": group, "enable.auto.commit": False, "log_level": 0}
        )

    def offsets(self, topic: str, partitions: int, timeout: float = 5.0) -> dict[int, int]:
        """``{partition: committed offset}`` of the group on ``topic`` (partitions without one absent).

        :raises KafkaException: the answer holds an error for a partition (a coordinator that moved or is
            loading): no partition counts as without an offset on such an answer.
        """
        from confluent_kafka import KafkaException, TopicPartition

        answer = self.consumer.committed(
            [TopicPartition(topic, p) for p in range(partitions)], timeout=timeout
        )
        failed = [tp for tp in answer if tp.error is not None]
        if failed:
            raise KafkaException(failed[0].error)
        return {tp.partition: tp.offset for tp in answer if tp.offset >= 0}

    def close(self) -> None:
        self.consumer.close()


def offsets_gap(
    admin: Any, topic: str, group: str, reader: CommittedReader | None = None
) -> tuple[int, Any, list[int]]:
    """One look at the unsafe state: ``(partitions, the group's description, partitions without an offset
    of the group)``. Members in the group while a partition lacks its offset is what the safe order forbids
    (a latest-reset member would start that partition at its end).

    :param reader: reads the committed offsets (see :class:`CommittedReader`: where brokers die or
        coordinators move, pass one); else the AdminClient's ListConsumerGroupOffsets.
    """
    n = len(admin.list_topics(topic, timeout=5).topics[topic].partitions)
    desc = admin.describe_consumer_groups([group])[group].result(timeout=5)
    if reader is not None:
        have = set(reader.offsets(topic, n))
    else:
        request = [ConsumerGroupTopicPartitions(group)]
        result = admin.list_consumer_group_offsets(request)[group].result(timeout=5)
        have = {tp.partition for tp in result.topic_partitions if tp.topic == topic and tp.offset >= 0}
    return n, desc, sorted(set(range(n)) - have)


class SafetyWatcher(threading.Thread):
    """Sample, in order, the partition count, the group's members, its committed offsets (see the module):
    ``violations`` lists ``(t, members, partitions without an offset)``. The offsets are read through a
    :class:`CommittedReader` (made, used and closed in the watcher's thread)."""

    def __init__(self, config: dict[str, Any], topic: str, group: str) -> None:
        super().__init__(daemon=True)
        from confluent_kafka.admin import AdminClient

        self.config = {**config, "log_level": 0}
        self.admin: Any = AdminClient(self.config)
        self.topic, self.group = topic, group
        self.violations: list[tuple[float, int, list[int]]] = []
        self.samples = 0
        self._halt = threading.Event()

    def _sample(self, reader: CommittedReader) -> None:
        _, desc, missing = offsets_gap(self.admin, self.topic, self.group, reader)
        self.samples += 1
        if desc.members and missing:
            self.violations.append((time.monotonic(), len(desc.members), missing))

    def run(self) -> None:
        reader = CommittedReader(self.config, self.group)
        try:
            while not self._halt.is_set():
                with contextlib.suppress(Exception):  # a missed sample (a broker down) is fine
                    self._sample(reader)
                time.sleep(0.1)
        finally:
            reader.close()

    def stop(self) -> None:
        self._halt.set()
        self.join(20)
        self.admin = None


#: A provider error in a task's logged traceback (Airflow's task logs go through structlog, not the
#: standard logging handlers: they are read from the output).
_NAMED = re.compile(r"airflow_provider_kstate\.errors\.(\w+): ")


def named_errors(output: str) -> list[str]:
    """The provider's named errors (``airflow_provider_kstate.errors``) in ``output``, in order, once each."""
    return list(dict.fromkeys(_NAMED.findall(output)))


def _java_hash(text: str) -> int:
    h = 0
    for ch in text:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def offsets_partition(group: str, partitions: int = 16) -> int:
    """The ``__consumer_offsets`` partition of ``group`` (its coordinator leads it): Kafka's
    ``Utils.abs(group.hashCode()) % partitions``."""
    return (_java_hash(group) & 0x7FFFFFFF) % partitions


def group_coordinated_by(admin: Any, broker: int, prefix: str) -> str:
    """A group name starting with ``prefix`` whose coordinator is ``broker`` (the leader of its
    ``__consumer_offsets`` partition now)."""
    deadline = time.monotonic() + 60
    while True:  # a fresh cluster makes __consumer_offsets at the first FindCoordinator
        meta = admin.list_topics("__consumer_offsets", timeout=10).topics["__consumer_offsets"]
        if meta.partitions and all(p.leader >= 0 for p in meta.partitions.values()):
            break
        if time.monotonic() > deadline:
            raise RuntimeError("__consumer_offsets was not created within 60 s")
        with contextlib.suppress(Exception):
            admin.describe_consumer_groups([f"{prefix}-probe"])[f"{prefix}-probe"].result(timeout=5)
        time.sleep(0.5)
    count = len(meta.partitions)
    for i in range(1000):
        name = f"{prefix}-{i}"
        if meta.partitions[offsets_partition(name, count)].leader == broker:
            return name
    raise RuntimeError(f"no group name {prefix}-N is coordinated by broker {broker}")
