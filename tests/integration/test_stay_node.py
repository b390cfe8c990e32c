"""A Node.js (KafkaJS 2.2.4) group stays in its group while the topic grows (issue 41, item 3), through the
real DAG (``dag.test()`` of ``kstate_partition_increase``) on Apache Kafka 4.4 under live keyed traffic.

The group is two ControlledConsumers of ``clients/node`` in one process (``test/apps/consume.js``: one clock
for the processing order of both members), latest reset (``fromBeginning: false``), KafkaJS's default
assigner; the topic's producer is the Node ControlledProducer (``test/apps/produce.js``, a process of its
own, 97 keys round robin at 150 records/s, a per-key ``seq``). Every live member acknowledged on the
control topic, so the plan lets the group stay (``stay: client-piece``); with ``producer_drivers:
["control"]`` the producer is pinned to the old layout until the group holds a committed offset on every new
partition: the members take the new partitions at the ``pending`` barrier carrying ``partitions`` (control
protocol rule 8: they refresh their metadata, KafkaJS's next fetch rejoins) and commit their start there
(rule 7: offset 0, nothing was written there yet). With ``key_order: "preserve"`` they then hold at the
key-order barrier inside their group, and the producer switches.

Asserted: the run succeeds; the plan marks the group ``stay: client-piece``; the window's ``stayed`` lists it
as positioned, nothing fallen back, no stray record, no live window; the group holds a committed offset on
all 8 partitions; no pause was commanded to the group and no member paused (its ``state`` events, its
acknowledgements on the control topic); the members kept their member ids; every record the producer
delivered was processed (0 lost), each new partition from offset 0, and no key was processed out of order
(:class:`~kstate_support.key_order.OrderChecker` over the members' processing order, as
``test_node_client.py`` counts it). Each member's largest gap in processing during the run is printed beside
the same over the seconds before it, with the producer's largest gap in deliveries and its holds: KafkaJS's
assignor is eager, so every partition moves at the rejoin (the members stay in the group).
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupState
from kstate_support import kafka as kfacts
from kstate_support.increase_runs import DAG_ID, states, xcom
from kstate_support.key_order import OrderChecker
from kstate_support.node import consumers, node_ready, producer
from kstate_support.stay_fleet import control_records, group_members, largest_gap, latency, stable
from kstate_support.traffic import wait_until

from airflow_provider_kstate.client_piece.protocol import DEFAULT_CONTROL_TOPIC

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(bool(node_ready()), reason=node_ready() or "ready"),
]

OLD, NEW = 4, 8
#: Seconds of traffic before the run, the baseline of the members' gaps in processing.
BASELINE_S = 5.0
KEYS, RATE = 97, 150


@pytest.mark.chaos  # make chaos: the Node group's stay proof (the Python groups' in test_stay, Java's in test_stay_java)
def test_node_group_stays_in_its_group_while_the_topic_grows(
    kafka_config: dict[str, Any], admin: Any, make_topic: Any, run_dag: Any
) -> None:
    topic = make_topic("stay-node", partitions=OLD)
    group = f"{topic}-g"
    clients = [f"{group}-{i}" for i in range(2)]
    common = {
        "brokers": str(kafka_config["bootstrap.servers"]).split(","),
        "controlTopic": DEFAULT_CONTROL_TOPIC,
    }
    # the group's coordinator loaded before the members join: on a fresh broker under load a describe went
    # unanswered for over 10 s (__consumer_offsets being created), and once, without this wait, the Node
    # group never formed within 60 s (the members' stderr was not kept then: now it is, below)
    assert group_members(admin, group) == (ConsumerGroupState.DEAD.name, {})
    fleet = consumers(
        {
            **common,
            "groupId": group,
            "topics": [topic],
            "fromBeginning": False,
            "members": [{"clientId": c} for c in clients],
        },
        "stay-consumers",
    )
    source = None
    with fleet:  # killed on the way out if a step failed
        try:
            assert wait_until(lambda: stable(admin, group, 2), 90), (
                group_members(admin, group),
                fleet.events[-10:],
                fleet.stderr(),
            )
            # rule 4.7 on the old partitions: the start (0, nothing written yet) committed before the traffic,
            # so every record the producer delivers is one the group must process
            assert wait_until(lambda: len(kfacts.committed(admin, group, topic, OLD)) == OLD, 30)
            source = producer(
                {**common, "topic": topic, "clientId": f"{topic}-producer", "keys": KEYS, "rate": RATE},
                "stay-producer",
            )
            source.wait(lambda e: e["event"] == "started")
            assert wait_until(lambda: {e["c"] for e in fleet.of("record")} == set(clients), 30), (
                "a member idles"
            )
            time.sleep(BASELINE_S)
            state_before, members_before = group_members(admin, group)
            assert state_before == ConsumerGroupState.STABLE.name and set(members_before) == set(clients)
            started = time.time() * 1000
            dr = run_dag(
                DAG_ID,
                {
                    "topic": topic,
                    "partitions": NEW,
                    "consumer_groups": [group],
                    "consumers_stay": "auto",
                    "producer_drivers": ["control"],
                    "key_order": "preserve",
                },
            )
            ended = time.time() * 1000
            assert dr.state == "success", states(dr)
            plan = xcom(dr, "plan")["groups"][group]
            window = xcom(dr, "pause_window")
            committed = kfacts.committed(admin, group, topic, NEW)
            assert wait_until(lambda: {e["p"] for e in source.of("sent")} == set(range(NEW)), 30), (
                "the producer never wrote to all 8"
            )
            time.sleep(1.0)  # traffic on the eight partitions
            _state_after, members_after = group_members(admin, group)
        finally:
            stopped = source.stop("stop") if source is not None else 0
        assert stopped == 0, source.stderr()
        delivered = {(e["key"], e["seq"]) for e in source.of("sent")}
        try:
            wait_until(lambda: delivered <= {(e["key"], e["seq"]) for e in fleet.of("record")}, 60)
        finally:
            closed = fleet.stop()
        assert closed == 0, fleet.stderr()

    records = fleet.of("record")
    checker = OrderChecker()
    for e in records:  # stdout order: the processing order of both members
        checker.record(e["key"], e["seq"])
    seen = {(e["key"], e["seq"]) for e in records}
    lost = sorted(delivered - seen)
    first_new: dict[int, int] = {}
    for e in records:
        if e["p"] >= OLD:
            first_new[e["p"]] = min(first_new.get(e["p"], e["o"]), e["o"])
    paused = [e for e in fleet.of("state") if e["state"] == "paused"]
    control = control_records(kafka_config, group, set(clients))
    pauses = [v for v in control if v["kind"] == "command" and v.get("command") == "pause"]
    paused_acks = [v for v in control if v["kind"] == "ack" and v.get("state") == "paused"]
    base = started - BASELINE_S * 1000
    figures = {
        c: {
            "gap_s": round(largest_gap([e["t"] for e in records if e["c"] == c], started, ended), 3),
            "gap_before_s": round(largest_gap([e["t"] for e in records if e["c"] == c], base, started), 3),
        }
        for c in clients
    }
    sent = source.of("sent")
    for c in clients:
        mine = [e for e in records if e["c"] == c]
        figures[c]["latency_s"] = round(latency(sent, mine, started, ended), 3)
        figures[c]["latency_before_s"] = round(latency(sent, mine, base, started), 3)
    partition_gaps = {
        p: round(largest_gap([e["t"] for e in records if e["p"] == p], started, ended), 3) for p in range(OLD)
    }
    sent_times = [e["t"] for e in sent]
    produced_gap = largest_gap(sent_times, started, ended)
    produced_gap_before = largest_gap(sent_times, base, started)
    holds = [h for e in source.of("closed") for h in e["holds"]]
    joins: dict[str, int] = defaultdict(int)
    for e in fleet.of("assigned"):
        if e["t"] >= started:
            joins[e["c"]] += 1
    stayed = window["stayed"]
    switch = window["topics"][topic]["switch"]
    print(
        f"STAY node preserve: {len(delivered)} records delivered, {checker.processed} processed, {len(lost)} lost, "
        f"{checker.keys_out_of_order} keys out of order ({len(checker.violations)} records); run "
        f"{(ended - started) / 1000:.1f} s; positions after {stayed.get('positioned_after_s')} s; per member "
        f"(largest gap in processing and longest wait of a delivered record, during the run and over the "
        f"{BASELINE_S:.0f} s before it) {figures}; per old partition, its largest gap in processing during the "
        f"run {partition_gaps}; the "
        f"producer's largest gap in deliveries during the run {produced_gap:.3f} s (before {produced_gap_before:.3f} "
        f"s), holds {holds}; assignments during the run {dict(joins)}; plan stay {plan.get('stay')!r} "
        f"({plan.get('stay_reason')}), key order {plan.get('key_order')}; timings {window.get('timings')}; "
        f"committed {committed}; first offsets on the new partitions {dict(sorted(first_new.items()))}; members "
        f"{members_before} -> {members_after}"
    )

    assert plan.get("stay") == "client-piece", plan
    assert plan.get("key_order") == "barrier", plan
    assert stayed["positioned"] == [group] and stayed["fell_back"] == [], stayed
    assert stayed["stray_records"] == 0, stayed
    assert window["timings"]["live_window_s"] == 0.0, window["timings"]
    assert switch["key_order"] == "preserve" and switch["producers_held"], switch
    assert switch["held_groups"] == [group] and not switch["relaxed_groups"], switch
    assert set(committed) == set(range(NEW)), f"committed offsets only on {sorted(committed)}"
    assert not paused, paused
    assert not pauses and not paused_acks, (pauses, paused_acks)
    assert members_after == members_before, f"the members changed: {members_before} -> {members_after}"
    assert not lost, f"{len(lost)} lost, e.g. {lost[:10]}"
    assert first_new == dict.fromkeys(range(OLD, NEW), 0), f"new partitions not read from 0: {first_new}"
    assert checker.violations == [], checker.violations[:10]
    assert [h["expired"] for h in holds] == [False], holds
