"""What the proofs that consumers stay in their groups (issue 41) share: the keyed producer and the consumer
groups of each client kind, what the broker and the control topic say of a group, and the figures of a run
(largest gap in processing, longest wait of a delivered record). Used by ``tests/integration/test_stay.py``,
``test_stay_java.py``, ``test_stay_node.py`` and ``test_stay_all.py`` (every kind in one run).

Every producer and consumer here logs what it delivered or processed as JSON lines
``{"key", "seq", "p", "o", "t"}`` (``t`` wall-clock ms), the Java fleet's format, so
:func:`~kstate_support.fleet.judge` reads any of them.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, ConsumerGroupState, KafkaException, TopicPartition

from airflow_provider_kstate.client_piece.protocol import DEFAULT_CONTROL_TOPIC
from kstate_support import ROOT
from kstate_support.fleet import COORDINATOR_LOADING, read_lines, start_group
from kstate_support.java_services import JavaFleet
from kstate_support.traffic import CONSUMER_METADATA_MS

#: The old partition count of the stay proofs (``left_group`` counts a revocation below it).
OLD = 4
#: The classic members' metadata refresh: a classic Java member (its group leader) sees the new partitions
#: at its next refresh only (``metadata.max.age.ms``, 5 minutes by default), then the group rebalances.
CLASSIC_METADATA_MS = 1000
#: The Java cooperative-sticky assignor of the classic cells.
COOPERATIVE = "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"
#: The producer, in a process of its own (``python -c PRODUCER CONFIG TOPIC OUT KIND METADATA_MS``): a
#: ControlledProducer (``controlled``: the client piece, pinned and switched by the run) or a plain
#: confluent-kafka producer (``plain``: murmur2 over the partitions its metadata shows, for the naive increase)
#: writing 97 keys round robin at 200 records/s, values
#: ``{"key": "k0042", "seq": 7}`` (a key's seq counts from 0), each delivered record logged to OUT as the Java
#: fleet's producer logs it (``{"key","seq","p","o","t"}``, ``t`` wall-clock ms), so
#: :func:`~kstate_support.fleet.judge` reads it. Not a thread of the test: ``dag.test()`` runs the tasks in
#: this process, and a producer thread sharing its interpreter stalls with it (up to 2.4 s measured: gaps
#: that were the producer's, not the consumers').
PRODUCER = r"""
import json, signal, sys, threading, time
from confluent_kafka import Producer
from airflow_provider_kstate.client_piece.producer import ControlledProducer

config, topic, out, kind, metadata_ms = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
keys, rate = 97, 200.0
halt = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: halt.set())
lines = open(out, "a", buffering=1)

def delivered(err, msg):
    if err is not None:
        lines.write(json.dumps({"error": str(err)}) + "\n")
        return
    value = json.loads(msg.value())
    t = time.time() * 1000
    lines.write(json.dumps({"key": value["key"], "seq": value["seq"], "p": msg.partition(), "o": msg.offset(), "t": t}) + "\n")

settings = {**config, "linger.ms": 5, "topic.metadata.refresh.interval.ms": metadata_ms}
if kind == "controlled":
    producer = ControlledProducer(settings, [topic], check_interval=0.1)
else:
    producer = Producer({**settings, "partitioner": "murmur2_random"})
n, start = 0, time.monotonic()
while not halt.is_set():
    key = f"k{n % keys:04d}"
    value = json.dumps({"key": key, "seq": n // keys})
    producer.produce(topic, value=value.encode(), key=key.encode(), on_delivery=delivered)
    producer.poll(0)
    n += 1
    delay = start + n / rate - time.monotonic()
    if delay > 0:
        time.sleep(delay)
producer.flush(30)
if kind == "controlled":
    producer.close()
lines.close()
"""


class ProducerProcess:
    """:data:`PRODUCER` in a process of its own; :meth:`delivered` reads what it logged."""

    def __init__(
        self, config: dict[str, Any], topic: str, out: Path, controlled: bool = True, metadata_ms: int = 500
    ) -> None:
        self.out = out
        self._log = out.with_suffix(".log").open("w")
        kind = "controlled" if controlled else "plain"
        self.proc = subprocess.Popen(
            [sys.executable, "-c", PRODUCER, json.dumps(config), topic, str(out), kind, str(metadata_ms)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=self._log,
        )

    def lines(self) -> list[dict[str, Any]]:
        return read_lines(self.out)

    @property
    def delivered(self) -> list[dict[str, Any]]:
        return [r for r in self.lines() if "error" not in r]

    @property
    def errors(self) -> list[str]:
        return [r["error"] for r in self.lines() if "error" in r]

    def partitions(self) -> set[int]:
        return {d["p"] for d in self.delivered}

    def stop(self) -> None:
        """SIGTERM (it flushes and exits), bounded; idempotent."""
        terminate(self.proc)
        self._log.close()


#: A client-piece group of the Python client in a process of its own
#: (``python -c CONSUMER CONFIG TOPIC GROUP OUT EVENTS MEMBERS``): MEMBERS ControlledConsumers of GROUP (client
#: ids ``GROUP-0`` ...), each polling in a thread, reading :data:`PRODUCER`'s values. Each processed record is a
#: line of OUT (``{"c", "key", "seq", "p", "o", "t"}``, in processing order across the members), each
#: rebalance callback and state change a line of EVENTS (``{"c", "ev": assign|revoke|lost|state|started|closed,
#: "partitions" | "state", "t"}``). SIGTERM closes the members (they leave) and exits. A process, not threads
#: of the test, for the reason :data:`PRODUCER` is one: the gaps measured are the consumers' own.
CONSUMER = r"""
import json, signal, sys, threading, time
from airflow_provider_kstate.client_piece.consumer import ControlledConsumer

config, topic, group, out, events_out, members = (
    json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6])
)
halt = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: halt.set())
lock = threading.Lock()
lines = open(out, "a", buffering=1)
events = open(events_out, "a", buffering=1)

def event(c, ev, **more):
    with lock:
        events.write(json.dumps({"c": c, "ev": ev, "t": time.time() * 1000, **more}) + "\n")

def parts(tps):
    return sorted(tp.partition for tp in tps)

def member(c, consumer):
    try:
        while not halt.is_set():
            msg = consumer.poll(0.1)
            if msg is None or msg.error():
                continue
            value = json.loads(msg.value())
            line = {"c": c, "key": value["key"], "seq": value["seq"], "p": msg.partition(), "o": msg.offset()}
            with lock:
                lines.write(json.dumps({**line, "t": time.time() * 1000}) + "\n")
    finally:
        consumer.close()
        event(c, "closed")

def make(c):
    return ControlledConsumer(
        {**config, "group.id": group, "client.id": c},
        [topic],
        check_interval=0.1,
        on_assign=lambda _c, tps: event(c, "assign", partitions=parts(tps)),
        on_revoke=lambda _c, tps: event(c, "revoke", partitions=parts(tps)),
        on_lost=lambda _c, tps: event(c, "lost", partitions=parts(tps)),
        on_state_change=lambda state: event(c, "state", state=state),
    )

clients = [f"{group}-{i}" for i in range(members)]
consumers = [make(c) for c in clients]
for c in clients:
    event(c, "started")
threads = [threading.Thread(target=member, args=pair) for pair in zip(clients, consumers)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
"""


class ClientPieceProcess:
    """:data:`CONSUMER`: a Python client-piece group (``auto.offset.reset=latest``) in a process of its own.

    :param protocol: ``group.protocol``: ``consumer`` (KIP-848) or ``classic`` (with ``assignor``).
    :param metadata_ms: the members' ``topic.metadata.refresh.interval.ms`` (the client piece refreshes at
        once when the control topic announces a grow).
    """

    def __init__(
        self,
        config: dict[str, Any],
        topic: str,
        group: str,
        run_dir: Path,
        members: int = 2,
        protocol: str = "consumer",
        assignor: str | None = None,
        metadata_ms: int = CONSUMER_METADATA_MS,
    ) -> None:
        run_dir.mkdir(parents=True, exist_ok=True)
        self.group = group
        self.clients = [f"{group}-{i}" for i in range(members)]
        self.out = run_dir / f"{group}.jsonl"
        self.events_out = run_dir / f"{group}.events.jsonl"
        settings = {
            **config,
            "auto.offset.reset": "latest",
            "topic.metadata.refresh.interval.ms": metadata_ms,
            "auto.commit.interval.ms": 500,
            "group.protocol": protocol,
        }
        if protocol == "classic":
            settings |= {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500}
            if assignor:
                settings["partition.assignment.strategy"] = assignor
        self._log = (run_dir / f"{group}.log").open("w")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                CONSUMER,
                json.dumps(settings),
                topic,
                group,
                str(self.out),
                str(self.events_out),
                str(members),
            ],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=self._log,
        )

    def lines(self, *clients: str) -> list[dict[str, Any]]:
        """The records processed (by ``clients``, or every member), in processing order."""
        return [r for r in read_lines(self.out) if not clients or r["c"] in clients]

    def events(self, *clients: str) -> list[dict[str, Any]]:
        return [e for e in read_lines(self.events_out) if not clients or e["c"] in clients]

    def assigned(self) -> set[int]:
        """The partitions the members hold now, by their own callbacks."""
        held: dict[str, set[int]] = {}
        for e in self.events():
            if e["ev"] == "assign":
                held.setdefault(e["c"], set()).update(e["partitions"])
            elif e["ev"] in ("revoke", "lost"):
                held.setdefault(e["c"], set()).difference_update(e["partitions"])
        return set().union(*held.values()) if held else set()

    def log(self) -> str:
        path = Path(self._log.name)
        return path.read_text()[-3000:] if path.exists() else ""

    def stop(self) -> int:
        """SIGTERM (the members close and leave), bounded; idempotent; the exit code."""
        terminate(self.proc)
        self._log.close()
        return int(self.proc.returncode)

    def close(self) -> None:
        """:meth:`stop`, for ``contextlib.closing``."""
        self.stop()


def offline_group(config: dict[str, Any], topic: str, group: str, partitions: int = OLD) -> None:
    """A group with committed offsets (0) on the topic's ``partitions`` and no members (EMPTY)."""
    consumer = Consumer({**config, "group.id": group, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    consumer.commit(offsets=[TopicPartition(topic, p, 0) for p in range(partitions)], asynchronous=False)
    consumer.close()


def java_group(
    fleet: JavaFleet,
    admin: Any,
    topic: str,
    protocol: str,
    metadata_ms: int | None = None,
    prefix: str = "java",
    group: str | None = None,
) -> tuple[str, list[str]]:
    """Start two latest-reset Java members of one group on ``topic`` with ``--auto-commit true`` (classic:
    cooperative-sticky); return the group, the names.

    :param metadata_ms: the members' ``metadata.max.age.ms`` (default: :data:`CLASSIC_METADATA_MS` under
        classic, the fleet's 0.5 s under KIP-848, where the broker's heartbeat brings new partitions).
    :param group: the group's name (default ``{topic}-g``).
    """
    group = group or f"{topic}-g"
    options: dict[str, Any] = {"group_protocol": protocol, "auto_commit": True, "commit_interval_ms": 200}
    if protocol == "classic":
        options |= {"assignor": COOPERATIVE, "metadata_max_age_ms": metadata_ms or CLASSIC_METADATA_MS}
    elif metadata_ms:
        options["metadata_max_age_ms"] = metadata_ms
    names = [f"{prefix}-{protocol}-m{i}" for i in range(2)]
    for name in names:
        fleet.consumer(name, topic, group, **options)
    start_group(fleet, admin, group)
    return group, names


def left_group(fleet: JavaFleet, name: str, since: float, old: int = OLD) -> list[dict[str, Any]]:
    """Events of the Java member ``name`` after ``since`` (ms) that take it out of its group or take
    partitions from it: a stop, an exit, a lost assignment, a revocation of an old partition (below ``old``),
    a new member id."""
    events = fleet.events(name)
    ids = {e["member"] for e in events if e["ev"] == "join" and e["t"] < since}
    return [
        e
        for e in events
        if e["t"] >= since
        and (
            e["ev"] in ("stop", "exit", "lost")
            or (e["ev"] == "rebalancing" and any(p < old for p in e.get("partitions", [])))
            or (e["ev"] == "join" and e["member"] not in ids)
        )
    ]


def group_members(admin: Any, group: str, timeout: float = 90.0) -> tuple[str, dict[str, str]]:
    """The group's state and its members on the broker: client id -> member id. A coordinator still loading
    (a fresh broker's ``__consumer_offsets``: NOT_COORDINATOR, or no answer within 10 s under load) is asked
    again, up to ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            desc = admin.describe_consumer_groups([group])[group].result(timeout=10)
            return desc.state.name, {m.client_id: m.member_id for m in desc.members}
        except (KafkaException, FutureTimeout) as exc:
            loading = isinstance(exc, FutureTimeout) or exc.args[0].code() in COORDINATOR_LOADING
            if not loading or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def stable(admin: Any, group: str, members: int) -> bool:
    """Whether the broker reports ``group`` STABLE with ``members`` members."""
    state, now = group_members(admin, group)
    return state == ConsumerGroupState.STABLE.name and len(now) == members


def control_records(kafka_config: dict[str, Any], group: str, clients: set[str]) -> list[dict[str, Any]]:
    """The values of the control topic's records (log order) that are commands to ``group`` or
    acknowledgements written by ``clients``."""
    reader = Consumer({**kafka_config, "group.id": "kstate-test-reader", "enable.auto.commit": False})
    end = reader.get_watermark_offsets(TopicPartition(DEFAULT_CONTROL_TOPIC, 0), timeout=10)[1]
    reader.assign([TopicPartition(DEFAULT_CONTROL_TOPIC, 0, 0)])
    out: list[dict[str, Any]] = []
    position, deadline = 0, time.monotonic() + 30
    while position < end and time.monotonic() < deadline:
        for m in reader.consume(500, 0.2):
            if m.error() or m.value() is None:
                continue
            position = m.offset() + 1
            value = json.loads(m.value())
            command = value.get("kind") == "command" and value.get("group") == group
            if command or value.get("client") in clients:
                out.append(value)
    reader.close()
    assert position >= end, f"read the control topic to {position} of {end}"
    return out


def largest_gap(times: list[float], start: float, end: float) -> float:
    """The longest interval (s) between ``start`` and ``end`` (wall-clock ms) without one of ``times``."""
    inside = [start, *sorted(t for t in times if start <= t <= end), end]
    return max(b - a for a, b in zip(inside, inside[1:], strict=False)) / 1000


def latency(
    delivered: list[dict[str, Any]], processed: list[dict[str, Any]], start: float, end: float
) -> float:
    """The longest (s) a record delivered between ``start`` and ``end`` (wall-clock ms) and processed in
    ``processed`` waited for its first processing: the consumer's own delay, whatever the producer did."""
    at = {(d["key"], d["seq"]): d["t"] for d in delivered if start <= d["t"] <= end}
    first: dict[tuple[str, int], float] = {}
    for r in processed:
        key = (r["key"], r["seq"])
        if key in at:
            first[key] = min(first.get(key, r["t"]), r["t"])
    return max((t - at[k] for k, t in first.items()), default=0.0) / 1000


def first_offsets(processed: list[dict[str, Any]], old: int = OLD) -> dict[int, int]:
    """The first offset processed on each new partition (``old`` and above; 0: nothing there was skipped)."""
    first: dict[int, int] = {}
    for r in processed:
        if r["p"] >= old:
            first[r["p"]] = min(first.get(r["p"], r["o"]), r["o"])
    return dict(sorted(first.items()))


def caught_up(delivered: list[dict[str, Any]], processed: list[dict[str, Any]]) -> bool:
    """Whether ``processed`` reached the last offset ``delivered`` on each partition (loss aside)."""
    last: dict[int, int] = {}
    for d in delivered:
        last[d["p"]] = max(last.get(d["p"], -1), d["o"])
    done: dict[int, int] = {}
    for r in processed:
        done[r["p"]] = max(done.get(r["p"], -1), r["o"])
    return all(done.get(p, -1) >= o for p, o in last.items())


def terminate(proc: subprocess.Popen[Any]) -> None:
    """SIGTERM ``proc`` and wait up to 60 s for it to exit on its own (flushing, leaving its group), then kill
    it; idempotent."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
