"""Example stateful PySpark pipeline: running totals per account, kept in a compacted changelog.

    spark-submit running_totals.py --kafka-config-file CFG.json --report-file R.json \\
        --input-topic payments --changelog-topic totals --group totals-pipeline

Input records: key = account id, value = an integer amount (ASCII) or ``CLOSE`` (the account is closed:
its total is deleted). Each run

1. takes the input's end offsets (last stable offsets) as the batch's bound and the group's committed
   offsets as its start, per partition; the bounds are cross-checked with where a fetch ends, so a broker
   whose ListOffsets lags its data fails the run instead of folding a fraction of the batch (issue 17), and
   a read that ends short of its bound fails too;
2. reads every input partition's new records in a Spark task with confluent-kafka ``assign()``
   (read_committed) and reduces them per account;
3. folds the changelog partitions that hold the touched accounts (read_committed, placed by murmur2) to
   get their current totals;
4. writes the new totals (or tombstones) to the changelog with a transactional producer
   (``partitioner=murmur2_random``, Kafka's Java placement) and commits the input offsets in the same
   transaction: exactly once, whatever fails in between.

Across an increase of the input topic (issue 21) a batch must not span the producers' switch: an account
that moved has its older events on its old partition and its newer ones on its new partition, and a
per-partition reduction cannot order them (a CLOSE on one side, deposits on the other). While the
key-order barrier of the input topic names the group and the group's committed offsets are below it, the
batch ends at the barrier on every partition (new partitions: nothing); the next run, past it, reads the
rest. Without a barrier (``key_order="relax"``, or no control topic) the batch is not cut.

The store is the model airflow-provider-kstate checks: changelog key -> latest value, null deletes.
No Airflow import: this runs under spark-submit.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
from typing import Any

CLOSE = b"CLOSE"


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kafka-config-file", required=True, help="JSON file of librdkafka settings")
    parser.add_argument("--report-file", required=True, help="where to write the JSON report")
    parser.add_argument("--input-topic", required=True)
    parser.add_argument("--changelog-topic", required=True)
    parser.add_argument("--group", required=True, help="consumer group keeping the input offsets")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument(
        "--control-topic", default="_kstate_control", help="the kstate control topic (key-order barrier)"
    )
    return parser.parse_args(argv)


def reduce_events(events: list[tuple[bytes, bytes]]) -> dict[bytes, tuple[bool, int, bool]]:
    """Reduce one partition's ``(account, value)`` events in offset order.

    Returns ``{account: (reset, delta, closed)}``: ``reset`` when a CLOSE came (the old total is dropped),
    ``delta`` the sum of the amounts after the last CLOSE, ``closed`` when the last event was a CLOSE.
    """
    out: dict[bytes, tuple[bool, int, bool]] = {}
    for key, value in events:
        reset, delta, _ = out.get(key, (False, 0, False))
        if value.strip().upper() == CLOSE:
            out[key] = (True, 0, True)
        else:
            out[key] = (reset, delta + int(value), False)
    return out


def apply(current: int | None, change: tuple[bool, int, bool]) -> int | None:
    """Return the account's new total (None: deleted) from its current total and its reduced change."""
    reset, delta, closed = change
    if closed:
        return None
    return (0 if reset or current is None else current) + delta


def read_input(
    cfg: dict[str, Any], topic: str, part: int, start: int, end: int, timeout: float
) -> Iterator[Any]:
    """Spark task: yield ``(account, (reset, delta, closed))`` for one input partition's batch."""
    from confluent_kafka import KafkaError

    from airflow_provider_kstate.spark_apps.kafka_io import KafkaReadError, read_batches

    events: list[tuple[bytes, bytes]] = []
    bad = 0
    for msgs in read_batches(cfg, topic, part, start, end, timeout):
        for m in msgs:
            if m.error() is not None:  # partition EOF (the end of the read), or a consumer error
                if m.error().code() != KafkaError._PARTITION_EOF:
                    raise KafkaReadError(f"{topic}[{part}]: {m.error().str()}")
                continue
            if m.offset() >= end:
                break
            if m.key() is None or m.value() is None or not _is_event(m.value()):
                bad += 1
                continue
            events.append((m.key(), m.value()))
    yield from reduce_events(events).items()
    # b"" is no account: it carries what this task read (unusable records, usable events)
    yield b"", (False, bad, False, len(events))


def _is_event(value: bytes) -> bool:
    text = value.strip()
    return text.upper() == CLOSE or text.lstrip(b"-").isdigit()


def fold_totals(
    cfg: dict[str, Any], topic: str, part: int, end: int, keys: set[bytes], timeout: float
) -> Iterator[Any]:
    """Spark task: yield ``(account, total)`` of the touched accounts held by one changelog partition."""
    from airflow_provider_kstate.spark_apps.kafka_io import fold_partition

    folded = fold_partition(cfg, topic, part, 0, end, timeout)
    for key, (_offset, value) in folded.state.items():
        if key in keys and value is not None:
            yield key, int(value)


def offsets(cfg: dict[str, Any], topic: str) -> dict[int, tuple[int, int]]:
    """Return ``{partition: (log start, last stable offset)}``, refused (``OffsetBoundError``) when a fetch
    from just below an end disagrees with it."""
    from airflow_provider_kstate.spark_apps.kafka_io import checked_offsets, topic_partition_count

    return checked_offsets(cfg, topic, list(range(topic_partition_count(cfg, topic))))


def committed(
    cfg: dict[str, Any], group: str, topic: str, bounds: dict[int, tuple[int, int]]
) -> tuple[Any, dict[int, int]]:
    """Return the group's consumer (for the transaction) and the start offset of each input partition."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {**cfg, "group.id": group, "enable.auto.commit": False, "isolation.level": "read_committed"}
    )
    tps = consumer.committed([TopicPartition(topic, p) for p in bounds], timeout=30)
    starts = {
        tp.partition: max(tp.offset, bounds[tp.partition][0]) if tp.offset >= 0 else bounds[tp.partition][0]
        for tp in tps
    }
    return consumer, starts


def barrier_ends(
    cfg: dict[str, Any],
    control_topic: str,
    topic: str,
    group: str,
    starts: dict[int, int],
    ends: dict[int, int],
) -> tuple[dict[int, int], int]:
    """Cut the batch at the key-order barrier of ``topic`` while ``group`` has not passed it.

    :return: the batch's end per partition, and the barrier's epoch when it cut the batch (else 0).
    """
    from confluent_kafka.admin import AdminClient

    from airflow_provider_kstate.client.config import tail_config
    from airflow_provider_kstate.client.follower import ControlTail
    from airflow_provider_kstate.client.protocol import Barrier, Release, barrier_key, release_key

    if control_topic not in AdminClient(tail_config(cfg)).list_topics(timeout=30).topics:
        return ends, 0
    tail = ControlTail(cfg, control_topic)
    try:
        latest = dict(tail.catch_up())
    finally:
        tail.close()
    barrier, release = latest.get(barrier_key(topic)), latest.get(release_key(topic, group))
    if not isinstance(barrier, Barrier) or not barrier.applies(group):
        return ends, 0
    released = isinstance(release, Release) and release.epoch >= barrier.epoch
    if released or all(starts[p] >= barrier.offset(p) for p in ends):
        return ends, 0
    return {p: min(end, max(starts[p], barrier.offset(p))) for p, end in ends.items()}, barrier.epoch


def write_changelog(
    cfg: dict[str, Any],
    args: argparse.Namespace,
    totals: dict[bytes, int | None],
    consumer: Any,
    ends: dict[int, int],
) -> None:
    """Write the new totals and commit the input offsets in one transaction."""
    from confluent_kafka import Producer, TopicPartition

    producer = Producer(
        {
            **cfg,
            "transactional.id": f"kstate-example-{args.group}-{args.changelog_topic}",
            "partitioner": "murmur2_random",
            "enable.idempotence": True,
        }
    )
    producer.init_transactions(args.timeout)
    producer.begin_transaction()
    try:
        for key, total in sorted(totals.items()):
            producer.produce(
                args.changelog_topic, key=key, value=None if total is None else str(total).encode()
            )
            producer.poll(0)
        producer.send_offsets_to_transaction(
            [TopicPartition(args.input_topic, p, o) for p, o in sorted(ends.items())],
            consumer.consumer_group_metadata(),
            args.timeout,
        )
        producer.commit_transaction(args.timeout)
    except Exception:
        producer.abort_transaction(args.timeout)
        raise


def run(args: argparse.Namespace, cfg: dict[str, Any]) -> dict[str, Any]:
    from pyspark.sql import SparkSession

    from airflow_provider_kstate.client.murmur2 import partition_for

    spark = SparkSession.builder.appName("kstate-example-running-totals").getOrCreate()
    sc = spark.sparkContext
    bounds = offsets(cfg, args.input_topic)
    consumer, starts = committed(cfg, args.group, args.input_topic, bounds)
    ends, barrier = barrier_ends(
        cfg,
        args.control_topic,
        args.input_topic,
        args.group,
        starts,
        {p: hi for p, (_lo, hi) in bounds.items()},
    )
    ranges = [(p, starts[p], ends[p]) for p in sorted(ends) if starts[p] < ends[p]]
    inp, timeout = args.input_topic, args.timeout
    changes_rdd = sc.parallelize(ranges, max(len(ranges), 1)).flatMap(
        lambda r: read_input(cfg, inp, r[0], r[1], r[2], timeout)
    )
    collected = changes_rdd.collect()
    counts = [c for k, c in collected if k == b""]  # one per task
    changes = dict(kv for kv in collected if kv[0] != b"")
    bad, events = sum(c[1] for c in counts), sum(c[3] for c in counts)
    ends_log = {p: hi for p, (_lo, hi) in offsets(cfg, args.changelog_topic).items()}
    log_n = len(ends_log)
    touched = sc.broadcast(set(changes))
    parts = sorted({partition_for(k, log_n) for k in changes})
    log = args.changelog_topic
    current_rdd = sc.parallelize(parts, max(len(parts), 1)).flatMap(
        lambda p: fold_totals(cfg, log, p, ends_log[p], touched.value, timeout)
    )
    current = dict(current_rdd.collect())
    totals = {k: apply(current.get(k), change) for k, change in changes.items()}
    if totals or any(starts[p] < ends[p] for p in ends):
        write_changelog(cfg, args, totals, consumer, ends)
    consumer.close()
    spark.stop()
    return {
        "ok": True,
        "input_partitions": len(bounds),
        "offsets_consumed": sum(hi - start for _p, start, hi in ranges),
        "payments_read": events + bad,  # what the reads returned, not what the offsets span
        "accounts_touched": len(totals),
        "bad_records": bad,
        "accounts_updated": sum(1 for v in totals.values() if v is not None),
        "accounts_closed": sum(1 for v in totals.values() if v is None),
        "input_offsets": {str(p): o for p, o in sorted(ends.items())},
        "cut_at_barrier": barrier,  # the key-order barrier's epoch when it ended this batch, else 0
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    with open(args.kafka_config_file, encoding="utf-8") as f:
        cfg = json.load(f)
    started = time.monotonic()
    try:
        report = run(args, cfg)
    except Exception as exc:  # noqa: BLE001 - reported, then a non-zero exit
        report = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    report["seconds"] = round(time.monotonic() - started, 3)
    with open(args.report_file, "w", encoding="utf-8") as f:
        json.dump(report, f)
    print(f"running_totals: {json.dumps(report)[:1000]}")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
