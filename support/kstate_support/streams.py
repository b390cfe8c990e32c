"""Kafka Streams 4.4 applications under a partition increase (issue 32): the app (``support/streams``), keyed
traffic, and the truth its outputs are judged against.

:func:`build` compiles ``support/streams`` with Maven once into the git-ignored ``.kstate/streams-build``
(classes and the runtime jars in ``libs``; rebuilt only when the pom or a source changed, a stamp of their
hash). :class:`StreamsApp` runs one instance of it (a JVM of 256 MB at most) with one of three topologies,
``count`` (``groupByKey().count()``), ``join`` (a stream-stream join with window stores) or ``filter``
(stateless), and reads what it wrote about itself: its state changes, the tasks it ran, and any uncaught
exception (the app then shuts down: ``SHUTDOWN_CLIENT``).

:class:`KeyedTraffic` writes keyed records the way a Java producer would place them (``murmur2_random``:
murmur2 of the key over the partition count it knows), remembering each delivered record; the ``*_verdict``
functions compare an app's output, read back with :func:`read_topic` (``read_committed``), with the truth
computed here from what was written.

    python -m kstate_support.streams merge DIR > docs/measurements/issue32/naive.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kstate_support import ROOT, maven

#: The Maven project of the app.
STREAMS_DIR = Path(__file__).resolve().parent.parent / "streams"
#: Where :func:`build` puts the classes and ``libs``.
BUILD_DIR = ROOT / ".kstate" / "streams-build"
MAIN = "io.kstate.streams.App"

#: The topologies of the app.
SHAPES = ("count", "join", "filter")
#: Streams' group protocols: the classic one (the client's assignor) and KIP-1071's streams groups (the
#: broker assigns; Apache Kafka 4.4 enables them by default: ``group.coordinator.rebalance.protocols`` is
#: ``classic,consumer,streams``).
PROTOCOLS = ("classic", "streams")
#: The app's JVM: small, quick to start.
JAVA_OPTS = ("-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData")


class StreamsError(RuntimeError):
    """The app could not be built or started, or did not reach a state in time."""


def build(build_dir: Path = BUILD_DIR) -> Path:
    """Build the app into ``build_dir`` unless it holds a build of the current sources; return it
    (:func:`kstate_support.maven.package_once`)."""
    return maven.package_once(STREAMS_DIR, build_dir, "build the Streams app")


class StreamsApp:
    """One instance of the Streams app (not started until :meth:`start`).

    :param shape: ``count``, ``join`` or ``filter``.
    :param inputs: its input topics (two for ``join``).
    :param run_dir: where its state dir, ``events.jsonl`` and ``app.log`` go.
    :param protocol: ``classic`` or ``streams`` (KIP-1071).
    :param guarantee: ``exactly_once_v2`` or ``at_least_once``.
    :param metadata_ms: its clients' ``metadata.max.age.ms`` (how soon it sees a new partition).
    """

    def __init__(
        self,
        shape: str,
        bootstrap: str,
        app_id: str,
        inputs: list[str],
        output: str,
        run_dir: Path,
        protocol: str = "classic",
        guarantee: str = "exactly_once_v2",
        commit_ms: int = 200,
        metadata_ms: int = 1000,
        window_ms: int = 2000,
    ) -> None:
        args = dict(locals())
        self._args = {k: v for k, v in args.items() if k != "self"}
        if shape not in SHAPES:
            raise ValueError(f"shape is one of {SHAPES}, not {shape!r}")
        if protocol not in PROTOCOLS:
            raise ValueError(f"protocol is one of {PROTOCOLS}, not {protocol!r}")
        java = shutil.which(os.environ.get("KSTATE_FLEET_JAVA", "java"))
        if java is None:
            raise StreamsError("java (Java 17+) is not on PATH")
        self.build_dir = build()
        self.run_dir = run_dir
        run_dir.mkdir(parents=True, exist_ok=True)
        self.events_file = run_dir / "events.jsonl"
        self.log_file = run_dir / "app.log"
        self.argv = [
            java,
            *JAVA_OPTS,
            "-cp",
            f"{self.build_dir / 'classes'}:{self.build_dir / 'libs'}/*",
            MAIN,
            *("--shape", shape, "--bootstrap", bootstrap, "--app-id", app_id),
            *("--input", ",".join(inputs), "--output", output, "--state-dir", str(run_dir / "state")),
            *("--events", str(self.events_file), "--protocol", protocol, "--guarantee", guarantee),
            *(
                "--commit-ms",
                str(commit_ms),
                "--metadata-ms",
                str(metadata_ms),
                "--window-ms",
                str(window_ms),
            ),
        ]
        self.proc: subprocess.Popen[bytes] | None = None

    def again(self, run_dir: Path) -> StreamsApp:
        """Another instance of this app (the same application id, topics and settings) in ``run_dir``: the
        app restarted by its operator, with a fresh state dir."""
        return StreamsApp(**{**self._args, "run_dir": run_dir})

    def start(self) -> None:
        with self.log_file.open("ab") as log:
            self.proc = subprocess.Popen(  # noqa: S603 - our own JVM and arguments
                self.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def events(self) -> list[dict[str, Any]]:
        """What the app wrote about itself so far (``start``, ``state``, ``error``, ``signal``, ``exit``)."""
        if not self.events_file.exists():
            return []
        out = []
        for line in self.events_file.read_text().splitlines():
            with contextlib.suppress(json.JSONDecodeError):
                out.append(json.loads(line))
        return out

    def states(self) -> list[tuple[float, str]]:
        """``(epoch seconds, state)`` of each state the app entered."""
        return [(e["t"] / 1000, e["to"]) for e in self.events() if e["ev"] == "state"]

    def state(self) -> str:
        states = self.states()
        return states[-1][1] if states else "CREATED"

    def errors(self) -> list[dict[str, Any]]:
        return [e for e in self.events() if e["ev"] == "error"]

    def wait_running(self, timeout: float = 90.0) -> None:
        """Wait until the app is RUNNING with at least one task.

        :raises StreamsError: it was not within ``timeout`` (the message ends with its log)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            running = [
                e for e in self.events() if e["ev"] == "state" and e["to"] == "RUNNING" and e.get("tasks")
            ]
            if running:
                return
            if not self.alive():
                break
            time.sleep(0.2)
        raise StreamsError(f"the app was not RUNNING with tasks within {timeout}s:\n{self.log_tail()}")

    def log_tail(self, chars: int = 3000) -> str:
        return self.log_file.read_text(errors="replace")[-chars:] if self.log_file.exists() else ""

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM the app (Streams closes), SIGKILL it after ``timeout``; return its exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode


@dataclass
class Record:
    """A record :class:`KeyedTraffic` wrote and the broker acknowledged."""

    topic: str
    key: str
    seq: int
    partition: int
    ts: int  # its CreateTime, ms
    offset: int = -1


class KeyedTraffic(threading.Thread):
    """Write keyed records to ``topics`` in turn at ``rate`` per second (each topic) until stopped.

    The value is a sequence number unique across the topics; the key cycles over ``keys`` keys (each topic
    gets every key); the timestamp is set here (so the truth of a windowed join uses the one the record
    carries). Placed as the Java client's default partitioner places a keyed record (``murmur2_random``:
    murmur2 of the key over the partition count it knows), with the producer's metadata refreshed every
    ``metadata_ms`` (it sees a new partition within it).
    """

    def __init__(
        self,
        config: dict[str, Any],
        topics: list[str],
        rate: float = 100.0,
        keys: int = 50,
        metadata_ms: int = 500,
    ) -> None:
        super().__init__(daemon=True)
        from confluent_kafka import Producer

        self.topics = topics
        self.rate = rate
        self.keys = keys
        self.delivered: list[Record] = []
        self.errors: list[str] = []
        self._halt = threading.Event()
        self._lock = threading.Lock()
        self.producer = Producer(
            {
                **config,
                "partitioner": "murmur2_random",
                "linger.ms": 5,
                "acks": "all",
                "enable.idempotence": True,
                "topic.metadata.refresh.interval.ms": metadata_ms,
            }
        )

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))
            return
        record = Record(
            msg.topic(),
            msg.key().decode(),
            int(msg.value()),
            msg.partition(),
            msg.timestamp()[1],
            msg.offset(),
        )
        with self._lock:
            self.delivered.append(record)

    def run(self) -> None:
        seq = seq0 = 0
        start = time.monotonic()
        per_round = 1.0 / self.rate
        while not self._halt.is_set():
            if self.held():  # the pace starts again after a hold
                start, seq0 = time.monotonic(), seq
            key = f"k{(seq // len(self.topics)) % self.keys:03d}"
            for topic in self.topics:
                self.producer.produce(
                    topic,
                    key=key.encode(),
                    value=str(seq).encode(),
                    timestamp=int(time.time() * 1000),
                    on_delivery=self._on_delivery,
                )
                seq += 1
            self.producer.poll(0)
            rounds = (seq - seq0) // len(self.topics)
            delay = start + rounds * per_round - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        self.producer.flush(30)

    def held(self) -> bool:
        """Between two rounds: True when the traffic was held (and is free again). Never, here."""
        return False

    def stop(self, timeout: float = 40.0) -> None:
        self._halt.set()
        self.join(timeout)

    def records(self) -> list[Record]:
        with self._lock:
            return list(self.delivered)


def read_topic(config: dict[str, Any], topic: str, timeout: float = 60.0) -> list[tuple[str, bytes, int]]:
    """Every committed record of ``topic`` as ``(key, value, partition)``, read from the start to the ends
    the topic had when called (``read_committed``); bounded by ``timeout``."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            **config,
            "group.id": f"kstate-read-{os.getpid()}-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        ends = {}
        for p in meta.partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            if high > low:
                ends[p] = high
        consumer.assign([TopicPartition(topic, p, 0) for p in meta.partitions])
        out: list[tuple[str, bytes, int]] = []
        deadline = time.monotonic() + timeout

        def behind() -> bool:  # a position stops past the last commit marker too
            positions = consumer.position([TopicPartition(topic, p) for p in ends])
            return any(tp.offset < ends[tp.partition] for tp in positions)

        while ends and time.monotonic() < deadline and behind():
            for msg in consumer.consume(500, timeout=0.5):
                if not msg.error():
                    out.append(((msg.key() or b"").decode(), msg.value(), msg.partition()))
        return out
    finally:
        consumer.close()


def count_truth(records: list[Record]) -> dict[str, int]:
    """The count per key of every record written."""
    return dict(Counter(r.key for r in records))


def count_verdict(records: list[Record], output: list[tuple[str, bytes, int]]) -> dict[str, Any]:
    """Compare the last count the app wrote for each key with the truth.

    ``keys_wrong`` keys end with another count (``lost`` the counts short in all, ``over`` the counts
    above); ``missing_keys`` never had a count written at all (in ``keys_wrong`` too)."""
    truth = count_truth(records)
    last: dict[str, int] = {}
    for key, value, _ in output:  # in offset order per partition; a key sits in one output partition
        last[key] = int.from_bytes(value, "big", signed=True)
    wrong = {k: (last.get(k), n) for k, n in truth.items() if last.get(k) != n}
    return {
        "records_written": len(records),
        "keys": len(truth),
        "keys_wrong": len(wrong),
        "missing_keys": sum(1 for k in truth if k not in last),
        "lost": sum(n - (got or 0) for got, n in wrong.values() if (got or 0) < n),
        "over": sum((got or 0) - n for got, n in wrong.values() if (got or 0) > n),
        "examples": {k: {"got": got, "truth": n} for k, (got, n) in sorted(wrong.items())[:5]},
    }


def join_truth(records: list[Record], left: str, right: str, window_ms: int) -> Counter[str]:
    """Every ``"a|b"`` an inner join within ``window_ms`` yields: a left and a right record of one key whose
    timestamps are at most ``window_ms`` apart."""
    by_key: dict[str, dict[str, list[Record]]] = defaultdict(lambda: {left: [], right: []})
    for r in records:
        by_key[r.key][r.topic].append(r)
    out: Counter[str] = Counter()
    for sides in by_key.values():
        rights = sorted(sides[right], key=lambda r: r.ts)
        for a in sides[left]:
            for b in rights:
                if abs(a.ts - b.ts) <= window_ms:
                    out[f"{a.seq}|{b.seq}"] += 1
    return out


def multiset_verdict(truth: Counter[str], got: Counter[str]) -> dict[str, Any]:
    """``missing`` results of the truth the app never wrote, ``duplicated`` written more than once,
    ``extra`` written but not in the truth."""
    return {
        "expected": sum(truth.values()),
        "written": sum(got.values()),
        "missing": sum((truth - got).values()),
        "duplicated": sum(n - 1 for k, n in got.items() if n > 1 and k in truth),
        "extra": sum(n for k, n in got.items() if k not in truth),
    }


def join_verdict(
    records: list[Record], output: list[tuple[str, bytes, int]], left: str, right: str, window_ms: int
) -> dict[str, Any]:
    truth = join_truth(records, left, right, window_ms)
    got = Counter(value.decode() for _, value, _ in output)
    return {"records_written": len(records), **multiset_verdict(truth, got)}


def filter_verdict(records: list[Record], output: list[tuple[str, bytes, int]]) -> dict[str, Any]:
    truth = Counter(str(r.seq) for r in records if r.seq % 2 == 0)
    got = Counter(value.decode() for _, value, _ in output)
    return {"records_written": len(records), **multiset_verdict(truth, got)}


def merge(folder: Path) -> dict[str, Any]:
    """The cells the tests wrote to ``folder`` (``KSTATE_STREAMS_RESULTS``), one document."""
    cells = [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]
    return {
        "issue": 32,
        "what": "the naive partition increase (CreatePartitions of the source topics only) under Kafka Streams 4.4.0",
        "how": (
            "tests/integration/test_streams_naive.py on Apache Kafka 4.4.0 (KRaft, one node): the app of "
            "support/streams, one instance, one stream thread, exactly_once_v2, commit.interval.ms 200, its "
            "clients' metadata.max.age.ms 1000; 50 keyed records/s per input (40 keys, murmur2_random, "
            "producer metadata every 0.5 s); inputs 2 -> 4 after 6 s of traffic, 20 s more traffic, then up to "
            "45 s to settle; join window 2 s without grace; the truth from every acknowledged record, the "
            "output read read_committed; 'restart' is the same application id started again afterwards"
        ),
        "cells": cells,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kstate_support.streams")
    sub = parser.add_subparsers(dest="action", required=True)
    sub.add_parser("build", help="build the app")
    m = sub.add_parser("merge", help="print the cells of a results folder as one JSON document")
    m.add_argument("folder", type=Path)
    args = parser.parse_args(argv)
    if args.action == "build":
        print(build())
    else:
        json.dump(merge(args.folder), sys.stdout, indent=2)
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
