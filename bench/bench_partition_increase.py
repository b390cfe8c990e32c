"""Benchmark the safe partition increase (not a timed test).

    .venv/bin/python bench/bench_partition_increase.py [--consumers 2 4] [--repeats 5] [--no-memory]

Measures, in one run on one broker:

* **pause window** — the consumers' downtime during the DAG's safe 1 -> 8 increase, for both layouts of
  the project's DAGs (``window``: ``kstate_partition_increase``, pause .. resume in one task, the default;
  ``per_step``: ``kstate_partition_increase_per_step``, one task per step), next to a **plain stop and
  restart** of the same consumers (every consumer ``close()``s, new ones subscribe), with ONE definition measured in the consumer threads
  (``traffic.Timeline``): from the first consumer that stops handing out messages to the ``on_assign``
  callback after which every consumer holds partitions and together they hold all 8. Restarts are
  measured with plain confluent-kafka Consumers and with the ControlledConsumers of the safe run
  ("same"); runs alternate, medians and every sample are reported. Target: window <= 1.2x the restart.
* **whole safe run** — wall time of the DAG run (``dag.test()``) at 1 -> 8.
* **worker memory** — peak RSS of a process that runs plan, seed and verify for G groups x P partitions
  over topics holding 10k vs 200k messages: it grows with G x P and not with the data, because no
  message passes through the worker.

Consumer throughput with and without the client piece is ``bench/bench_client_throughput.py``.
Starts its own embedded broker unless ``KSTATE_BOOTSTRAP_SERVERS`` is set. Prints a table and writes
``bench/results/partition_increase.json``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from kstate_support import airflow_env as support_airflow
from kstate_support import bench, quiet
from kstate_support.bench import Column, progress

ROOT = Path(__file__).resolve().parent.parent

RESULTS = bench.results_path("partition_increase")
#: The controlled consumers' ``check_interval``: the wrapper's default (``paused_check_interval`` too).
CHECK_INTERVAL = 0.2
WINDOW_DEFINITION = (
    "seconds from the first consumer that stops handing out messages (the pause reaches it; a restart: it "
    "leaves its loop to close()) to the on_assign callback after which every consumer holds partitions and "
    "together they hold all 8; timestamps taken in the consumer threads"
)


#: The cluster of ``KSTATE_BOOTSTRAP_SERVERS``, else a fresh embedded broker in ``.kstate/bench-broker``.
broker = functools.partial(bench.broker, "bench-broker")

#: The layouts measured: the project's own DAGs (``dags/kstate_partition_increase.py``).
LAYOUTS = {
    "window": "kstate_partition_increase",  # the default: pause .. resume in one task
    "per_step": "kstate_partition_increase_per_step",  # one task per step
}


def airflow_env(config: dict[str, Any]) -> dict[str, Any]:
    """Point Airflow at the project's DAG folder and return its two partition-increase DAGs by layout."""
    support_airflow.prepare(ROOT / ".kstate" / "bench-airflow", config, log_level="WARNING", fresh=False)
    from airflow.dag_processing.dagbag import DagBag

    quiet.filter_known_warnings()  # after Airflow's settings put their own filters in front
    bag = DagBag(dag_folder=str(ROOT / "dags" / "kstate_partition_increase.py"))
    assert not bag.import_errors, bag.import_errors
    return {layout: bag.get_dag(dag_id) for layout, dag_id in LAYOUTS.items()}


def _wait_window(
    timeline: Any, after: float, members: list[str], partitions: int, timeout: float = 60.0
) -> dict[str, float]:
    """Wait (bounded) until ``timeline`` shows the downtime after ``after`` complete; return it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        window = timeline.window(after, set(members), partitions)
        if window is not None:
            return window
        time.sleep(0.02)
    raise RuntimeError(f"consumers {members} did not get all {partitions} partitions back within {timeout} s")


def plain_restart(config: dict[str, Any], consumers: int, controlled: bool) -> dict[str, float]:
    """Stop the consumers of a group (each ``close()``s) and start new ones; return the downtime as measured
    in the consumer threads (:meth:`traffic.Timeline.window`): first consumer stops -> the new consumers
    hold all 8 partitions.

    :param controlled: the consumers are the client piece's (the same consumers as in the safe run).
    """
    from kstate_support.traffic import ConsumerFleet, SeqProducer, Timeline, warm_up

    topic = bench.new_topic(config, "restart", 8)
    group = f"{topic}-g"
    timeline = Timeline()
    settings = {"controlled": controlled, "check_interval": CHECK_INTERVAL, "timeline": timeline}
    fleet = ConsumerFleet(config, topic, group, n=consumers, name="old", **settings)
    producer = SeqProducer(config, topic, rate=200)
    producer.start()
    try:
        warm_up(producer, fleet)
        started = time.monotonic()
        fleet.stop()
        fleet = ConsumerFleet(config, topic, group, n=consumers, name="new", **settings)
        return _wait_window(timeline, started, fleet.members, 8)
    finally:
        producer.stop()
        fleet.stop()


def safe_window(config: dict[str, Any], dag: Any, consumers: int) -> dict[str, float]:
    """Run the DAG 1 -> 8 under traffic; return the consumers' pause window (the same definition as
    :func:`plain_restart`: first consumer stops at the pause -> all hold all 8 partitions after the resume),
    the run's wall time and the number of messages lost."""
    from kstate_support.traffic import ConsumerFleet, SeqProducer, loss, warm_up

    topic = bench.new_topic(config, "safe", 1)
    group = f"{topic}-g"
    fleet = ConsumerFleet(config, topic, group, n=consumers, controlled=True, check_interval=CHECK_INTERVAL)
    producer = SeqProducer(config, topic, rate=200, controlled=True)
    producer.start()
    try:
        since = warm_up(producer, fleet)
        started = time.monotonic()
        dr = dag.test(run_conf={"topic": topic, "partitions": 8, "consumer_groups": [group]})
        run_seconds = time.monotonic() - started
        if dr.state != "success":
            raise RuntimeError(f"DAG run {dr.run_id} ended {dr.state}")
        window = _wait_window(fleet.timeline, started, fleet.members, 8)
    finally:
        producer.stop()
    lost = loss(producer, fleet, since, drain_timeout=30)
    fleet.stop()
    return {**window, "run": run_seconds, "lost": float(len(lost))}


_MEMORY_PROBE = r"""
import json, resource, sys, time, tracemalloc
from types import SimpleNamespace
from airflow_provider_kstate.hooks.admin import KStateAdminHook
from airflow_provider_kstate.operators.seed import KStateSeedOffsetsOperator
from airflow_provider_kstate.operators.verify import KStateVerifyOperator
from airflow_provider_kstate.increase.plan import build_plan
from airflow_provider_kstate.increase.request import PlanRequest
from confluent_kafka.admin import NewPartitions
topic, groups, target = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
hook = KStateAdminHook()
hook.partition_count(topic)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
tracemalloc.start()
plan = build_plan(hook, topic, PlanRequest(topics=(topic,), partitions=target, consumer_groups=groups))
admin = hook.get_conn
for f in admin.create_partitions([NewPartitions(topic, target)]).values():
    f.result(30)
time.sleep(0.5)
ctx = {"ti": SimpleNamespace(dag_id="bench", run_id="memory")}
report = KStateSeedOffsetsOperator(task_id="seed", plan=plan).execute(ctx)
KStateVerifyOperator(task_id="verify", plan=plan, seed_report=report, release_lease=False).execute(ctx)
heap = tracemalloc.get_traced_memory()[1]
print(json.dumps({"base_kib": base, "peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "heap_peak": heap}))
"""


def _fill(config: dict[str, Any], topic: str, messages: int, groups: list[str]) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer({**config, "linger.ms": 20, "batch.num.messages": 10000})
    payload = b"x" * 200
    for i in range(messages):
        producer.produce(topic, value=payload, key=str(i).encode())
        if i % 10000 == 0:
            producer.poll(0)
    producer.flush(120)
    from confluent_kafka.admin import AdminClient

    meta = AdminClient(config).list_topics(topic, timeout=10).topics[topic]
    for group in groups:  # an EMPTY group with committed offsets at the log end
        consumer = Consumer({**config, "group.id": group, "enable.auto.commit": False})
        ends = [
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in meta.partitions
        ]
        consumer.commit(
            offsets=[TopicPartition(topic, p, end) for p, end in enumerate(ends)], asynchronous=False
        )
        consumer.close()


def worker_memory(config: dict[str, Any], groups: int, partitions: int, messages: int) -> dict[str, Any]:
    """Peak RSS growth of plan + seed + verify for ``groups`` x ``partitions`` over ``messages`` of data."""
    topic = bench.new_topic(config, "mem", partitions)
    names = [f"{topic}-g{i}" for i in range(groups)]
    _fill(config, topic, messages, names)
    env = {**os.environ, "AIRFLOW_CONN_KAFKA_DEFAULT": json.dumps({"conn_type": "kafka", "extra": config})}
    out = subprocess.run(
        [sys.executable, "-c", _MEMORY_PROBE, topic, json.dumps(names), str(partitions * 2)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    sample = json.loads(out.stdout.strip().splitlines()[-1])
    growth = sample["peak_kib"] - sample["base_kib"]
    return {
        "groups": groups,
        "partitions": partitions,
        "messages": messages,
        "rss_growth_kib": growth,
        "peak_kib": sample["peak_kib"],
        "heap_peak_kib": sample["heap_peak"] / 1024,
    }


#: The pause window against the restarts, per consumer count and DAG layout.
WINDOWS = [
    Column("consumers", "consumers"),
    Column("layout", "layout"),
    Column("restart plain", "restart_plain_s", ".3f"),
    Column("restart same", "restart_same_s", ".3f"),
    Column("window", "pause_window_s", ".3f"),
    Column("ratio", "ratio", ".2f"),
    Column("<=1.2", "meets_target"),
    Column("vs plain", "ratio_vs_plain", ".2f"),
    Column("safe run", "safe_run_s", ".2f"),
    Column("lost", "lost"),
]
#: The worker's memory per groups x partitions x messages.
MEMORY = [
    Column("groups", "groups"),
    Column("partitions", "partitions"),
    Column("messages", "messages"),
    Column("RSS KiB", "rss_growth_kib"),
    Column("Python heap KiB", "heap_peak_kib", ".1f"),
]


def print_table(result: dict[str, Any]) -> None:
    bench.print_table(
        result["pause_window"],
        WINDOWS,
        title="\nConsumer downtime, measured in the consumer threads: first consumer stops -> all consumers"
        " hold all 8 partitions again\n(seconds, medians; restart = every consumer close()s, new ones"
        " subscribe; ratio = window / restart of the same ControlledConsumers)",
    )
    bench.print_table(
        result["memory"], MEMORY, title="\nWorker memory: peak growth while plan + seed + verify run"
    )
    print(f"\nmemory independent of message count: {result['memory_flat_in_messages']}")


def _rounded(sample: dict[str, float]) -> dict[str, float]:
    keep = ("window", "stopped", "subscribed", "run", "lost")
    return {k: round(v, 4) for k, v in sample.items() if k in keep}


def measure_windows(
    config: dict[str, Any], dags: dict[str, Any], consumers: int, repeats: int
) -> list[dict[str, Any]]:
    """Plain restarts and both DAG layouts, alternating, ``repeats`` times each, for ``consumers`` consumers."""
    restarts: dict[str, list[dict[str, float]]] = {"plain": [], "same": []}
    safe: dict[str, list[dict[str, float]]] = {name: [] for name in dags}
    for r in range(repeats):
        for kind, name in zip(("plain", "same"), dags, strict=True):
            progress(f"{consumers} consumers, round {r + 1}/{repeats}: restart {kind}, then {name}")
            restarts[kind].append(plain_restart(config, consumers, controlled=kind == "same"))
            safe[name].append(safe_window(config, dags[name], consumers))
    plain = statistics.median(x["window"] for x in restarts["plain"])
    same = statistics.median(x["window"] for x in restarts["same"])
    rows = []
    for name, runs in safe.items():
        window = statistics.median(x["window"] for x in runs)
        rows.append(
            {
                "consumers": consumers,
                "layout": name,
                "restart_plain_s": round(plain, 4),
                "restart_same_s": round(same, 4),
                "pause_window_s": round(window, 4),
                "safe_run_s": round(statistics.median(x["run"] for x in runs), 3),
                "lost": int(sum(x["lost"] for x in runs)),
                "ratio": round(window / same, 3),
                "meets_target": window / same <= 1.2,
                "ratio_vs_plain": round(window / plain, 3),
                "meets_target_vs_plain": window / plain <= 1.2,
                "samples": {
                    "restart_plain": [_rounded(x) for x in restarts["plain"]],
                    "restart_same": [_rounded(x) for x in restarts["same"]],
                    "runs": [_rounded(x) for x in runs],
                },
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--consumers", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-memory", action="store_true", help="skip the worker-memory part")
    args = parser.parse_args(argv)
    result: dict[str, Any] = {
        "pause_window": [],
        "memory": [],
        "check_interval_s": CHECK_INTERVAL,
        "definition": WINDOW_DEFINITION,
    }
    with broker() as config:
        dags = airflow_env(config)
        for name, dag in dags.items():  # not counted: the first run of each layout pays imports and caches
            progress(f"warm-up run of {name}")
            safe_window(config, dag, 2)
        for n in args.consumers:
            result["pause_window"] += measure_windows(config, dags, n, args.repeats)
        for groups, partitions, messages in [
            (1, 8, 10_000),
            (1, 8, 200_000),
            (4, 8, 10_000),
            (4, 64, 10_000),
            (16, 64, 10_000),
        ]:
            if not args.no_memory:
                result["memory"].append(worker_memory(config, groups, partitions, messages))
        del dag
        dags.clear()  # the DAGs' hooks may hold Kafka clients: the broker's stop collects them first
    if args.no_memory and RESULTS.exists():  # keep the last memory measurement
        result["memory"] = json.loads(RESULTS.read_text()).get("memory", [])
    small, large = result["memory"][0], result["memory"][1]
    result["memory_flat_in_messages"] = (
        abs(large["rss_growth_kib"] - small["rss_growth_kib"]) <= 2048
        and large["heap_peak_kib"] <= small["heap_peak_kib"] * 1.1 + 64
    )
    bench.write_results(RESULTS, result)
    print_table(result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
