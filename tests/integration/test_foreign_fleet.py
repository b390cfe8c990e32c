"""Issue 25, the scenario: services no one here wrote (plain KafkaJS, no client piece) lose records and
reorder keys when partitions are added the naive way, and their command pair (stop / start / ready) is a
handle the provider can drive.

Each test runs real Node.js processes (``support/node``: ``consumer.js``, ``producer.js``, ``svc.sh``)
through :class:`kstate_support.fleet.Fleet` and grows the topic with a plain ``CreatePartitions``
(confluent-kafka's AdminClient), not with the provider, as ``test_kafka_12261.py`` does for librdkafka.
The verdicts come from the services' own JSON lines: what the producer logged as delivered and what the
group logged as processed, replayed in processing order into ``key_order.OrderChecker``.
"""

from __future__ import annotations

import subprocess
import time
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions
from kstate_support.fleet import Fleet, drain, start_group, wait_group, warm_up
from kstate_support.increase_runs import grow
from kstate_support.kafka import commit
from kstate_support.traffic import wait_until

pytestmark = pytest.mark.integration


def _committed(admin: Any, group: str, topic: str) -> dict[int, int]:
    """The group's committed offsets of ``topic`` (partition -> next offset), as the broker has them."""
    request = [ConsumerGroupTopicPartitions(group)]
    result = admin.list_consumer_group_offsets(request)[group].result(timeout=30)
    return {tp.partition: tp.offset for tp in result.topic_partitions if tp.topic == topic and tp.offset >= 0}


def test_naive_increase_loses_records_at_a_kafkajs_latest_reset_group(
    admin: Any, make_topic: Any, fleet: Fleet
) -> None:
    """KAFKA-12261 with foreign clients: 2 -> 4 under a KafkaJS producer's live traffic, and the KafkaJS
    group (fromBeginning: false) skips the records written to the new partitions before it joined them.

    The members refresh metadata every 5 s, the producer every 0.5 s (KafkaJS's default is 300 s for
    both): the producer writes to a new partition seconds before the group holds it. With refreshes of
    0.5 to 1 s on both sides the race goes either way (0 to 61 lost in five runs).
    """
    topic = make_topic("fleet-naive", partitions=2)
    group = f"{topic}-g"
    for i in range(2):
        fleet.consumer(f"naive-m{i}", topic, group, metadata_max_age_ms=5000)
    fleet.producer("naive-p", topic, keys=100, rate=200)
    start_group(fleet, admin, group)
    fleet.start("naive-p")
    since = warm_up(fleet, group)

    grow(admin, topic, 4)
    assert wait_until(lambda: fleet.assigned(group) == {0, 1, 2, 3}, 15), "the group never took 2 and 3"
    time.sleep(1.0)  # live traffic on all four partitions, now consumed
    fleet.stop("naive-p")
    drain(fleet, ["naive-p"], group)
    verdict = fleet.judge(["naive-p"], group, since=since)
    print(f"naive 2 -> 4: {verdict.summary()}")

    assert verdict.lost, (
        f"the naive increase lost nothing: the scenario did not reproduce ({verdict.summary()})"
    )
    assert set(verdict.lost_by_partition) <= {2, 3}, f"only new partitions should lose: {verdict.summary()}"
    processed = {r["p"] for r in fleet.lines(*fleet.groups[group])}
    assert processed == {0, 1, 2, 3}, f"the group consumed the new partitions, after the gap: {processed}"


def test_loss_free_but_order_blind_increase_reorders_keys(admin: Any, make_topic: Any, fleet: Fleet) -> None:
    """4 -> 6 with no loss still reorders keys: the group's members are stopped with the command pair, the
    partitions created, the new ones seeded to offset 0 for the group, the members started (a loss-free,
    order-blind increase).

    Three members, KafkaJS's round-robin assignor: m0 holds 0 and 3 before (half the traffic) and 0 and 3
    after, m1 and m2 hold one old partition each and get 4 and 5. m0 is slower than its inflow, so at the
    switch it has a backlog of seconds, and about two in three of its keys move to 1, 2, 4 or 5, whose fast
    members process their new records at once, ahead of the same keys' older records still waiting at m0.
    (With two members the round-robin keeps every key on its member's parity, 0/2/4 or 1/3/5: a key can
    only move within one member.)
    """
    topic = make_topic("fleet-order", partitions=4)
    group = f"{topic}-g"
    for i in range(3):
        fleet.consumer(f"order-m{i}", topic, group, delay_ms=30 if i == 0 else 1)
    fleet.producer("order-p", topic, keys=40, rate=120)
    start_group(fleet, admin, group)
    fleet.start("order-p")
    since = warm_up(fleet, group)
    time.sleep(2.5)  # m0's backlog grows

    members = fleet.groups[group]
    stop = fleet.stop(*members)
    wait_group(admin, group, "EMPTY", 0, timeout=10)
    committed = _committed(admin, group, topic)
    processed_before: dict[int, int] = {}
    for r in fleet.lines(*members):
        processed_before[r["p"]] = max(processed_before.get(r["p"], 0), r["o"] + 1)
    grow(admin, topic, 6)
    commit(admin, group, topic, {4: 0, 5: 0})  # every partition's answer checked
    start_group(fleet, admin, group)
    time.sleep(1.5)  # traffic on the six partitions
    fleet.stop("order-p")
    drain(fleet, ["order-p"], group)
    verdict = fleet.judge(["order-p"], group, since=since)
    downtime = {m: [round(d, 2) for d in fleet.downtime(m)] for m in members}
    gap = {p: processed_before[p] - committed.get(p, 0) for p in processed_before}
    print(f"seeded 4 -> 6: {verdict.summary()}; stop {stop:.2f}s, member downtime {downtime}")
    print(f"seeded 4 -> 6: processed but not committed at the stop, per partition: {gap}")

    # timeout contract: the members exit on SIGTERM well inside the stop's 20 s --timeout (over it, the stop
    # fails); 10 s is many times a clean exit, for a loaded machine
    assert stop < 10, f"the stop command took {stop:.1f}s"
    # At least once: nothing is committed that was not processed; a member whose last commit raced another
    # member's LeaveGroup (all get SIGTERM at once) is fenced and leaves a few records to be redelivered.
    assert all(0 <= g <= 20 for g in gap.values()), f"committed vs processed on stop: {gap}"
    assert not verdict.lost, f"the seeded increase lost records: {verdict.summary()}"
    assert verdict.keys_out_of_order > 0, f"no key reordered: {verdict.summary()}"
    partitions: dict[str, set[int]] = {}
    for d in fleet.lines("order-p"):
        partitions.setdefault(d["key"], set()).add(d["p"])
    unmoved = {k for k, _s, _t in verdict.violations if len(partitions[k]) < 2}
    assert not unmoved, f"keys the increase did not move reordered: {sorted(unmoved)}"


def _sh(command: str) -> tuple[int, float]:
    began = time.monotonic()
    done = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=60)
    return done.returncode, time.monotonic() - began


def test_the_command_pair_empties_and_refills_the_group(admin: Any, make_topic: Any, fleet: Fleet) -> None:
    """The strings a user configures, run in a shell: stop makes the broker report the group EMPTY within
    seconds, start and ready bring it back STABLE with every member, and both are idempotent (a second
    start leaves the same processes, a second stop succeeds at once)."""
    topic = make_topic("fleet-pair", partitions=2)
    group = f"{topic}-g"
    for i in range(2):
        fleet.consumer(f"pair-m{i}", topic, group)
    pair = fleet.group_commands(group)
    pidfiles = [fleet.run_dir / f"{m}.pid" for m in fleet.groups[group]]

    assert _sh(pair.start)[0] == 0
    assert wait_until(lambda: _sh(pair.ready)[0] == 0, 30, interval=0.1), "never ready"
    wait_group(admin, group, "STABLE", 2, timeout=30)
    pids = [p.read_text() for p in pidfiles]
    assert _sh(pair.start)[0] == 0, "start of a running group failed"
    assert [p.read_text() for p in pidfiles] == pids, "a second start started new processes"

    rc, stopping = _sh(pair.stop)
    assert rc == 0
    empty = wait_group(admin, group, "EMPTY", 0, timeout=10)
    # timeout contract: the members leave on SIGTERM, inside the stop's 20 s --timeout (the wait above gives
    # the broker 10 s to show it); 10 s is many times a clean exit, for a loaded machine
    assert stopping + empty < 10, f"SIGTERM to EMPTY took {stopping:.2f}s + {empty:.2f}s"
    assert _sh(pair.ready)[0] != 0, "ready while stopped"
    rc, again = _sh(pair.stop)
    # timeout contract: a second stop has nothing to wait for: it returns at once, not at its 20 s --timeout
    assert rc == 0 and again < 10, f"a second stop: rc {rc} in {again:.2f}s"

    began = time.monotonic()
    assert _sh(pair.start)[0] == 0
    assert wait_until(lambda: _sh(pair.ready)[0] == 0, 30, interval=0.1), "never ready again"
    wait_group(admin, group, "STABLE", 2, timeout=30)
    back = time.monotonic() - began
    # timeout contract: once running, the members join within the group's 5 s rebalance timeout; 20 s is 2x
    # that and 10 s for starting the Node processes on a loaded machine
    assert back < 20, f"start to STABLE took {back:.2f}s"
    print(
        f"command pair: stop {stopping:.2f}s + EMPTY {empty:.2f}s, again {again:.2f}s, start to STABLE {back:.2f}s"
    )
    assert all(fleet.downtime(m) for m in fleet.groups[group]), "no stop/start window in the events"
