"""Benchmark of the two changelog readers of the Spark applications, side by side in one run (issue 30):
confluent-kafka ``assign()`` inside the Python tasks (``--changelog-reader confluent``) against Spark's own
Kafka source (``spark.read.format("kafka")`` with per-partition ``startingOffsets``/``endingOffsets`` JSON,
``--changelog-reader spark``; spark-sql-kafka-0-10 from Maven Central shipped with ``--jars``).

    .venv/bin/python bench/bench_changelog_reader.py [--sizes 100000,400000,1600000] [--partitions 8]

At each size (records in ``--partitions`` partitions, half as many distinct keys), each reader runs the
rebuild and then the deep check of that rebuild's snapshot with ``spark-submit --master local[2]``;
records/s = the app's ``records_read`` / its own ``seconds`` (from a ready SparkSession to the report: JVM
start-up excluded, the wall time is kept too). The readers alternate which goes first at each size (the
machine is shared). The table gives records/s per reader and the ratio spark / confluent per job and size,
so how each cost grows with size shows in one run. Both readers' snapshots must have identical manifests
(rows and digest per partition), and both deep checks must pass: a bench whose readers disagree fails.

Writes ``bench/results/changelog_reader.json``. The broker is the one of ``KSTATE_BOOTSTRAP_SERVERS`` or an
Apache Kafka started here.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

from bench_state import produce, submit
from kstate_support import bench, spark_kafka
from kstate_support.bench import Column

from airflow_provider_kstate.store.layout import resolve
from airflow_provider_kstate.store.manifest import read_manifest

READERS = ("confluent", "spark")


def run(app: str, reader: str, conf_file: str, topic: str, uri: str, work: Path) -> dict[str, Any]:
    report = work / f"{app}-{reader}-{uuid.uuid4().hex[:6]}.json"
    args = ["--kafka-config-file", conf_file, "--topic", topic, "--snapshot-uri", uri]
    args += ["--report-file", str(report), "--changelog-reader", reader]
    result = submit(app, "local[2]", args, spark_kafka.submit_args())
    assert result["ok"], result
    return {
        "records": result["records_read"],
        "seconds_in_app": result["seconds"],
        "wall_seconds": result["wall_seconds"],
        "records_per_s": round(result["records_read"] / result["seconds"]),
        "cpu": result["cpu"],
    }


def measure_size(
    conf: dict[str, Any], records: int, partitions: int, work: Path, conf_file: str, index: int
) -> dict[str, Any]:
    topic = bench.new_topic(conf, "reader", partitions, {"cleanup.policy": "compact"})
    bench.progress(f"{records:,} records into {topic}")
    produce(conf, topic, records)
    out: dict[str, Any] = {"records": records, "partitions": partitions, "rebuild": {}, "deep_check": {}}
    order = READERS if index % 2 == 0 else READERS[::-1]
    uris = {reader: str(work / f"snap-{records}-{reader}") for reader in READERS}
    for reader in order:
        bench.progress(f"  rebuild, {reader}")
        out["rebuild"][reader] = run("rebuild.py", reader, conf_file, topic, uris[reader], work)
    manifests = {r: read_manifest(resolve(uris[r]).uri) for r in READERS}
    state = {
        r: {p: (s.start_offset, s.end_offset, s.rows, s.digest) for p, s in m.partition_stats.items()}
        for r, m in manifests.items()
    }
    same = state["confluent"] == state["spark"]
    assert same, "the readers' snapshots differ"
    out["identical_snapshots"] = same
    for reader in order[::-1]:
        bench.progress(f"  deep check, {reader}")
        out["deep_check"][reader] = run("deep_check.py", reader, conf_file, topic, uris["confluent"], work)
    for job in ("rebuild", "deep_check"):
        rates = {r: out[job][r]["records_per_s"] for r in READERS}
        out[job]["spark_over_confluent"] = round(rates["spark"] / rates["confluent"], 2)
    bench.delete_topics(conf, [topic])
    return out


def rows(sizes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for size in sizes:
        for job in ("rebuild", "deep_check"):
            out.append(
                {
                    "records": size["records"],
                    "job": job,
                    "confluent": size[job]["confluent"]["records_per_s"],
                    "spark": size[job]["spark"]["records_per_s"],
                    "ratio": size[job]["spark_over_confluent"],
                    "confluent_s": size[job]["confluent"]["seconds_in_app"],
                    "spark_s": size[job]["spark"]["seconds_in_app"],
                }
            )
    return out


COLUMNS = [
    Column("records", "records", ","),
    Column("job", "job", align="<"),
    Column("confluent rec/s", "confluent", ","),
    Column("spark rec/s", "spark", ","),
    Column("spark/confluent", "ratio", ".2f"),
    Column("confluent s", "confluent_s", ".2f"),
    Column("spark s", "spark_s", ".2f"),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="100000,400000,1600000")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--name", default="changelog_reader")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    spark_kafka.jars()  # fetched before anything is timed
    with (
        bench.broker("bench-reader") as conf,
        tempfile.TemporaryDirectory(prefix="kstate-bench-reader-") as tmp,
    ):
        work = Path(tmp)
        conf_file = str(work / "kafka.json")
        Path(conf_file).write_text(json.dumps(conf))
        measured = [measure_size(conf, n, args.partitions, work, conf_file, i) for i, n in enumerate(sizes)]
    result = {
        "bench": "changelog_reader",
        "commit": bench.git("rev-parse", "--short", "HEAD"),
        "master": "local[2]",
        "spark_kafka": spark_kafka.package(),
        "sizes": measured,
        "table": rows(measured),
    }
    bench.write_results(bench.results_path(args.name), result)
    bench.print_table(rows(measured), COLUMNS, title="changelog readers, records/s (spark-submit local[2])")
    return 0


if __name__ == "__main__":
    sys.exit(main())
