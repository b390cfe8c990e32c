"""Soak (issue 10, item 7): many safe increases under live traffic, services restarted at random between rounds.

First the scenario is proven on its own topic in the same run: a plain ``CreatePartitions`` under live
latest-reset consumers loses messages (KAFKA-12261). Then ``KSTATE_SOAK_ROUNDS`` (default 20) runs of the
shipped DAG ``kstate_partition_increase`` grow another topic one partition per round, under a keyed producer
(``murmur2_random``, not controlled: it writes to each new partition as soon as it exists) and a group of
:class:`ControlledConsumer` members with latest reset. Between rounds, at random (seed printed), the
consumers are stopped and started again (they rejoin from their committed offsets), the producer is
replaced, or both. After the last round every message produced was consumed.
"""

from __future__ import annotations

import os
import random
import time
from typing import Any

import pytest
from confluent_kafka.admin import NewPartitions
from kstate_support.traffic import ConsumerFleet, SeqProducer, live_traffic, loss, wait_until, warm_up

pytestmark = [pytest.mark.integration, pytest.mark.chaos, pytest.mark.timeout(1800)]

DAG_ID = "kstate_partition_increase"
ROUNDS = int(os.environ.get("KSTATE_SOAK_ROUNDS", "20"))


class NumberedProducer(SeqProducer):
    """A :class:`SeqProducer` whose numbers start at ``first``: successive producers never reuse one."""

    def __init__(self, config: dict[str, Any], topic: str, first: int, rate: float = 100.0) -> None:
        super().__init__(config, topic, rate=rate)
        self.first = first

    def run(self) -> None:
        seq, start = self.first, time.monotonic()
        while not self._halt.is_set():
            self.producer.produce(
                self.topic, value=str(seq).encode(), key=f"key-{seq}".encode(), on_delivery=self._delivered
            )
            self.producer.poll(0)
            seq += 1
            delay = start + (seq - self.first) / self.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        self.producer.flush(30)
        self.producer = None


class Traffic:
    """The live services of one topic: a consumer group and a producer, each restartable; loss over all."""

    def __init__(self, config: dict[str, Any], topic: str, group: str) -> None:
        self.config, self.topic, self.group = config, topic, group
        self.placed: dict[int, int] = {}
        self.received: set[int] = set()
        self.restarts = {"consumers": 0, "producer": 0}
        self.fleet = self._fleet()
        self.producer = self._producer(0)

    def _fleet(self) -> ConsumerFleet:
        return ConsumerFleet(self.config, self.topic, self.group, n=2, controlled=True)

    def _producer(self, first: int) -> NumberedProducer:
        producer = NumberedProducer(self.config, self.topic, first)
        producer.start()
        return producer

    def restart_consumers(self) -> None:
        self.fleet.stop()
        self.received |= self.fleet.received
        self.fleet = self._fleet()
        self.restarts["consumers"] += 1

    def restart_producer(self) -> None:
        self.producer.stop()
        self.placed.update(self.producer.placed)
        self.producer = self._producer(max(self.placed, default=-1) + 1_000_000)
        self.restarts["producer"] += 1

    def close(self) -> None:
        """Stop the producer and the consumers (idempotent): in ``finally``, so no thread outlives a failure."""
        if self.producer.is_alive():
            self.producer.stop()
        self.fleet.stop()

    def finish(self, since: int, drain_timeout: float = 60.0) -> dict[int, int]:
        """Stop the producer, wait (bounded) for the consumers to catch up; return ``{seq: partition}`` lost."""
        self.producer.stop()
        self.placed.update(self.producer.placed)
        produced = {seq for seq in self.placed if seq >= since}
        wait_until(lambda: produced <= self.received | self.fleet.received, drain_timeout)
        self.fleet.stop()
        self.received |= self.fleet.received
        return {seq: self.placed[seq] for seq in sorted(produced - self.received)}


def _naive_loss(kafka_config: dict[str, Any], admin: Any, topic: str) -> dict[int, int]:
    """A plain CreatePartitions 1 -> 2 under live latest-reset consumers; return what they skipped."""
    with live_traffic(kafka_config, topic, f"{topic}-g", n=2) as (producer, fleet):
        since = warm_up(producer, fleet)
        for future in admin.create_partitions([NewPartitions(topic, 2)]).values():
            future.result(timeout=30)
        wait_until(lambda: any(p == 1 for s, p in producer.placed.items() if s >= since), 15)
        wait_until(lambda: False, 6)  # producing while the consumers have not discovered partition 1
        producer.stop()
        return loss(producer, fleet, since, drain_timeout=20)


def test_soak_safe_rounds_lose_nothing_naive_loses(
    kafka_config: dict[str, Any], admin: Any, make_topic: Any, run_dag: Any
) -> None:
    naive = _naive_loss(kafka_config, admin, make_topic("soak-naive", partitions=1))
    assert naive, "the naive increase lost nothing: the scenario did not reproduce"
    seed = int(os.environ.get("KSTATE_SOAK_SEED", str(int(time.time()))))
    rng = random.Random(seed)
    topic = make_topic("soak", partitions=1)
    traffic = Traffic(kafka_config, topic, f"{topic}-g")
    durations = []
    try:
        since = warm_up(traffic.producer, traffic.fleet)
        for target in range(2, ROUNDS + 2):
            t0 = time.monotonic()
            conf = {"topic": topic, "partitions": target, "consumer_groups": [], "dry_run": False}
            dr = run_dag(DAG_ID, conf)
            durations.append(time.monotonic() - t0)
            assert dr.state == "success", (target, {ti.task_id: ti.state for ti in dr.get_task_instances()})
            choice = rng.choice(("none", "consumers", "producer", "both"))
            if choice in ("consumers", "both"):
                traffic.restart_consumers()
            if choice in ("producer", "both"):
                traffic.restart_producer()
            time.sleep(rng.uniform(0.5, 2.0))  # traffic on the grown topic before the next round
        wait_until(lambda: set(traffic.producer.placed.values()) == set(range(ROUNDS + 1)), 15)
        lost = traffic.finish(since)
    finally:
        traffic.close()  # no producer or consumer thread outlives a failed round
    produced = sum(1 for seq in traffic.placed if seq >= since)
    print(
        f"\nSOAK seed {seed}: naive lost {len(naive)}; {ROUNDS} safe rounds (1 -> {ROUNDS + 1} partitions), "
        f"run {min(durations):.1f}-{max(durations):.1f} s, restarts {traffic.restarts}; "
        f"lost {len(lost)} of {produced}"
    )
    assert lost == {}, f"{len(lost)} lost: {dict(list(lost.items())[:20])}"
