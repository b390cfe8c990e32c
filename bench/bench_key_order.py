"""Benchmark per-key order across an increase (issues 21 and 25): what the barrier (``preserve``) and the
drain (``drain``) cost against ``relax``.

    .venv/bin/python bench/bench_key_order.py [--backlogs 0 2000 6000] [--partitions 4 16] [--rate 500]
                                              [--orders preserve drain relax]

For each original partition count N (-> 2N) and each backlog (records written in a burst just before the
switch, so the old partitions hold them unprocessed), the orders run in the same process, one after the
other, on fresh topics: a keyed ControlledProducer (200 keys, ``rate`` msg/s after the burst), two
ControlledConsumers (1 ms per record, offsets stored after processing), and the controller's switch
(:class:`~airflow_provider_kstate.increase.key_order.KeyOrderSwitch`, the same code the DAG runs) over
light adapters of the admin and control ports (no Airflow). The barrier holds the producers for about one
control round trip and the consumers at ``B`` until the backlog is consumed; the drain stops the producers
before the create (a service without the client piece cannot hold at a barrier) and starts them once the
group consumed everything written before. Measured:

* producer block: how long ``produce()`` was blocked (the producer's own clock): the barrier's hold, or
  the drain's whole stop (the producer downtime);
* extra delay of moved keys: what records of moved keys wait beyond ``relax``: at the barrier, the
  longest time a consumer kept a partition paused at it; in a drain, the producer block (every record
  written after the stop waits that long at its producer; the consumers never hold);
* violations: records processed after a later record of their key (an outside checker).

Starts its own embedded broker unless ``KSTATE_BOOTSTRAP_SERVERS`` is set. Prints a table and writes
``bench/results/key_order.json``. Run heavy measurements under ``flock /tmp/kstate-heavy.lock``.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kstate_support import broker as embedded_broker
from kstate_support.key_order import KeyedProducer, OrderChecker, SlowFleet
from kstate_support.traffic import wait_until

from airflow_provider_kstate.client.channel import ControlChannel
from airflow_provider_kstate.client.protocol import (
    BARRIER_HOLD,
    BARRIER_PENDING,
    Barrier,
    Layout,
    Release,
    now_ms,
)
from airflow_provider_kstate.hooks.control import ControlWatch
from airflow_provider_kstate.increase.key_order import KeyOrderSwitch
from airflow_provider_kstate.increase.plan import GroupPlan, Plan

RESULTS = Path(__file__).resolve().parent / "results"


class Admin:
    """The admin port over a plain AdminClient (what the hook does, without Airflow)."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.client = AdminClient(config)

    def partition_count(self, topic: str) -> int:
        return len(self.client.list_topics(topic, timeout=10).topics[topic].partitions)

    def watermarks(self, topic: str, partitions: Any) -> dict[int, tuple[int, int]]:
        probe = Consumer({**self.config, "group.id": "bench-probe"})
        try:
            return {p: probe.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in partitions}
        finally:
            probe.close()

    def describe_groups(self, groups: list[str], topic: str) -> dict[str, Any]:
        if not groups:
            return {}
        return {g: f.result(10) for g, f in self.client.describe_consumer_groups(groups).items()}

    def committed_offsets_many(self, groups: list[str], topic: str, partitions: int) -> Any:
        from confluent_kafka import ConsumerGroupTopicPartitions

        for group in groups:
            request = [
                ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
            ]
            result = self.client.list_consumer_group_offsets(request)[group].result(10)
            yield group, {tp.partition: tp.offset for tp in result.topic_partitions if tp.offset >= 0}


class Control:
    """The control port over a ControlChannel (what the hook does, without Airflow)."""

    def __init__(self, config: dict[str, Any], topic: str) -> None:
        self.config, self.topic = config, topic
        self.channel = ControlChannel(config, topic)
        self.channel.ensure()

    def announce_barrier(self, topic: str, groups: list[str], issuer: str) -> int:
        epoch = now_ms()
        self.channel.publish(
            Barrier(topic=topic, epoch=epoch, state=BARRIER_PENDING, groups=groups, issuer=issuer)
        )
        return epoch

    def hold_producers(self, topic: str, partitions: int, hold_s: float, issuer: str) -> int:
        epoch = now_ms()
        layout = Layout(
            topic, partitions, epoch, issuer=issuer, hold=True, hold_until=epoch + int(hold_s * 1000)
        )
        self.channel.publish(layout)
        return epoch

    def set_barrier(self, topic: str, offsets: list[int], groups: list[str], issuer: str) -> int:
        epoch = now_ms()
        self.channel.publish(
            Barrier(
                topic=topic, epoch=epoch, state=BARRIER_HOLD, offsets=offsets, groups=groups, issuer=issuer
            )
        )
        return epoch

    def set_layout(self, topic: str, partitions: int, issuer: str) -> int:
        epoch = now_ms()
        self.channel.publish(Layout(topic, partitions, epoch, issuer=issuer))
        return epoch

    def release_group(self, topic: str, group: str, epoch: int, issuer: str) -> None:
        self.channel.publish(Release(topic=topic, group=group, epoch=epoch, issuer=issuer))

    def watch(self) -> ControlWatch:
        return ControlWatch(self.config, self.topic)


def one_run(
    config: dict[str, Any], control_topic: str, partitions: int, backlog: int, order: str, rate: float
) -> dict[str, Any]:
    admin, control = Admin(config), Control(config, control_topic)
    topic = f"bench-order-{uuid.uuid4().hex[:8]}"
    admin.client.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    group = f"{topic}-g"
    checker = OrderChecker()
    control.set_layout(topic, partitions, "bench")  # the pin of an increase: producers acknowledge it
    fleet = SlowFleet(
        {**config, "topic.metadata.refresh.interval.ms": 500},
        topic,
        group,
        [0.001, 0.001],
        checker,
        control_topic,
    )
    producer = KeyedProducer(config, topic, keys=200, rate=rate, burst=backlog, control_topic=control_topic)
    mark = "drained" if order == "drain" else ""
    plan = Plan(
        topic,
        partitions,
        2 * partitions,
        {group: GroupPlan(cls="active", state="STABLE", pause=True, seed=True, wait=True, key_order=mark)},  # type: ignore[arg-type]
    )
    switch = KeyOrderSwitch(plan, admin, control, logging.getLogger("bench"), "bench", order)  # type: ignore[arg-type]
    drained_s = 0.0
    try:
        assert wait_until(lambda: all(fleet.assigned), 60), "consumers never joined"
        switch.announce()
        producer.start()
        assert wait_until(lambda: producer.written >= backlog + 50, 60)
        behind = _lag(admin, group, topic, partitions)
        started = time.monotonic()
        if order == "drain":
            switch.hold_for_drain(600.0)  # the producers stop before the create
        for f in admin.client.create_partitions([NewPartitions(topic, 2 * partitions)]).values():
            f.result(30)
        wait_until(lambda: admin.partition_count(topic) == 2 * partitions, 10)
        if order == "drain":
            out = switch.drain_barrier([group])
            offsets = out["drain"]["offsets"]
            assert wait_until(lambda: _drained(admin, group, topic, offsets), 300), "the group never drained"
            drained_s = time.monotonic() - started
            control.set_layout(topic, 2 * partitions, "bench")  # the producers start on the new layout
        else:
            started = time.monotonic()
            out = switch.switch([group])
        switch_s = time.monotonic() - started
        time.sleep(1.0)
    finally:
        producer.stop()
    wait_until(lambda: checker.lost(producer) == 0, 120)
    wait_until(lambda: all(p.released is not None for p in fleet.passages()), 60)
    fleet.stop()
    holds = getattr(producer.producer, "holds", [])
    passages = fleet.passages()
    held = [p.held_s for p in passages if p.held_s is not None]
    blocked = max((h.blocked_s for h in holds), default=0.0)
    admin.client.delete_topics([topic])
    control.channel.close()
    return {
        "order": order,
        "partitions": f"{partitions}->{2 * partitions}",
        "backlog": backlog,
        "backlog_at_stop": behind,
        "switch_s": round(switch_s, 4),
        "producer_blocked_s": round(blocked, 4),
        "held_to_switch_s": out.get("held_to_switch_s"),
        "drained_s": round(drained_s, 3) if order == "drain" else None,
        "extra_hold_s": round(max(held, default=0.0), 3),
        "moved_keys_extra_delay_s": round(blocked if order == "drain" else max(held, default=0.0), 3),
        "violations": len(checker.violations),
        "keys_out_of_order": checker.keys_out_of_order,
        "lost": checker.lost(producer),
        "processed": checker.processed,
    }


def _lag(admin: Admin, group: str, topic: str, partitions: int) -> int:
    """Records the group has not committed yet: the backlog when the producers stop (or are held)."""
    ends = admin.watermarks(topic, range(partitions))
    committed = dict(admin.committed_offsets_many([group], topic, partitions))[group]
    return sum(max(ends[p][1] - committed.get(p, 0), 0) for p in range(partitions))


def _drained(admin: Admin, group: str, topic: str, offsets: list[int]) -> bool:
    """The group committed at or past ``offsets`` on every old partition (the check of the drain)."""
    committed = dict(admin.committed_offsets_many([group], topic, len(offsets)))[group]
    return all(committed.get(p, -1) >= b for p, b in enumerate(offsets))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backlogs", type=int, nargs="+", default=[0, 2000, 6000])
    parser.add_argument("--partitions", type=int, nargs="+", default=[4, 16])
    parser.add_argument("--rate", type=float, default=500.0)
    parser.add_argument("--orders", nargs="+", default=["preserve", "drain", "relax"])
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    rows = []
    with embedded_broker.cluster() as config:
        control_topic = f"_kstate_control_bench_{uuid.uuid4().hex[:6]}"
        for partitions in args.partitions:
            for backlog in args.backlogs:
                for order in args.orders:
                    row = one_run(config, control_topic, partitions, backlog, order, args.rate)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    header = (
        "order",
        "partitions",
        "backlog",
        "backlog_at_stop",
        "producer_blocked_s",
        "held_to_switch_s",
        "drained_s",
        "moved_keys_extra_delay_s",
        "violations",
        "keys_out_of_order",
        "lost",
    )
    print("\n| " + " | ".join(header) + " |\n|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(str(row.get(h)) for h in header) + " |")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "key_order.json").write_text(json.dumps({"rate": args.rate, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
