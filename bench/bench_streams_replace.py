"""The re-placement rate of a Kafka Streams changelog after a partition increase (issue 32, item 3).

Writes a compacted changelog of ``--records`` records over ``--keys`` keys (placed as the Java client places
them: murmur2 of the key over ``--from`` partitions), grows it to ``--to`` partitions and re-places it with
``replace_changelog.py``: under ``spark-submit`` (``spark``, local[2]) and in-process (``local``, threads, no
Spark); each on a changelog of its own. Prints one JSON document: per mode the records read, the keys moved,
the application's own seconds (read, move, tombstones, deep check) and records/s, and the wall seconds with
Spark's start-up.

    PYTHONPATH=support KSTATE_BOOTSTRAP_SERVERS=... python bench/bench_streams_replace.py --records 200000
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from airflow_provider_kstate.cluster.streams_resize import local_replacer, spark_submit_replacer
from airflow_provider_kstate.increase.streams_apps import StreamsChangelog

ROOT = Path(__file__).resolve().parent.parent


def write_changelog(config: dict[str, Any], topic: str, partitions: int, records: int, keys: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(config)
    for f in admin.create_topics(
        [NewTopic(topic, partitions, 1, config={"cleanup.policy": "compact"})]
    ).values():
        f.result(30)
    producer = Producer({**config, "partitioner": "murmur2_random", "linger.ms": 50, "acks": "all"})
    value = b"v" * 64
    for i in range(records):
        while True:
            try:
                producer.produce(topic, key=f"key{i % keys:07d}".encode(), value=value + str(i).encode())
                break
            except BufferError:
                producer.poll(0.1)
    producer.flush(120)


def grow(config: dict[str, Any], topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewPartitions

    admin = AdminClient(config)  # kept referenced until its futures are done
    for f in admin.create_partitions([NewPartitions(topic, partitions)]).values():
        f.result(30)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--keys", type=int, default=50_000)
    parser.add_argument("--from", dest="before", type=int, default=2)
    parser.add_argument("--to", type=int, default=4)
    parser.add_argument("--modes", default="spark,local")
    args = parser.parse_args()
    config = {"bootstrap.servers": os.environ["KSTATE_BOOTSTRAP_SERVERS"]}
    out: dict[str, Any] = {
        "records": args.records,
        "keys": args.keys,
        "partitions": f"{args.before} -> {args.to}",
    }
    for mode in args.modes.split(","):
        topic = f"kstate-bench-replace-{mode}-{int(time.time())}-changelog"
        started = time.monotonic()
        write_changelog(config, topic, args.before, args.records, args.keys)
        print(f"{mode}: changelog written in {time.monotonic() - started:.1f}s", file=sys.stderr)
        grow(config, topic, args.to)
        changelog = StreamsChangelog(
            topic=topic, store="bench", store_type="key-value", cleanup_policy="compact", partitions=args.to
        )
        replacer = (
            spark_submit_replacer(
                config,
                ROOT / ".kstate" / "bench-replace",
                spark_submit=str(Path(sys.executable).parent / "spark-submit"),
                spark_args=("--master", "local[2]", "--conf", "spark.ui.enabled=false"),
            )
            if mode == "spark"
            else local_replacer(config)
        )
        started = time.monotonic()
        report = replacer([changelog], args.before, args.to)[topic]
        wall = round(time.monotonic() - started, 3)
        replaced = report.get("replace", {})
        out[mode] = {
            "ok": report.get("ok"),
            "error": report.get("error"),
            "records_read": replaced.get("records_read"),
            "live_keys": replaced.get("live_keys"),
            "moved": replaced.get("moved"),
            "replace_seconds": replaced.get("seconds"),
            "records_per_s": replaced.get("records_per_s"),
            "check_seconds": report.get("check", {}).get("seconds"),
            "misplaced": report.get("check", {}).get("misplaced"),
            "wall_seconds": wall,
        }
        from confluent_kafka.admin import AdminClient

        admin = AdminClient(config)
        for f in admin.delete_topics([topic]).values():
            f.result(30)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
