"""Benchmark the read of many groups' committed offsets: the provider's read (a consumer of each group,
``Consumer.committed`` in chunks; :meth:`ClusterAdmin.committed_offsets_many`) against the AdminClient's
ListConsumerGroupOffsets it replaced (the same chunks, every request in flight at once), side by side.

    PYTHONPATH=support .venv/bin/python bench/bench_committed_read.py [--cells 10x8,100x8,100x512,100x4096]

The AdminClient's call is faster, but librdkafka 2.16 dies of a SIGSEGV when a moving coordinator answers it
NOT_COORDINATOR (librdkafka issue 5040, found in issue 33's fault matrix): a plan or a verify reading offsets
through a rolling restart would kill its worker. Each cell (``groups x partitions``) commits an offset on
every partition for every group (the seed's admin call), then reads them both ways, alternating, ``--rounds``
times; the table gives each way's median seconds and their ratio. Writes ``bench/results/committed_read.json``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from kstate_support import bench
from kstate_support.bench import Column

from airflow_provider_kstate.cluster.admin import OFFSETS_CHUNK, ClusterAdmin, _chunks


def admin_read(admin: ClusterAdmin, groups: list[str], topic: str, partitions: int) -> dict[str, int]:
    """The replaced read: every group's chunks through the AdminClient, all in flight at once."""
    futures = []
    for group in groups:
        for chunk in _chunks(list(range(partitions)), OFFSETS_CHUNK):
            request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in chunk])
            futures.append(admin.client.list_consumer_group_offsets([request], request_timeout=60)[group])
    found: dict[str, int] = {}
    for future in futures:
        result = future.result(timeout=60)
        found[result.group_id] = found.get(result.group_id, 0) + sum(
            1 for tp in result.topic_partitions if tp.offset >= 0
        )
    return found


def consumer_read(admin: ClusterAdmin, groups: list[str], topic: str, partitions: int) -> dict[str, int]:
    """The provider's read."""
    return {g: len(o) for g, o in admin.committed_offsets_many(groups, topic, partitions)}


def measure(config: dict[str, Any], groups: int, partitions: int, rounds: int) -> dict[str, Any]:
    admin = ClusterAdmin(config, timeout=60)
    with bench.scratch_topic(config, "committed", partitions) as topic:
        names = [f"{topic}-g{i}" for i in range(groups)]
        admin.seed_offsets_many(topic, {g: dict.fromkeys(range(partitions), 0) for g in names})
        times: dict[str, list[float]] = {"admin": [], "consumer": []}
        for _ in range(rounds):
            for way, read in (("admin", admin_read), ("consumer", consumer_read)):
                started = time.perf_counter()
                found = read(admin, names, topic, partitions)
                times[way].append(time.perf_counter() - started)
                if sorted(found.values()) != [partitions] * groups:
                    raise AssertionError(f"{way} read {found} offsets, not {partitions} per group")
    admin_s, consumer_s = statistics.median(times["admin"]), statistics.median(times["consumer"])
    bench.progress(f"{groups}x{partitions}: admin {admin_s:.3f} s, consumer {consumer_s:.3f} s")
    return {
        "groups": groups,
        "partitions": partitions,
        "offsets": groups * partitions,
        "admin_s": round(admin_s, 4),
        "consumer_s": round(consumer_s, 4),
        "ratio": round(consumer_s / admin_s, 2),
        "runs": {k: [round(v, 4) for v in vs] for k, vs in times.items()},
    }


COLUMNS = [
    Column("groups x partitions", "cell", align="<"),
    Column("offsets", "offsets", ","),
    Column("AdminClient s (replaced)", "admin_s", ".3f"),
    Column("consumer per group s", "consumer_s", ".3f"),
    Column("consumer / admin", "ratio", ".2f"),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cells", default="10x8,100x8,100x512,100x4096")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    cells = [tuple(int(x) for x in c.split("x")) for c in args.cells.split(",")]
    with bench.broker("bench-committed") as config:
        measured = [measure(config, g, p, args.rounds) for g, p in cells]
    rows = [{**m, "cell": f"{m['groups']} x {m['partitions']}"} for m in measured]
    result = {
        "bench": "committed_read",
        "commit": bench.git("rev-parse", "--short", "HEAD"),
        "rounds": args.rounds,
        "cells": measured,
    }
    bench.write_results(bench.results_path("committed_read"), result)
    bench.print_table(rows, COLUMNS, title="committed offsets of many groups, median seconds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
