"""Issue 41 ("stay" mode): what evidence a live group gives that it has a position on a new partition no one
wrote to. Probes for ``tests/integration/test_stay_evidence.py``.

* :class:`AutoCommitJava`: a plain ``KafkaConsumer`` (kafka-clients of the Java fleet's build) with
  ``enable.auto.commit=true``, nothing else: a single-file Java source run by ``java`` itself (JEP 330),
  so it needs no change to ``support/java``. It writes its assignment (``consumer.assignment()`` after each
  poll that changed it) as JSON lines ``{"t": epoch s, "assigned": [...]}``.
* :class:`RdkafkaMember`: a confluent-kafka (librdkafka) member polled in a thread, auto-commit on, that
  records its own assignment the same way.
* :func:`committed` and :func:`described`: what the broker says of a group (committed offsets; the members'
  assignment and, for KIP-848 groups, target assignment).
* :class:`HeldProducer`: a producer held on the old partitions (explicit partition numbers).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

#: The Java probe: ``java -cp LIBS/* AutoCommit.java BROKERS TOPIC GROUP PROTOCOL OUT``.
JAVA_SOURCE = r"""
import java.io.FileWriter;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;

public class AutoCommit {
    public static void main(String[] a) throws Exception {
        String brokers = a[0], topic = a[1], group = a[2], protocol = a[3], out = a[4];
        Properties p = new Properties();
        p.put("bootstrap.servers", brokers);
        p.put("group.id", group);
        p.put("client.id", group + "-autocommit");
        p.put("group.protocol", protocol);
        p.put("enable.auto.commit", "true");
        p.put("auto.commit.interval.ms", "200");
        p.put("auto.offset.reset", "latest");
        p.put("metadata.max.age.ms", "500");
        p.put("fetch.max.wait.ms", "100");
        p.put("allow.auto.create.topics", "false");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        if (protocol.equals("classic")) {
            p.put("session.timeout.ms", "6000");
            p.put("heartbeat.interval.ms", "300");
        }
        KafkaConsumer<String, String> c = new KafkaConsumer<>(p);
        AtomicBoolean stop = new AtomicBoolean();
        CountDownLatch done = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stop.set(true);
            c.wakeup();
            try {
                done.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }));
        Set<Integer> last = null;
        try (FileWriter w = new FileWriter(out, true)) {
            c.subscribe(List.of(topic));
            try {
                while (!stop.get()) {
                    c.poll(Duration.ofMillis(100));
                    Set<Integer> now = new TreeSet<>();
                    for (TopicPartition tp : c.assignment()) {
                        now.add(tp.partition());
                    }
                    if (!now.equals(last)) {
                        last = now;
                        w.write("{\"t\": " + (System.currentTimeMillis() / 1000.0) + ", \"assigned\": "
                                + now + "}\n");
                        w.flush();
                    }
                }
            } catch (WakeupException e) {
                // the shutdown hook
            }
            c.close(Duration.ofSeconds(5));
        } finally {
            done.countDown();
        }
    }
}
"""


def _first(events: list[tuple[float, frozenset[int]]], partitions: set[int]) -> float | None:
    """The first time (epoch s) an assignment covering ``partitions`` was seen."""
    return next((t for t, held in events if partitions <= held), None)


class AutoCommitJava:
    """A plain auto-commit ``KafkaConsumer`` of ``topic`` in ``group`` (a JVM; :meth:`stop` ends it).

    :param libs: the folder of the kafka-clients jars (``.kstate/java-build/libs``).
    """

    def __init__(
        self, libs: Path, run_dir: Path, brokers: str, topic: str, group: str, protocol: str
    ) -> None:
        run_dir.mkdir(parents=True, exist_ok=True)
        source = run_dir / "AutoCommit.java"
        source.write_text(JAVA_SOURCE)
        self.out = run_dir / f"{group}.assigned.jsonl"
        self.log = (run_dir / f"{group}.log").open("w")
        java = os.environ.get("KSTATE_FLEET_JAVA", "java")
        command = [
            java,
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-cp",
            f"{libs}/*",
            str(source),
            brokers,
            topic,
            group,
            protocol,
            str(self.out),
        ]
        self.proc = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT)

    def events(self) -> list[tuple[float, frozenset[int]]]:
        if not self.out.exists():
            return []
        lines = [json.loads(x) for x in self.out.read_text().splitlines() if x.strip()]
        return [(r["t"], frozenset(r["assigned"])) for r in lines]

    def held_since(self, partitions: set[int]) -> float | None:
        return _first(self.events(), partitions)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if not self.log.closed:
            self.log.close()


class RdkafkaMember(threading.Thread):
    """A confluent-kafka member of ``group`` subscribed to ``topic``: ``enable.auto.commit=true`` (every 0.2 s),
    latest reset, metadata refreshed every 0.5 s, ``group.protocol`` ``protocol``; polled here until
    :meth:`stop`. ``events`` holds (epoch s, the whole assignment) after each change."""

    def __init__(self, config: dict[str, Any], topic: str, group: str, protocol: str) -> None:
        super().__init__(daemon=True, name=f"rdkafka-{group}")
        from confluent_kafka import Consumer

        settings = {
            **config,
            "group.id": group,
            "client.id": f"{group}-rdkafka",
            "group.protocol": protocol,
            "enable.auto.commit": True,
            "auto.commit.interval.ms": 200,
            "auto.offset.reset": "latest",
            "topic.metadata.refresh.interval.ms": 500,
            "fetch.wait.max.ms": 100,
        }
        if protocol == "classic":
            settings.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 300})
        self.consumer = Consumer(settings)
        self.topic = topic
        self.events: list[tuple[float, frozenset[int]]] = []
        self.received: dict[int, int] = {}
        self._halt = threading.Event()
        self._lock = threading.Lock()
        self._asked: list[int] = []
        self._answer: dict[int, int] = {}
        self._answered = threading.Event()

    def run(self) -> None:
        from confluent_kafka import TopicPartition

        self.consumer.subscribe([self.topic])
        last: frozenset[int] | None = None
        while not self._halt.is_set():
            if self._asked:  # positions are read here, between polls, not from another thread
                tps = [TopicPartition(self.topic, p) for p in self._asked]
                self._answer = {tp.partition: tp.offset for tp in self.consumer.position(tps)}
                self._asked = []
                self._answered.set()
            msg = self.consumer.poll(0.1)
            if msg is not None and msg.error() is None:
                self.received[msg.partition()] = self.received.get(msg.partition(), 0) + 1
            held = frozenset(tp.partition for tp in self.consumer.assignment())
            if held != last:
                last = held
                with self._lock:
                    self.events.append((time.time(), held))
        self.consumer.close()

    def held_since(self, partitions: set[int]) -> float | None:
        with self._lock:
            return _first(list(self.events), partitions)

    def positions(self, partitions: list[int], timeout: float = 10) -> dict[int, int]:
        """The consumer's own positions (``Consumer.position``: the offset after the last message it
        returned; negative: none), read by the polling thread."""
        self._answered.clear()
        self._asked = list(partitions)
        if not self._answered.wait(timeout):
            raise TimeoutError(f"{self.name} did not read its positions within {timeout}s")
        return dict(self._answer)

    def stop(self) -> None:
        self._halt.set()
        self.join(15)


class HeldProducer(threading.Thread):
    """Writes a record every ``interval`` seconds to each of ``partitions`` only (explicit partition numbers:
    the producers of a stay run held on the old partitions)."""

    def __init__(
        self, config: dict[str, Any], topic: str, partitions: list[int], interval: float = 0.1
    ) -> None:
        super().__init__(daemon=True, name=f"held-{topic}")
        from confluent_kafka import Producer

        self.producer = Producer({**config, "linger.ms": 5})
        self.topic, self.partitions, self.interval = topic, partitions, interval
        self.sent = 0
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            for p in self.partitions:
                self.producer.produce(self.topic, value=str(self.sent).encode(), partition=p)
                self.sent += 1
            self.producer.poll(0)
            self._halt.wait(self.interval)
        self.producer.flush(10)

    def stop(self) -> None:
        self._halt.set()
        self.join(15)


def committed(admin: Any, group: str, topic: str) -> dict[int, int]:
    """The committed offsets of ``group`` on ``topic`` by partition (the broker's ``OffsetFetch``)."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(10)
    return {tp.partition: tp.offset for tp in result.topic_partitions if tp.topic == topic and tp.offset >= 0}


def described(admin: Any, group: str, topic: str) -> dict[str, Any]:
    """What ``DescribeGroups`` / ``ConsumerGroupDescribe`` (KIP-848) says of ``group``: its type and state,
    the partitions of ``topic`` in the members' assignment, and in their target assignment (KIP-848 only)."""
    d = admin.describe_consumer_groups([group])[group].result(10)
    assigned: set[int] = set()
    target: set[int] = set()
    for m in d.members:
        assigned |= {tp.partition for tp in m.assignment.topic_partitions if tp.topic == topic}
        if m.target_assignment is not None:
            target |= {tp.partition for tp in m.target_assignment.topic_partitions if tp.topic == topic}
    return {
        "type": getattr(d.type, "name", str(d.type)),
        "state": getattr(d.state, "name", str(d.state)),
        "members": len(d.members),
        "assigned": frozenset(assigned),
        "target": frozenset(target),
    }


def written(config: dict[str, Any], topic: str, partitions: list[int]) -> dict[int, int]:
    """The high watermark of each of ``partitions`` (how many records were ever written there)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({**config, "group.id": f"{topic}-watermarks", "enable.auto.commit": False})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions}
    finally:
        c.close()
