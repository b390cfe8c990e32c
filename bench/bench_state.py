"""Benchmark of the Spark state applications against the limit: one plain consumer draining the changelog.

    .venv/bin/python bench/bench_state.py [--records 1000000] [--big-records 4000000] [--skip-big]
    .venv/bin/python bench/bench_state.py --fast-check-only   # the fast check alone, in a minute

Measured in one run, on changelogs of ``--records`` and ``--big-records`` records in 16 partitions (half as
many distinct keys), each time:

* limit: one confluent-kafka consumer (``consume()`` batches, read_committed) draining the changelog and
  doing nothing else, records/s. Two ways, each twice: every partition assigned at once, and one partition
  after another; the limit is the fastest of the four (the strictest yardstick for the apps);
* rebuild and deep check at ``local[1]`` and ``local[2]`` via ``spark-submit``: records/s = the app's
  ``records_read`` / the app's own ``seconds`` (timed inside the application from a ready SparkSession to
  the report, so JVM start-up and session creation are excluded; the wall time is printed too);
* the *marginal* rate of each app at ``local[2]``: the extra records of the big changelog over the extra
  seconds, i.e. the rate once the application's fixed cost (a fresh JVM's first Spark jobs) is paid;
* CPU: the CPU seconds of the spark-submit process tree and of the broker during each app, and the
  average cores they kept busy (the machine's cores bound what ``local[2]`` can gain over ``local[1]``);
* peak driver RSS (the driver JVM, which in local mode also hosts the executors, and the Python driver
  process, each polled from /proc) of the local[2] rebuild at both sizes;
* driver memory apart from the executors': the rebuild once more at each size in ``local-cluster[1,2,1024]``
  mode (one executor JVM with 2 cores, separate from the driver JVM), reporting the peak RSS of the driver
  JVM, the executor JVM and the Python driver, and the driver JVM's heap after each GC (from its GC log:
  the largest value is an upper bound of what the driver keeps alive, whatever the executors hold);
* the fast check on topics of 10, 100 and 1,000 partitions (:data:`FAST_CHECK_SIZES`), two ways side by
  side: the provider's (``store.fast_check.fast_check`` on the admin verbs, what ``KStateSnapshotHook.
  fast_check`` and the fast check task run: the topic's metadata, the manifest, the snapshot's files, a
  log-start and a high-watermark ListOffsets round) and the Spark side's (``read_manifest`` + one
  ``kafka_io.list_offsets`` round, a fresh client each time). Each after a warm-up of its connection (the
  topic's creation is not timed: Apache Kafka brings new partitions online over seconds); the first timed
  call apart, then the median and max of :data:`FAST_CHECK_RUNS` more; ratios against the smallest topic
  show how the cost grows with the partitions. The 1,000-partition target was a test's wall-clock bound
  (``test_fast_check_of_a_1000_partition_topic...``), which failed a newcomer's loaded 2-core ``make test``
  at 1.045 s: measured here, with the machine's load beside it, and no test times it.

Targets: rebuild >= 50% of the limit at local[2], deep check >= 70%, local[2] >= 1.6x local[1], peak RSS at
the big size within 10% of the small one (checked for the local[2] JVM, the local-cluster driver JVM and
its heap after GC), the provider's fast check of 1,000 partitions <= 1 s (median). Writes
``bench/results/state.json``; ``--fast-check-only`` measures the fast check alone and writes
``bench/results/state_fast_check.json`` (state.json keeps the last full run).
The broker is the one of ``KSTATE_BOOTSTRAP_SERVERS`` or an embedded one started here.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from kstate_support import bench
from kstate_support import broker as broker_helper
from kstate_support.bench import Column

from airflow_provider_kstate.spark_apps import kafka_io
from airflow_provider_kstate.store.manifest import (
    Manifest,
    PartitionStats,
    read_manifest,
    write_manifest,
)

ROOT = Path(__file__).resolve().parent.parent
APPS = ROOT / "airflow_provider_kstate" / "spark_apps"
RESULTS = bench.results_path("state")
FAST_CHECK_RESULTS = bench.results_path("state_fast_check")
PARTITIONS = 16
#: The changelog's topic settings: compacted, one active segment (so nothing is compacted away).
CHANGELOG = {"cleanup.policy": "compact", "segment.bytes": str(1 << 30)}
VALUE = b"v" * 24
#: The memory runs: a driver JVM apart from one executor JVM (2 cores, 1 GiB), so the driver's own memory shows.
MEMORY_MASTER = "local-cluster[1,2,1024]"
#: RSS and CPU of the application's processes are polled this often; its process tree is re-read every
#: ``TREE_EVERY`` polls.
POLL_SECONDS = 0.05
TREE_EVERY = 4


#: The embedded broker's data folder under ``.kstate/`` (:func:`broker_cpu` finds the broker by it).
BROKER = "broker-bench-state"
#: The broker under test: the cluster of ``KSTATE_BOOTSTRAP_SERVERS``, else an embedded one.
broker = functools.partial(bench.broker, BROKER)


def produce(conf: dict[str, Any], topic: str, records: int) -> float:
    """Produce ``records`` small records (keys repeat: records/2 distinct) as fast as possible; return seconds."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            **conf,
            "partitioner": "murmur2_random",
            "linger.ms": 50,
            "batch.size": 1 << 20,
            "batch.num.messages": 100_000,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 1 << 21,
            "compression.type": "lz4",
            "acks": 1,
        }
    )
    distinct = max(1, records // 2)
    started = time.monotonic()
    produce_one = producer.produce
    for i in range(records):
        key = b"key-%010d" % (i % distinct)
        while True:
            try:
                produce_one(topic, VALUE, key)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 100_000 == 0:
            producer.poll(0)
    assert producer.flush(300) == 0
    return time.monotonic() - started


def drain_each(conf: dict[str, Any], topic: str, ranges: dict[int, tuple[int, int]]) -> int:
    """One consumer reading the partitions one after another (same consumer, re-assigned)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(kafka_io.consumer_config(conf))
    count = 0
    try:
        for p, (start, end) in sorted(ranges.items()):
            consumer.assign([TopicPartition(topic, p, start)])
            following = start
            while following < end:
                msgs = consumer.consume(max(1, min(kafka_io.BATCH, end - following)), timeout=1.0)
                records = [m for m in msgs if m.error() is None]
                count += len(records)
                if records:
                    following = (records[-1].offset() or 0) + 1
                elif msgs:
                    break  # partition EOF before ``end``: nothing more to read
    finally:
        consumer.close()
    return count


def limit(conf: dict[str, Any], topic: str) -> dict[str, Any]:
    """One plain consumer draining the changelog, nothing else: the best of two ways, each run twice."""
    offsets = kafka_io.list_offsets(conf, topic, list(range(PARTITIONS)))
    runs: list[dict[str, Any]] = []
    for way, drain in (("all partitions", kafka_io.drain_count), ("one by one", drain_each)) * 2:
        started = time.monotonic()
        count = drain(conf, topic, offsets)
        runs.append({"way": way, "records": count, "seconds": round(time.monotonic() - started, 3)})
    best = min(runs, key=lambda r: r["seconds"])
    return {**best, "records_per_s": round(best["records"] / best["seconds"]), "runs": runs}


class RssPoller(threading.Thread):
    """Poll the peak RSS of the driver JVM, executor JVMs (local-cluster mode) and Python driver, and the CPU
    time of the whole process tree."""

    def __init__(self, root_pid: int, app: str) -> None:
        super().__init__(daemon=True)
        self.root_pid, self.app = root_pid, app
        self.peak = {"jvm": 0, "executor_jvm": 0, "python_driver": 0}
        self.cpu: dict[int, float] = {}  # pid -> last seen utime + stime, seconds
        self.stop = threading.Event()

    def run(self) -> None:
        # finding the tree scans all of /proc (~6 ms of CPU each time): done every TREE_EVERY polls only, so
        # the poller itself takes ~3% of a core from the application it measures, not ~12%
        tree: list[tuple[int, str]] = []
        polls = 0
        while not self.stop.is_set():
            if polls % TREE_EVERY == 0:
                tree = _tree(self.root_pid)
            polls += 1
            for pid, cmd in tree:
                kind = _kind(cmd, self.app)
                if kind:
                    self.peak[kind] = max(self.peak[kind], _rss(pid))
                self.cpu[pid] = max(self.cpu.get(pid, 0.0), bench.process_cpu_s(pid))
            time.sleep(POLL_SECONDS)


def _kind(cmd: str, app: str) -> str | None:
    """Return which process of an application a command line is (None: not one of those polled)."""
    if "org.apache.spark.deploy.SparkSubmit" in cmd:
        return "jvm"
    if "CoarseGrainedExecutorBackend" in cmd:
        return "executor_jvm"
    if app in cmd and "python" in cmd.split("\0")[0]:
        return "python_driver"
    return None


def broker_cpu() -> float:
    """CPU seconds the embedded broker of this benchmark has used (0 with a named cluster)."""
    return bench.broker_cpu_s(bench.broker_dir(BROKER)) or 0.0


def _tree(root: int) -> list[tuple[int, str]]:
    children: dict[int, list[int]] = {}
    cmds: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmds[int(entry.name)] = (entry / "cmdline").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append((pid, cmds.get(pid, "")))
        todo.extend(children.get(pid, []))
    return out


def _rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def submit(app: str, master: str, args: list[str], extra: list[str] | None = None) -> dict[str, Any]:
    """Run one application with spark-submit; return its report plus wall time and peak RSS.

    :param extra: more spark-submit options (the memory runs' GC log).
    """
    venv_bin = Path(sys.executable).parent
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PATH": f"{venv_bin}{os.pathsep}{os.environ['PATH']}",
    }
    report = Path(args[args.index("--report-file") + 1])
    cmd = [str(venv_bin / "spark-submit"), "--master", master, "--conf", "spark.log.level=ERROR"]
    cmd += ["--conf", "spark.ui.enabled=false", *(extra or []), str(APPS / app), *args]
    started = time.monotonic()
    broker_started = broker_cpu()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    poller = RssPoller(proc.pid, app)
    poller.start()
    out, err = proc.communicate()
    poller.stop.set()
    poller.join()
    wall = time.monotonic() - started
    broker_seconds = broker_cpu() - broker_started
    if proc.returncode != 0:
        raise RuntimeError(f"{app} failed ({proc.returncode}): {err[-2000:]}")
    result = json.loads(report.read_text())
    result["wall_seconds"] = round(wall, 3)
    result["peak_rss"] = poller.peak
    result["cpu"] = {
        "app_seconds": round(sum(poller.cpu.values()), 2),
        "broker_seconds": round(broker_seconds, 2),
        "cores_busy": round((sum(poller.cpu.values()) + broker_seconds) / wall, 2),
    }
    return result


def app_args(conf_file: str, topic: str, uri: str, report: Path) -> list[str]:
    return [
        "--kafka-config-file",
        conf_file,
        "--topic",
        topic,
        "--snapshot-uri",
        uri,
        "--report-file",
        str(report),
    ]


def run_app(app: str, master: str, conf_file: str, topic: str, uri: str, work: Path) -> dict[str, Any]:
    report = work / f"{app}-{master}-{uuid.uuid4().hex[:6]}.json"
    result = submit(app, master, app_args(conf_file, topic, uri, report))
    seconds = result["seconds"]
    return {
        "master": master,
        "records": result["records_read"],
        "seconds_in_app": seconds,
        "wall_seconds": result["wall_seconds"],
        "records_per_s": round(result["records_read"] / seconds),
        "ok": result["ok"],
        "peak_rss_jvm_mib": round(result["peak_rss"]["jvm"] / 2**20, 1),
        "peak_rss_python_driver_mib": round(result["peak_rss"]["python_driver"] / 2**20, 1),
        "cpu": result["cpu"],
    }


def heap_after_gc(log: Path) -> dict[str, Any]:
    """Return the largest and the last heap size after a GC in a JVM's ``-Xlog:gc`` log, MiB.

    :param log: the log; lines such as ``GC(3) Pause Young (Normal) (G1 Evacuation Pause) 24M->3M(256M) 2.3ms``.
    """
    import re

    after = [int(m.group(1)) for m in re.finditer(r"\d+M->(\d+)M\(", log.read_text())]
    return {"gcs": len(after), "max_mib": max(after, default=0), "last_mib": after[-1] if after else 0}


def run_memory(conf_file: str, topic: str, uri: str, work: Path) -> dict[str, Any]:
    """Rebuild in :data:`MEMORY_MASTER` mode: the driver JVM's RSS and heap apart from the executor's."""
    tag = uuid.uuid4().hex[:6]
    report, gc_log = work / f"memory-{tag}.json", work / f"gc-{tag}.log"
    extra = ["--driver-java-options", f"-Xlog:gc:file={gc_log}"]
    result = submit("rebuild.py", MEMORY_MASTER, app_args(conf_file, topic, uri, report), extra)
    mib = {kind: round(value / 2**20, 1) for kind, value in result["peak_rss"].items()}
    return {
        "master": MEMORY_MASTER,
        "records": result["records_read"],
        "seconds_in_app": result["seconds"],
        "ok": result["ok"],
        "peak_rss_driver_jvm_mib": mib["jvm"],
        "peak_rss_executor_jvm_mib": mib["executor_jvm"],
        "peak_rss_python_driver_mib": mib["python_driver"],
        "driver_heap_after_gc": heap_after_gc(gc_log),
    }


#: The fast check's topic sizes, partitions: how its cost grows with them, in one run.
FAST_CHECK_SIZES = (10, 100, 1000)
#: Timed fast checks per size and way after the first one (their median and max are reported).
FAST_CHECK_RUNS = 5


def _timed(call: Any) -> float:
    started = time.monotonic()
    call()
    return time.monotonic() - started


def fast_check(conf: dict[str, Any], work: Path, partitions: int) -> dict[str, Any]:
    """Time the provider's fast check and the Spark side's on a fresh ``partitions``-partition changelog
    whose snapshot manifest matches it (every partition passes)."""
    from airflow_provider_kstate.cluster.admin import ClusterAdmin
    from airflow_provider_kstate.store.fast_check import fast_check as provider_check
    from airflow_provider_kstate.store.uri import uri_problem

    with bench.scratch_topic(conf, "wide", partitions, CHANGELOG) as topic:
        stats = {p: PartitionStats(0, 0, 0, "0" * 16) for p in range(partitions)}
        uri = str(work / f"wide-{partitions}")
        write_manifest(uri, Manifest(topic=topic, partitions=partitions, partition_stats=stats))
        # a long request timeout: a loaded broker brings 1,000 new partitions online slowly (NOT_LEADER
        # answers are asked again until it)
        admin = ClusterAdmin(conf, timeout=120, name="bench")
        admin.partition_count(topic)  # the warm-up the test had: the connection and the leaders known
        admin.log_starts(topic, range(partitions))

        def provider() -> None:
            assert not uri_problem(uri)  # the hook's URI check, without Airflow
            report = provider_check(admin, topic, uri)
            assert report.ok and len(report.partitions) == partitions, report.problems

        def spark_side() -> None:
            manifest = read_manifest(uri)
            offsets = kafka_io.list_offsets(conf, topic, sorted(manifest.partition_stats))
            assert len(offsets) == partitions

        spark_side()  # metadata warm-up, as a hook's connection
        row: dict[str, Any] = {"partitions": partitions}
        for way, call in (("provider", provider), ("spark_side", spark_side)):
            first = _timed(call)
            runs = sorted(_timed(call) for _ in range(FAST_CHECK_RUNS))
            row[way] = {
                "first_s": round(first, 4),
                "median_s": round(runs[len(runs) // 2], 4),
                "max_s": round(runs[-1], 4),
            }
        return row


def measure_fast_check(conf: dict[str, Any], work: Path) -> dict[str, Any]:
    """The fast check at every size of :data:`FAST_CHECK_SIZES`, with the ratios side by side: each size's
    median against the smallest size's (growth) and the provider's against the Spark side's."""
    load_before = os.getloadavg()
    sizes = []
    for partitions in FAST_CHECK_SIZES:
        bench.progress(f"fast check: {partitions} partitions")
        sizes.append(fast_check(conf, work, partitions))
    base = sizes[0]
    for row in sizes:
        for way in ("provider", "spark_side"):
            row[way]["over_smallest"] = round(row[way]["median_s"] / base[way]["median_s"], 2)
        row["provider_over_spark_side"] = round(
            row["provider"]["median_s"] / row["spark_side"]["median_s"], 2
        )
    return {
        "sizes": sizes,
        "runs_per_size": FAST_CHECK_RUNS,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }


def measure_size(conf: dict[str, Any], records: int, work: Path, conf_file: str) -> dict[str, Any]:
    """Produce one changelog of ``records`` and measure the limit and every app on it."""
    out: dict[str, Any] = {"records": records}
    with bench.scratch_topic(conf, "log", PARTITIONS, CHANGELOG) as topic:
        out["produce_seconds"] = round(produce(conf, topic, records), 2)
        out["limit"] = limit(conf, topic)
        uri = str(work / f"snapshot-{records}")
        for app in ("rebuild", "deep_check"):
            for master in ("local[1]", "local[2]"):
                out[f"{app} {master}"] = run_app(f"{app}.py", master, conf_file, topic, uri, work)
        out["memory"] = run_memory(conf_file, topic, str(work / f"snapshot-mem-{records}"), work)
    return out


def marginal(small: dict[str, Any], big: dict[str, Any], job: str) -> dict[str, Any]:
    """Return the rate of ``job`` once its fixed cost is paid: extra records over extra seconds."""
    a, b = small[job], big[job]
    extra = b["seconds_in_app"] - a["seconds_in_app"]
    rate = (b["records"] - a["records"]) / extra if extra > 0 else float("inf")
    fixed = a["seconds_in_app"] - a["records"] / rate if extra > 0 else 0.0
    return {"records_per_s": round(rate), "fixed_seconds": round(fixed, 2)}


def measure(conf: dict[str, Any], records: int, big: int | None, work: Path) -> dict[str, Any]:
    conf_file = work / "kafka.json"
    conf_file.write_text(json.dumps(conf))
    res: dict[str, Any] = {"partitions": PARTITIONS, "cores": os.cpu_count()}
    res["sizes"] = [
        measure_size(conf, n, work, str(conf_file)) for n in ([records, big] if big else [records])
    ]
    if big:
        small, large = res["sizes"]
        res["marginal"] = {
            job: marginal(small, large, job) for job in ("rebuild local[2]", "deep_check local[2]")
        }
    res["fast_check"] = measure_fast_check(conf, work)
    return res


def size_verdicts(size: dict[str, Any]) -> list[tuple[str, str, str, bool]]:
    n, lim = size["records"], size["limit"]["records_per_s"]
    r1, r2 = size["rebuild local[1]"]["records_per_s"], size["rebuild local[2]"]["records_per_s"]
    c1, c2 = size["deep_check local[1]"]["records_per_s"], size["deep_check local[2]"]["records_per_s"]
    return [
        (f"rebuild local[2] / limit @{n}", f"{r2 / lim:.0%}", ">= 50%", r2 / lim >= 0.5),
        (f"deep check local[2] / limit @{n}", f"{c2 / lim:.0%}", ">= 70%", c2 / lim >= 0.7),
        (f"rebuild local[2] / local[1] @{n}", f"{r2 / r1:.2f}x", ">= 1.6x", r2 / r1 >= 1.6),
        (f"deep check local[2] / local[1] @{n}", f"{c2 / c1:.2f}x", ">= 1.6x", c2 / c1 >= 1.6),
    ]


def verdicts(res: dict[str, Any]) -> list[tuple[str, str, str, bool]]:
    rows = [row for size in res["sizes"] for row in size_verdicts(size)]
    lim = res["sizes"][-1]["limit"]["records_per_s"]
    for job, goal in (("rebuild local[2]", 0.5), ("deep_check local[2]", 0.7)):
        if job in res.get("marginal", {}):
            rate = res["marginal"][job]["records_per_s"]
            rows.append(
                (f"{job} marginal / limit", f"{rate / lim:.0%}", f">= {goal:.0%}", rate / lim >= goal)
            )
    rows += fast_check_verdicts(res["fast_check"])
    if len(res["sizes"]) == 2:
        rows += memory_verdicts(*res["sizes"])
    return rows


def fast_check_verdicts(fast: dict[str, Any]) -> list[tuple[str, str, str, bool]]:
    """The provider's fast check of the largest topic (1,000 partitions): median <= 1 s."""
    row = fast["sizes"][-1]
    seconds = row["provider"]["median_s"]
    return [(f"fast check, {row['partitions']} partitions", f"{seconds:.3f} s", "<= 1 s", seconds <= 1)]


def memory_verdicts(small: dict[str, Any], big: dict[str, Any]) -> list[tuple[str, str, str, bool]]:
    """Peak memory at the big size against the small one: local[2] JVM and Python driver, and the
    local-cluster driver JVM (RSS, and its largest heap after a GC)."""
    pairs = [
        (f"peak RSS {kind} local[2]", small["rebuild local[2]"][key], big["rebuild local[2]"][key])
        for kind, key in (("jvm", "peak_rss_jvm_mib"), ("python_driver", "peak_rss_python_driver_mib"))
    ]
    a, b = small["memory"], big["memory"]
    pairs.append(
        ("peak RSS driver JVM local-cluster", a["peak_rss_driver_jvm_mib"], b["peak_rss_driver_jvm_mib"])
    )
    pairs.append(
        (
            "driver heap after GC (max) local-cluster",
            a["driver_heap_after_gc"]["max_mib"],
            b["driver_heap_after_gc"]["max_mib"],
        )
    )
    tag = f"{big['records']} vs {small['records']} rec"
    return [(f"{name} {tag}", f"{y / x - 1:+.1%}", "<= +10%", y <= x * 1.1) for name, x, y in pairs]


#: Per changelog size: the limit, then each application at local[1] and local[2].
SIZE_COLUMNS = [
    Column("job", "job", align="<"),
    Column("records", "records"),
    Column("s (in app)", "seconds_in_app"),
    Column("s (wall)", "wall_seconds"),
    Column("records/s", "records_per_s"),
    Column("JVM RSS MiB", "peak_rss_jvm_mib"),
    Column("py RSS MiB", "peak_rss_python_driver_mib"),
    Column("app CPU s", "app_seconds"),
    Column("broker CPU s", "broker_seconds"),
    Column("cores busy", "cores_busy"),
]
JOBS = ("rebuild local[1]", "rebuild local[2]", "deep_check local[1]", "deep_check local[2]")
#: The rebuild in MEMORY_MASTER mode, per changelog size.
MEMORY_COLUMNS = [
    Column("records", "records"),
    Column("s (in app)", "seconds_in_app"),
    Column("driver JVM RSS MiB", "peak_rss_driver_jvm_mib"),
    Column("executor JVM RSS MiB", "peak_rss_executor_jvm_mib"),
    Column("py RSS MiB", "peak_rss_python_driver_mib"),
    Column(
        "driver heap after GC: max / last MiB (GCs)",
        lambda m: "{max_mib} / {last_mib} ({gcs})".format(**m["driver_heap_after_gc"]),
    ),
]
#: The fast check per topic size: each way's first call, median and max (seconds), its median against the
#: smallest topic's, and the provider's median against the Spark side's.
FAST_CHECK_COLUMNS = [
    Column("partitions", "partitions"),
    Column("provider first s", lambda r: r["provider"]["first_s"], ".4f"),
    Column("provider median s", lambda r: r["provider"]["median_s"], ".4f"),
    Column("provider max s", lambda r: r["provider"]["max_s"], ".4f"),
    Column("provider x smallest", lambda r: r["provider"]["over_smallest"], ".2f"),
    Column("spark side median s", lambda r: r["spark_side"]["median_s"], ".4f"),
    Column("spark side max s", lambda r: r["spark_side"]["max_s"], ".4f"),
    Column("spark side x smallest", lambda r: r["spark_side"]["over_smallest"], ".2f"),
    Column("provider / spark side", "provider_over_spark_side", ".2f"),
]
#: The targets: (name, measured, goal, met) tuples of :func:`verdicts`.
VERDICT_COLUMNS = [
    Column("target", lambda v: v[0], align="<"),
    Column("measured", lambda v: v[1]),
    Column("goal", lambda v: v[2]),
    Column("met", lambda v: "yes" if v[3] else "NO", align="<"),
]


def print_size(size: dict[str, Any], cores: int) -> None:
    lim = size["limit"]
    rows = [{"job": "limit: 1 consumer", **lim, "seconds_in_app": lim["seconds"]}]
    rows += [{"job": name, **size[name], **size[name]["cpu"]} for name in JOBS]
    title = f"\nchangelog: {size['records']} records, {PARTITIONS} partitions, {cores} cores"
    bench.print_table(rows, SIZE_COLUMNS, title=title)


def print_memory(res: dict[str, Any]) -> None:
    title = f"\nmemory, rebuild in {MEMORY_MASTER} (driver JVM apart from the executor JVM)"
    bench.print_table([size["memory"] for size in res["sizes"]], MEMORY_COLUMNS, title=title)


def print_fast_check(fast: dict[str, Any], cores: int | None) -> None:
    title = (
        f"\nfast check, {fast['runs_per_size']} runs per size after the first; {cores} cores, load average "
        f"{fast['load_average_before'][0]} before, {fast['load_average_after'][0]} after"
    )
    bench.print_table(fast["sizes"], FAST_CHECK_COLUMNS, title=title)


def print_table(res: dict[str, Any]) -> None:
    for size in res["sizes"]:
        print_size(size, res["cores"])
    print_memory(res)
    print_fast_check(res["fast_check"], res["cores"])
    for job, m in res.get("marginal", {}).items():
        print(f"{job}: marginal {m['records_per_s']} records/s, fixed cost {m['fixed_seconds']} s")
    print()
    bench.print_table(verdicts(res), VERDICT_COLUMNS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--big-records", type=int, default=4_000_000)
    parser.add_argument("--skip-big", action="store_true", help="skip the RSS run at --big-records")
    parser.add_argument(
        "--fast-check-only",
        action="store_true",
        help="measure the fast check alone; write bench/results/state_fast_check.json",
    )
    args = parser.parse_args(argv)
    if args.fast_check_only:
        return main_fast_check()
    with broker() as conf, tempfile.TemporaryDirectory(prefix="kstate-bench-") as tmp:
        res = measure(conf, args.records, None if args.skip_big else args.big_records, Path(tmp))
    res["load_average_at_end"] = os.getloadavg()
    res["verdicts"] = [{"target": n, "measured": v, "goal": g, "met": m} for n, v, g, m in verdicts(res)]
    bench.write_results(RESULTS, res)
    print_table(res)
    return 0


def main_fast_check() -> int:
    """``--fast-check-only``: the fast check at every size, its table and its verdict."""
    with broker() as conf, tempfile.TemporaryDirectory(prefix="kstate-bench-") as tmp:
        fast = measure_fast_check(conf, Path(tmp))
    named = broker_helper.external_config() is not None
    res: dict[str, Any] = {
        "broker": conf["bootstrap.servers"] if named else broker_helper.describe(),
        "cores": os.cpu_count(),
        "commit": bench.git("rev-parse", "--short", "HEAD"),
        "fast_check": fast,
    }
    res["verdicts"] = [
        {"target": n, "measured": v, "goal": g, "met": m} for n, v, g, m in fast_check_verdicts(fast)
    ]
    bench.write_results(FAST_CHECK_RESULTS, res)
    print(f"broker: {res['broker']}")
    print_fast_check(fast, res["cores"])
    print()
    bench.print_table(fast_check_verdicts(fast), VERDICT_COLUMNS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
