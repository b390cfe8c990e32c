"""Issue 30, item 3: the Java reference client (``org.apache.kafka:kafka-clients`` 4.4, ``support/java``),
for ``group.protocol=classic`` and ``group.protocol=consumer`` (KIP-848), as services no one here wrote.

A latest-reset Java group loses records when partitions are added the naive way (a plain
``CreatePartitions`` under a Java producer's keyed traffic), and the provider, driving the same Java
consumers and producer only through their command pairs (``support/java/svc.sh stop|start|ready``, named
in the ``kstate_drivers`` Variable) in ``dag.test()`` of ``kstate_partition_increase``, loses none. The
verdicts come from the services' own JSON lines, judged as the KafkaJS fleet's are
(:func:`kstate_support.fleet.judge`), the runs read with :mod:`kstate_support.increase_runs`.

Under KIP-848 the broker assigns: a member learns of a new partition on its next heartbeat
(``group.consumer.heartbeat.interval.ms``, 5 s on the broker), not after its own metadata refresh, and a
reassignment that moves a partition takes a revocation heartbeat and an assignment heartbeat.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from kstate_support.fleet import drain, start_group, wait_group, warm_up
from kstate_support.increase_runs import DAG_ID, drivers_variable, grow, states, xcom
from kstate_support.java_services import PROTOCOLS, JavaFleet
from kstate_support.traffic import wait_until

pytestmark = pytest.mark.integration

#: make test runs the KIP-848 cells (the new protocol); the classic ones repeat the KafkaJS and librdkafka
#: proofs of the classic protocol and run in make chaos.
CELLS = [pytest.param(p, marks=pytest.mark.chaos) if p == "classic" else p for p in PROTOCOLS]

#: The members' metadata refresh: under classic the group sees new partitions (and rebalances) within it;
#: under KIP-848 the broker's heartbeat decides.
MEMBER_METADATA_MS = 5000


def _java_group(fleet: JavaFleet, name: str, topic: str, protocol: str, members: int = 2) -> str:
    """Define ``members`` latest-reset Java consumers of ``topic`` under ``protocol``; return the group."""
    group = f"{topic}-g"
    for i in range(members):
        fleet.consumer(
            f"{name}-m{i}", topic, group, group_protocol=protocol, metadata_max_age_ms=MEMBER_METADATA_MS
        )
    return group


def _jvm_start(fleet: JavaFleet, name: str) -> float:
    """Seconds from a service's first ``start`` event (its JVM running ``main``, the client built) to its
    first ``join``: what a member adds to a window on top of the JVM's own start."""
    events = fleet.events(name)
    start = next(e["t"] for e in events if e["ev"] == "start")
    join = next(e["t"] for e in events if e["ev"] == "join")
    return (join - start) / 1000


@pytest.mark.parametrize("protocol", CELLS)
def test_naive_increase_loses_records_at_a_latest_reset_java_group(
    protocol: str, admin: Any, make_topic: Any, java_fleet: JavaFleet
) -> None:
    """KAFKA-12261 with the reference client: 2 -> 4 under a Java producer's keyed traffic (murmur2 of the
    key over the new count), and the Java group (auto.offset.reset=latest) starts the new partitions at
    their end when it gets them, skipping what was written there before.

    The producer refreshes its metadata every 0.1 s, the members every 5 s (classic: then the group
    rebalances) or on the broker's heartbeat (KIP-848, up to 5 s): the producer writes to a new partition
    before the group has a position there, whatever the phase of the members' refresh (with the producer
    at 0.5 s and the members at 3 s, one classic run of three lost 1 record only)."""
    topic = make_topic(f"java-naive-{protocol}", partitions=2)
    group = _java_group(java_fleet, "naive", topic, protocol)
    java_fleet.producer("naive-p", topic, keys=100, rate=200, metadata_max_age_ms=100)
    members = java_fleet.groups[group]
    jvm = java_fleet.start(*members)  # returns when each JVM runs main with its client built (its pidfile)
    java_fleet.wait_ready(*members)
    stable = jvm + wait_group(admin, group, "STABLE", len(members), timeout=30)
    java_fleet.start("naive-p")
    since = warm_up(java_fleet, group)

    created = time.monotonic()
    grow(admin, topic, 4)
    assert wait_until(lambda: java_fleet.assigned(group) == {0, 1, 2, 3}, 30), "the group never took 2 and 3"
    taken = time.monotonic() - created
    time.sleep(1.0)  # live traffic on all four partitions, now consumed
    java_fleet.stop("naive-p")
    drain(java_fleet, ["naive-p"], group)
    verdict = java_fleet.judge(["naive-p"], group, since=since)
    print(
        f"java {protocol} naive 2 -> 4: {verdict.summary()}; group took the new partitions {taken:.2f} s "
        f"after the create; start command (JVMs up) {jvm:.2f} s, to STABLE {stable:.2f} s, JVM main to "
        f"first join {[round(_jvm_start(java_fleet, m), 2) for m in members]} s"
    )

    assert verdict.lost, (
        f"the naive increase lost nothing: the scenario did not reproduce ({verdict.summary()})"
    )
    assert set(verdict.lost_by_partition) <= {2, 3}, f"only new partitions should lose: {verdict.summary()}"
    processed = {r["p"] for r in java_fleet.lines(*members)}
    assert processed == {0, 1, 2, 3}, f"the group consumed the new partitions, after the gap: {processed}"


@pytest.mark.parametrize("protocol", CELLS)
def test_the_provider_drives_java_services_by_command_pairs_and_loses_nothing(
    protocol: str,
    admin: Any,
    make_topic: Any,
    run_dag: Any,
    java_fleet: JavaFleet,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same group, producer and traffic, the increase by ``kstate_partition_increase``: the Java group
    cannot hold at the key-order barrier and its producer is named, so the plan drains it. The window stops
    the producer and the group by their command pairs, creates the partitions, seeds the new ones to the
    log start for the EMPTY group, starts the group, and starts the producer once the group consumed the old
    partitions to where it stopped: nothing lost, no key reordered."""
    topic = make_topic(f"java-drive-{protocol}", partitions=2)
    group = _java_group(java_fleet, "drive", topic, protocol)
    java_fleet.producer("drive-p", topic, keys=100, rate=200)
    pairs = {"consumers": java_fleet.group_commands(group), "producer": java_fleet.commands("drive-p")}
    monkeypatch.setenv("AIRFLOW_VAR_KSTATE_DRIVERS", drivers_variable(**pairs))
    start_group(java_fleet, admin, group)
    java_fleet.start("drive-p")
    since = warm_up(java_fleet, group)

    began = time.monotonic()
    dr = run_dag(
        DAG_ID,
        {
            "topic": topic,
            "partitions": 4,
            "consumer_groups": [group],
            "group_drivers": {group: "consumers"},
            "producer_drivers": ["producer"],
        },
    )
    took = time.monotonic() - began
    assert dr.state == "success", states(dr)
    assert java_fleet.running("drive-p"), "the producer service is not running after the run"
    assert wait_until(lambda: java_fleet.assigned(group) == {0, 1, 2, 3}, 30), "the group never took 2 and 3"
    time.sleep(1.0)  # traffic on the four partitions
    java_fleet.stop("drive-p")
    drain(java_fleet, ["drive-p"], group)
    verdict = java_fleet.judge(["drive-p"], group, since=since)
    window, started = xcom(dr, "pause_window"), xcom(dr, "start_producers")
    progress = json.loads((Path(window["topics"][topic]["report_uri"]).parent / "progress.json").read_text())
    entry = progress["groups"][group]
    out = (entry["back_at"] - entry["out_since"]) / 1000
    downtime = {m: [round(d, 2) for d in java_fleet.downtime(m)] for m in java_fleet.groups[group]}
    print(
        f"java {protocol} provider 2 -> 4: {verdict.summary()}; run {took:.1f} s, group out {out:.2f} s "
        f"(member SIGTERM to join {downtime}), producer down {started['topics'][topic]['producer_downtime_s']:.2f} s; "
        f"window {window['timings']}"
    )

    assert not verdict.lost, verdict.summary()
    assert verdict.keys_out_of_order == 0, verdict.summary()
    plan = xcom(dr, "plan")["groups"][group]
    assert plan["key_order"] == "drained" and plan["driver"]["name"] == "consumers", plan
    assert plan.get("type", "CLASSIC") == protocol.upper(), f"the plan saw another group type: {plan}"
    assert window["drivers"]["stopped_groups"] == [group] and window["drivers"]["started_groups"] == [group]
    assert window["drivers"]["producers_stopped"]["services"] == ["producer"], window["drivers"]
    assert started["services"] == ["producer"] and not started["start_failures"], started
    assert entry["driver"] == "command consumers", entry
    processed = {r["p"] for r in java_fleet.lines(*java_fleet.groups[group])}
    assert processed == {0, 1, 2, 3}, f"the group did not consume the new partitions: {processed}"
    assert all(downtime.values()), f"a member was never stopped and started: {downtime}"
