"""Re-place a Kafka Streams changelog after its partition count grew (a PySpark application, issue 32).

    spark-submit airflow_provider_kstate/spark_apps/replace_changelog.py --kafka-config-file CFG.json \\
        --topic CHANGELOG [--topic CHANGELOG2 ...] --report-file R.json --from-partitions 2 --partitions 4 \\
        [--key-suffix 12 ...]

A Streams task owns one partition number of its sources and of its stores' changelogs; when the sources grow
from ``--from-partitions`` to ``--partitions``, a key's new records arrive on the task of
``murmur2(key) % N``, while its state sits in the changelog partition of ``murmur2(key) % N_old``. Kafka
cannot move records, so the changelog is re-placed by writing:

1. Capture the changelog's log starts and last stable offsets of its old partitions (driver, one ListOffsets,
   cross-checked with where a read_committed fetch ends, see :func:`.kafka_io.checked_offsets`).
2. One Spark task per old partition: fold it (read_committed, up to that bound) to each key's latest value;
   for every live key whose **record key** (the changelog key without its last ``--key-suffix`` bytes: 12
   for a window store, 16 for a session store, 0 for a key-value store) hashes to another partition of the
   new count, write its latest value there (same key, value, timestamp and headers; idempotent producer,
   ``acks=all``), and once every such write is acknowledged, a tombstone for it in its old partition. A
   restore (from a checkpoint or from scratch) then converges on the new placement. Run again after a
   failure it re-places what is left (the keys already at home are untouched).
3. The deep check: fold every partition of the grown changelog again and prove that every live key sits in
   ``murmur2(record key) % N`` (``misplaced`` 0) and that the live ``(key, value)`` rows are those of before
   (their order-independent digest and count are equal: nothing lost, nothing duplicated).

Several changelogs (``--topic`` repeated, each with its ``--key-suffix``) share one Spark session: an
application's stores are re-placed by one ``spark-submit``. The report is ``{"ok", "changelogs": {topic:
{"replace", "check", "ok"}}, "seconds"}``. ``--check-only`` runs step 3 alone (its digest is then not
compared). The changelog must already have
``--partitions`` partitions (the caller grows it first, with the sources). Nothing here imports Airflow.
Exit code 0 when the application ran (the report's ``ok`` says whether the check passed); 2 with one
``kstate-replace: error:`` line on stderr when it could not run.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

if __package__ in (None, ""):  # run as a script by spark-submit
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from airflow_provider_kstate.client_piece.murmur2 import partition_for
from airflow_provider_kstate.spark_apps import kafka_io
from airflow_provider_kstate.spark_apps.runtime import first_line, spark_session, to_stderr
from airflow_provider_kstate.store.contract import (
    DEFAULT_TIMEOUT,
    AppError,
    error_code,
    fail,
    load_kafka_config,
    write_report,
)
from airflow_provider_kstate.store.digest import digest_hex, digest_sum

PREFIX = "kstate-replace"
#: Live keys named per partition in the report when misplaced.
SAMPLES = 5


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the command line (the options every kstate application takes, without a snapshot)."""
    parser = argparse.ArgumentParser(
        prog="replace_changelog.py", description="Re-place a Kafka Streams changelog on its grown count."
    )
    parser.add_argument(
        "--kafka-config-file", required=True, help="JSON dict of librdkafka settings (secret)"
    )
    parser.add_argument(
        "--topic",
        required=True,
        action="append",
        help="a changelog topic (repeat: one Spark session for all)",
    )
    parser.add_argument("--report-file", required=True, help="where to write the JSON report")
    parser.add_argument("--from-partitions", type=int, required=True, help="its partition count before")
    parser.add_argument("--partitions", type=int, required=True, help="its partition count now")
    parser.add_argument(
        "--key-suffix",
        type=int,
        action="append",
        help="bytes after the record key in a changelog key: 0 key-value (default), 12 window, 16 session "
        "store; once for every topic, or once per --topic in its order",
    )
    parser.add_argument("--check-only", action="store_true", help="only prove the placement (step 3)")
    parser.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT, help="read timeout per partition, s"
    )
    kafka_io.add_deviation_argument(parser)
    return parser.parse_args(argv)


@dataclass(frozen=True)
class Job:
    """What every task needs (pickled to the executors; ``kafka_config`` is never logged)."""

    kafka_config: dict[str, Any]
    topic: str
    partitions: int
    suffix: int
    ranges: dict[int, tuple[int, int]]
    timeout: float


def home(key: bytes, job: Job) -> int:
    """The partition of a changelog key under the new count: murmur2 of its record key."""
    record_key = key[: len(key) - job.suffix] if job.suffix else key
    return partition_for(record_key, job.partitions)


def _fold(job: Job, partition: int) -> kafka_io.FoldResult:
    start, end = job.ranges[partition]
    return kafka_io.fold_partition(job.kafka_config, job.topic, partition, start, end, job.timeout)


def _producer(job: Job) -> Any:
    from confluent_kafka import Producer

    conf = kafka_io.admin_config(job.kafka_config)  # the connection's settings, no consumer-only keys
    conf.pop("allow.auto.create.topics", None)
    return Producer(
        {
            **conf,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 20,
            "batch.num.messages": 10_000,
            "queue.buffering.max.messages": 1_000_000,
        }
    )


def _send(producer: Any, job: Job, records: list[tuple[int, bytes, bytes | None, int, Any]]) -> int:
    """Write ``(partition, key, value, timestamp, headers)`` records, wait for every acknowledgement;
    return how many; raise naming the first failure."""
    failures: list[str] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(str(err))

    for partition, key, value, ts, headers in records:
        while True:
            try:
                producer.produce(
                    job.topic,
                    key=key,
                    value=value,
                    partition=partition,
                    timestamp=ts,
                    headers=headers,
                    on_delivery=delivered,
                )
                break
            except BufferError:
                producer.poll(0.05)
    left = producer.flush(job.timeout)
    if left or failures:
        raise kafka_io.KafkaReadError(
            f"{job.topic}: {len(failures)} writes failed, {left} not acknowledged within {job.timeout:g}s"
            + (f": {failures[0]}" if failures else "")
        )
    return len(records)


def replace_partition(job: Job, partition: int) -> dict[str, Any]:
    """Step 2 for one old partition: move its live keys that belong elsewhere; return its numbers and the
    digest of its live rows before the move."""
    started = time.monotonic()
    fold = _fold(job, partition)
    moves: list[tuple[int, bytes, bytes | None, int, Any]] = []
    tombstones: list[tuple[int, bytes, bytes | None, int, Any]] = []
    keys: list[bytes] = []
    values: list[bytes] = []
    for key, msg in fold.latest.items():
        value = msg.value()
        if value is None:
            continue
        keys.append(key)
        values.append(value)
        target = home(key, job)
        if target != partition:
            ts = msg.timestamp()[1]
            moves.append((target, key, value, ts, msg.headers()))
            tombstones.append((partition, key, None, ts, msg.headers()))
    if moves:
        producer = _producer(job)
        _send(producer, job, moves)  # every moved value is stored before its old copy is deleted
        _send(producer, job, tombstones)
    return {
        "partition": partition,
        "records": fold.records,
        "live": len(keys),
        "moved": len(moves),
        "digest": digest_sum(keys, values),
        "seconds": round(time.monotonic() - started, 3),
    }


def check_partition(job: Job, partition: int) -> dict[str, Any]:
    """Step 3 for one partition of the grown changelog: its live keys, those not at home, their digest."""
    fold = _fold(job, partition)
    keys: list[bytes] = []
    values: list[bytes] = []
    misplaced: list[str] = []
    count = 0
    for key, msg in fold.latest.items():
        value = msg.value()
        if value is None:
            continue
        keys.append(key)
        values.append(value)
        if home(key, job) != partition:
            count += 1
            if len(misplaced) < SAMPLES:
                misplaced.append(key.hex())
    return {
        "partition": partition,
        "records": fold.records,
        "live": len(keys),
        "misplaced": count,
        "misplaced_keys": misplaced,
        "digest": digest_sum(keys, values),
    }


#: Runs ``task(job, partition)`` for every partition of ``job.ranges``; returns the results.
Tasks = Callable[[Job, Callable[[Job, int], dict[str, Any]]], list[dict[str, Any]]]


def spark_tasks(spark: Any) -> Tasks:
    """One Spark task per partition (the application)."""

    def run(job: Job, task: Callable[[Job, int], dict[str, Any]]) -> list[dict[str, Any]]:
        parts = sorted(job.ranges)
        if not parts:
            return []
        found = spark.sparkContext.parallelize(parts, len(parts)).map(lambda p: task(job, p)).collect()
        return sorted(found, key=lambda r: r["partition"])

    return run


def local_tasks(workers: int = 4) -> Tasks:
    """The same tasks in threads of this process (no Spark): for a small changelog, where starting a Spark
    application costs more than the work (:func:`replace_local`)."""

    def run(job: Job, task: Callable[[Job, int], dict[str, Any]]) -> list[dict[str, Any]]:
        with ThreadPoolExecutor(max_workers=max(1, min(workers, len(job.ranges)))) as pool:
            return list(pool.map(lambda p: task(job, p), sorted(job.ranges)))

    return run


def suffixes(args: argparse.Namespace) -> dict[str, int]:
    """``{topic: key suffix}`` of the command line."""
    given = args.key_suffix or [0]
    if len(given) == 1:
        given = given * len(args.topic)
    if len(given) != len(args.topic):
        raise AppError(f"{len(args.topic)} --topic and {len(given)} --key-suffix: give one, or one per topic")
    for suffix in given:
        if suffix not in (0, 12, 16):
            raise AppError(f"--key-suffix {suffix} is none of 0 (key-value), 12 (window), 16 (session)")
    return dict(zip(args.topic, given, strict=True))


def _job(
    args: argparse.Namespace, config: dict[str, Any], topic: str, suffix: int, count: int, warnings: list[str]
) -> Job:
    ranges = kafka_io.checked_offsets(
        config,
        topic,
        list(range(count)),
        accept_fetch_ends=kafka_io.accepts_fetch_ends(args),
        warnings=warnings,
    )
    return Job(config, topic, args.partitions, suffix, ranges, args.timeout)


def check_layout(config: dict[str, Any], args: argparse.Namespace, topics: list[str]) -> None:
    """Refuse before anything is written: a changelog not grown yet, a count that is not an increase."""
    if not 0 < args.from_partitions <= args.partitions:
        raise AppError(f"--from-partitions {args.from_partitions} is not in 1..{args.partitions}")
    for topic in topics:
        count = kafka_io.topic_partition_count(config, topic)
        if count != args.partitions:
            raise AppError(
                f"changelog {topic!r} has {count} partitions, not --partitions {args.partitions}: grow it "
                "first (with its application's sources), then re-place it"
            )


def replace(
    tasks: Tasks, args: argparse.Namespace, config: dict[str, Any], topic: str, suffix: int
) -> dict[str, Any]:
    """Steps 1 to 3 for one changelog; return its report."""
    warnings: list[str] = []
    report: dict[str, Any] = {"topic": topic, "from_partitions": args.from_partitions}
    report.update({"partitions": args.partitions, "key_suffix": suffix, "warnings": warnings})
    before: list[dict[str, Any]] = []
    started = time.monotonic()
    if not args.check_only:
        job = _job(args, config, topic, suffix, args.from_partitions, warnings)
        before = tasks(job, replace_partition)
        seconds = time.monotonic() - started
        records = sum(r["records"] for r in before)
        report["replace"] = {
            "records_read": records,
            "live_keys": sum(r["live"] for r in before),
            "moved": sum(r["moved"] for r in before),
            "tombstones": sum(r["moved"] for r in before),
            "seconds": round(seconds, 3),
            "records_per_s": round(records / seconds, 1) if seconds > 0 else None,
            "partitions": [{k: v for k, v in r.items() if k != "digest"} for r in before],
        }
    checked = time.monotonic()
    after = tasks(_job(args, config, topic, suffix, args.partitions, warnings), check_partition)
    live_after = sum(r["live"] for r in after)
    check: dict[str, Any] = {
        "live_keys": live_after,
        "misplaced": sum(r["misplaced"] for r in after),
        "misplaced_keys": {str(r["partition"]): r["misplaced_keys"] for r in after if r["misplaced"]},
        "digest": digest_hex(sum(r["digest"] for r in after)),
        "seconds": round(time.monotonic() - checked, 3),
    }
    if before:
        check["digest_before"] = digest_hex(sum(r["digest"] for r in before))
        check["live_keys_before"] = sum(r["live"] for r in before)
    same = not before or (
        check["digest"] == check["digest_before"] and check["live_keys_before"] == live_after
    )
    check["ok"] = check["misplaced"] == 0 and same
    report["check"] = check
    report["ok"] = check["ok"]
    return report


def replace_local(
    kafka_config: dict[str, Any], layout: dict[str, int], before: int, now: int, workers: int = 4
) -> dict[str, dict[str, Any]]:
    """Re-place the changelogs ``{topic: key suffix}`` in this process (threads, no Spark): the same steps and
    report per changelog as the application's."""
    argv = ["--kafka-config-file", "-", "--report-file", "-", "--from-partitions", str(before)]
    argv += ["--partitions", str(now)]
    for topic in layout:
        argv += ["--topic", topic]
    args = parse_args(argv)
    check_layout(kafka_config, args, list(layout))
    tasks = local_tasks(workers)
    out = {}
    for topic, suffix in layout.items():
        started = time.monotonic()
        out[topic] = replace(tasks, args, kafka_config, topic, suffix)
        out[topic]["seconds"] = round(time.monotonic() - started, 3)
    return out


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``spark-submit replace_changelog.py``; returns the exit code."""
    args = parse_args(argv)
    started = time.monotonic()
    try:
        config = load_kafka_config(args.kafka_config_file)
        layout = suffixes(args)
        check_layout(config, args, list(layout))
        spark = spark_session("kstate-replace-changelog")
        tasks = spark_tasks(spark)
        changelogs = {topic: replace(tasks, args, config, topic, suffix) for topic, suffix in layout.items()}
    except Exception as exc:  # noqa: BLE001 - Spark/Py4J errors: one line, not a stack trace
        known = isinstance(exc, (AppError, kafka_io.KafkaReadError, kafka_io.OffsetBoundError))
        message = str(exc) if known else f"{type(exc).__name__}: {first_line(exc)}"
        return fail(args.report_file, message, to_stderr, PREFIX, error_code(exc))
    ok = all(r["ok"] for r in changelogs.values())
    report = {"ok": ok, "changelogs": changelogs, "seconds": round(time.monotonic() - started, 3)}
    write_report(args.report_file, report)
    for topic, one in changelogs.items():
        moved = one.get("replace", {}).get("moved", 0)
        print(
            f"{PREFIX}: {'ok' if one['ok'] else 'CHECK FAILED'}: {topic}: {moved} keys moved; "
            f"{one['check']['live_keys']} live keys, {one['check']['misplaced']} misplaced"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
