"""Benchmark the safe partition increase (not a timed test).

    .venv/bin/python bench/bench_partition_increase.py [--consumers 2 4] [--repeats 3]

Measures, in one run on one broker:

* **pause window** — how long the consumers are out of their group during the DAG's safe 1 -> 8 increase
  (first consumer leaves -> the group is back STABLE with all 8 partitions assigned, as sampled from the
  broker every 50 ms), next to a **plain stop and restart** of the same consumers (first close ->
  STABLE with all partitions assigned). Target: window <= 1.2x the plain restart.
* **whole safe run** — wall time of the ``kstate_partition_increase`` DAG run (``dag.test()``) at 1 -> 8.
* **worker memory** — peak RSS of a process that runs plan, seed and verify for G groups x P partitions
  over topics holding 10k vs 200k messages: it grows with G x P and not with the data, because no
  message passes through the worker.

Consumer throughput with and without the client piece is ``bench/bench_client_throughput.py``.
Starts its own embedded broker unless ``KSTATE_BOOTSTRAP_SERVERS`` is set. Prints a table and writes
``bench/results/partition_increase.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import embedded_broker  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "partition_increase.json"
#: The controlled consumers' ``check_interval``: how soon they see a pause or resume (their reaction time).
CHECK_INTERVAL = 0.05


@contextlib.contextmanager
def broker() -> Iterator[dict[str, Any]]:
    extra = json.loads(os.environ.get("KSTATE_KAFKA_CONFIG", "{}"))
    if os.environ.get("KSTATE_BOOTSTRAP_SERVERS"):
        yield {"bootstrap.servers": os.environ["KSTATE_BOOTSTRAP_SERVERS"], **extra}
        return
    with embedded_broker.running(ROOT / ".kstate" / "bench-broker") as bootstrap:
        yield {"bootstrap.servers": bootstrap}


BENCH_DAGS = """
from __future__ import annotations
import pendulum
from airflow.sdk import DAG
from airflow_provider_kstate.task_groups.partition_increase import safe_partition_increase
for dag_id, single in (("bench_per_step", False), ("bench_single_window", True)):
    with DAG(dag_id=dag_id, schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
             render_template_as_native_obj=True) as dag:
        safe_partition_increase(topic="{{ dag_run.conf['topic'] }}", partitions="{{ dag_run.conf['partitions'] }}",
                                consumer_groups="{{ dag_run.conf['consumer_groups'] }}", single_window=single)
    globals()[dag_id] = dag
"""


def airflow_env(config: dict[str, Any]) -> dict[str, Any]:
    """Point Airflow at a bench DAG folder holding the per-step and the single-window layouts."""
    home = ROOT / ".kstate" / "bench-airflow"
    dags = home / "dags"
    dags.mkdir(parents=True, exist_ok=True)
    (dags / "bench_dags.py").write_text(BENCH_DAGS)
    os.environ.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
            "AIRFLOW_CONN_KAFKA_DEFAULT": json.dumps({"conn_type": "kafka", "extra": config}),
        }
    )
    subprocess.run(
        [str(Path(sys.executable).with_name("airflow")), "db", "migrate"], check=True, capture_output=True
    )
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(dags))
    assert not bag.import_errors, bag.import_errors
    return {"per_step": bag.get_dag("bench_per_step"), "single_window": bag.get_dag("bench_single_window")}


def create_topic(config: dict[str, Any], prefix: str, partitions: int) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"bench-{prefix}-{uuid.uuid4().hex[:6]}"
    admin = AdminClient(config)
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(timeout=30)
    return name


def plain_restart(config: dict[str, Any], consumers: int, controlled: bool) -> float:
    """Stop the consumers of a group and start them again; return seconds until the group is back.

    :param controlled: the consumers are the client piece's (the same consumers as in the safe run).
    """
    from traffic import ConsumerFleet, GroupWatcher, SeqProducer, warm_up

    topic = create_topic(config, "restart", 8)
    group = f"{topic}-g"
    fleet = ConsumerFleet(
        config, topic, group, n=consumers, controlled=controlled, check_interval=CHECK_INTERVAL
    )
    producer = SeqProducer(config, topic, rate=200)
    producer.start()
    watcher = GroupWatcher(config, group, topic)
    watcher.start()
    try:
        warm_up(producer, fleet)
        started = time.monotonic()
        fleet.stop()
        fleet = ConsumerFleet(
            config, topic, group, n=consumers, controlled=controlled, check_interval=CHECK_INTERVAL
        )
        deadline = time.monotonic() + 60
        while watcher.back_at(started, 8) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        back = watcher.back_at(started, 8)
    finally:
        watcher.stop()
        producer.stop()
        fleet.stop()
    if back is None:
        raise RuntimeError("consumers did not come back within 60 s")
    return back - started


def safe_window(config: dict[str, Any], dag: Any, consumers: int) -> dict[str, float]:
    """Run the DAG 1 -> 8 under traffic; return the consumers' pause window and the run's wall time."""
    from traffic import ConsumerFleet, GroupWatcher, SeqProducer, loss, warm_up

    topic = create_topic(config, "safe", 1)
    group = f"{topic}-g"
    fleet = ConsumerFleet(config, topic, group, n=consumers, controlled=True, check_interval=CHECK_INTERVAL)
    producer = SeqProducer(config, topic, rate=200, controlled=True)
    producer.start()
    watcher = GroupWatcher(config, group, topic)
    watcher.start()
    try:
        since = warm_up(producer, fleet)
        started = time.monotonic()
        dr = dag.test(run_conf={"topic": topic, "partitions": 8, "consumer_groups": [group]})
        run_seconds = time.monotonic() - started
        if dr.state != "success":
            raise RuntimeError(f"DAG run {dr.run_id} ended {dr.state}")
        left = min(t for t, state in fleet.events if state == "paused")
        back = watcher.back_at(left, 8)
    finally:
        watcher.stop()
        producer.stop()
    lost = loss(producer, fleet, since, drain_timeout=30)
    fleet.stop()
    if back is None:
        raise RuntimeError("the group was not seen STABLE with 8 partitions after the run")
    return {"window": back - left, "run": run_seconds, "lost": float(len(lost))}


_MEMORY_PROBE = r"""
import json, resource, sys, time, tracemalloc
from types import SimpleNamespace
from airflow_provider_kstate.hooks.admin import KStateAdminHook
from airflow_provider_kstate.operators.seed import KStateSeedOffsetsOperator
from airflow_provider_kstate.operators.verify import KStateVerifyOperator
from airflow_provider_kstate.utils.plan import build_plan
from confluent_kafka.admin import NewPartitions
topic, groups, target = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
hook = KStateAdminHook()
hook.partition_count(topic)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
tracemalloc.start()
plan = build_plan(hook, topic, target, groups)
admin = hook.get_conn()
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
    topic = create_topic(config, "mem", partitions)
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


def print_table(result: dict[str, Any]) -> None:
    print("\nConsumer pause window during the safe 1 -> 8 increase vs a plain restart (seconds, medians)")
    print(
        f"{'consumers':>9} {'layout':>13} {'restart plain':>13} {'restart same':>12} {'window':>7} "
        f"{'ratio':>6} {'<=1.2':>6} {'safe run':>9} {'lost':>5}"
    )
    for row in result["pause_window"]:
        print(
            f"{row['consumers']:>9} {row['layout']:>13} {row['restart_plain_s']:>13.2f} {row['restart_same_s']:>12.2f}"
            f" {row['pause_window_s']:>7.2f} {row['ratio']:>6.2f} {str(row['meets_target']):>6} {row['safe_run_s']:>9.1f}"
            f" {row['lost']:>5}"
        )
    print("\nWorker memory: peak growth while plan + seed + verify run")
    print(f"{'groups':>6} {'partitions':>10} {'messages':>9} {'RSS KiB':>8} {'Python heap KiB':>16}")
    for row in result["memory"]:
        print(
            f"{row['groups']:>6} {row['partitions']:>10} {row['messages']:>9} {row['rss_growth_kib']:>8}"
            f" {row['heap_peak_kib']:>16.1f}"
        )
    print(f"\nmemory independent of message count: {result['memory_flat_in_messages']}")


def measure_windows(
    config: dict[str, Any], dags: dict[str, Any], consumers: int, repeats: int
) -> list[dict[str, Any]]:
    """Plain restarts and both DAG layouts, interleaved, for ``consumers`` consumers."""
    samples: dict[str, list[float]] = {"plain": [], "same": []}
    safe: dict[str, list[dict[str, float]]] = {name: [] for name in dags}
    for _ in range(repeats):
        samples["plain"].append(plain_restart(config, consumers, controlled=False))
        samples["same"].append(plain_restart(config, consumers, controlled=True))
        for name, dag in dags.items():
            safe[name].append(safe_window(config, dag, consumers))
    rows = []
    for name, runs in safe.items():
        row: dict[str, Any] = {
            "consumers": consumers,
            "layout": name,
            "restart_plain_s": statistics.median(samples["plain"]),
            "restart_same_s": statistics.median(samples["same"]),
            "pause_window_s": statistics.median(r["window"] for r in runs),
            "safe_run_s": statistics.median(r["run"] for r in runs),
            "lost": int(sum(r["lost"] for r in runs)),
            "samples": {"restart_plain": samples["plain"], "restart_same": samples["same"], "runs": runs},
        }
        row["ratio"] = row["pause_window_s"] / row["restart_same_s"]
        row["meets_target"] = row["ratio"] <= 1.2
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--consumers", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    result: dict[str, Any] = {"pause_window": [], "memory": [], "check_interval_s": CHECK_INTERVAL}
    with broker() as config:
        dags = airflow_env(config)
        for n in args.consumers:
            result["pause_window"] += measure_windows(config, dags, n, args.repeats)
        for groups, partitions, messages in [
            (1, 8, 10_000),
            (1, 8, 200_000),
            (4, 8, 10_000),
            (4, 64, 10_000),
            (16, 64, 10_000),
        ]:
            result["memory"].append(worker_memory(config, groups, partitions, messages))
    small, large = result["memory"][0], result["memory"][1]
    result["memory_flat_in_messages"] = (
        abs(large["rss_growth_kib"] - small["rss_growth_kib"]) <= 2048
        and large["heap_peak_kib"] <= small["heap_peak_kib"] * 1.1 + 64
    )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2))
    print_table(result)
    print(f"\nwrote {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
