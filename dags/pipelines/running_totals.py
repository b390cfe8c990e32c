"""Example stateful PySpark pipeline: running totals per account, kept in a compacted changelog.

    spark-submit --packages org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0 running_totals.py \\
        --kafka-config-file CFG.json --report-file R.json \\
        --input-topic payments --changelog-topic totals --group totals-pipeline --checkpoint DIR

Input records: key = account id, value = an integer amount (ASCII) or ``CLOSE`` (the account is closed:
its total is deleted). The input is read as PySpark users read Kafka: a Structured Streaming query on
Spark's own Kafka source (``spark.readStream.format("kafka")``, ``read_committed``), whose offsets live in
the query's checkpoint (``--checkpoint``: a local folder in client mode; a URI every driver reaches, such
as ``hdfs://`` or ``s3a://``, in cluster mode). Each run is one ``trigger(availableNow=True)``: it processes
what the topic holds when it starts, then stops. Partitions added to the topic are discovered by the source
and read from their earliest offset, so a partition increase loses nothing. Each micro-batch
(``foreachBatch``)

1. reduces every input partition's records per account in offset order, on the executors (one Spark task
   per Kafka partition);
2. folds the changelog partitions that hold the touched accounts (read_committed, placed by murmur2) to
   get their current totals;
3. writes the new totals (or tombstones) to the changelog with a transactional producer
   (``partitioner=murmur2_random``, Kafka's Java placement) and commits the batch's input offsets to
   ``--group`` in the same transaction. The checkpoint is Spark's record of progress; the group's offsets
   make a replayed batch (a crash after the commit, before the checkpoint) a no-op, so each batch is applied
   exactly once, and show the kstate tooling where the pipeline is (the key-order barrier).

Before the query starts, the input's end offsets are cross-checked with where a fetch ends (issue 17): a
broker whose ListOffsets lags its data fails the run before anything is read or written. Then the
checkpoint is resumed only against the log its offsets were taken from (issue 39): the pipeline keeps the
input's topic id (KIP-516) beside the query's checkpoint (``_kstate_input.json`` in its folder), and a
checkpoint whose input was deleted and created again since (the ids differ: ``TopicRecreatedError``), or
whose offsets, or the group's commits, lie beyond the topic's end (``StoredOffsetsError``), is refused
with the two ways out: a new checkpoint location, or ``--start-over true``, which sets the checkpoint aside,
moves the group's offsets to the log start and reads the input from its earliest offset, saying so (the
report's ``started_over``). An id that cannot be read (a broker without ids, no DESCRIBE permission, a
checkpoint from before the record was kept) is a named warning, and the offsets are checked as before.

Across an increase of the input topic (issue 21) a batch may span the producers' switch: an account that
moved has its older events on its old partition and its newer ones on its new partition. While the
key-order barrier of the input topic names the group, each partition's records are split at the barrier's
offset (new partitions: all after it) and an account's changes are applied in that order: every total is
exact after one run. Without a barrier (``key_order="relax"``, or no control topic) the changes of one
account from two partitions cannot be ordered and the last one read wins: totals can end wrong.

The store is the model airflow-provider-kstate checks: changelog key -> latest value, null deletes.
No Airflow import: this runs under spark-submit.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

CLOSE = b"CLOSE"
#: A change to one account: (reset, delta, closed), see :func:`reduce_events`.
Change = tuple[bool, int, bool]


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kafka-config-file", required=True, help="JSON file of librdkafka settings")
    parser.add_argument("--report-file", required=True, help="where to write the JSON report")
    parser.add_argument("--input-topic", required=True)
    parser.add_argument("--changelog-topic", required=True)
    parser.add_argument("--group", required=True, help="consumer group the batches' input offsets go to")
    parser.add_argument(
        "--checkpoint",
        default="",
        help="the query's checkpoint location (default: a folder per group under the temporary directory)",
    )
    parser.add_argument(
        "--start-over",
        type=lambda text: text.strip().lower() in ("true", "1", "yes"),
        default=False,
        help="true: when the checkpoint cannot be resumed (its input topic was recreated, or its offsets lie "
        "beyond the topic's end), set it aside and start over from the earliest offset, saying so; "
        "false (the default): refuse",
    )
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument(
        "--control-topic", default="_kstate_control", help="the kstate control topic (key-order barrier)"
    )
    return parser.parse_args(argv)


def reduce_events(events: Iterable[tuple[bytes, bytes]]) -> dict[bytes, Change]:
    """Reduce one partition's ``(account, value)`` events in offset order.

    Returns ``{account: (reset, delta, closed)}``: ``reset`` when a CLOSE came (the old total is dropped),
    ``delta`` the sum of the amounts after the last CLOSE, ``closed`` when the last event was a CLOSE.
    """
    out: dict[bytes, Change] = {}
    for key, value in events:
        reset, delta, _ = out.get(key, (False, 0, False))
        if value.strip().upper() == CLOSE:
            out[key] = (True, 0, True)
        else:
            out[key] = (reset, delta + int(value), False)
    return out


def compose(first: Change, then: Change) -> Change:
    """Return the change of ``first`` followed by ``then`` (the same account)."""
    if then[0]:
        return then
    return (first[0], first[1] + then[1], first[2] and then == (False, 0, False))


def apply(current: int | None, change: Change) -> int | None:
    """Return the account's new total (None: deleted) from its current total and its reduced change."""
    reset, delta, closed = change
    if closed:
        return None
    return (0 if reset or current is None else current) + delta


def _is_event(value: bytes) -> bool:
    text = value.strip()
    return text.upper() == CLOSE or text.lstrip(b"-").isdigit()


def reduce_partition(rows: Iterator[Any], barrier: dict[int, int] | None) -> Iterator[Any]:
    """Spark task over one Kafka partition's rows (``partition, offset, key, value``, in offset order).

    Yields ``(account, (phase, partition, change))``: phase 0 below the barrier's offset of the partition,
    1 at or past it (always 0 without a barrier); then ``(b"", (bad, events))``, what the task read.
    """
    groups: dict[tuple[int, int], list[tuple[bytes, bytes]]] = {}
    bad = events = 0
    for row in rows:
        key, value = row["key"], row["value"]
        if key is None or value is None or not _is_event(bytes(value)):
            bad += 1
            continue
        part = int(row["partition"])
        phase = 0 if barrier is None or row["offset"] < barrier.get(part, 0) else 1
        groups.setdefault((part, phase), []).append((bytes(key), bytes(value)))
        events += 1
    for (part, phase), evs in sorted(groups.items()):
        for key, change in reduce_events(evs).items():
            yield key, (phase, part, change)
    yield b"", (bad, events)


def combine(collected: list[Any], ordered: bool) -> tuple[dict[bytes, Change], int, int]:
    """Return each account's change in the batch, and the unusable and usable records read.

    :param ordered: the changes of one account are ordered by phase (a barrier split them); else one
        account's changes from two partitions cannot be ordered and the last one collected wins.
    """
    parts: dict[bytes, list[tuple[int, int, Change]]] = {}
    bad = events = 0
    for key, item in collected:
        if key == b"":
            bad, events = bad + item[0], events + item[1]
        else:
            parts.setdefault(key, []).append(item)
    changes: dict[bytes, Change] = {}
    for key, items in parts.items():
        if not ordered:
            changes[key] = items[-1][2]
            continue
        change: Change = (False, 0, False)
        for _phase, _part, step in sorted(items, key=lambda i: i[0]):
            change = compose(change, step)
        changes[key] = change
    return changes, bad, events


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


def barrier_offsets(
    cfg: dict[str, Any], control_topic: str, topic: str, group: str
) -> tuple[dict[int, int], int]:
    """Return the key-order barrier of ``topic`` when it names ``group`` (its offset per partition, its
    epoch), else ``({}, 0)``."""
    from confluent_kafka.admin import AdminClient

    from airflow_provider_kstate.client_piece.follower import ControlTail
    from airflow_provider_kstate.client_piece.helper_config import tail_config
    from airflow_provider_kstate.client_piece.protocol import Barrier, barrier_key

    if control_topic not in AdminClient(tail_config(cfg)).list_topics(timeout=30).topics:
        return {}, 0
    tail = ControlTail(cfg, control_topic)
    try:
        latest = dict(tail.catch_up())
    finally:
        tail.close()
    barrier = latest.get(barrier_key(topic))
    if not isinstance(barrier, Barrier) or not barrier.applies(group):
        return {}, 0
    return {p: barrier.offset(p) for p in range(len(barrier.offsets))}, barrier.epoch


@dataclass
class Totals:
    """What the runs' micro-batches did (the report)."""

    cfg: dict[str, Any]
    args: argparse.Namespace
    barrier: dict[int, int]
    epoch: int
    batches: int = 0
    replayed: int = 0
    read: int = 0
    bad: int = 0
    touched: set[bytes] = field(default_factory=set)
    updated: int = 0
    closed: int = 0


def batch_ends(batch: Any) -> dict[int, int]:
    """Return ``{partition: last offset + 1}`` of the records of a micro-batch."""
    from pyspark.sql import functions as F

    rows = batch.groupBy("partition").agg(F.max("offset").alias("last")).collect()
    return {int(r["partition"]): int(r["last"]) + 1 for r in rows}


def process(batch: Any, batch_id: int, run: Totals) -> None:
    """``foreachBatch``: reduce, fold the current totals, write the new ones and the offsets in one transaction."""
    from airflow_provider_kstate.client_piece.murmur2 import partition_for

    ends = batch_ends(batch)
    if not ends:
        return
    consumer = group_consumer(run.cfg, run.args.group)
    try:
        if already_applied(consumer, run.args.input_topic, ends):
            run.replayed += 1
            return
        barrier = run.barrier or None
        events = batch.select("partition", "offset", "key", "value")
        collected = events.rdd.mapPartitions(lambda rows: reduce_partition(rows, barrier)).collect()
        changes, bad, read = combine(collected, ordered=barrier is not None)
        spark = batch.sparkSession
        ends_log = {p: hi for p, (_lo, hi) in offsets(run.cfg, run.args.changelog_topic).items()}
        touched = spark.sparkContext.broadcast(set(changes))
        parts = sorted({partition_for(k, len(ends_log)) for k in changes})
        cfg, log, timeout = run.cfg, run.args.changelog_topic, run.args.timeout
        current = dict(
            spark.sparkContext.parallelize(parts, max(len(parts), 1))
            .flatMap(lambda p: fold_totals(cfg, log, p, ends_log[p], touched.value, timeout))
            .collect()
        )
        totals = {k: apply(current.get(k), change) for k, change in changes.items()}
        write_changelog(run.cfg, run.args, totals, consumer, ends)
    finally:
        consumer.close()
    run.batches += 1
    run.read, run.bad = run.read + read + bad, run.bad + bad
    run.touched |= set(totals)
    run.updated += sum(1 for v in totals.values() if v is not None)
    run.closed += sum(1 for v in totals.values() if v is None)


def group_consumer(cfg: dict[str, Any], group: str) -> Any:
    """A consumer of ``group`` that never joins it: its metadata for the transaction, its committed offsets."""
    from confluent_kafka import Consumer

    return Consumer(
        {**cfg, "group.id": group, "enable.auto.commit": False, "isolation.level": "read_committed"}
    )


def already_applied(consumer: Any, topic: str, ends: dict[int, int]) -> bool:
    """Whether the group's committed offsets already cover the batch (a replay after a crash)."""
    from confluent_kafka import TopicPartition

    tps = consumer.committed([TopicPartition(topic, p) for p in ends], timeout=30)
    return all(tp.offset >= ends[tp.partition] for tp in tps)


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


def checkpoint_location(args: argparse.Namespace) -> str:
    """The query's checkpoint: ``--checkpoint``, else a folder per group under the temporary directory."""
    return args.checkpoint or os.path.join(tempfile.gettempdir(), "kstate-example-checkpoints", args.group)


# -- the checkpoint's input: resumed only against the log its offsets were taken from ---------------------

#: The pipeline's own record in the checkpoint folder: the input topic and its topic id (KIP-516).
INPUT_RECORD = "_kstate_input.json"
INPUT_FORMAT = "kstate-checkpoint-input/1"


@dataclass
class Checkpoint:
    """What a checkpoint holds of the input topic.

    :param location: the checkpoint's location.
    :param exists: whether Spark has written offsets to it (a query ran).
    :param offsets: the input's offsets of its latest batch (where a resume starts), per partition.
    :param recorded: the pipeline's record (:data:`INPUT_RECORD`): ``topic``, ``topic_id``, ``written_at``;
        empty for a checkpoint written before it was kept.
    """

    location: str
    exists: bool = False
    offsets: dict[int, int] = field(default_factory=dict)
    recorded: dict[str, Any] = field(default_factory=dict)


def read_checkpoint(spark: Any, location: str, topic: str) -> Checkpoint:
    """Read the input's offsets of the checkpoint's latest batch (``offsets/<n>``: a version line, the
    batch's metadata, then one JSON object of offsets per source) and the pipeline's record."""
    from airflow_provider_kstate.spark_apps.runtime import hadoop_fs, read_bytes
    from airflow_provider_kstate.store.uri import join

    found = Checkpoint(location)
    raw = read_bytes(spark, join(location, INPUT_RECORD))
    if raw:
        found.recorded = dict(json.loads(raw))
    fs, root = hadoop_fs(spark, join(location, "offsets"))
    if not fs.exists(root):
        return found
    batches = [str(s.getPath().getName()) for s in fs.listStatus(root)]
    numbered = sorted(int(n) for n in batches if n.isdigit())
    if not numbered:
        return found
    found.exists = True
    text = (read_bytes(spark, join(join(location, "offsets"), str(numbered[-1]))) or b"").decode()
    for line in text.splitlines()[2:]:
        source = json.loads(line) if line.strip().startswith("{") else {}
        for p, offset in (source.get(topic) or {}).items():
            found.offsets[int(p)] = int(offset)
    return found


def resume_problem(
    topic: str,
    checkpoint: Checkpoint,
    topic_id: str,
    ends: dict[int, int],
    committed: dict[int, int],
) -> tuple[str, str, list[str]]:
    """Judge whether the checkpoint may be resumed against the input as it is now.

    :param topic: the input topic.
    :param checkpoint: what the checkpoint holds (:func:`read_checkpoint`).
    :param topic_id: the input's topic id now (``""``: it cannot be read).
    :param ends: the input's end offset per partition now.
    :param committed: the group's committed offsets on the input (the batches' exactly-once mark).
    :returns: ``(problem, kind, warnings)``: ``kind`` is ``recreated``, ``beyond`` or ``""`` (none).
    """
    from airflow_provider_kstate.store.topic_id import compare_ids, unknown_now

    warnings: list[str] = []
    if not checkpoint.exists and not topic_id:
        warnings.append(unknown_now(topic))
    if checkpoint.exists:
        recorded = checkpoint.recorded.get("topic_id") if checkpoint.recorded.get("topic") == topic else None
        what = f"the checkpoint at {checkpoint.location}"
        identity = compare_ids(
            topic, recorded, topic_id, what, str(checkpoint.recorded.get("written_at") or "")
        )
        warnings += identity.warnings
        if identity.problem:
            return identity.problem, "recreated", warnings
    beyond = {
        f"{name} partition {p}": (offset, ends.get(p))
        for name, offsets in (("the checkpoint's", checkpoint.offsets), ("the group's commit on", committed))
        for p, offset in sorted(offsets.items())
        if offset > ends.get(p, -1)
    }
    if beyond:
        shown = "; ".join(
            f"{where}: offset {offset}, "
            + ("the partition does not exist" if end is None else f"the topic ends at {end}")
            for where, (offset, end) in list(beyond.items())[:6]
        )
        problem = (
            f"the stored offsets lie beyond the end of topic {topic!r} ({shown}): they were taken from another "
            "log (the topic was deleted and created again, or the cluster rebuilt), so resuming would read "
            "nothing"
        )
        return problem, "beyond", warnings
    return "", "", warnings


def refusal(problem: str, kind: str, location: str) -> Exception:
    """The error a refused resume fails the run with: the problem and the two ways out."""
    from airflow_provider_kstate.errors import StoredOffsetsError, TopicRecreatedError

    cls = TopicRecreatedError if kind == "recreated" else StoredOffsetsError
    return cls(
        f"refused to resume the checkpoint at {location}: {problem}. Nothing was read or written. Two ways "
        "out: give the run a new checkpoint location (the checkpoint param, --checkpoint) to read the input "
        "from its earliest offset with a fresh query, or run with start_over=true (--start-over true) to set "
        "this checkpoint aside and start over from the earliest offset"
    )


def start_over(
    spark: Any, cfg: dict[str, Any], args: argparse.Namespace, bounds: dict[int, tuple[int, int]]
) -> str:
    """Set the checkpoint aside (renamed, kept) and move the group's offsets on the input to its log start:
    the query then reads the input from its earliest offset. Return where the old checkpoint went."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    from airflow_provider_kstate.spark_apps.kafka_io import admin_config
    from airflow_provider_kstate.spark_apps.runtime import hadoop_fs

    location = checkpoint_location(args)
    aside = f"{location.rstrip('/')}.set-aside-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}"
    fs, path = hadoop_fs(spark, location)
    if fs.exists(path):
        _, target = hadoop_fs(spark, aside)
        if not fs.rename(path, target):
            raise OSError(f"could not set the checkpoint {location} aside as {aside}")
    reset = [TopicPartition(args.input_topic, p, lo) for p, (lo, _hi) in sorted(bounds.items())]
    admin = AdminClient(admin_config(cfg))
    for future in admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(args.group, reset)], request_timeout=args.timeout
    ).values():
        future.result(timeout=args.timeout)
    return aside


def record_input(spark: Any, location: str, topic: str, topic_id: str, group: str) -> None:
    """Write the pipeline's record of the input into the checkpoint folder (the id the offsets belong to)."""
    from airflow_provider_kstate.spark_apps.runtime import write_bytes
    from airflow_provider_kstate.store.uri import join

    doc = {
        "format": INPUT_FORMAT,
        "topic": topic,
        "topic_id": topic_id or None,
        "group": group,
        "written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    write_bytes(spark, join(location, INPUT_RECORD), json.dumps(doc, indent=1).encode())


def guard_resume(
    spark: Any, cfg: dict[str, Any], args: argparse.Namespace, bounds: dict[int, tuple[int, int]]
) -> dict[str, Any]:
    """Before the query starts: refuse a checkpoint (or group commit) that does not belong to the input's
    log now, unless ``--start-over``; record the input's id beside the checkpoint. Return the report's
    fields: the input's id, warnings, and ``started_over`` when it did."""
    from airflow_provider_kstate.spark_apps.kafka_io import topic_id as read_topic_id

    location = checkpoint_location(args)
    topic_id = read_topic_id(cfg, args.input_topic)  # before the offsets: they are of this id's log
    checkpoint = read_checkpoint(spark, location, args.input_topic)
    consumer = group_consumer(cfg, args.group)
    try:
        committed = committed_offsets(consumer, args.input_topic, sorted(bounds))
    finally:
        consumer.close()
    ends = {p: hi for p, (_lo, hi) in bounds.items()}
    problem, kind, warnings = resume_problem(args.input_topic, checkpoint, topic_id, ends, committed)
    for warning in warnings:
        print(f"running_totals: warning: {warning}", file=sys.stderr)
    out: dict[str, Any] = {"input_topic_id": topic_id or None, "warnings": warnings}
    if problem and not args.start_over:
        raise refusal(problem, kind, location)
    if problem:
        aside = start_over(spark, cfg, args, bounds)
        print(
            f"running_totals: STARTING OVER from the earliest offset of {args.input_topic!r} (start_over=true): "
            f"{problem}. The old checkpoint was set aside as {aside}; the totals already in "
            f"{args.changelog_topic!r} are kept and added to",
            file=sys.stderr,
        )
        out["started_over"] = {"reason": problem, "checkpoint_set_aside": aside}
    if problem or checkpoint.recorded.get("topic_id") != (topic_id or None) or not checkpoint.recorded:
        record_input(spark, location, args.input_topic, topic_id, args.group)
    return out


def committed_offsets(consumer: Any, topic: str, partitions: list[int]) -> dict[int, int]:
    """The group's committed offsets on ``topic`` (partitions without one are absent)."""
    from confluent_kafka import TopicPartition

    tps = consumer.committed([TopicPartition(topic, p) for p in partitions], timeout=30)
    return {tp.partition: tp.offset for tp in tps if tp.offset >= 0}


def input_stream(spark: Any, cfg: dict[str, Any], topic: str) -> Any:
    """The input as PySpark users read Kafka: Spark's Kafka source, read_committed, from earliest."""
    from airflow_provider_kstate.spark_apps.kafka_source import java_options

    return (
        spark.readStream.format("kafka")
        .options(**java_options(cfg))
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("kafka.isolation.level", "read_committed")
        .option("failOnDataLoss", "true")
        .load()
    )


def consumed(progress: list[Any]) -> tuple[int, dict[str, int]]:
    """Return the offsets the query's batches spanned and the input offsets it ended at, from its progress."""
    spanned, last_end = 0, {}
    for entry in progress:
        source = entry["sources"][0] if isinstance(entry, dict) else entry.sources[0]
        start, end = (
            source[k] if isinstance(source, dict) else getattr(source, k)
            for k in ("startOffset", "endOffset")
        )
        start = json.loads(start) if isinstance(start, str) else start or {}
        end = json.loads(end) if isinstance(end, str) else end or {}
        for topic_ends in end.values():
            topic_starts = next(iter(start.values()), {}) if start else {}
            for p, hi in topic_ends.items():
                spanned += max(0, int(hi) - int(topic_starts.get(p, 0)))
                last_end[p] = int(hi)
    return spanned, dict(sorted(last_end.items(), key=lambda kv: int(kv[0])))


def run(args: argparse.Namespace, cfg: dict[str, Any]) -> dict[str, Any]:
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("kstate-example-running-totals").getOrCreate()
    bounds = offsets(cfg, args.input_topic)  # refuses a broker whose ListOffsets lags its fetches
    resumed = guard_resume(spark, cfg, args, bounds)  # refuses offsets taken from another log
    barrier, epoch = barrier_offsets(cfg, args.control_topic, args.input_topic, args.group)
    totals = Totals(cfg, args, barrier, epoch)
    query = (
        input_stream(spark, cfg, args.input_topic)
        .writeStream.foreachBatch(lambda batch, batch_id: process(batch, batch_id, totals))
        .option("checkpointLocation", checkpoint_location(args))
        .trigger(availableNow=True)
        .queryName(f"kstate-example-{args.group}")
        .start()
    )
    query.awaitTermination()
    spanned, ends = consumed([p for p in query.recentProgress if _rows(p)])
    spark.stop()
    return {
        "ok": True,
        "input_partitions": len(bounds),
        "offsets_consumed": spanned,
        "payments_read": totals.read,  # what the reads returned, not what the offsets span
        "accounts_touched": len(totals.touched),
        "bad_records": totals.bad,
        "accounts_updated": totals.updated,
        "accounts_closed": totals.closed,
        "input_offsets": ends,
        "batches": totals.batches,
        "batches_replayed": totals.replayed,
        "checkpoint": checkpoint_location(args),
        "ordered_at_barrier": epoch,  # the key-order barrier's epoch when it ordered the batches, else 0
        **resumed,  # the input's topic id, what could not be checked, and started_over when it did
    }


def _rows(progress: Any) -> int:
    return int(progress["numInputRows"] if isinstance(progress, dict) else progress.numInputRows)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    with open(args.kafka_config_file, encoding="utf-8") as f:
        cfg = json.load(f)
    started = time.monotonic()
    try:
        report = run(args, cfg)
    except Exception as exc:  # noqa: BLE001 - reported, then a non-zero exit
        from airflow_provider_kstate.errors import StoredOffsetsError
        from airflow_provider_kstate.store.contract import error_code, fail

        if isinstance(exc, StoredOffsetsError):  # the task fails with the named error, not retried
            return fail(args.report_file, str(exc), print, "running_totals", error_code(exc))
        report = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    report["seconds"] = round(time.monotonic() - started, 3)
    with open(args.report_file, "w", encoding="utf-8") as f:
        json.dump(report, f)
    print(f"running_totals: {json.dumps(report)[:1000]}")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
