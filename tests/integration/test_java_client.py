"""The control protocol in Java (issue 41, deliverable 2): the client piece of ``clients/java``
(``ControlledPartitioner``, ``ControlledConsumer`` on ``kafka-clients`` 4.4), written from
``docs/control-protocol.md``, against the real broker and the provider's real increase.

Java processes (``clients/java/src/test/java/io/kstate/control/apps``) run a keyed producer and the members of
a consumer group and report what they did as JSON lines (:mod:`kstate_support.java_client`). First the
scenario proves itself: a naive increase under a plain Java producer and a latest-reset plain Java consumer
loses the records written to the new partitions before the consumer has them. Then the provider's increase
through ``dag.test()`` with the Java client piece on both sides: the producer is held on the old layout from
the pin to the release (the partitions its records land on say so), the consumers pause by leaving and
resume, the key-order barrier holds, and nothing is lost or reordered. Last, consumers that stay in their
group while the topic grows (rules 4.7 and 4.8, classic cooperative-sticky and KIP-848): a committed offset on
every new partition within seconds of the pending barrier. No mocks; every wait is bounded.
"""

from __future__ import annotations

import functools
import json
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, Producer, TopicPartition
from confluent_kafka.admin import NewPartitions
from kstate_support import kafka as kfacts
from kstate_support.fixtures import wait_until as shared_wait_until
from kstate_support.fleet import describe_group as describe
from kstate_support.java_client import build, consumers, java_ready, producer, unit_test_results
from kstate_support.key_order import OrderChecker

from airflow_provider_kstate.client_piece.murmur2 import partition_for
from airflow_provider_kstate.client_piece.protocol import DEFAULT_CONTROL_TOPIC
from airflow_provider_kstate.increase.key_order import ORDER_BARRIER, group_order

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(bool(java_ready()), reason=java_ready() or "ready"),
]

WAIT = 30.0
DAG_ID = "kstate_partition_increase"

#: The shared bounded wait (:func:`kstate_support.fixtures.wait_until`), up to ``WAIT`` unless told otherwise.
wait_until = functools.partial(shared_wait_until, timeout=WAIT)


@pytest.fixture(scope="module")
def java_client() -> Iterator[None]:
    """``clients/java`` built (and unit-tested by Surefire) once per source hash."""
    build()
    yield


def test_java_unit_tests_pass(java_client: None) -> None:
    """The build's Surefire run of ``clients/java``: murmur2 against the Kafka, Python and Node.js vectors,
    every record the client writes validated against ``docs/schemas/control`` (networknt), what a reader
    ignores, the barrier bookkeeping, rules 4.7 and 4.8's decisions (``NewPartitions``) and the producer's
    hold/release state machine."""
    totals = unit_test_results()
    assert totals["tests"] >= 17 and totals["failures"] == 0 and totals["errors"] == 0, totals


def brokers(kafka_config: dict[str, Any]) -> str:
    return str(kafka_config["bootstrap.servers"])


def group_is(admin: Any, group: str, state: ConsumerGroupState, members: int) -> bool:
    desc = describe(admin, group)
    return bool(desc.state == state and len(desc.members) == members)


def acks(hook: Any, prefix: str, epoch: int) -> dict[str, str]:
    """``{client: state}`` of the acknowledgements of ``epoch`` under ``prefix``."""
    watch = hook.watch()
    try:
        return {a.client: a.state for a in watch.acks(prefix, epoch)}
    finally:
        watch.close()


def test_java_consumers_pause_by_leaving_and_resume_on_kip848(
    kafka_config: dict[str, Any],
    admin: Any,
    make_topic: Callable[..., str],
    controller: Any,
    java_client: None,
) -> None:
    """Java ControlledConsumers on ``group.protocol=consumer`` (KIP-848), driven by the provider's control
    hook: on pause they commit what they processed and leave (the broker reports EMPTY) and ack ``paused``;
    one started while paused stays out; on resume the group is STABLE with all three, each acks ``running``,
    and the plan sees them as client-piece clients (their acknowledgements carry their Kafka client ids)."""
    topic = make_topic("java-pause", partitions=4)
    group = f"{topic}-g"
    total = 2000
    kfacts.write_keyed_json(kafka_config, topic, total)
    base = {
        "brokers": brokers(kafka_config),
        "groupId": group,
        "topics": [topic],
        "controlTopic": controller.control_topic,
        "groupProtocol": "consumer",
    }
    clients = [f"{group}-{i}" for i in range(3)]
    first = consumers({**base, "members": [{"clientId": c, "workMs": 4} for c in clients[:2]]}, "first")
    late = None
    try:
        wait_until(lambda: group_is(admin, group, ConsumerGroupState.STABLE, 2))
        wait_until(lambda: len(first.of("record")) >= 200)
        epoch = controller.pause([group], topic, issuer="test_java_client")
        wait_until(lambda: group_is(admin, group, ConsumerGroupState.EMPTY, 0), interval=0.01)
        for c in clients[:2]:
            first.wait(lambda e, c=c: e["event"] == "state" and e["c"] == c and e["state"] == "paused")
        wait_until(
            lambda: acks(controller, f"ack/{group}/", epoch) == dict.fromkeys(clients[:2], "paused"),
            interval=0.1,
        )
        before = first.of("record")
        assert 0 < len(before) < total, (
            "everything was consumed before the pause: the test would prove nothing"
        )
        upto: dict[int, int] = defaultdict(int)
        for e in before:
            upto[e["p"]] = max(upto[e["p"]], e["o"] + 1)
        # what was processed; elsewhere the start the members committed on assignment (rule 4.7: earliest, 0)
        expected = {p: upto.get(p, 0) for p in range(4)}
        assert kfacts.committed(admin, group, topic, 4) == expected, "the pause commits what was processed"

        late = consumers({**base, "members": [{"clientId": clients[2]}]}, "late")
        started = late.wait(lambda e: e["event"] == "started")
        assert started["state"] == "paused" and started["epoch"] == epoch
        wait_until(lambda: acks(controller, f"ack/{group}/", epoch).get(clients[2]) == "paused", interval=0.1)
        time.sleep(1.0)
        assert group_is(admin, group, ConsumerGroupState.EMPTY, 0), "a consumer started while paused joined"
        assert late.of("record") == [] and len(first.of("record")) == len(before)

        resume = controller.resume([group], topic, issuer="test_java_client")
        wait_until(lambda: group_is(admin, group, ConsumerGroupState.STABLE, 3))
        wait_until(
            lambda: acks(controller, f"ack/{group}/", resume) == dict.fromkeys(clients, "running"),
            interval=0.1,
        )
        members = {m.client_id for m in describe(admin, group).members}
        assert members == set(clients), "a member's Kafka client id is its acknowledgement's client"
        present = controller.client_piece_clients()[group]
        assert members <= present
        assert group_order("preserve", members, present)[0] == ORDER_BARRIER
        everything = lambda: {(e["p"], e["o"]) for app in (first, late) for e in app.of("record")}  # noqa: E731
        wait_until(lambda: len(everything()) >= total, timeout=60)
        wait_until(lambda: sum(kfacts.committed(admin, group, topic, 4).values()) == total, timeout=60)
    finally:
        codes = [first.stop(), late.stop() if late is not None else 0]
    assert codes == [0, 0], first.stderr() + (late.stderr() if late is not None else "")
    after = [e for app in (first, late) for e in app.of("record")][len(before) :]
    again = {(e["p"], e["o"]) for e in before} & {(e["p"], e["o"]) for e in after}
    assert not again, f"{len(again)} records processed before the pause were processed again after it"
    committed = kfacts.committed(admin, group, topic, 4)
    assert everything() == {(p, o) for p, n in committed.items() for o in range(n)}, "lost records"


def read_back(kafka_config: dict[str, Any], topic: str, partitions: int, expected: int) -> dict[Any, Any]:
    """``{(key, seq): partition}`` of every record of ``topic``."""
    consumer = Consumer({**kafka_config, "group.id": "kstate-test-reader", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: dict[Any, Any] = {}
    deadline = time.monotonic() + WAIT
    while len(out) < expected and time.monotonic() < deadline:
        for m in consumer.consume(1000, 0.2):
            if not m.error():
                value = json.loads(m.value())
                out[(value["key"], value["seq"])] = m.partition()
    consumer.close()
    assert len(out) == expected, f"read {len(out)} of {expected} records of {topic}"
    return out


# 8-10 s; make chaos. make test keeps the naive loss at a Java group (test_java_fleet, KIP-848) and under the
# classic protocol (test_kafka_12261: librdkafka; test_foreign_fleet: KafkaJS), as test_java_fleet's classic cells
@pytest.mark.chaos
def test_a_naive_increase_loses_records_of_a_plain_java_consumer(
    kafka_config: dict[str, Any], admin: Any, make_topic: Callable[..., str], java_client: None
) -> None:
    """The scenario, without the client piece: a plain Java producer (Kafka's default partitioner, metadata
    refreshed every 0.2 s) writes to the new partitions at once, and a plain Java consumer with
    ``auto.offset.reset=latest`` that finds them at its next metadata refresh starts there at the end:
    the records written in between are lost (KAFKA-12261)."""
    topic = make_topic("java-naive", partitions=4)
    group = f"{topic}-g"
    common = {"brokers": brokers(kafka_config), "controlled": False}
    member = {"clientId": f"{group}-0"}
    fleet = consumers(
        {
            **common,
            "groupId": group,
            "topics": [topic],
            "members": [member],
            "autoOffsetReset": "latest",
            "metadataMaxAgeMs": 5000,
        }
    )
    with fleet:
        fleet.wait(lambda e: e["event"] == "assigned" and len(e["assignment"].get(topic, [])) == 4)
        source = producer(
            {
                **common,
                "topic": topic,
                "clientId": f"{topic}-p",
                "keys": 100,
                "rate": 200,
                "metadataMaxAgeMs": 200,
                # it writes to the new partitions the moment they exist: not idempotent, so Kafka 4.4's
                # KAFKA-15591 cannot keep its first batch there retrying until the delivery timeout
                "idempotent": False,
            }
        )
        with source:
            wait_until(lambda: len(fleet.of("record")) > 50)
            admin.create_partitions([NewPartitions(topic, 6)])[topic].result(timeout=30)
            source.wait(lambda e: e["event"] == "sent" and e["p"] >= 4)
            fleet.wait(lambda e: e["event"] == "assigned" and len(e["assignment"].get(topic, [])) == 6)
            assert source.stop("stop") == 0, source.stderr()
        sent = {(e["key"], e["seq"]): e["p"] for e in source.of("sent")}
        old = {k for k, p in sent.items() if p < 4}
        wait_until(lambda: old <= {(e["key"], e["seq"]) for e in fleet.of("record")})
        time.sleep(1.0)  # the records on the new partitions that the consumer could still get
        assert fleet.stop() == 0, fleet.stderr()
    processed = {(e["key"], e["seq"]) for e in fleet.of("record")}
    lost = set(sent) - processed
    print(f"java naive: {len(lost)} of {len(sent)} lost, all on the new partitions")
    assert lost, "the naive increase lost nothing: the scenario would prove nothing"
    assert {sent[k] for k in lost} <= {4, 5}
    assert {p for p in sent.values()} == set(range(6)), (
        "the plain producer wrote to the new partitions at once"
    )


class CountSampler:
    """Samples the topic's partition count every 50 ms: when the increase created the partitions."""

    def __init__(self, admin: Any, topic: str, target: int) -> None:
        self.created_ms: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(admin, topic, target), daemon=True)
        self._thread.start()

    def _run(self, admin: Any, topic: str, target: int) -> None:
        while not self._stop.is_set() and self.created_ms is None:
            try:
                if kfacts.partition_count(admin, topic) >= target:
                    self.created_ms = time.time() * 1000
            except Exception:  # noqa: BLE001 - a sample that failed is taken again
                pass
            self._stop.wait(0.05)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


def test_java_clients_through_the_increase(
    kafka_config: dict[str, Any], admin: Any, make_topic: Callable[..., str], run_dag: Any, java_client: None
) -> None:
    """The provider's increase 4 -> 6 (``key_order=preserve``) through ``dag.test()`` under live keyed
    traffic (200 records/s over 200 keys after a 300-record burst) from a Java producer with the
    ControlledPartitioner, read by a group of two Java ControlledConsumers (range assignor; the member of the
    low partitions 4 ms per record, the other 1 ms): the producer stays on the old
    layout from the pin until the release (every record placed over 4, none on partitions 4-5, also while
    the topic had 6), then places over 6; the consumers paused and resumed; 0 lost, 0 reordered."""
    topic = make_topic("java-increase", partitions=4)
    group = f"{topic}-g"
    common = {"brokers": brokers(kafka_config), "controlTopic": DEFAULT_CONTROL_TOPIC}
    members = [{"clientId": f"{group}-0", "workMs": 4}, {"clientId": f"{group}-1", "workMs": 1}]
    fleet = consumers({**common, "groupId": group, "topics": [topic], "range": True, "members": members})
    source = producer(
        {**common, "topic": topic, "clientId": f"{topic}-producer", "keys": 200, "rate": 200, "burst": 300}
    )
    sampler = CountSampler(admin, topic, 6)
    with fleet, source:  # killed on the way out if a step failed
        try:
            started = source.wait(lambda e: e["event"] == "started")
            assert (started["n"], started["epoch"]) == (4, 0), started
            assigned = lambda: {e["c"] for e in fleet.of("assigned") if e["assignment"].get(topic)}  # noqa: E731
            wait_until(lambda: len(assigned()) == 2 and len(fleet.of("record")) > 50)
            dr = run_dag(
                DAG_ID, {"topic": topic, "partitions": 6, "consumer_groups": [group], "key_order": "preserve"}
            )
            assert dr.state == "success", {ti.task_id: ti.state for ti in dr.get_task_instances()}
            plan, window = (
                dr.get_task_instance(f"safe_partition_increase.{t}").xcom_pull(
                    task_ids=f"safe_partition_increase.{t}"
                )
                for t in ("plan", "pause_window")
            )
            source.wait(lambda e: e["event"] == "sent" and e["n"] == 6)
            time.sleep(1.0)
        finally:
            stopped = source.stop("stop")
            sampler.stop()
        assert stopped == 0, source.stderr()
        delivered = {(e["key"], e["seq"]) for e in source.of("sent")}
        try:
            wait_until(
                lambda: delivered <= {(e["key"], e["seq"]) for e in fleet.of("record")},
                timeout=60,
                interval=0.2,
            )
        finally:
            stopped = fleet.stop()
        assert stopped == 0, fleet.stderr()

    sent = source.of("sent")
    assert not source.of("failed"), source.of("failed")[:3]
    # the truth from every acknowledged record: what the broker holds is where the app says it wrote
    placed = read_back(kafka_config, topic, 6, len(sent))
    assert all(placed[(e["key"], e["seq"])] == e["p"] for e in sent), "the broker disagrees with the app"
    assert all(e["p"] == partition_for(e["key"].encode(), e["n"]) for e in sent), "not murmur2 % n"
    # in send order (the producer writes the keys round-robin: record i is key i % 200, its seq i // 200)
    counts = [e["n"] for e in sorted(sent, key=lambda e: e["seq"] * 200 + int(e["key"][1:]))]
    first_six = counts.index(6)
    assert set(counts[:first_six]) == {4} and set(counts[first_six:]) == {6}, (
        "the count went from 4 to 6, once"
    )
    on_new = [e for e in sent if e["p"] >= 4]
    assert on_new and {e["n"] for e in on_new} == {6}
    created = sampler.created_ms
    assert created is not None, "the sampler never saw 6 partitions"
    pinned = [e for e in sent if e["n"] == 4 and e["ts"] > created]
    assert len(pinned) > 50, f"only {len(pinned)} records were written while the topic had 6 and the pin held"
    assert {e["p"] for e in pinned} <= {0, 1, 2, 3}
    holds = [h for e in source.of("closed") for h in e["holds"]]
    assert len(holds) == 1 and not holds[0]["expired"], holds
    hold = holds[0]
    assert hold["heldAck"] is not None and hold["ended"] is not None and hold["partitions"] == 4, hold
    six = [e for e in sent if e["n"] == 6]
    assert min(e["t"] for e in six) >= hold["ended"], "a record was placed over 6 before the release"
    layouts = sorted({(e["n"], e["epoch"]) for e in sent})
    assert len(layouts) >= 2 and layouts[-1][0] == 6 and layouts[-1][1] > hold["epoch"], layouts

    # the consumers: paused by leaving, resumed; the barrier held and released
    for m in members:
        states = [e["state"] for e in fleet.of("state") if e["c"] == m["clientId"]]
        assert "paused" in states and states[-1] == "running", (m, states)
        assert states.index("paused") < len(states) - 1
    checker = OrderChecker()
    for e in fleet.of("record"):  # stdout order: the processing order of both members
        checker.record(e["key"], e["seq"])
    by_key: dict[str, set[int]] = defaultdict(set)
    for key, seq in delivered:
        by_key[key].add(seq)
    lost = checker.lost(SimpleNamespace(delivered=by_key))  # type: ignore[arg-type]
    last = {k: max(s) for k, s in by_key.items()}
    wrong_last = sum(1 for k, v in last.items() if checker.last.get(k) != v)
    passages = [p for e in fleet.of("closed") for p in e["passages"]]
    switch = window["topics"][topic]["switch"]
    print(
        "java increase:",
        {
            "written": len(delivered),
            "processed": checker.processed,
            "lost": lost,
            "reordered": len(checker.violations),
            "keys": len(last),
            "pinned_while_six": len(pinned),
            "held_ms": hold["ended"] - hold["started"],
            "blocked_ms": hold["blockedMs"],
            "passages": passages,
        },
    )
    assert plan["groups"][group]["key_order"] == "barrier", plan["groups"][group]
    assert switch["key_order"] == "preserve" and switch["producers_held"] and not switch["producers_missing"]
    assert switch["held_groups"] and not switch["relaxed_groups"], switch
    assert lost == 0
    assert len(checker.violations) == 0, checker.violations[:5]
    assert wrong_last == 0 and len(last) == 200
    held = [p for p in passages if p["firstHold"] is not None]
    assert held and all(p["released"] is not None for p in held), passages


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_java_consumers_take_new_partitions_at_once(
    kafka_config: dict[str, Any],
    admin: Any,
    make_topic: Callable[..., str],
    controller: Any,
    java_client: None,
    protocol: str,
) -> None:
    """Rules 4.7 and 4.8 (issue 41, consumers stay in their groups): two Java ControlledConsumers
    (``auto.offset.reset=latest``, metadata max age 5 minutes) on classic with the cooperative-sticky
    assignor, or on KIP-848. On joining they commit the log end of every partition on which the group had no
    offset (rule 4.7: the wrapper commits nothing else, nothing is handed out). The topic grows 4 -> 8 while
    they run and the controller publishes the ``pending`` barrier with ``partitions=8`` and ``grown_from=4`` (as
    the increase does): within 30 s the group has committed offset 0 on every new partition (rule 4.8, then
    4.7 at 0 without a position lookup), nobody was paused, no old partition was
    revoked, and a record written to a new partition afterwards is processed (nothing skipped)."""
    topic = make_topic(f"java-grow-{protocol}", partitions=4)
    group = f"{topic}-g"
    kfacts.write_keyed_json(kafka_config, topic, 400)
    clients = [f"{group}-{i}" for i in range(2)]
    config = {
        "brokers": brokers(kafka_config),
        "groupId": group,
        "topics": [topic],
        "controlTopic": controller.control_topic,
        "groupProtocol": protocol,
        "assignor": "cooperative-sticky",
        "autoOffsetReset": "latest",
        "members": [{"clientId": c} for c in clients],
    }
    with consumers(config, f"grow-{protocol}") as fleet:
        try:
            latest: dict[str, dict[str, list[int]]] = {}

            def held() -> dict[str, list[int]]:
                for e in fleet.of("assigned"):
                    latest[e["c"]] = e["assignment"]
                return {c: a.get(topic, []) for c, a in latest.items()}

            wait_until(lambda: group_is(admin, group, ConsumerGroupState.STABLE, 2))
            wait_until(
                lambda: sorted(p for ps in held().values() for p in ps) == [0, 1, 2, 3] and len(held()) == 2
            )
            # rule 4.7 on the old partitions: the log end (latest), committed though nothing was handed out
            wait_until(lambda: len(kfacts.committed(admin, group, topic, 4)) == 4)
            seeded = kfacts.committed(admin, group, topic, 4)
            assert sum(seeded.values()) == 400 and not fleet.of("record"), seeded
            before = held()
            mark = len(fleet.events)

            admin.create_partitions([NewPartitions(topic, 8)])[topic].result(timeout=30)
            epoch = controller.announce_barrier(
                topic, [group], issuer="test_java_client", partitions=8, grown_from=4
            )
            published = float(epoch)  # the record's time (the controller's wall clock before it wrote it)
            committed, took_ms = kfacts.new_partitions_taken(
                admin, group, topic, 4, 8, published, timeout=WAIT
            )
            read_grown_from = "grew from 4 to 8 partitions" in fleet.stderr()  # the last lines of their log
            assert {p: committed[p] for p in range(4, 8)} == dict.fromkeys(range(4, 8), 0)
            wait_until(lambda: sorted(p for ps in held().values() for p in ps) == list(range(8)))
            after = held()
            wait_until(
                lambda: (
                    acks(controller, f"ack-barrier/{topic}/{group}/", epoch)
                    == dict.fromkeys(clients, "pending")
                )
            )
            fresh = Producer(kafka_config)  # its metadata shows the new partitions
            for p in range(4, 8):
                fresh.produce(topic, partition=p, key=f"n{p}", value=json.dumps({"key": f"n{p}", "seq": p}))
            assert fresh.flush(30) == 0
            wait_until(lambda: {e["p"] for e in fleet.of("record")} >= set(range(4, 8)))
            events = fleet.events[mark:]  # up to the close (which revokes everything)
        finally:
            stopped = fleet.stop()
        assert stopped == 0, fleet.stderr()
    revoked = [
        e for e in events if e["event"] == "revoked" and any(p < 4 for p in e["revoked"].get(topic, []))
    ]
    paused = [e for e in fleet.of("state") if e["state"] == "paused"]
    print(
        f"java {protocol}: pending -> offset on the last new partition {took_ms:.0f} ms"
        f" (grown_from read: {read_grown_from});"
        f" assignment {before} -> {after}; revoked {[e['revoked'] for e in events if e['event'] == 'revoked']}"
    )
    assert took_ms < WAIT * 1000
    assert not paused, paused
    assert not revoked, f"old partitions were revoked: {revoked}"
    assert all(set(before[c]) <= set(after[c]) for c in clients), (before, after)
    assert sorted(e["p"] for e in fleet.of("record")) == [4, 5, 6, 7], "latest: only what was written after"
