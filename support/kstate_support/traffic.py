"""Live traffic for the KAFKA-12261 scenario: a numbered producer and latest-reset consumers.

Used by the integration tests, the demo and the benchmarks. Every message carries its sequence number;
loss is ``produced - received``, with the partition each lost message was written to.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

from confluent_kafka import Consumer, Producer

from airflow_provider_kstate.client_piece.consumer import ControlledConsumer
from airflow_provider_kstate.client_piece.producer import ControlledProducer

#: Producers see new partitions quickly, consumers late: the window in which latest-reset skips data.
PRODUCER_METADATA_MS = 500
CONSUMER_METADATA_MS = 4000


class SeqProducer(threading.Thread):
    """Write numbered, keyed messages at ``rate`` per second until stopped; remember where each landed.

    :param controlled: use the client piece's ``ControlledProducer`` (honours layout signals).
    """

    def __init__(
        self, config: dict[str, Any], topic: str, rate: float = 200.0, controlled: bool = False
    ) -> None:
        super().__init__(daemon=True)
        self.topic = topic
        self.rate = rate
        self.placed: dict[int, int] = {}
        self.errors: list[str] = []
        #: ``time.monotonic()`` of each acknowledgement (a trace of when writes went through).
        self.acked_at: list[float] = []
        self._halt = threading.Event()
        settings = {**config, "linger.ms": 5, "topic.metadata.refresh.interval.ms": PRODUCER_METADATA_MS}
        self.producer: Any = (
            ControlledProducer(settings, [topic], check_interval=0.1)
            if controlled
            else Producer({**settings, "partitioner": "murmur2_random"})
        )

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.placed[int(msg.value())] = msg.partition()
            self.acked_at.append(time.monotonic())

    def run(self) -> None:
        seq = 0
        start = time.monotonic()
        while not self._halt.is_set():
            self.producer.produce(
                self.topic, value=str(seq).encode(), key=f"key-{seq}".encode(), on_delivery=self._delivered
            )
            self.producer.poll(0)
            seq += 1
            delay = start + seq / self.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        self.producer.flush(30)
        if isinstance(self.producer, ControlledProducer):
            self.producer.close()
        self.producer = None  # the last reference: librdkafka's client is destroyed here, broker still up

    def stop(self) -> None:
        self._halt.set()
        self.join(60)

    @property
    def produced(self) -> set[int]:
        return set(self.placed)


class Timeline:
    """Consumer-side events of one group's members, timestamped (``time.monotonic()``) in the consumer
    threads themselves: ``stop`` (the member stops handing out messages: the loop ends before ``close()``,
    or a pause begins), ``subscribe`` (it (re)subscribes), ``assign`` / ``revoke`` (its rebalance callbacks,
    with the partitions).

    :meth:`window` measures the downtime of a pause or a restart with one definition for both.
    """

    def __init__(self) -> None:
        self.events: list[tuple[float, str, str, frozenset[int]]] = []
        self._lock = threading.Lock()

    def record(self, member: str, kind: str, partitions: frozenset[int] = frozenset()) -> None:
        with self._lock:
            self.events.append((time.monotonic(), member, kind, partitions))

    def callbacks(self, member: str) -> dict[str, Any]:
        """``on_assign`` / ``on_revoke`` for ``subscribe`` that record into this timeline."""

        def on_assign(_consumer: Any, parts: list[Any]) -> None:
            self.record(member, "assign", frozenset(tp.partition for tp in parts))

        def on_revoke(_consumer: Any, parts: list[Any]) -> None:
            self.record(member, "revoke", frozenset(tp.partition for tp in parts))

        return {"on_assign": on_assign, "on_revoke": on_revoke}

    def window(
        self, after: float, members: set[str], partitions: int, each: bool = True
    ) -> dict[str, float] | None:
        """The downtime after ``after``: from the first ``stop`` to the first moment at which every one of
        ``members`` holds an assignment and together they hold all ``partitions`` partitions (the last
        ``assign`` callback of the rejoin). None while that moment has not come.

        :param each: whether every member must hold a partition (False: only the union counts, for fewer
            partitions than members).

        :return: ``{"window", "start", "end", "stopped", "subscribed"}``: seconds from the first stop to the
            end, the two instants, and seconds from the first stop to the last stop / the last subscribe.
        """
        with self._lock:
            events = list(self.events)
        held: dict[str, frozenset[int]] = {}
        start = last_stop = last_sub = None
        for t, member, kind, parts in events:
            _apply_event(held, member, kind, parts)
            if t < after:
                continue
            if kind == "stop":
                start = t if start is None else start
                last_stop = t
            elif kind == "subscribe":
                last_sub = t
            elif start is not None and kind == "assign" and _covers(held, members, partitions, each):
                return {
                    "window": t - start,
                    "start": start,
                    "end": t,
                    "stopped": (last_stop or start) - start,
                    "subscribed": (last_sub or start) - start,
                }
        return None


def _apply_event(held: dict[str, frozenset[int]], member: str, kind: str, parts: frozenset[int]) -> None:
    if kind == "assign":
        held[member] = held.get(member, frozenset()) | parts
    elif kind == "revoke":
        held[member] = held.get(member, frozenset()) - parts
    elif kind == "stop":
        held[member] = frozenset()


def _covers(held: dict[str, frozenset[int]], members: set[str], partitions: int, each: bool = True) -> bool:
    if each and not all(held.get(m) for m in members):
        return False
    return frozenset().union(*(held.get(m, frozenset()) for m in members)) >= frozenset(range(partitions))


class ConsumerFleet:
    """``n`` consumer threads of one group with ``auto.offset.reset=latest``, recording what they receive.

    :param controlled: wrap each with the client piece's ``ControlledConsumer`` (honours pause/resume).
    :param check_interval: how often a controlled consumer looks at the control topic (its reaction time).
    :param timeline: record stops, subscribes and assignments there (members ``f"{name}{i}"``).
    :param name: the member-name prefix in ``timeline``.
    :param protocol: ``group.protocol``: ``classic`` (the default) or ``consumer`` (KIP-848: the broker
        owns the session and heartbeat timing, so librdkafka refuses the two settings set here for classic).
    :param topics: subscribe to these topics instead of ``topic`` alone (a join's co-partitioned inputs);
        what each topic delivered is in ``by_topic`` (``received`` mixes their sequence numbers).
    :param metadata_ms: how often the consumers refresh the topics' metadata (when they see new partitions).
    :param assignor: the classic protocol's ``partition.assignment.strategy`` (None: librdkafka's default).
    """

    def __init__(
        self,
        config: dict[str, Any],
        topic: str,
        group: str,
        n: int = 2,
        controlled: bool = False,
        check_interval: float = 0.1,
        timeline: Timeline | None = None,
        name: str = "m",
        protocol: str = "classic",
        topics: list[str] | None = None,
        metadata_ms: int = CONSUMER_METADATA_MS,
        assignor: str | None = None,
    ) -> None:
        self.topic = topic
        self.topics = list(topics or [topic])
        self.by_topic: dict[str, set[int]] = {t: set() for t in self.topics}
        self.timeline = timeline or Timeline()
        self.members = [f"{name}{i}" for i in range(n)]
        self.group = group
        self.received: set[int] = set()
        self.transitions: list[str] = []
        self.events: list[tuple[float, str]] = []
        #: ``(time.monotonic(), member index)`` of every message received: gaps in processing.
        self.arrivals: list[tuple[float, int]] = []
        self._lock = threading.Lock()
        self._halt = threading.Event()
        self._settings = {
            **config,
            "group.id": group,
            "auto.offset.reset": "latest",
            "topic.metadata.refresh.interval.ms": metadata_ms,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            "auto.commit.interval.ms": 500,
        }
        if protocol != "classic":
            del self._settings["session.timeout.ms"], self._settings["heartbeat.interval.ms"]
            self._settings["group.protocol"] = protocol
        elif assignor:
            self._settings["partition.assignment.strategy"] = assignor
        self._controlled = controlled
        self._check_interval = check_interval
        self._ready = threading.Barrier(n + 1)
        self._threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(n)]
        for thread in self._threads:
            thread.start()
        try:
            self._ready.wait(60)
        except threading.BrokenBarrierError:  # a consumer failed to start: stop the others, then raise
            self.stop()
            raise

    def _make(self, i: int) -> Any:
        member = self.members[i]
        callbacks = self.timeline.callbacks(member)
        if self._controlled:
            return ControlledConsumer(
                {**self._settings, "client.id": f"{self.group}-{i}"},
                self.topics,
                check_interval=self._check_interval,
                on_state_change=lambda state: self._on_state(member, state),
                on_pause=lambda _c: self.timeline.record(member, "stop"),
                **callbacks,
            )
        consumer = Consumer({**self._settings, "client.id": f"{self.group}-{i}"})
        consumer.subscribe(self.topics, **callbacks)
        self.timeline.record(member, "subscribe")
        return consumer

    def _on_state(self, member: str, state: str) -> None:
        self.transitions.append(state)
        self.events.append((time.monotonic(), state))
        if state == "running":
            self.timeline.record(member, "subscribe")

    def _run(self, i: int) -> None:
        try:
            consumer = self._make(i)
        except BaseException:
            self._ready.abort()  # the constructor stops waiting, stops the fleet and raises
            raise
        try:
            self._ready.wait(60)
            while not self._halt.is_set():
                msg = consumer.poll(0.1)
                if msg is None or msg.error():
                    continue
                with self._lock:
                    self.received.add(int(msg.value()))
                    self.by_topic[msg.topic()].add(int(msg.value()))
                    self.arrivals.append((time.monotonic(), i))
        finally:
            self.timeline.record(self.members[i], "stop")
            consumer.close()

    def largest_gaps(self, start: float, end: float) -> list[float]:
        """Each member's longest time without a message between ``start`` and ``end`` (monotonic), seconds."""
        with self._lock:
            arrivals = list(self.arrivals)
        gaps = []
        for i in range(len(self.members)):
            times = [start, *sorted(t for t, m in arrivals if m == i and start <= t <= end), end]
            gaps.append(max(b - a for a, b in zip(times, times[1:], strict=False)))
        return gaps

    def stop(self) -> None:
        """Stop and close every consumer (idempotent)."""
        self._halt.set()
        for thread in self._threads:
            if thread.is_alive():
                thread.join(60)


class GroupWatcher(threading.Thread):
    """Sample a group's state and assigned partitions every ``interval`` s: ``samples`` of (t, state, n)."""

    def __init__(self, config: dict[str, Any], group: str, topic: str, interval: float = 0.05) -> None:
        super().__init__(daemon=True)
        from confluent_kafka.admin import AdminClient

        self.admin = AdminClient(config)
        self.group, self.topic, self.interval = group, topic, interval
        self.samples: list[tuple[float, str, int]] = []
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            try:
                desc = self.admin.describe_consumer_groups([self.group])[self.group].result(timeout=5)
                assigned = sum(
                    1 for m in desc.members for tp in m.assignment.topic_partitions if tp.topic == self.topic
                )
                self.samples.append((time.monotonic(), desc.state.name, assigned))
            except Exception:  # noqa: BLE001 - a missed sample is fine
                pass
            time.sleep(self.interval)

    def stop(self) -> None:
        self._halt.set()
        self.join(10)
        self.admin = None  # destroy the AdminClient now, while the broker still answers

    def back_at(self, after: float, partitions: int) -> float | None:
        """Return the first time after ``after`` the group was STABLE with ``partitions`` assigned."""
        for t, state, assigned in self.samples:
            if t > after and state == "STABLE" and assigned >= partitions:
                return t
        return None

    def left_at(self, after: float) -> float | None:
        """Return the first time after ``after`` the group had no member consuming (EMPTY or rebalancing)."""
        for t, state, _assigned in self.samples:
            if t > after and state != "STABLE":
                return t
        return None


def wait_until(predicate: Any, timeout: float, interval: float = 0.2) -> bool:
    """Poll ``predicate`` until it is true or ``timeout`` seconds pass; return its last value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


def warm_up(producer: SeqProducer, fleet: ConsumerFleet, timeout: float = 60.0) -> int:
    """Wait until the fleet receives live traffic; return the first sequence number loss is counted from.

    Latest-reset consumers skip what was written before they had positions: that is start-up, not the
    scenario, so loss is counted only after this mark.
    """
    if not wait_until(lambda: len(fleet.received) >= 20, timeout):
        raise RuntimeError(f"consumers of {fleet.group} received nothing within {timeout}s")
    time.sleep(1.0)  # let auto-commit record positions
    with fleet._lock:
        return max(fleet.received) + 1


def loss(
    producer: SeqProducer, fleet: ConsumerFleet, since: int, drain_timeout: float = 30.0
) -> dict[int, int]:
    """Wait (bounded) for the fleet to catch up; return ``{seq: partition}`` of messages ≥ ``since`` never received.

    Caught up: every message received, or the last one written to each partition received. A partition is
    read in order, so a message below one received that is still missing was skipped (a reset past it) and
    never comes: the naive scenarios stop waiting there instead of at ``drain_timeout``.
    """
    produced = {seq for seq in producer.produced if seq >= since}
    last: dict[int, int] = {}
    for seq in produced:
        p = producer.placed[seq]
        last[p] = max(last.get(p, seq), seq)
    ends = set(last.values())
    wait_until(lambda: produced <= fleet.received or ends <= fleet.received, drain_timeout)
    if not produced <= fleet.received:
        time.sleep(0.5)  # a message another member polled before the last one may still be on its way in
    return {seq: producer.placed[seq] for seq in sorted(produced - fleet.received)}


@contextlib.contextmanager
def live_traffic(
    config: dict[str, Any],
    topic: str,
    group: str,
    n: int = 2,
    controlled: bool = False,
    rate: float = 200.0,
    protocol: str = "classic",
) -> Iterator[tuple[SeqProducer, ConsumerFleet]]:
    """Run a :class:`SeqProducer` and a :class:`ConsumerFleet` for the block; stop both on the way out,
    whatever happened in it (a failed assertion, a timeout, Ctrl-C).

    A consumer or producer thread still polling when the session stops the broker takes the interpreter down
    at exit (librdkafka destroyed under a live thread: the whole pytest process died with rc 139). Stopping
    either one earlier inside the block (to count loss) is fine: ``stop()`` is idempotent.

    :param config: librdkafka settings.
    :param topic: the topic.
    :param group: the fleet's consumer group.
    :param n: consumers in the fleet.
    :param controlled: use the client piece (``ControlledProducer`` / ``ControlledConsumer``).
    :param rate: messages per second.
    :param protocol: the fleet's ``group.protocol`` (``classic`` or ``consumer``).
    """
    fleet = ConsumerFleet(config, topic, group, n=n, controlled=controlled, protocol=protocol)
    producer: SeqProducer | None = None
    try:
        producer = SeqProducer(config, topic, rate=rate, controlled=controlled)
        producer.start()
        yield producer, fleet
    finally:
        if producer is not None and producer.is_alive():
            producer.stop()
        fleet.stop()
