"""Benchmark per-key order across an increase (issues 21 and 25): what the barrier (``preserve``) and the
drain (``drain``) cost against ``relax``.

    .venv/bin/python bench/bench_key_order.py [--backlogs 0 2000 6000] [--partitions 4 16] [--rate 500]
                                              [--orders preserve drain relax]

For each original partition count N (-> 2N) and each backlog (records written in a burst just before the
switch, so the old partitions hold them unprocessed), the orders run in the same process, one after the
other, on fresh topics: a keyed ControlledProducer (200 keys, ``rate`` msg/s after the burst), two
ControlledConsumers (1 ms per record, offsets stored after processing), and the controller's switch
(:class:`~airflow_provider_kstate.increase.key_order.KeyOrderSwitch`, the same code the DAG runs) over
the provider's own admin verbs and controller (``cluster/``: no Airflow). The barrier holds the producers for about one
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
from typing import Any

from confluent_kafka.admin import NewPartitions
from kstate_support import bench
from kstate_support.bench import Column
from kstate_support.key_order import KeyedProducer, OrderChecker, SlowFleet
from kstate_support.traffic import wait_until

from airflow_provider_kstate.cluster.admin import ClusterAdmin
from airflow_provider_kstate.cluster.control import Controller
from airflow_provider_kstate.increase.key_order import KeyOrderSwitch
from airflow_provider_kstate.increase.plan import GroupPlan, Plan

RESULTS = bench.results_path("key_order")
#: The table's columns: keys of a run's row.
HEADER = (
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


def one_run(
    config: dict[str, Any], control_topic: str, partitions: int, backlog: int, order: str, rate: float
) -> dict[str, Any]:
    admin = ClusterAdmin(config)
    control = Controller(admin, control_topic)
    control.channel()  # creates the control topic
    topic = bench.new_topic(config, "order", partitions, replication=1)
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
    bench.delete_topics(config, [topic])
    control.close()
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


def _lag(admin: ClusterAdmin, group: str, topic: str, partitions: int) -> int:
    """Records the group has not committed yet: the backlog when the producers stop (or are held)."""
    ends = admin.watermarks(topic, range(partitions))
    committed = dict(admin.committed_offsets_many([group], topic, partitions))[group]
    return sum(max(ends[p][1] - committed.get(p, 0), 0) for p in range(partitions))


def _drained(admin: ClusterAdmin, group: str, topic: str, offsets: list[int]) -> bool:
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
    with bench.broker("bench-key-order-broker") as config:
        control_topic = f"_kstate_control_bench_{uuid.uuid4().hex[:6]}"
        for partitions in args.partitions:
            for backlog in args.backlogs:
                for order in args.orders:
                    row = one_run(config, control_topic, partitions, backlog, order, args.rate)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    bench.write_results(RESULTS, {"rate": args.rate, "rows": rows})
    print()
    bench.print_table(rows, [Column(key, key) for key in HEADER], markdown=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
