"""Benchmark of the Spark state applications against the limit: one plain consumer draining the changelog.

    .venv/bin/python bench/bench_state.py [--records 1000000] [--big-records 4000000] [--skip-big]

Measured in one run, on one changelog of ``--records`` records in 16 partitions (half as many distinct keys):

* limit: one confluent-kafka consumer (``consume(num_messages=10000)``, read_committed) draining every
  partition and doing nothing else, records/s;
* rebuild and deep check at ``local[1]`` and ``local[2]`` via ``spark-submit``: records/s = the app's
  ``records_read`` / the app's own ``seconds`` (timed inside the application from a ready SparkSession to
  the report, so JVM start-up and session creation are excluded; the wall time is printed too);
* peak driver RSS (the driver JVM, which in local mode also hosts the executors, and the Python driver
  process, each polled from /proc) of the local[2] rebuild at ``--records`` and at ``--big-records``;
* the fast check on a 1,000-partition topic: ``read_manifest`` + one ``list_offsets`` round (log start and
  last stable offset of every partition), the equivalent of the Airflow side's fast check.

Targets: rebuild >= 50% of the limit at local[2], deep check >= 70%, local[2] >= 1.6x local[1], peak RSS at
the big size within 10% of the small one, fast check <= 1 s. Writes ``bench/results/state.json``.
The broker is the one of ``KSTATE_BOOTSTRAP_SERVERS`` or an embedded one started here.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from airflow_provider_kstate.spark_apps import kafka_io  # noqa: E402
from airflow_provider_kstate.spark_apps.manifest import (  # noqa: E402
    Manifest,
    PartitionStats,
    read_manifest,
    write_manifest,
)

APPS = ROOT / "airflow_provider_kstate" / "spark_apps"
RESULTS = ROOT / "bench" / "results" / "state.json"
PARTITIONS = 16
VALUE = b"v" * 24


@contextlib.contextmanager
def broker() -> Iterator[dict[str, Any]]:
    """Yield the librdkafka config of the broker under test (embedded unless KSTATE_BOOTSTRAP_SERVERS)."""
    if os.environ.get("KSTATE_BOOTSTRAP_SERVERS"):
        extra = json.loads(os.environ.get("KSTATE_KAFKA_CONFIG", "{}"))
        yield {"bootstrap.servers": os.environ["KSTATE_BOOTSTRAP_SERVERS"], **extra}
        return
    import embedded_broker

    with embedded_broker.running(ROOT / ".kstate" / "broker-bench-state") as bootstrap:
        yield {"bootstrap.servers": bootstrap}


def create_topic(conf: dict[str, Any], name: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    config = {"cleanup.policy": "compact", "segment.bytes": str(1 << 30)}  # one active segment: no compaction
    admin = AdminClient(conf)
    for f in admin.create_topics([NewTopic(name, partitions, 1, config=config)]).values():
        f.result(timeout=60)


def delete_topic(conf: dict[str, Any], name: str) -> None:
    from confluent_kafka.admin import AdminClient

    for f in AdminClient(conf).delete_topics([name]).values():
        with contextlib.suppress(Exception):
            f.result(timeout=60)


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


def limit(conf: dict[str, Any], topic: str) -> dict[str, Any]:
    """One plain consumer draining the changelog, nothing else."""
    offsets = kafka_io.list_offsets(conf, topic, list(range(PARTITIONS)))
    started = time.monotonic()
    count = kafka_io.drain_count(conf, topic, offsets)
    seconds = time.monotonic() - started
    return {"records": count, "seconds": round(seconds, 3), "records_per_s": round(count / seconds)}


class RssPoller(threading.Thread):
    """Poll the peak RSS of the spark-submit process tree's driver JVM and Python driver."""

    def __init__(self, root_pid: int, app: str) -> None:
        super().__init__(daemon=True)
        self.root_pid, self.app = root_pid, app
        self.peak = {"jvm": 0, "python_driver": 0}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            for pid, cmd in _tree(self.root_pid):
                kind = "jvm" if "org.apache.spark.deploy.SparkSubmit" in cmd else None
                if kind is None and self.app in cmd and "python" in cmd.split("\0")[0]:
                    kind = "python_driver"
                if kind:
                    self.peak[kind] = max(self.peak[kind], _rss(pid))
            time.sleep(0.05)


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


def submit(app: str, master: str, args: list[str]) -> dict[str, Any]:
    """Run one application with spark-submit; return its report plus wall time and peak RSS."""
    venv_bin = Path(sys.executable).parent
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PATH": f"{venv_bin}{os.pathsep}{os.environ['PATH']}",
    }
    report = Path(args[args.index("--report-file") + 1])
    cmd = [str(venv_bin / "spark-submit"), "--master", master, "--conf", "spark.log.level=ERROR"]
    cmd += ["--conf", "spark.ui.enabled=false", str(APPS / app), *args]
    started = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    poller = RssPoller(proc.pid, app)
    poller.start()
    out, err = proc.communicate()
    poller.stop.set()
    poller.join()
    wall = time.monotonic() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{app} failed ({proc.returncode}): {err[-2000:]}")
    result = json.loads(report.read_text())
    result["wall_seconds"] = round(wall, 3)
    result["peak_rss"] = poller.peak
    return result


def run_app(app: str, master: str, conf_file: str, topic: str, uri: str, work: Path) -> dict[str, Any]:
    report = work / f"{app}-{master}-{uuid.uuid4().hex[:6]}.json"
    args = [
        "--kafka-config-file",
        conf_file,
        "--topic",
        topic,
        "--snapshot-uri",
        uri,
        "--report-file",
        str(report),
    ]
    result = submit(app, master, args)
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
    }


def fast_check(conf: dict[str, Any], work: Path, partitions: int = 1000) -> dict[str, Any]:
    """Time read_manifest + one list_offsets round for a ``partitions``-partition topic."""
    topic = f"kstate-bench-wide-{uuid.uuid4().hex[:6]}"
    create_topic(conf, topic, partitions)
    try:
        stats = {p: PartitionStats(0, 0, 0, "0" * 16) for p in range(partitions)}
        uri = str(work / "wide-snapshot")
        write_manifest(uri, Manifest(topic=topic, partitions=partitions, partition_stats=stats))
        kafka_io.list_offsets(
            conf, topic, list(range(partitions))
        )  # metadata warm-up, as a hook's connection
        timings = []
        for _ in range(5):
            started = time.monotonic()
            manifest = read_manifest(uri)
            offsets = kafka_io.list_offsets(conf, topic, sorted(manifest.partition_stats))
            timings.append(time.monotonic() - started)
            assert len(offsets) == partitions
        return {
            "partitions": partitions,
            "seconds_median": round(sorted(timings)[2], 3),
            "seconds_max": round(max(timings), 3),
        }
    finally:
        delete_topic(conf, topic)


def measure(conf: dict[str, Any], records: int, big: int | None, work: Path) -> dict[str, Any]:
    conf_file = work / "kafka.json"
    conf_file.write_text(json.dumps(conf))
    topic = f"kstate-bench-log-{uuid.uuid4().hex[:6]}"
    create_topic(conf, topic, PARTITIONS)
    out: dict[str, Any] = {"records": records, "partitions": PARTITIONS, "cores": os.cpu_count()}
    try:
        out["produce_seconds"] = round(produce(conf, topic, records), 2)
        out["limit"] = limit(conf, topic)
        uri = str(work / "snapshot")
        for master in ("local[1]", "local[2]"):
            out[f"rebuild {master}"] = run_app("rebuild.py", master, str(conf_file), topic, uri, work)
        for master in ("local[1]", "local[2]"):
            out[f"deep_check {master}"] = run_app("deep_check.py", master, str(conf_file), topic, uri, work)
        if big:
            out["rss_big"] = measure_big(conf, big, work, str(conf_file))
    finally:
        delete_topic(conf, topic)
    out["fast_check"] = fast_check(conf, work)
    return out


def measure_big(conf: dict[str, Any], records: int, work: Path, conf_file: str) -> dict[str, Any]:
    topic = f"kstate-bench-big-{uuid.uuid4().hex[:6]}"
    create_topic(conf, topic, PARTITIONS)
    try:
        produce(conf, topic, records)
        return run_app("rebuild.py", "local[2]", conf_file, topic, str(work / "big-snapshot"), work)
    finally:
        delete_topic(conf, topic)


def verdicts(res: dict[str, Any]) -> list[tuple[str, str, str, bool]]:
    lim = res["limit"]["records_per_s"]
    r1, r2 = res["rebuild local[1]"]["records_per_s"], res["rebuild local[2]"]["records_per_s"]
    c1, c2 = res["deep_check local[1]"]["records_per_s"], res["deep_check local[2]"]["records_per_s"]
    rows = [
        ("rebuild local[2] / limit", f"{r2 / lim:.0%}", ">= 50%", r2 / lim >= 0.5),
        ("deep check local[2] / limit", f"{c2 / lim:.0%}", ">= 70%", c2 / lim >= 0.7),
        ("rebuild local[2] / local[1]", f"{r2 / r1:.2f}x", ">= 1.6x", r2 / r1 >= 1.6),
        ("deep check local[2] / local[1]", f"{c2 / c1:.2f}x", ">= 1.6x", c2 / c1 >= 1.6),
        (
            "fast check, 1000 partitions",
            f"{res['fast_check']['seconds_median']:.3f} s",
            "<= 1 s",
            res["fast_check"]["seconds_median"] <= 1,
        ),
    ]
    if "rss_big" in res:
        small, big = res["rebuild local[2]"], res["rss_big"]
        for kind in ("jvm", "python_driver"):
            a, b = small[f"peak_rss_{kind}_mib"], big[f"peak_rss_{kind}_mib"]
            rows.append(
                (
                    f"peak RSS {kind} {big['records']} vs {small['records']} rec",
                    f"{b / a - 1:+.1%}",
                    "<= +10%",
                    b <= a * 1.1,
                )
            )
    return rows


def print_table(res: dict[str, Any]) -> None:
    print(f"\nchangelog: {res['records']} records, {res['partitions']} partitions, {res['cores']} cores")
    print(
        f"{'job':<22}{'records':>10}{'s (in app)':>12}{'s (wall)':>10}{'records/s':>12}{'JVM RSS MiB':>13}{'py RSS MiB':>12}"
    )
    lim = res["limit"]
    print(
        f"{'limit: 1 consumer':<22}{lim['records']:>10}{lim['seconds']:>12}{'':>10}{lim['records_per_s']:>12}"
    )
    for name in ("rebuild local[1]", "rebuild local[2]", "deep_check local[1]", "deep_check local[2]"):
        r = res[name]
        print(
            f"{name:<22}{r['records']:>10}{r['seconds_in_app']:>12}{r['wall_seconds']:>10}{r['records_per_s']:>12}"
            f"{r['peak_rss_jvm_mib']:>13}{r['peak_rss_python_driver_mib']:>12}"
        )
    if "rss_big" in res:
        r = res["rss_big"]
        print(
            f"{'rebuild local[2] big':<22}{r['records']:>10}{r['seconds_in_app']:>12}{r['wall_seconds']:>10}"
            f"{r['records_per_s']:>12}{r['peak_rss_jvm_mib']:>13}{r['peak_rss_python_driver_mib']:>12}"
        )
    print(f"\n{'target':<44}{'measured':>12}{'goal':>10}  met")
    for name, value, goal, met in verdicts(res):
        print(f"{name:<44}{value:>12}{goal:>10}  {'yes' if met else 'NO'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--big-records", type=int, default=4_000_000)
    parser.add_argument("--skip-big", action="store_true", help="skip the RSS run at --big-records")
    args = parser.parse_args(argv)
    with broker() as conf, tempfile.TemporaryDirectory(prefix="kstate-bench-") as tmp:
        res = measure(conf, args.records, None if args.skip_big else args.big_records, Path(tmp))
    res["load_average_at_end"] = os.getloadavg()
    res["verdicts"] = [{"target": n, "measured": v, "goal": g, "met": m} for n, v, g, m in verdicts(res)]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(res, indent=2))
    print_table(res)
    print(f"\nwritten: {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
