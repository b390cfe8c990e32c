"""Java consumer groups stay in their groups while the topic grows (issue 41, items 1 and 3), through the
real DAG (``dag.test()`` of ``kstate_partition_increase``) on Apache Kafka 4.4 under live keyed traffic.

The consumers are the Java fleet's service (``support/java/.../fleet/Consumer.java``, kafka-clients 4.4, no
client piece) with ``--auto-commit true``: ``enable.auto.commit=true`` every 200 ms, so the client commits
the position of every partition it is assigned, a new partition no one wrote to included (offset 0,
measured in ``test_stay_evidence.py``). The request names the group in ``committing_groups``, so the plan
lets it stay (``stay: commits``); the producer is a ControlledProducer (``producer_drivers: ["control"]``),
kept on the old partitions until the group holds a committed offset on every new partition.

Per protocol: two members on ``group.protocol=consumer`` (KIP-848: the broker assigns the new partitions on
a member's heartbeat) and two on classic with ``CooperativeStickyAssignor``. A classic Java member finds
new partitions only at its metadata refresh (``metadata.max.age.ms``, 5 minutes by default; set to 1 s
here, :data:`CLASSIC_METADATA_MS`): the producer keeps writing to the old partitions until then, so the
wait costs no one anything but the run's time. Per key order: a plain Java group cannot hold at the
key-order barrier, so ``relax`` switches the producer at once (keys that move may be processed out of
order: reported, not asserted), and ``preserve`` drains the group instead (``key_order: drained``: once
the group holds its positions the producer is held, the group consumes the old partitions to their ends,
then the producer switches): nothing reordered, and the producer's hold is the consumers' largest gap.

The scenario first (:func:`test_a_naive_increase_loses_records_at_the_same_java_group`): the same group
grown by a plain ``CreatePartitions`` under a plain producer loses records on the new partitions (also
``test_java_fleet.py`` with manual commits, ``test_kafka_12261.py``, ``test_kip848.py``).

Asserted: the run succeeds; the group is marked ``stay: commits``; the window's ``stayed`` lists it as
positioned with nothing fallen back and no stray record; the group holds a committed offset on all 8
partitions; each Java member kept its member id and never stopped, lost its partitions or had an old
partition revoked (its ``.events.jsonl``); every record delivered after the warm-up was processed (the
fleet's :func:`~kstate_support.fleet.judge`) and each new partition was read from offset 0. Each member's
largest gap in processing and the longest wait of a delivered record during the run are printed beside the
same over the seconds before it, with the producer's own largest gap in deliveries (a gap of the consumers
that is the producer's).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from kstate_support import ROOT
from kstate_support import kafka as kfacts
from kstate_support.fleet import judge, read_lines, start_group, warm_up
from kstate_support.increase_runs import DAG_ID, grow, states, xcom
from kstate_support.java_services import JavaFleet
from kstate_support.traffic import wait_until

pytestmark = pytest.mark.integration

#: The classic members' metadata refresh: a classic Java member (its group leader) sees the new partitions
#: at its next refresh only (``metadata.max.age.ms``, 5 minutes by default), then the group rebalances.
CLASSIC_METADATA_MS = 1000
#: The members' metadata refresh in the naive scenario (``test_java_fleet.py``'s, still far below the default
#: 5 minutes), and how many naive increases may win the race before the scenario counts as not reproduced.
NAIVE_MEMBER_METADATA_MS = 5000
NAIVE_TRIES = 3
#: The Java cooperative-sticky assignor of the classic cell.
COOPERATIVE = "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"
#: Seconds of traffic before the run, the baseline of the members' gaps in processing.
BASELINE_S = 5.0
OLD, NEW = 4, 8


#: The producer, in a process of its own (``python -c PRODUCER CONFIG TOPIC OUT KIND METADATA_MS``): a
#: ControlledProducer (``controlled``: the client piece, pinned and switched by the run) or a plain
#: confluent-kafka producer (``plain``: murmur2 over the partitions its metadata shows, for the naive increase)
#: writing 97 keys round robin at 200 records/s, values
#: ``{"key": "k0042", "seq": 7}`` (a key's seq counts from 0), each delivered record logged to OUT as the Java
#: fleet's producer logs it (``{"key","seq","p","o","t"}``, ``t`` wall-clock ms), so
#: :func:`~kstate_support.fleet.judge` reads it. Not a thread of the test: ``dag.test()`` runs the tasks in
#: this process, and a producer thread sharing its interpreter stalls with it (up to 2.4 s measured: gaps
#: that were the producer's, not the consumers').
PRODUCER = r"""
import json, signal, sys, threading, time
from confluent_kafka import Producer
from airflow_provider_kstate.client_piece.producer import ControlledProducer

config, topic, out, kind, metadata_ms = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
keys, rate = 97, 200.0
halt = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: halt.set())
lines = open(out, "a", buffering=1)

def delivered(err, msg):
    if err is not None:
        lines.write(json.dumps({"error": str(err)}) + "\n")
        return
    value = json.loads(msg.value())
    t = time.time() * 1000
    lines.write(json.dumps({"key": value["key"], "seq": value["seq"], "p": msg.partition(), "o": msg.offset(), "t": t}) + "\n")

settings = {**config, "linger.ms": 5, "topic.metadata.refresh.interval.ms": metadata_ms}
if kind == "controlled":
    producer = ControlledProducer(settings, [topic], check_interval=0.1)
else:
    producer = Producer({**settings, "partitioner": "murmur2_random"})
n, start = 0, time.monotonic()
while not halt.is_set():
    key = f"k{n % keys:04d}"
    value = json.dumps({"key": key, "seq": n // keys})
    producer.produce(topic, value=value.encode(), key=key.encode(), on_delivery=delivered)
    producer.poll(0)
    n += 1
    delay = start + n / rate - time.monotonic()
    if delay > 0:
        time.sleep(delay)
producer.flush(30)
if kind == "controlled":
    producer.close()
lines.close()
"""


class ProducerProcess:
    """:data:`PRODUCER` in a process of its own; :meth:`delivered` reads what it logged."""

    def __init__(
        self, config: dict[str, Any], topic: str, out: Path, controlled: bool = True, metadata_ms: int = 500
    ) -> None:
        self.out = out
        self._log = out.with_suffix(".log").open("w")
        kind = "controlled" if controlled else "plain"
        self.proc = subprocess.Popen(
            [sys.executable, "-c", PRODUCER, json.dumps(config), topic, str(out), kind, str(metadata_ms)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=self._log,
        )

    def lines(self) -> list[dict[str, Any]]:
        return read_lines(self.out)

    @property
    def delivered(self) -> list[dict[str, Any]]:
        return [r for r in self.lines() if "error" not in r]

    @property
    def errors(self) -> list[str]:
        return [r["error"] for r in self.lines() if "error" in r]

    def partitions(self) -> set[int]:
        return {d["p"] for d in self.delivered}

    def stop(self) -> None:
        """SIGTERM (it flushes and exits), bounded; idempotent."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()


def _ms() -> float:
    return time.time() * 1000


def _members(admin: Any, group: str) -> dict[str, str]:
    """The broker's members of ``group``: client id -> member id."""
    desc = admin.describe_consumer_groups([group])[group].result(timeout=10)
    return {m.client_id: m.member_id for m in desc.members}


def _largest_gap(times: list[float], start: float, end: float) -> float:
    """The longest interval (s) between ``start`` and ``end`` (wall-clock ms) without one of ``times``."""
    inside = [start, *sorted(t for t in times if start <= t <= end), end]
    return max(b - a for a, b in zip(inside, inside[1:], strict=False)) / 1000


def _latency(
    delivered: list[dict[str, Any]], processed: list[dict[str, Any]], start: float, end: float
) -> float:
    """The longest (s) a record delivered between ``start`` and ``end`` and processed by this member waited
    for its first processing: the member's own delay, whatever the producer did."""
    at = {(d["key"], d["seq"]): d["t"] for d in delivered if start <= d["t"] <= end}
    first: dict[tuple[str, int], float] = {}
    for r in processed:
        key = (r["key"], r["seq"])
        if key in at:
            first[key] = min(first.get(key, r["t"]), r["t"])
    return max((t - at[k] for k, t in first.items()), default=0.0) / 1000


def _left(fleet: JavaFleet, name: str, since: float) -> list[dict[str, Any]]:
    """Events of ``name`` after ``since`` (ms) that take it out of its group or take partitions from it: a
    stop, an exit, a lost assignment, a revocation of an old partition, a new member id."""
    events = fleet.events(name)
    ids = {e["member"] for e in events if e["ev"] == "join" and e["t"] < since}
    return [
        e
        for e in events
        if e["t"] >= since
        and (
            e["ev"] in ("stop", "exit", "lost")
            or (e["ev"] == "rebalancing" and any(p < OLD for p in e.get("partitions", [])))
            or (e["ev"] == "join" and e["member"] not in ids)
        )
    ]


def _caught_up(fleet: JavaFleet, producer: ProducerProcess, group: str) -> bool:
    last: dict[int, int] = {}
    for d in producer.delivered:
        last[d["p"]] = max(last.get(d["p"], -1), d["o"])
    done: dict[int, int] = {}
    for r in fleet.lines(*fleet.groups[group]):
        done[r["p"]] = max(done.get(r["p"], -1), r["o"])
    return all(done.get(p, -1) >= o for p, o in last.items())


def _java_group(
    fleet: JavaFleet,
    admin: Any,
    topic: str,
    protocol: str,
    metadata_ms: int | None = None,
    prefix: str = "java",
) -> tuple[str, list[str]]:
    """Start two latest-reset Java members of one group on ``topic`` with ``--auto-commit true`` (classic:
    cooperative-sticky); return the group, the names.

    :param metadata_ms: the members' ``metadata.max.age.ms`` (default: :data:`CLASSIC_METADATA_MS` under
        classic, the fleet's 0.5 s under KIP-848, where the broker's heartbeat brings new partitions)."""
    group = f"{topic}-g"
    options: dict[str, Any] = {"group_protocol": protocol, "auto_commit": True, "commit_interval_ms": 200}
    if protocol == "classic":
        options |= {"assignor": COOPERATIVE, "metadata_max_age_ms": metadata_ms or CLASSIC_METADATA_MS}
    elif metadata_ms:
        options["metadata_max_age_ms"] = metadata_ms
    names = [f"{prefix}-{protocol}-m{i}" for i in range(2)]
    for name in names:
        fleet.consumer(name, topic, group, **options)
    start_group(fleet, admin, group)
    return group, names


def _finish(fleet: JavaFleet, producer: ProducerProcess, group: str, drain: float = 30) -> None:
    """Once the producer wrote to all 8 partitions and the group holds them: a second of traffic, the producer
    stopped, and the group given ``drain`` seconds to process what it delivered (a group that skipped
    records never catches up on those: the judge counts them)."""
    assert wait_until(lambda: producer.partitions() == set(range(NEW)), 30), "never wrote to all 8"
    assert wait_until(lambda: fleet.assigned(group) == set(range(NEW)), 30), "never took all 8"
    time.sleep(1.0)  # traffic on the eight partitions
    producer.stop()
    wait_until(lambda: _caught_up(fleet, producer, group), drain)


def _first_offsets(fleet: JavaFleet, names: list[str]) -> dict[int, int]:
    """The first offset the group processed on each new partition (0: nothing there was skipped)."""
    first: dict[int, int] = {}
    for r in fleet.lines(*names):
        if r["p"] >= OLD:
            first[r["p"]] = min(first.get(r["p"], r["o"]), r["o"])
    return dict(sorted(first.items()))


@pytest.mark.chaos  # the scenario, for both protocols also in test_java_fleet.py (make chaos)
@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_a_naive_increase_loses_records_at_the_same_java_group(
    protocol: str, admin: Any, kafka_config: dict[str, Any], make_topic: Any, java_fleet: JavaFleet
) -> None:
    """The scenario first: the same auto-committing Java group and the same traffic from a plain producer,
    grown 4 -> 8 by a plain ``CreatePartitions``. The producer writes to the new partitions at its next
    metadata refresh (0.1 s); the members get them later (classic: the leader's refresh, then a rebalance;
    KIP-848: the broker's heartbeat, 1 s on the test broker) and start them at their end (latest): records
    lost, on new partitions only. The members refresh their metadata every 5 s here, as in
    ``test_java_fleet.py`` (5 minutes by default).

    A race, so up to :data:`NAIVE_TRIES` tries on fresh topics until one loses. Measured here: with the
    members refreshing every 0.5 s (KIP-848) or 1 s (classic) they won it often (KIP-848: 4 of 5 tries lost
    nothing, with the producer at 0.1 or 0.5 s; classic: 1 of 3); at 5 s every try lost. The same with manual
    commits: ``test_java_fleet.py``."""
    tries = []
    for attempt in range(NAIVE_TRIES):
        topic = make_topic(f"stay-java-naive{attempt}-{protocol}", partitions=OLD)
        group, names = _java_group(
            java_fleet, admin, topic, protocol, metadata_ms=NAIVE_MEMBER_METADATA_MS, prefix=f"naive{attempt}"
        )
        out = java_fleet.run_dir / f"producer-naive{attempt}.jsonl"
        producer = ProducerProcess(kafka_config, topic, out, controlled=False, metadata_ms=100)
        try:
            since = warm_up(java_fleet, group)
            grow(admin, topic, NEW)
            _finish(java_fleet, producer, group, drain=10)
        finally:
            producer.stop()
            java_fleet.stop(*names)
        verdict = judge(producer.delivered, java_fleet.lines(*names), since=since)
        tries.append(verdict)
        print(
            f"NAIVE java {protocol} try {attempt + 1}: {verdict.summary()}; first offsets processed on the "
            f"new partitions {_first_offsets(java_fleet, names)}"
        )
        if verdict.lost:
            break
    assert tries[-1].lost, f"{len(tries)} naive increases lost nothing: {[v.summary() for v in tries]}"
    assert set(tries[-1].lost_by_partition) <= set(range(OLD, NEW)), tries[-1].summary()


@pytest.mark.parametrize(
    ("protocol", "key_order"),
    [
        ("consumer", "relax"),
        # the three other cells: make chaos (make test keeps one; test_stay.py keeps classic and preserve)
        pytest.param("classic", "preserve", marks=pytest.mark.chaos),
        pytest.param("consumer", "preserve", marks=pytest.mark.chaos),
        pytest.param("classic", "relax", marks=pytest.mark.chaos),
    ],
)
def test_java_auto_committing_group_stays_in_its_group_while_the_topic_grows(
    protocol: str,
    key_order: str,
    admin: Any,
    kafka_config: dict[str, Any],
    make_topic: Any,
    run_dag: Any,
    java_fleet: JavaFleet,
) -> None:
    topic = make_topic(f"stay-java-{protocol}", partitions=OLD)
    group, names = _java_group(java_fleet, admin, topic, protocol)
    members_before = _members(admin, group)
    producer = ProducerProcess(kafka_config, topic, java_fleet.run_dir / "producer.jsonl")
    try:
        since = warm_up(java_fleet, group)
        time.sleep(BASELINE_S)
        started = _ms()
        dr = run_dag(
            DAG_ID,
            {
                "topic": topic,
                "partitions": NEW,
                "consumer_groups": [group],
                "consumers_stay": "auto",
                "producer_drivers": ["control"],
                "committing_groups": [group],
                "key_order": key_order,
            },
        )
        ended = _ms()
        assert dr.state == "success", states(dr)
        plan = xcom(dr, "plan")["groups"][group]
        window = xcom(dr, "pause_window")
        released = xcom(dr, "start_producers")
        stayed = window["stayed"]
        committed = kfacts.committed(admin, group, topic, NEW)
        _finish(java_fleet, producer, group)
        members_after = _members(admin, group)
        left = {n: _left(java_fleet, n, started) for n in names}
    finally:
        producer.stop()
    delivered = producer.delivered
    verdict = judge(delivered, java_fleet.lines(*names), since=since)
    base = started - BASELINE_S * 1000
    figures = {
        n: {
            "gap_s": round(_largest_gap([r["t"] for r in java_fleet.lines(n)], started, ended), 3),
            "gap_before_s": round(_largest_gap([r["t"] for r in java_fleet.lines(n)], base, started), 3),
            "latency_s": round(_latency(delivered, java_fleet.lines(n), started, ended), 3),
            "latency_before_s": round(_latency(delivered, java_fleet.lines(n), base, started), 3),
        }
        for n in names
    }
    produced_gap = _largest_gap([d["t"] for d in delivered], started, ended)
    print(
        f"STAY java {protocol} {key_order}: {verdict.summary()}; run {(ended - started) / 1000:.1f} s; positions after "
        f"{stayed.get('positioned_after_s')} s; per member (largest gap in processing and longest wait of a "
        f"delivered record, during the run and over the {BASELINE_S:.0f} s before it) {figures}; the "
        f"producer's largest gap in deliveries during the run {produced_gap:.3f} s; plan stay "
        f"{plan.get('stay')!r} ({plan.get('stay_reason')}); timings {window.get('timings')}; committed {committed}; key order {plan.get('key_order')}; "
        f"producers {window.get('drivers', {}).get('producers_stopped')} -> {released}"
    )

    assert plan.get("stay") == "commits", plan
    assert stayed["positioned"] == [group] and stayed["fell_back"] == [], stayed
    assert stayed["stray_records"] == 0, stayed
    assert window["timings"]["live_window_s"] == 0.0, window["timings"]
    assert set(committed) == set(range(NEW)), f"committed offsets only on {sorted(committed)}"
    assert members_after == members_before, f"the members changed: {members_before} -> {members_after}"
    assert left == {n: [] for n in names}, f"a member left its group or lost old partitions: {left}"
    assert not producer.errors, producer.errors[:5]
    assert not verdict.lost, verdict.summary()
    first = _first_offsets(java_fleet, names)
    assert first == dict.fromkeys(range(OLD, NEW), 0), f"new partitions not read from 0: {first}"
    if key_order == "preserve":
        assert plan.get("key_order") == "drained", plan
        assert released["drained_groups"] == [group] and not released["start_failures"], released
        assert verdict.keys_out_of_order == 0, verdict.summary()
