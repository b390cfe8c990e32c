"""Every kind of consumer stays in its group in one run while the topic grows (issue 41, item 3), through the
real DAG (``dag.test()`` of ``kstate_partition_increase``) on Apache Kafka 4.4 under live keyed traffic.

One topic, 4 -> 8 partitions, written by one ControlledProducer (:class:`~kstate_support.stay_fleet.ProducerProcess`:
97 keys round robin at 200 records/s, a per-key ``seq``, every delivered record logged), read at once by
five groups, each latest-reset:

* ``py848``: two Python ControlledConsumers on ``group.protocol=consumer`` (KIP-848), in a process of their
  own (:class:`~kstate_support.stay_fleet.ClientPieceProcess`): ``stay: client-piece``, held at the key-order
  barrier;
* ``java848``: two Java members (kafka-clients 4.4, the Java fleet's service) on ``group.protocol=consumer``
  with ``enable.auto.commit=true``, named in ``committing_groups``: ``stay: commits``, drained (a plain Java
  consumer cannot hold at the barrier: once every group holds its positions the producer is held until the
  group consumed the old partitions to their ends);
* ``javaclassic``: the same on the classic protocol with ``CooperativeStickyAssignor`` (metadata refresh
  1 s: a classic member finds new partitions only then);
* ``node``: two Node.js (KafkaJS 2.2.4) ControlledConsumers of ``clients/node`` in one process
  (``stay: client-piece``, held at the barrier; KafkaJS's assignor is eager, so every partition moves at its
  rejoin: the members stay, their partitions do not);
* ``offline``: committed offsets, no members: seeded at 0 on every new partition.

The request: ``consumers_stay=auto``, ``producer_drivers=["control"]``, ``committing_groups`` the two Java
groups, ``key_order=preserve``.

Asserted, from the truth (every record the producer logged as delivered after every group processed live
traffic on every old partition): per live group 0 lost, 0 keys reordered (processing order across its
members), every new partition read from offset 0; the plan marks each live group ``stay`` (client-piece or
commits) and the offline one not; the window's ``stayed`` lists the four live groups positioned, nothing fallen
back, no stray record, no live window; the switch held the two client-piece groups at the barrier and drained
the two Java groups; every group (the offline one at 0 on the new partitions) holds a committed offset on all 8;
no member left: the same member ids on the broker before and after, no pause commanded or acknowledged on the
control topic, no ``paused`` state (client-piece groups), no revocation of an old partition (Python KIP-848 and
both Java groups: their callbacks and events), no stop, exit, lost assignment or new member id (Java).

Printed, per member: its largest gap in processing and the longest wait of a delivered record, around the run
(from the run's start to a second of traffic on the 8 partitions after it) and over the
:data:`BASELINE_S` seconds before it, with the producer's largest gap in deliveries (its hold) and the run's
time. Only one thing is asserted of them: every member processed records after the run (none was left idle).
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupState
from kstate_support import kafka as kfacts
from kstate_support.fleet import judge
from kstate_support.increase_runs import DAG_ID, states, xcom
from kstate_support.java_services import JavaFleet
from kstate_support.node import consumers, node_ready
from kstate_support.stay_fleet import (
    ClientPieceProcess,
    ProducerProcess,
    caught_up,
    control_records,
    first_offsets,
    group_members,
    java_group,
    largest_gap,
    latency,
    left_group,
    offline_group,
    stable,
)
from kstate_support.traffic import wait_until

from airflow_provider_kstate.client_piece.protocol import DEFAULT_CONTROL_TOPIC

pytestmark = [
    pytest.mark.integration,
    pytest.mark.chaos(
        reason="issue 41 item 3: every kind of consumer stays in one run (Python KIP-848, Java KIP-848 and "
        "classic cooperative-sticky, Node.js, offline); each kind alone: test_stay, test_stay_java, "
        "test_stay_node"
    ),
    pytest.mark.skipif(bool(node_ready()), reason=node_ready() or "ready"),
]

OLD, NEW = 4, 8
#: Seconds of traffic before the run, the baseline of the members' gaps in processing.
BASELINE_S = 5.0
#: Seconds of traffic on the 8 partitions after the run, inside the measured span.
AFTER_S = 1.0


def _ms() -> float:
    return time.time() * 1000


def _partitions(lines: list[dict[str, Any]], since: float = 0) -> set[int]:
    return {r["p"] for r in lines if r["t"] >= since}


def _grow(run_dag: Any, conf: dict[str, Any]) -> dict[str, Any]:
    """Run the DAG with ``conf``; return its state, its tasks' states and the XComs the proof reads (plain
    data: the DagRun is not kept in the test's frame, which a failure's traceback keeps to the session's end)."""
    dr = run_dag(DAG_ID, conf)
    out: dict[str, Any] = {"state": dr.state, "states": states(dr)}
    if dr.state == "success":
        out |= {task: xcom(dr, task) for task in ("plan", "pause_window", "start_producers")}
    return out


class _Readers:
    """What each live group processed, by group or by member (``{"key", "seq", "p", "o", "t"}`` lines)."""

    def __init__(
        self,
        python: ClientPieceProcess,
        node: Any,
        java: JavaFleet,
        members: dict[str, list[str]],
    ) -> None:
        self.python, self.node, self.java, self.members = python, node, java, members

    def processed(self, group: str) -> list[dict[str, Any]]:
        """What ``group`` processed so far (in processing order per member; :func:`judge` orders by ``t``)."""
        if group == self.python.group:
            return self.python.lines()
        if group in self.java.groups:
            return self.java.lines(*self.members[group])
        return self.node.of("record")

    def by_member(self, group: str, member: str) -> list[dict[str, Any]]:
        if group in self.java.groups:
            return self.java.lines(member)
        return [r for r in self.processed(group) if r["c"] == member]


def _print_figures(
    topic: str,
    read: _Readers,
    delivered: list[dict[str, Any]],
    span: tuple[float, float, float],
    verdicts: dict[str, Any],
    plan: dict[str, Any],
    firsts: dict[str, dict[int, int]],
) -> None:
    """Per group its verdict, per member its largest gap in processing and longest wait of a delivered record
    over the :data:`BASELINE_S` seconds before the run and around it (``span``: the run's start, the end of the
    run, the end of the measured traffic after it), in wall-clock ms."""
    started, ended, around = span
    base = started - BASELINE_S * 1000
    sent = [d["t"] for d in delivered]
    print(
        f"STAY ALL: run {(ended - started) / 1000:.1f} s; the producer's largest gap in deliveries before / "
        f"around the run {largest_gap(sent, base, started):.3f} / {largest_gap(sent, started, around):.3f} s"
    )
    for group, names in read.members.items():
        short = group.removeprefix(f"{topic}-")
        print(
            f"STAY ALL {short}: {verdicts[group].summary()}; plan stay {plan[group].get('stay')!r}, key order "
            f"{plan[group].get('key_order')}; first offsets on the new partitions {firsts[group]}"
        )
        for m in names:
            lines = read.by_member(group, m)
            times = [r["t"] for r in lines]
            print(
                f"STAY ALL {short} {m}: largest gap in processing before {largest_gap(times, base, started):.3f} "
                f"s, around the run {largest_gap(times, started, around):.3f} s; longest wait of a delivered "
                f"record before {latency(delivered, lines, base, started):.3f} s, around "
                f"{latency(delivered, lines, started, around):.3f} s"
            )


def _python_left(python: ClientPieceProcess, since: float, until: float) -> list[dict[str, Any]]:
    """The Python members' events between ``since`` and ``until`` (ms; their close at the end revokes
    everything) that take one out of its group or take an old partition from it: a pause, a lost assignment,
    a revocation of an old partition."""
    return [
        e
        for e in python.events()
        if since <= e["t"] <= until
        and (
            (e["ev"] == "state" and e["state"] == "paused")
            or e["ev"] == "lost"
            or (e["ev"] == "revoke" and any(p < OLD for p in e["partitions"]))
        )
    ]


def test_every_kind_of_consumer_stays_in_its_group_in_one_run(
    kafka_config: dict[str, Any],
    admin: Any,
    make_topic: Any,
    run_dag: Any,
    java_fleet: JavaFleet,
    tmp_path: Any,
) -> None:
    topic = make_topic("stay-all", partitions=OLD)
    py848, java848, javaclassic, node, offline = (
        f"{topic}-{k}" for k in ("py848", "java848", "javaclassic", "node", "offline")
    )
    live = [py848, java848, javaclassic, node]
    java_groups = sorted([java848, javaclassic])
    held_groups = sorted([py848, node])
    # the groups' coordinator loaded before any member joins (a fresh broker's __consumer_offsets: see
    # test_stay_node.py), then the offline group: offsets at 0 on the old partitions, no members
    assert group_members(admin, node) == (ConsumerGroupState.DEAD.name, {})
    offline_group(kafka_config, topic, offline)
    node_clients = [f"{node}-{i}" for i in range(2)]
    node_fleet = consumers(
        {
            "brokers": str(kafka_config["bootstrap.servers"]).split(","),
            "controlTopic": DEFAULT_CONTROL_TOPIC,
            "groupId": node,
            "topics": [topic],
            "fromBeginning": False,
            "members": [{"clientId": c} for c in node_clients],
        },
        "stay-all-node",
    )
    python = ClientPieceProcess(kafka_config, topic, py848, tmp_path / "python", protocol="consumer")
    producer: ProducerProcess | None = None
    with node_fleet, contextlib.closing(python):  # both ended on the way out if a step failed
        try:
            _, j848 = java_group(java_fleet, admin, topic, "consumer", prefix="all", group=java848)
            _, jclassic = java_group(java_fleet, admin, topic, "classic", prefix="all", group=javaclassic)
            assert wait_until(lambda: stable(admin, node, 2), 90), (
                group_members(admin, node),
                node_fleet.events[-10:],
                node_fleet.stderr(),
            )
            assert wait_until(lambda: stable(admin, py848, 2), 60), (
                group_members(admin, py848),
                python.log(),
            )
            read = _Readers(
                python,
                node_fleet,
                java_fleet,
                {py848: python.clients, java848: j848, javaclassic: jclassic, node: node_clients},
            )
            processed, by_member, members = read.processed, read.by_member, read.members
            producer = ProducerProcess(kafka_config, topic, tmp_path / "producer.jsonl")
            begun = _ms()
            # live traffic processed on every old partition by every group, and by every member: loss is
            # counted from here (a latest-reset member skips what was written before it had a position)
            assert wait_until(
                lambda: (
                    all(_partitions(processed(g), begun) == set(range(OLD)) for g in live)
                    and all(by_member(g, m) for g in live for m in members[g])
                ),
                60,
            ), {g: sorted(_partitions(processed(g), begun)) for g in live}
            since = _ms()
            time.sleep(BASELINE_S)
            before = {g: group_members(admin, g) for g in live}
            assert all(state == ConsumerGroupState.STABLE.name for state, _ in before.values()), before
            started = _ms()
            run = _grow(
                run_dag,
                {
                    "topic": topic,
                    "partitions": NEW,
                    "consumer_groups": [*live, offline],
                    "consumers_stay": "auto",
                    "producer_drivers": ["control"],
                    "committing_groups": java_groups,
                    "key_order": "preserve",
                },
            )
            ended = _ms()
            assert run["state"] == "success", run["states"]
            plan, window, released = run["plan"]["groups"], run["pause_window"], run["start_producers"]
            committed = {g: kfacts.committed(admin, g, topic, NEW) for g in [*live, offline]}
            assert wait_until(lambda: producer.partitions() == set(range(NEW)), 30), "never wrote to all 8"
            assert wait_until(
                lambda: all(_partitions(processed(g), started) >= set(range(OLD, NEW)) for g in live), 60
            ), {g: sorted(_partitions(processed(g), started)) for g in live}
            time.sleep(AFTER_S)  # traffic on the eight partitions
            around = _ms()
            after = {g: group_members(admin, g) for g in live}
        finally:
            if producer is not None:
                producer.stop()
        delivered = producer.delivered
        try:
            wait_until(lambda: all(caught_up(delivered, processed(g)) for g in live), 60)
        finally:
            closed = node_fleet.stop()
            python_rc = python.stop()
    assert closed == 0, node_fleet.stderr()
    assert python_rc == 0, python.log()

    # -- the figures, printed before anything is asserted -------------------------------------------------
    verdicts = {g: judge(delivered, processed(g), since=since) for g in live}
    firsts = {g: first_offsets(processed(g), OLD) for g in live}
    _print_figures(topic, read, delivered, (started, ended, around), verdicts, plan, firsts)
    stayed = window["stayed"]
    switch = window["topics"][topic]["switch"]
    print(f"STAY ALL: positions after {stayed.get('positioned_after_s')} s; timings {window.get('timings')}")

    # -- the plan and the run's own account --------------------------------------------------------------
    assert {g: plan[g].get("stay") for g in live} == {
        py848: "client-piece",
        java848: "commits",
        javaclassic: "commits",
        node: "client-piece",
    }, {g: (plan[g].get("stay"), plan[g].get("stay_reason")) for g in plan}
    assert not plan[offline].get("stay"), plan[offline]
    assert {g: plan[g].get("key_order") for g in live} == {
        py848: "barrier",
        java848: "drained",
        javaclassic: "drained",
        node: "barrier",
    }, {g: (plan[g].get("key_order"), plan[g].get("key_order_reason")) for g in plan}
    assert sorted(stayed["positioned"]) == sorted(live) and stayed["fell_back"] == [], stayed
    assert stayed["stray_records"] == 0, stayed
    assert window["timings"]["live_window_s"] == 0.0, window["timings"]
    assert sorted(switch["held_groups"]) == held_groups and not switch["relaxed_groups"], switch
    assert sorted(switch["drain"]["groups"]) == java_groups, switch
    assert sorted(released["drained_groups"]) == java_groups and not released["start_failures"], released

    # -- positions: every group, the offline one seeded at 0 on every new partition ----------------------
    for g in [*live, offline]:
        assert set(committed[g]) == set(range(NEW)), f"{g}: committed offsets only on {sorted(committed[g])}"
    assert {p: committed[offline][p] for p in range(OLD, NEW)} == dict.fromkeys(range(OLD, NEW), 0), committed

    # -- nobody left ---------------------------------------------------------------------------------------
    ids = {g: (before[g][1], after[g][1]) for g in live}
    assert all(b == a for b, a in ids.values()), f"the members changed (before, after): {ids}"
    for g in (py848, node):
        control = control_records(kafka_config, g, set(members[g]))
        pauses = [v for v in control if v["kind"] == "command" and v.get("command") == "pause"]
        paused_acks = [v for v in control if v["kind"] == "ack" and v.get("state") == "paused"]
        assert not pauses and not paused_acks, (g, pauses, paused_acks)
    assert not [e for e in node_fleet.of("state") if e["state"] == "paused"]
    left_python = _python_left(python, started, around)
    assert left_python == [], f"a Python member left its group or lost old partitions: {left_python}"
    left_java = {n: left_group(java_fleet, n, started, OLD) for n in j848 + jclassic}
    assert left_java == {n: [] for n in left_java}, (
        f"a Java member left its group or lost old partitions: {left_java}"
    )

    # -- the truth: nothing lost, nothing reordered, each new partition read from 0 ----------------------
    assert not producer.errors, producer.errors[:5]
    for g in live:
        assert not verdicts[g].lost, f"{g}: {verdicts[g].summary()}"
        assert verdicts[g].keys_out_of_order == 0, (
            f"{g}: {verdicts[g].summary()} {verdicts[g].violations[:5]}"
        )
        assert firsts[g] == dict.fromkeys(range(OLD, NEW), 0), (
            f"{g}: new partitions not read from 0: {firsts[g]}"
        )
        for m in members[g]:
            assert any(r["t"] > ended for r in by_member(g, m)), f"{m} processed nothing after the run"
