"""Probe (not a bench): when do a topic's new partitions reach each reader after ``CreatePartitions``?

    nice -n 19 .venv/bin/python bench/probe_new_partitions.py [--sizes 64:512,64:4096] [--output FILE]

On one broker (the probe's own Apache Kafka unless ``KSTATE_BOOTSTRAP_SERVERS`` is set), per size
``FROM:TO``: a fresh topic of ``FROM`` partitions and three groups of two librdkafka consumers each:

* ``kip848-stay``: ``group.protocol=consumer``, in its group all along;
* ``kip848-rejoin``: ``group.protocol=consumer``, closed before the create (the group EMPTY, as in the pause
  window), two new consumers subscribe as soon as the create returns;
* ``classic-rejoin``: the classic protocol with ``cooperative-sticky``, closed and subscribed the same way.

Then the topic grows to ``TO``. Measured in seconds from the create's return: ``metadata_s`` (the cluster's
metadata lists ``TO`` partitions, each with a leader), ``loaded_s`` (a ListOffsets of every partition
answers without error: every new partition's leader serves it), and per group ``old_s`` (its consumers hold
every original partition again: a rejoining group's return) and ``all_s`` (they hold all ``TO``).

The question it answers (issue 41, item 6): Apache Kafka's broker applies a metadata change to its
``ReplicaManager`` (creating the new partitions' logs) *before* it tells its group coordinator
(``BrokerMetadataPublisher.onMetadataUpdate`` of 4.4.0: ``KRaftMetadataCache.setImage``, then
``ReplicaManager.applyDelta``, then ``GroupCoordinator.onMetadataUpdate``): a KIP-848 group is assigned the
new partitions only once their leaders serve them, while a classic group learns them from the metadata
cache at once. Writes ``bench/results/new_partitions.json`` and prints one line per size and group.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kstate_support import bench
from kstate_support.bench import progress

RESULTS = bench.results_path("new_partitions")
SIZES = [(64, 512), (64, 4096)]
CONSUMERS = 2
LOOK = 0.1
WITHIN = 180.0
KINDS = {
    "kip848-stay": {"group.protocol": "consumer"},
    "kip848-rejoin": {"group.protocol": "consumer"},
    "classic-rejoin": {"partition.assignment.strategy": "cooperative-sticky"},
}


class Member(threading.Thread):
    """One consumer polling in its own thread; ``held`` is what its rebalance callbacks gave it."""

    def __init__(self, config: dict[str, Any], topic: str, group: str, extra: dict[str, str]) -> None:
        super().__init__(daemon=True)
        self.held: set[int] = set()
        self.lock = threading.Lock()
        self.halt = threading.Event()
        self.subscribed = threading.Event()
        self.conf = {
            **config,
            **extra,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
        self.topic = topic

    def _assign(self, _consumer: Any, parts: list[Any]) -> None:
        with self.lock:
            self.held |= {p.partition for p in parts}

    def _revoke(self, _consumer: Any, parts: list[Any]) -> None:
        with self.lock:
            self.held -= {p.partition for p in parts}

    def run(self) -> None:
        from confluent_kafka import Consumer

        consumer = Consumer(self.conf)
        consumer.subscribe([self.topic], on_assign=self._assign, on_revoke=self._revoke, on_lost=self._revoke)
        self.subscribed.set()
        while not self.halt.is_set():
            consumer.poll(0.05)
        consumer.close()

    def holding(self) -> set[int]:
        with self.lock:
            return set(self.held)


class Group:
    def __init__(self, config: dict[str, Any], topic: str, kind: str) -> None:
        self.config, self.topic, self.kind = config, topic, kind
        self.group = f"{topic}-{kind}"
        self.members: list[Member] = []

    def start(self) -> None:
        self.members = [
            Member(self.config, self.topic, self.group, KINDS[self.kind]) for _ in range(CONSUMERS)
        ]
        for m in self.members:
            m.start()
        for m in self.members:
            m.subscribed.wait(30)

    def stop(self) -> None:
        for m in self.members:
            m.halt.set()
        for m in self.members:
            m.join(60)

    def holds(self, partitions: set[int]) -> bool:
        held = [m.holding() for m in self.members]
        return all(held) and partitions <= set().union(*held)


def _wait(test: Any, within: float = WITHIN) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if test():
            return True
        time.sleep(LOOK)
    return False


def _loaded(admin: Any, topic: str, count: int) -> bool:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    request = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(count)}
    try:
        futures = admin.list_offsets(request, request_timeout=10)
        for future in futures.values():
            future.result()
    except Exception:  # noqa: BLE001 - a partition not served yet: not loaded
        return False
    return True


def _listed(admin: Any, topic: str, count: int) -> bool:
    meta = admin.list_topics(topic, timeout=10).topics.get(topic)
    return (
        meta is not None
        and len(meta.partitions) == count
        and all(p.leader >= 0 for p in meta.partitions.values())
    )


def one_size(config: dict[str, Any], start: int, target: int) -> dict[str, Any]:
    from confluent_kafka.admin import AdminClient, NewPartitions

    admin = AdminClient(config)
    topic = bench.new_topic(config, f"newparts{target}", start)
    groups = {kind: Group(config, topic, kind) for kind in KINDS}
    old = set(range(start))
    try:
        for g in groups.values():
            g.start()
        if not _wait(lambda: all(g.holds(old) for g in groups.values()), 60):
            raise RuntimeError("the groups did not hold the original partitions within 60 s")
        for kind, g in groups.items():
            if kind.endswith("rejoin"):
                g.stop()
        began = time.monotonic()
        future = admin.create_partitions([NewPartitions(topic, target)], request_timeout=60)[topic]
        future.result()
        created = time.monotonic()
        for kind, g in groups.items():
            if kind.endswith("rejoin"):
                g.start()
        marks = _marks(admin, topic, groups, start, target, created)
        return {"from": start, "to": target, "create_s": round(created - began, 2), **marks}
    finally:
        for g in groups.values():
            g.stop()
        bench.delete_topics(config, [topic])


def _marks(
    admin: Any, topic: str, groups: dict[str, Group], start: int, target: int, created: float
) -> dict[str, float | None]:
    """Seconds from ``created`` to each moment the probe reports (None: not within :data:`WITHIN`)."""
    old, every = set(range(start)), set(range(target))
    marks: dict[str, float | None] = {"metadata_s": None, "loaded_s": None}
    marks.update({f"{k}.old_s": None for k in groups} | {f"{k}.all_s": None for k in groups})
    tests: dict[str, Any] = {
        "metadata_s": lambda: _listed(admin, topic, target),
        "loaded_s": lambda: marks["metadata_s"] is not None and _loaded(admin, topic, target),
    }
    for kind, g in groups.items():
        tests[f"{kind}.old_s"] = lambda g=g: g.holds(old)
        tests[f"{kind}.all_s"] = lambda g=g: g.holds(every)
    deadline = created + WITHIN
    while time.monotonic() < deadline and any(v is None for v in marks.values()):
        for name, test in tests.items():
            if marks[name] is None and test():
                marks[name] = round(time.monotonic() - created, 2)
        time.sleep(LOOK)
    return marks


@contextlib.contextmanager
def _cluster() -> Iterator[dict[str, Any]]:
    with bench.broker(f"probe-newparts-{uuid.uuid4().hex[:4]}", per_process=True) as config:
        yield config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=",".join(f"{a}:{b}" for a, b in SIZES))
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    sizes = [tuple(int(x) for x in s.split(":")) for s in args.sizes.split(",")]
    rows = []
    with _cluster() as config:
        for start, target in sizes:
            progress(f"{start} -> {target}")
            rows.append(one_size(config, start, target))
            print(json.dumps(rows[-1]), flush=True)
    bench.write_results(args.output, {"rows": rows, "consumers_per_group": CONSUMERS, "look_s": LOOK})


if __name__ == "__main__":
    main()
