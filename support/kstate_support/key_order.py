"""Live traffic for the per-key order proof (issue 21): keyed producers writing ``(key, seq)`` with a
per-key increasing ``seq``, slow consumers that store offsets after processing, and an outside checker of
the processing order.

Why a key reorders: after N -> M partitions a moved key's records written before the producers switch sit
on its old partition, later ones on its new partition. It is processed out of order exactly when the member
that consumes its new partition processes a post-switch record before the member that consumes its old
partition has processed the key's pre-switch records: it needs a backlog on the old partition at the
switch, and the new partition consumed by a member that is not stuck behind that backlog. With two members
and the range assignor, one member holds the low half of the partitions and the other the high half: after
4 -> 6 the first holds 0-2 (three quarters of the pre-switch traffic), the second 3-5 (the new 4 and 5);
after 4 -> 8 the first holds every old partition and the second every new one. The scenario makes the
first member slower than its pre-switch inflow (a backlog that grows until the switch) and the second
faster than its own (it reads new partitions at once), so every key that moves from the first member's
partitions to the second's, with records in the backlog, reorders under ``relax``.
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, Producer

from airflow_provider_kstate.client_piece.consumer import ControlledConsumer
from airflow_provider_kstate.client_piece.producer import ControlledProducer
from airflow_provider_kstate.client_piece.protocol import DEFAULT_CONTROL_TOPIC


class KeyedProducer(threading.Thread):
    """Write ``{"key": k, "seq": n}`` round-robin over ``keys`` keys at ``rate`` per second after an initial
    ``burst`` (the backlog); per key, ``seq`` increases by one with every record.

    :param controlled: a ``ControlledProducer`` (else a plain ``Producer`` with ``murmur2_random``).
    """

    def __init__(
        self,
        config: dict[str, Any],
        topic: str,
        keys: int = 200,
        rate: float = 300.0,
        burst: int = 0,
        controlled: bool = True,
        control_topic: str = DEFAULT_CONTROL_TOPIC,
    ) -> None:
        super().__init__(daemon=True)
        self.topic = topic
        self.keys = [f"k{i:04d}" for i in range(keys)]
        self.rate, self.burst = rate, burst
        self.next_seq: dict[str, int] = defaultdict(int)
        self.delivered: dict[str, set[int]] = defaultdict(set)
        self.errors: list[str] = []
        self.written = 0
        self._halt = threading.Event()
        settings = {**config, "linger.ms": 5, "topic.metadata.refresh.interval.ms": 500}
        self.producer: Any = (
            ControlledProducer(
                settings,
                [topic],
                check_interval=0.1,
                client_id=f"{topic}-producer",
                control_topic=control_topic,
            )
            if controlled
            else Producer({**settings, "partitioner": "murmur2_random"})
        )

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))
            return
        record = json.loads(msg.value())
        self.delivered[record["key"]].add(record["seq"])

    def _write(self) -> None:
        key = self.keys[self.written % len(self.keys)]
        seq = self.next_seq[key]
        self.next_seq[key] = seq + 1
        value = json.dumps({"key": key, "seq": seq}).encode()
        self.producer.produce(self.topic, value=value, key=key.encode(), on_delivery=self._delivered)
        self.producer.poll(0)
        self.written += 1

    def run(self) -> None:
        for _ in range(self.burst):
            self._write()
        start, sent = time.monotonic(), 0
        while not self._halt.is_set():
            self._write()
            sent += 1
            delay = start + sent / self.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        self.producer.flush(30)
        if isinstance(self.producer, ControlledProducer):
            self.producer.close()

    def stop(self) -> None:
        self._halt.set()
        self.join(60)

    def last(self) -> dict[str, int]:
        """The last ``seq`` delivered per key."""
        return {k: max(s) for k, s in self.delivered.items() if s}


class OrderChecker:
    """Records, from outside the consumers, the order in which records are processed (one lock, one
    clock): a record processed for the first time after a later record of its key is a violation. Its
    ``last`` is a last-value-per-key sink (an upsert per processed record)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.top: dict[str, int] = {}
        self.seen: set[tuple[str, int]] = set()
        self.last: dict[str, int] = {}
        self.violations: list[tuple[str, int, int]] = []
        self.processed = 0

    def record(self, key: str, seq: int) -> None:
        with self._lock:
            self.processed += 1
            self.last[key] = seq
            if (key, seq) in self.seen:
                return  # a redelivery (at least once): not a first processing
            self.seen.add((key, seq))
            top = self.top.get(key, -1)
            if seq < top:
                self.violations.append((key, seq, top))
            else:
                self.top[key] = seq

    @property
    def keys_out_of_order(self) -> int:
        return len({k for k, _s, _t in self.violations})

    def lost(self, producer: KeyedProducer) -> int:
        """Records delivered but never processed."""
        with self._lock:
            return sum(1 for k, seqs in producer.delivered.items() for s in seqs if (k, s) not in self.seen)


class SlowFleet:
    """Members of one group (``ControlledConsumer``, earliest reset), each with its own processing time per
    record; each stores the offset after processing, and reports to ``checker``.

    :param work: seconds of processing per record, one entry per member.
    :param partition_work: seconds per record of these partitions, whichever member holds them (at least
        the member's own): the backlog stays on them when another member takes them over for a while.
    """

    #: What each member's config adds to the group's (a short session: a stopped member leaves quickly).
    member_settings: dict[str, Any] = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500}

    def __init__(
        self,
        config: dict[str, Any],
        topic: str,
        group: str,
        work: list[float],
        checker: OrderChecker,
        control_topic: str = DEFAULT_CONTROL_TOPIC,
        partition_work: dict[int, float] | None = None,
    ) -> None:
        self.partition_work = partition_work or {}
        self.control_topic = control_topic
        self.topic, self.group, self.checker = topic, group, checker
        self.work = work
        self.consumers: list[ControlledConsumer | None] = [None] * len(work)
        self.assigned: list[set[int]] = [set() for _ in work]
        self._halt = threading.Event()
        self._settings = {
            **config,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.offset.store": False,
            "auto.commit.interval.ms": 200,
            **self.member_settings,
        }
        self._threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(len(work))]
        for thread in self._threads:
            thread.start()

    def _member(self, i: int, on_assign: Callable[[Any, list[Any]], None]) -> Any:
        """Member ``i``: a ControlledConsumer subscribed with ``on_assign``."""
        consumer = ControlledConsumer(
            {**self._settings, "client.id": f"{self.group}-{i}"},
            [self.topic],
            check_interval=0.1,
            on_assign=on_assign,
            control_topic=self.control_topic,
        )
        self.consumers[i] = consumer
        return consumer

    def _run(self, i: int) -> None:
        def on_assign(_c: Any, parts: list[Any]) -> None:
            self.assigned[i] = {tp.partition for tp in parts}

        consumer = self._member(i, on_assign)
        try:
            while not self._halt.is_set():
                msg = consumer.poll(0.05)
                if msg is None or msg.error():
                    continue
                time.sleep(max(self.work[i], self.partition_work.get(msg.partition() or 0, 0.0)))
                record = json.loads(msg.value())
                self.checker.record(record["key"], record["seq"])
                consumer.store_offsets(message=msg)
        finally:
            consumer.close()

    def passages(self) -> list[Any]:
        return [p for c in self.consumers if c is not None for p in c.passages]

    def stop(self) -> None:
        self._halt.set()
        for thread in self._threads:
            thread.join(60)


class PlainFleet(SlowFleet):
    """Plain confluent-kafka members of one group (no client piece), otherwise a :class:`SlowFleet`; they
    see new partitions within a second (metadata refresh 1 s, librdkafka's default is 5 min), which favours
    the naive increase: nothing waits."""

    member_settings = {"topic.metadata.refresh.interval.ms": 1000}

    def _member(self, i: int, on_assign: Callable[[Any, list[Any]], None]) -> Any:
        consumer = Consumer({**self._settings, "client.id": f"plain-{i}"})
        consumer.subscribe([self.topic], on_assign=on_assign)
        return consumer
