"""A Structured Streaming query on Spark's own Kafka source reads a topic through a partition increase and
loses nothing (issue 30): on the real broker, a real ``spark-submit`` query (``spark.readStream.format("kafka")``,
``startingOffsets=earliest``, a parquet sink with its checkpoint) runs while a producer writes and the topic
grows from 4 to 8 partitions.

It confirms what the plan relies on to leave Spark's source alone: the source discovers the new partitions by
itself and reads each from offset 0, every record written lands in the sink exactly once; and the source's
groups (``spark-kafka-source-*``) neither join nor commit, so the broker lists none of them: its offsets live
only in the checkpoint. The time from the increase to the first row of a new partition in the sink is measured
and printed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow.dataset as pads
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kstate_support import spark_kafka

pytestmark = [pytest.mark.integration, pytest.mark.spark]

BEFORE, AFTER = 4, 8

#: The query under test, as a PySpark user writes it (no kstate import).
QUERY = """
import os, sys, time
from pyspark.sql import SparkSession, functions as F

bootstrap, topic, out, checkpoint, stop = sys.argv[1:6]
spark = SparkSession.builder.appName("kstate-test-stream-increase").getOrCreate()
spark.sparkContext.setLogLevel("WARN")
rows = (
    spark.readStream.format("kafka")
    .option("kafka.bootstrap.servers", bootstrap)
    .option("subscribe", topic)
    .option("startingOffsets", "earliest")
    .option("kafka.isolation.level", "read_committed")
    .load()
    .select("partition", "offset", F.col("value").cast("string").alias("seq"), F.current_timestamp().alias("read_at"))
)
query = (
    rows.writeStream.format("parquet")
    .option("path", out)
    .option("checkpointLocation", checkpoint)
    .trigger(processingTime="500 milliseconds")
    .start()
)
while not os.path.exists(stop) or query.status["isDataAvailable"] or query.status["isTriggerActive"]:
    time.sleep(0.5)
    if query.exception() is not None:
        raise query.exception()
time.sleep(2)  # one more trigger sees the end
query.processAllAvailable()
query.stop()
print("QUERY STOPPED", flush=True)
"""


class Writer(threading.Thread):
    """Writes sequence numbers (keyed, spread over every partition) and keeps where each landed."""

    def __init__(self, config: dict[str, Any], topic: str, rate: float = 300.0) -> None:
        super().__init__(daemon=True)
        self.topic, self.rate = topic, rate
        self.producer = Producer({**config, "linger.ms": 5, "topic.metadata.refresh.interval.ms": 1000})
        self.landed: dict[tuple[int, int], str] = {}
        self.errors: list[str] = []
        self._halt = threading.Event()

    def run(self) -> None:
        start, n = time.monotonic(), 0
        while not self._halt.is_set():
            seq = str(n)

            def done(err: Any, msg: Any, seq: str = seq) -> None:
                if err is not None:
                    self.errors.append(str(err))
                else:
                    self.landed[(msg.partition(), msg.offset())] = seq

            self.producer.produce(self.topic, key=f"k{n}".encode(), value=seq.encode(), on_delivery=done)
            self.producer.poll(0)
            n += 1
            delay = start + n / self.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        assert self.producer.flush(30) == 0

    def stop(self) -> None:
        self._halt.set()
        self.join(60)


@pytest.fixture
def topic(admin: AdminClient) -> Iterator[str]:
    name = f"kstate-test-stream-{uuid.uuid4().hex[:8]}"
    for f in admin.create_topics([NewTopic(name, BEFORE, 1)]).values():
        f.result(timeout=30)
    yield name
    for f in admin.delete_topics([name]).values():
        try:
            f.result(timeout=30)
        except Exception:  # noqa: BLE001 - best-effort clean-up
            pass


def sink_rows(out: Path) -> list[dict[str, Any]]:
    """The rows of the files the parquet sink committed (its ``_spark_metadata`` log names them)."""
    files: list[str] = []
    for log in sorted((out / "_spark_metadata").glob("[0-9]*")):
        for line in log.read_text().splitlines()[1:]:  # "v1", then one JSON entry per file
            if line.strip():
                files.append(json.loads(line)["path"].removeprefix("file://"))
    files = list(dict.fromkeys(files))  # a ``N.compact`` log repeats the entries of the logs before it
    return pads.dataset(files, format="parquet").to_table().to_pylist() if files else []


def wait_for(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def test_a_streaming_query_reads_through_an_increase_and_loses_nothing(
    kafka_config: dict[str, Any], admin: AdminClient, topic: str, tmp_path: Path
) -> None:
    app, out, stop = tmp_path / "query.py", tmp_path / "out", tmp_path / "stop"
    app.write_text(QUERY)
    venv_bin = str(Path(sys.executable).parent)
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PATH": f"{venv_bin}{os.pathsep}{os.environ['PATH']}",
    }
    cmd = [str(Path(venv_bin) / "spark-submit"), "--master", "local[2]", "--conf", "spark.ui.enabled=false"]
    cmd += [*spark_kafka.submit_args(), str(app), kafka_config["bootstrap.servers"], topic, str(out)]
    cmd += [str(tmp_path / "checkpoint"), str(stop)]
    writer = Writer(kafka_config, topic)
    writer.start()
    query = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    grown, spark_groups = None, None
    try:
        wait_for(lambda: len(sink_rows(out)) > 0 or query.poll() is not None, 300, "the query's first rows")
        assert query.poll() is None, query.stdout.read()[-3000:] if query.stdout else ""
        groups = [g.group_id for g in admin.list_consumer_groups(request_timeout=30).result().valid]
        spark_groups = [g for g in groups if g.startswith(("spark-kafka-source-", "spark-kafka-relation-"))]

        for f in admin.create_partitions([NewPartitions(topic, AFTER)]).values():
            f.result(timeout=30)
        grown = datetime.now(timezone.utc)
        wait_for(lambda: any(r["partition"] >= BEFORE for r in sink_rows(out)), 120, "a new partition's rows")
        time.sleep(3.0)
    finally:
        writer.stop()
        stop.touch()
        if grown is None or spark_groups is None:  # failed before the increase: stop the query now
            query.kill()
    output = query.communicate(timeout=300)[0]
    assert query.returncode == 0 and "QUERY STOPPED" in output, output[-3000:]
    assert not writer.errors, writer.errors[:5]

    rows = sink_rows(out)
    got = {(r["partition"], r["offset"]): r["seq"] for r in rows}
    assert len(got) == len(rows), "a record reached the sink twice"
    lost = sorted(set(writer.landed) - set(got))
    assert not lost, f"{len(lost)} of {len(writer.landed)} records lost, e.g. {lost[:5]}"
    assert got == writer.landed
    new = [r for r in rows if r["partition"] >= BEFORE]
    starts = {p: min(r["offset"] for r in new if r["partition"] == p) for p in {r["partition"] for r in new}}
    assert starts and all(o == 0 for o in starts.values()), starts  # each new partition read from earliest
    first = min(r["read_at"] for r in new)
    first = first if first.tzinfo else first.replace(tzinfo=timezone.utc)
    assert spark_groups == [], spark_groups  # the source keeps its offsets in the checkpoint only
    print(
        f"stream through {BEFORE}->{AFTER} partitions: {len(got)} of {len(writer.landed)} records in the sink, "
        f"0 lost, 0 duplicated; new partitions {sorted(starts)} read from offset 0; first new-partition row "
        f"in the sink {(first - grown).total_seconds():.2f}s after the increase; broker-listed Spark groups: "
        f"{spark_groups}"
    )
