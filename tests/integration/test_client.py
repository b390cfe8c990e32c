"""The client wrappers against a real broker: pause/resume of a ControlledConsumer, layouts of a
ControlledProducer, and librdkafka's murmur2 partitioner against ours. No mocks; every wait is bounded."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, Producer, TopicPartition
from confluent_kafka.admin import NewPartitions
from kstate_support.fixtures import wait_until
from kstate_support.fleet import describe_group

from airflow_provider_kstate.client_piece.consumer import ControlledConsumer
from airflow_provider_kstate.client_piece.murmur2 import partition_for
from airflow_provider_kstate.client_piece.producer import ControlledProducer
from airflow_provider_kstate.client_piece.protocol import (
    Ack,
    Command,
    Layout,
    ack_key,
    layout_ack_key,
    now_ms,
)

pytestmark = pytest.mark.integration

WAIT = 20.0  # upper bound for anything that should take well under a second


def group_state(admin: Any, group: str) -> tuple[ConsumerGroupState, int]:
    desc = describe_group(admin, group)
    return desc.state, len(desc.members)


def produce_ids(config: dict[str, Any], topic: str, count: int) -> None:
    producer = Producer(config)
    for i in range(count):
        producer.produce(topic, value=str(i).encode(), key=f"k{i % 97}".encode())
    assert producer.flush(30) == 0


class App:
    """A single-threaded service loop around a ControlledConsumer that records what it processed."""

    def __init__(self, consumer: ControlledConsumer, work: float = 0.0) -> None:
        self.consumer = consumer
        self.work = work
        self.seen: list[int] = []

    def step(self, timeout: float = 0.5) -> None:
        msg = self.consumer.poll(timeout)
        if msg is not None and not msg.error():
            time.sleep(self.work)  # the service's processing time per message
            self.seen.append(int(msg.value() or b"-1"))


def committed_total(config: dict[str, Any], group: str, topic: str, partitions: int) -> int:
    probe = Consumer({**config, "group.id": group, "enable.auto.commit": False})
    try:
        tps = probe.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
    finally:
        probe.close()
    return sum(max(tp.offset, 0) for tp in tps)


def consumer_config(kafka_config: dict[str, Any], group: str) -> dict[str, Any]:
    return {**kafka_config, "group.id": group, "auto.offset.reset": "earliest"}


def test_pause_restart_resume_without_loss(
    kafka_config: dict[str, Any],
    admin: Any,
    make_topic: Callable[..., str],
    unique: Callable[[str], str],
    control: Any,
) -> None:
    topic = make_topic("pause", partitions=3)
    group = unique("group")
    total = 2000
    produce_ids(kafka_config, topic, total)
    cfg = consumer_config(kafka_config, group)

    app = App(
        ControlledConsumer(cfg, [topic], control_topic=control.topic, client_id="c1", check_interval=0.1),
        0.001,
    )
    assert app.consumer.state == "running"
    wait_until(lambda: len(app.seen) >= 200, step=app.step)
    assert group_state(admin, group) == (ConsumerGroupState.STABLE, 1)

    # pause: the app keeps calling poll(); the group must become EMPTY and an ack appear
    pause = Command(group=group, command="pause", epoch=now_ms(), topic=topic)
    control.publish(pause)
    took = wait_until(lambda: app.consumer.paused, step=app.step)
    # timeout contract: a pause is seen within check_interval (0.1 s) and applied (commit, leave): within
    # 2x that and a few seconds on a loaded machine
    assert took < 3.0, f"pause took {took:.2f}s with check_interval=0.1"
    assert group_state(admin, group) == (ConsumerGroupState.EMPTY, 0)
    ack = control.snapshot("ack/")[ack_key(group, "c1")]
    assert isinstance(ack, Ack) and ack.state == "paused" and ack.epoch == pause.epoch
    seen_before = len(app.seen)
    assert seen_before < total, "consumed everything before the pause: the test would prove nothing"
    assert committed_total(kafka_config, group, topic, 3) == seen_before, (
        "pause must commit what was returned"
    )

    # still paused: poll returns None, the group stays EMPTY
    for _ in range(3):
        assert app.consumer.poll(0.2) is None
    app.consumer.close()

    # a restart while paused does not join
    app2 = App(
        ControlledConsumer(cfg, [topic], control_topic=control.topic, client_id="c2", check_interval=0.1)
    )
    assert app2.consumer.paused and app2.consumer.epoch == pause.epoch
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        app2.step(0.3)
    assert app2.seen == []
    assert group_state(admin, group) == (ConsumerGroupState.EMPTY, 0)
    ack2 = control.snapshot("ack/")[ack_key(group, "c2")]
    assert isinstance(ack2, Ack) and ack2.state == "paused"

    # a stale resume is ignored
    control.publish(Command(group=group, command="resume", epoch=pause.epoch - 1))
    deadline = time.monotonic() + 0.6
    while time.monotonic() < deadline:
        app2.step(0.2)
    assert app2.consumer.paused

    # resume: rejoin, STABLE, consume the rest: no loss, no duplicates (the pause committed exactly)
    resume = Command(group=group, command="resume", epoch=pause.epoch + 1)
    control.publish(resume)
    wait_until(lambda: not app2.consumer.paused, step=app2.step)
    wait_until(lambda: group_state(admin, group) == (ConsumerGroupState.STABLE, 1), step=app2.step)
    wait_until(lambda: len(app.seen) + len(app2.seen) >= total, step=app2.step)
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:  # anything extra would be a duplicate
        app2.step(0.2)
    app2.consumer.close()
    everything = Counter(app.seen + app2.seen)
    assert set(everything) == set(range(total)), "lost messages"
    assert max(everything.values()) == 1, "duplicates although the pause committed synchronously"
    ack3 = control.snapshot("ack/")[ack_key(group, "c2")]
    assert isinstance(ack3, Ack) and ack3.state == "running" and ack3.epoch == resume.epoch


def test_pause_and_resume_of_several_members(
    kafka_config: dict[str, Any],
    admin: Any,
    make_topic: Callable[..., str],
    unique: Callable[[str], str],
    control: Any,
) -> None:
    topic = make_topic("multi", partitions=4)
    group = unique("group")
    total = 1500
    cfg = consumer_config(kafka_config, group)
    apps = [
        App(ControlledConsumer(cfg, [topic], control_topic=control.topic, client_id=f"m{i}"), 0.001)
        for i in range(3)
    ]

    def step_all() -> None:
        before = len(seen())
        for app in apps:
            app.step(0)
        if len(seen()) == before:
            time.sleep(0.01)

    def seen() -> list[int]:
        return [i for app in apps for i in app.seen]

    wait_until(lambda: group_state(admin, group) == (ConsumerGroupState.STABLE, 3), step=step_all)
    wait_until(lambda: all(app.consumer.assignment() for app in apps), step=step_all)
    produce_ids(kafka_config, topic, total)  # after the joins: no join rebalance re-delivers anything
    wait_until(lambda: len(seen()) >= 100, step=step_all)
    pause = Command(group=group, command="pause", epoch=now_ms())
    control.publish(pause)
    took = wait_until(lambda: group_state(admin, group)[0] == ConsumerGroupState.EMPTY, step=step_all)
    # timeout contract: every member sees the pause within its check_interval (0.2 s) and leaves; EMPTY
    # within 2x that and a few seconds on a loaded machine, not after a session timeout
    assert took < 3.5, f"EMPTY {took:.2f}s after the pause (check_interval 0.2 s)"
    wait_until(lambda: all(app.consumer.paused for app in apps), step=step_all, timeout=5)

    def all_acked() -> bool:
        acks = control.snapshot("ack/")
        states = {getattr(acks.get(ack_key(group, f"m{i}")), "state", None) for i in range(3)}
        return states == {"paused"}

    wait_until(all_acked, step=step_all, timeout=5)
    assert 0 < len(seen()) < total
    assert committed_total(kafka_config, group, topic, 4) == len(set(seen())), (
        "pause must commit what was returned"
    )

    control.publish(Command(group=group, command="resume", epoch=pause.epoch + 1))
    wait_until(lambda: group_state(admin, group) == (ConsumerGroupState.STABLE, 3), step=step_all)
    wait_until(lambda: len(set(seen())) >= total, step=step_all)
    for app in apps:
        app.consumer.close()
    everything = Counter(seen())
    assert set(everything) == set(range(total)), "lost messages"
    assert max(everything.values()) == 1, f"{sum(everything.values()) - total} duplicates"


def test_consumer_starts_running_after_resume_and_ignores_stale_pause(
    kafka_config: dict[str, Any],
    admin: Any,
    make_topic: Callable[..., str],
    unique: Callable[[str], str],
    control: Any,
) -> None:
    topic = make_topic("stale")
    group = unique("group")
    control.publish(
        Command(group=group, command="pause", epoch=100), Command(group=group, command="resume", epoch=200)
    )
    cfg = consumer_config(kafka_config, group)
    app = App(
        ControlledConsumer(cfg, [topic], control_topic=control.topic, client_id="s1", check_interval=0.05)
    )
    assert app.consumer.state == "running" and app.consumer.epoch == 200
    wait_until(lambda: group_state(admin, group)[0] == ConsumerGroupState.STABLE, step=app.step)
    control.publish(Command(group=group, command="pause", epoch=150))
    deadline = time.monotonic() + 0.8
    while time.monotonic() < deadline:
        app.step(0.1)
    assert app.consumer.state == "running"
    assert group_state(admin, group) == (ConsumerGroupState.STABLE, 1)
    app.consumer.close()


def test_paused_consumer_sees_the_resume_within_the_paused_interval(
    kafka_config: dict[str, Any],
    admin: Any,
    make_topic: Callable[..., str],
    unique: Callable[[str], str],
    control: Any,
) -> None:
    """``check_interval`` bounds how late a pause is seen; while paused the follower looks every
    ``paused_check_interval`` and wakes the waiting poll, so the resume is applied within milliseconds."""
    topic = make_topic("fast")
    group = unique("group")
    changes: list[tuple[float, str]] = []
    app = App(
        ControlledConsumer(
            consumer_config(kafka_config, group),
            [topic],
            control_topic=control.topic,
            client_id="f1",
            check_interval=1.0,
            paused_check_interval=0.01,
            on_state_change=lambda state: changes.append((time.monotonic(), state)),
        )
    )
    wait_until(lambda: group_state(admin, group) == (ConsumerGroupState.STABLE, 1), step=app.step)
    control.publish(Command(group=group, command="pause", epoch=now_ms(), topic=topic))
    took = wait_until(lambda: app.consumer.paused, step=app.step)
    # timeout contract: seen within check_interval (1.0 s): 2x that and 3 s for a loaded machine
    assert took < 2 * 1.0 + 3, f"pause seen after {took:.2f}s with check_interval=1.0"
    wait_until(lambda: group_state(admin, group) == (ConsumerGroupState.EMPTY, 0), timeout=2.0)
    published = time.monotonic()
    control.publish(Command(group=group, command="resume", epoch=now_ms() + 1, topic=topic))
    wait_until(lambda: not app.consumer.paused, step=lambda: app.step(5.0))  # applied inside the poll
    took = changes[-1][0] - published
    assert changes[-1][1] == "running"
    # timeout contract: the paused consumer looks every paused_check_interval (10 ms) and wakes its waiting
    # poll (5 s above): applied within 2x that and 3 s on a loaded machine, never at the poll's end
    assert took < 3.0, f"resume applied after {took:.2f}s: the paused poll was not woken"
    wait_until(lambda: group_state(admin, group) == (ConsumerGroupState.STABLE, 1), step=app.step)
    app.consumer.close()


def read_all(config: dict[str, Any], topic: str, expected: int) -> list[Any]:
    consumer = Consumer({**config, "group.id": "kstate-test-reader", "enable.auto.commit": False})
    meta = consumer.list_topics(topic, timeout=10).topics[topic]
    consumer.assign([TopicPartition(topic, p, 0) for p in meta.partitions])
    out: list[Any] = []
    deadline = time.monotonic() + WAIT
    while len(out) < expected and time.monotonic() < deadline:
        out.extend(m for m in consumer.consume(1000, 0.5) if not m.error())
    consumer.close()
    assert len(out) == expected, f"read {len(out)} of {expected} from {topic}"
    return out


def add_partitions(admin: Any, topic: str, total: int) -> None:
    for future in admin.create_partitions([NewPartitions(topic, total)]).values():
        future.result(timeout=30)


def test_producer_keeps_old_partitions_until_layout_raises(
    kafka_config: dict[str, Any], admin: Any, make_topic: Callable[..., str], control: Any
) -> None:
    topic = make_topic("layout", partitions=2)
    control.publish(Layout(topic=topic, partitions=2, epoch=1000))
    producer = ControlledProducer(
        kafka_config, [topic], control_topic=control.topic, client_id="p1", check_interval=0.05
    )
    assert producer.partitions(topic) == 2 and producer.layout_epoch(topic) == 1000
    add_partitions(admin, topic, 4)
    keys = [f"user-{i}".encode() for i in range(200)]
    for key in keys:
        producer.produce(topic, value=b"old", key=key)
    for _ in range(20):
        producer.produce(topic, value=b"old-nokey")
    assert producer.flush(30) == 0

    control.publish(Layout(topic=topic, partitions=4, epoch=2000))
    wait_until(lambda: producer.partitions(topic) == 4, step=lambda: producer.poll(0.05), timeout=5)
    ack = control.snapshot("ack-layout/")[layout_ack_key(topic, "p1")]
    assert isinstance(ack, Ack) and ack.state == "layout" and ack.partitions == 4 and ack.epoch == 2000
    control.publish(Layout(topic=topic, partitions=2, epoch=1500))  # stale: ignored
    time.sleep(0.1)
    for key in keys:
        producer.produce(topic, value=b"new", key=key)
    for _ in range(40):
        producer.produce(topic, value=b"new-nokey")
    assert producer.close() == 0

    msgs = read_all(kafka_config, topic, 2 * len(keys) + 60)
    old = [m for m in msgs if m.value().startswith(b"old")]
    new = [m for m in msgs if m.value().startswith(b"new")]
    assert {m.partition() for m in old} <= {0, 1}
    assert all(m.partition() == partition_for(m.key(), 2) for m in old if m.key())
    assert all(m.partition() == partition_for(m.key(), 4) for m in new if m.key())
    assert {m.partition() for m in new if m.key()} == {0, 1, 2, 3}
    assert Counter(m.partition() for m in new if not m.key()) == {0: 10, 1: 10, 2: 10, 3: 10}


def test_producer_without_layout_uses_count_at_first_use(
    kafka_config: dict[str, Any], admin: Any, make_topic: Callable[..., str], control: Any
) -> None:
    topic = make_topic("nolayout", partitions=3)
    producer = ControlledProducer(kafka_config, control_topic=control.topic, client_id="p2")
    producer.produce(topic, value=b"a", key=b"first")
    assert producer.partitions(topic) == 3 and producer.layout_epoch(topic) == 0
    add_partitions(admin, topic, 6)
    keys = [f"k{i}".encode() for i in range(300)]
    for key in keys:
        producer.produce(topic, value=b"b", key=key)
    assert producer.close() == 0
    msgs = read_all(kafka_config, topic, len(keys) + 1)
    assert {m.partition() for m in msgs} == {0, 1, 2}
    assert all(m.partition() == partition_for(m.key(), 3) for m in msgs)


def test_librdkafka_murmur2_random_matches_partition_for(
    kafka_config: dict[str, Any], make_topic: Callable[..., str]
) -> None:
    topic = make_topic("murmur", partitions=7)
    producer = Producer({**kafka_config, "partitioner": "murmur2_random"})
    keys = [f"order-{i}".encode() for i in range(500)] + [b"21", b"foobar", b"abc", "ключ".encode()]
    for key in keys:
        producer.produce(topic, value=b"x", key=key)
    assert producer.flush(30) == 0
    msgs = read_all(kafka_config, topic, len(keys))
    placed = {m.key(): m.partition() for m in msgs}
    assert placed == {k: partition_for(k, 7) for k in keys}
    assert len(set(placed.values())) == 7


#: The idle-member proof's group: one partition, so all members but one are idle.
MEMBERS = 4
#: Seconds the plain group must stay STABLE before its members close (cooperative-sticky's follow-up rebalance
#: starts within a few hundred milliseconds of the first assignment).
SETTLED_S = 2.0


def test_an_idle_cooperative_member_leaves_its_group_at_once_when_paused(
    kafka_config: dict[str, Any],
    admin: Any,
    make_topic: Callable[..., str],
    unique: Callable[[str], str],
    control: Any,
) -> None:
    """librdkafka 2.16 sends no LeaveGroup when a classic member with a cooperative assignor closes owning no
    partition in a settled group: the broker keeps it until its session times out. (``rdkafka_cgrp.c``: the close
    revokes nothing, and ``rd_kafka_cgrp_assignment_done`` in join-state STEADY falls through to
    ``rd_kafka_cgrp_try_terminate`` without ``rd_kafka_cgrp_leave_maybe``; only a member with a rejoin pending, or
    one still in a rebalance, goes through ``rd_kafka_cgrp_rejoin`` and leaves.) Proven first with plain consumers
    (four on one partition: three are idle), closed only once the group has stayed STABLE for a while: CI twice
    closed them during cooperative-sticky's follow-up rebalance and saw every one leave. Then the client piece's
    pause, which unsubscribes such a member before it closes, makes the group EMPTY at once."""
    topic = make_topic("idle", partitions=1)
    settings = {"partition.assignment.strategy": "cooperative-sticky", "session.timeout.ms": 10000}

    def joined(group: str, members: list[Any], step: Callable[[], Any]) -> None:
        wait_until(lambda: group_state(admin, group) == (ConsumerGroupState.STABLE, MEMBERS), step=step)
        wait_until(lambda: sum(len(m.assignment() or []) for m in members) == 1, step=step)

    def settled(group: str, members: list[Any], step: Callable[[], Any]) -> None:
        """Joined, then STABLE with one owner at every look for ``SETTLED_S`` (a follow-up rebalance restarts it)."""
        joined(group, members, step)
        since = time.monotonic()

        def quiet() -> bool:
            nonlocal since
            if group_state(admin, group) != (ConsumerGroupState.STABLE, MEMBERS) or (
                sum(len(m.assignment() or []) for m in members) != 1
            ):
                since = time.monotonic()
            return time.monotonic() - since >= SETTLED_S

        wait_until(quiet, step=step)

    plain_group = unique("idle-plain")
    plain = [Consumer({**consumer_config(kafka_config, plain_group), **settings}) for _ in range(MEMBERS)]
    for consumer in plain:
        consumer.subscribe([topic])
    settled(plain_group, plain, lambda: [c.poll(0.05) for c in plain])
    # the idle members close first, while the group is stable: closed after the owner, they could see the owner's
    # leave start a rebalance and leave from that state (CI once saw a group of two EMPTY at once)
    for consumer in sorted(plain, key=lambda c: len(c.assignment() or [])):
        consumer.close()
    started = time.monotonic()
    wait_until(lambda: group_state(admin, plain_group)[0] == ConsumerGroupState.EMPTY, timeout=30)
    assert time.monotonic() - started > 7.0, (
        "the scenario: the idle member stays until its session (10 s) ends"
    )

    group = unique("idle-piece")
    cfg = {**consumer_config(kafka_config, group), **settings}
    apps = [
        App(ControlledConsumer(cfg, [topic], control_topic=control.topic, client_id=f"i{i}"))
        for i in range(MEMBERS)
    ]

    def step_all() -> None:
        for app in apps:
            app.step(0.05)

    joined(group, [app.consumer for app in apps], step_all)
    control.publish(Command(group=group, command="pause", epoch=now_ms(), topic=topic))
    took = wait_until(lambda: group_state(admin, group)[0] == ConsumerGroupState.EMPTY, step=step_all)
    # timeout contract: both see the pause within their check_interval (0.2 s) and leave, not after 10 s
    assert took < 5.0, f"EMPTY {took:.2f}s after the pause: the idle member waited for its session"
    for app in apps:
        app.consumer.close()
