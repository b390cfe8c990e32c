"""Count librdkafka 2.16's process aborts per coordinator call kind while brokers die (issue 41).

    .venv/bin/python bench/bench_admin_aborts.py --minutes 25 --out docs/measurements/issue41/admin-aborts.json

librdkafka 2.16 (confluent-kafka 2.16.1) can abort the whole process with ``rdkafka_queue.h:1086:
rd_kafka_enq_once_del_source_return: Assertion 'eonce->refcnt > 0' failed`` (confluentinc/librdkafka#4605)
when an admin request to a group's coordinator times out as that coordinator dies. Known for
``describe_consumer_groups``; the question is whether ``alter_consumer_group_offsets`` (the provider's seed,
``ClusterAdmin.seed_offsets``) aborts too.

On a real 3-node Apache Kafka cluster (:func:`kstate_support.broker.running`, ``nodes=3``), each call kind
runs in a child process of its own (this file with ``--child KIND``), all at the same time, a call every
0.1 s after the previous one returned, one long-lived client per child:

* ``alter_offsets``: ``AdminClient.alter_consumer_group_offsets`` of an EMPTY group (offset 0 of the topic's
  4 partitions), ``request_timeout=1``;
* ``describe_groups``: ``AdminClient.describe_consumer_groups`` of the busy group (the known abort: the
  control), ``request_timeout=1``;
* ``consumer_commit``: ``Consumer.commit(offsets=..., asynchronous=False)`` of a consumer of an EMPTY group
  that never subscribes (OffsetCommit with generation -1: the same request as ``alter_offsets``),
  ``socket.timeout.ms=1000`` (commit has no per-call timeout);
* ``list_offsets``: ``AdminClient.list_consumer_group_offsets`` of an EMPTY group, ``request_timeout=1``;
* ``churn``: 2 consumers of the busy classic group that join and leave now and then (the coordinator busy
  with rebalances); its aborts are counted too.

Every group hashes to the same ``__consumer_offsets`` partition, so one broker coordinates all of them. A
child that dies of SIGABRT counts one abort (its time and stderr's assertion line kept) and a new child is
started. Meanwhile the driver SIGKILLs a node every 20 s (every other kill the groups' coordinator of the
moment, otherwise the other node killed least often) and restarts it 9 s later
(:func:`kstate_support.apache_kafka.kill_node`, :func:`kstate_support.apache_kafka.start`). Writes ``--out``
(JSON, with ``fields`` and a conclusion).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from importlib import metadata
from pathlib import Path
from typing import Any

import confluent_kafka
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from kstate_support import ROOT, apache_kafka, bench, broker_faults
from kstate_support import broker as broker_helper

KINDS = ("alter_offsets", "describe_groups", "consumer_commit", "list_offsets")
PARTITIONS = 4
INTERVAL_S = 0.1
REQUEST_TIMEOUT_S = 1.0
#: How long a child waits for an admin future past its request timeout before it counts ``future_wait``.
FUTURE_WAIT_S = 30.0
KILL_EVERY_S = 20.0
RESTART_AFTER_S = 9.0
ABORT_TEXT = "rd_kafka_enq_once_del_source_return"
DEFAULT_OUT = ROOT / "docs" / "measurements" / "issue41" / "admin-aborts.json"

FIELDS = {
    "kinds": "per call kind (one child process at a time, restarted after it died)",
    "kinds.*.call": "the call measured and its settings",
    "kinds.*.calls": "calls that returned (ok or an error); a call in flight when its process aborted is not "
    "counted here but in aborts",
    "kinds.*.ok": "calls that returned without any error (every partition's too)",
    "kinds.*.errors": "error name -> calls that failed with it (KafkaError name of the exception, or of the first "
    "failed partition in the result; future_wait: no answer within 30 s past the request timeout)",
    "kinds.*.aborts": "child processes that died of SIGABRT",
    "kinds.*.abort_events": "per abort: t (s from the start), since_kill_s (s from the last SIGKILL), the "
    "killed broker and whether it coordinated the groups, the calls the child had made, stderr's assertion line",
    "kinds.*.other_exits": "child processes that ended otherwise (return code, stderr tail)",
    "kinds.*.children": "child processes started",
    "kinds.*.max_call_s": "the slowest call that returned",
    "kills": "[t, broker SIGKILLed, was the coordinator of the groups, s from the kill until the restarted node "
    "was registered again (restart started 9 s after the kill)]",
    "load_start / load_end": "os.getloadavg() when the children started / stopped",
    "groups": "the consumer groups (all on one __consumer_offsets partition, so one coordinator)",
}


# -- the children ------------------------------------------------------------------------------------------


def _error_name(exc: BaseException) -> str:
    if isinstance(exc, KafkaException) and exc.args and hasattr(exc.args[0], "name"):
        return str(exc.args[0].name())
    if isinstance(exc, concurrent.futures.TimeoutError):
        return "future_wait"
    return type(exc).__name__


def _partition_error(tps: list[TopicPartition] | None) -> str | None:
    for tp in tps or []:
        if tp.error is not None:
            return str(tp.error.name())
    return None


def _report(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _call_loop(call: Any) -> None:
    """Call every INTERVAL_S after the last returned; one line per call on stdout: ``ok S`` / ``err NAME S``."""
    while True:
        started = time.monotonic()
        try:
            failed = call()
        except Exception as exc:  # noqa: BLE001 - counted by name
            failed = _error_name(exc)
        took = time.monotonic() - started
        _report(f"ok {took:.3f}" if failed is None else f"err {failed} {took:.3f}")
        time.sleep(INTERVAL_S)


def child(kind: str, bootstrap: str, group: str, topic: str) -> None:
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient

    config = {"bootstrap.servers": bootstrap, "log_level": 0}
    tps = [TopicPartition(topic, p, 0) for p in range(PARTITIONS)]
    wait = REQUEST_TIMEOUT_S + FUTURE_WAIT_S
    if kind == "churn":
        _churn(config, group, topic)
        return
    if kind == "consumer_commit":
        consumer = Consumer(
            {**config, "group.id": group, "enable.auto.commit": False, "socket.timeout.ms": 1000}
        )
        _call_loop(lambda: _partition_error(consumer.commit(offsets=tps, asynchronous=False)))
        return
    admin = AdminClient(config)
    if kind == "alter_offsets":

        def call() -> str | None:
            request = ConsumerGroupTopicPartitions(group, tps)
            futures = admin.alter_consumer_group_offsets([request], request_timeout=REQUEST_TIMEOUT_S)
            return _partition_error(futures[group].result(timeout=wait).topic_partitions)

    elif kind == "describe_groups":

        def call() -> str | None:
            futures = admin.describe_consumer_groups([group], request_timeout=REQUEST_TIMEOUT_S)
            futures[group].result(timeout=wait)
            return None

    elif kind == "list_offsets":

        def call() -> str | None:
            request = ConsumerGroupTopicPartitions(
                group, [TopicPartition(topic, p) for p in range(PARTITIONS)]
            )
            futures = admin.list_consumer_group_offsets([request], request_timeout=REQUEST_TIMEOUT_S)
            return _partition_error(futures[group].result(timeout=wait).topic_partitions)

    else:
        raise SystemExit(f"unknown kind {kind}")
    _call_loop(call)


def _churn(config: dict[str, Any], group: str, topic: str) -> None:
    """Two consumers of ``group`` join, stay 5-15 s, leave one after the other, and join again."""
    from confluent_kafka import Consumer

    rng = random.Random()
    while True:
        members = []
        for _ in range(2):
            c = Consumer(
                {**config, "group.id": group, "enable.auto.commit": False, "auto.offset.reset": "earliest"}
            )
            c.subscribe([topic])
            members.append(c)
        _report("ok 0")
        for stay in (rng.uniform(5, 15), rng.uniform(2, 6)):
            until = time.monotonic() + stay
            while time.monotonic() < until:
                for c in members:
                    c.poll(0.05)
            with contextlib.suppress(Exception):
                members.pop().close()
        time.sleep(rng.uniform(1, 3))


# -- the driver --------------------------------------------------------------------------------------------


class Kind:
    """One call kind: its current child, the counts read from the children's stdout."""

    def __init__(self, kind: str, argv: list[str], logs: Path, driver: Driver) -> None:
        self.kind, self.argv, self.logs, self.driver = kind, argv, logs, driver
        self.calls = self.ok = self.children = 0
        self.errors: Counter[str] = Counter()
        self.aborts: list[dict[str, Any]] = []
        self.other_exits: list[dict[str, Any]] = []
        self.max_call_s = 0.0
        self.halt = threading.Event()
        self.proc: subprocess.Popen[str] | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.halt.is_set():
            self.children += 1
            err_path = self.logs / f"{self.kind}-{self.children}.err"
            with err_path.open("w") as err:
                self.proc = subprocess.Popen(  # noqa: S603 - this file, as a child
                    self.argv, stdout=subprocess.PIPE, stderr=err, text=True, bufsize=1
                )
                calls = 0
                for line in self.proc.stdout or []:
                    parts = line.split()
                    if not parts:
                        continue
                    calls += 1
                    self.calls += 1
                    if parts[0] == "ok":
                        self.ok += 1
                    else:
                        self.errors[parts[1]] += 1
                    with contextlib.suppress(ValueError, IndexError):
                        self.max_call_s = max(self.max_call_s, float(parts[-1]))
                code = self.proc.wait()
            if self.halt.is_set():
                break
            tail = err_path.read_text(errors="replace")[-2000:]
            if code == -signal.SIGABRT:
                lines = [s for s in tail.splitlines() if ABORT_TEXT in s or "Assertion" in s]
                event = {
                    **self.driver.when(),
                    "calls_of_child": calls,
                    "stderr": (lines or [tail[-300:]])[-1],
                }
                self.aborts.append(event)
                bench.progress(
                    f"  {self.kind}: ABORT at {event['t']} s ({event['since_kill_s']} s after kill)"
                )
            else:
                self.other_exits.append({**self.driver.when(), "returncode": code, "stderr": tail[-300:]})
                bench.progress(f"  {self.kind}: child exited {code}")
                time.sleep(1)

    def stop(self) -> None:
        self.halt.set()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        self.thread.join(30)

    def result(self, call: str) -> dict[str, Any]:
        return {
            "call": call, "calls": self.calls, "ok": self.ok, "errors": dict(self.errors.most_common()),
            "aborts": len(self.aborts), "abort_events": self.aborts, "other_exits": self.other_exits,
            "children": self.children, "max_call_s": round(self.max_call_s, 3),
        }  # fmt: skip


CALLS = {
    "alter_offsets": "AdminClient.alter_consumer_group_offsets of an EMPTY group, offset 0 of 4 partitions, "
    "request_timeout=1",
    "describe_groups": "AdminClient.describe_consumer_groups of the busy group (2 consumers joining/leaving), "
    "request_timeout=1",
    "consumer_commit": "Consumer(group.id, enable.auto.commit=False, socket.timeout.ms=1000), never subscribes; "
    "commit(offsets=offset 0 of 4 partitions, asynchronous=False): OffsetCommit, generation -1",
    "list_offsets": "AdminClient.list_consumer_group_offsets of an EMPTY group, 4 partitions, request_timeout=1",
    "churn": "2 consumers of the busy group (classic, eager) join, stay 5-15 s, leave, join again; calls = joins",
}


class Driver:
    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.last_kill: tuple[float, int, bool] | None = None

    def when(self) -> dict[str, Any]:
        now = time.monotonic()
        out: dict[str, Any] = {"t": round(now - self.t0, 1)}
        if self.last_kill is not None:
            at, broker, coordinator = self.last_kill
            out.update(since_kill_s=round(now - at, 1), killed=broker, killed_coordinator=coordinator)
        return out


def _same_partition(prefix: str, partition: int) -> str:
    for i in range(10000):
        name = f"{prefix}-{i}"
        if broker_faults.offsets_partition(name) == partition:
            return name
    raise RuntimeError(f"no {prefix}-N on __consumer_offsets partition {partition}")


def _coordinator(admin: Any, partition: int) -> int:
    with contextlib.suppress(Exception):
        meta = admin.list_topics("__consumer_offsets", timeout=5).topics["__consumer_offsets"]
        return int(meta.partitions[partition].leader)
    return -1


def _conclusion(kinds: dict[str, dict[str, Any]]) -> str:
    parts = [f"{k}: {v['aborts']} aborts in {v['calls']} calls" for k, v in kinds.items() if k != "churn"]
    alter = kinds.get("alter_offsets", {})
    if alter.get("aborts"):
        verdict = (
            "alter_consumer_group_offsets aborts the process too (rd_kafka_enq_once_del_source_return, "
            "librdkafka#4605) when the groups' coordinator is killed"
        )
    elif kinds.get("describe_groups", {}).get("aborts"):
        verdict = (
            "alter_consumer_group_offsets did not abort while the control (describe_consumer_groups) did under "
            "the same kills: no abort seen in this many calls (not a proof it cannot)"
        )
    else:
        verdict = "the control did not abort either: the run says nothing either way"
    return f"{verdict}. " + "; ".join(parts)


def measure(minutes: float, out: Path, kinds: list[str]) -> dict[str, Any]:
    from confluent_kafka.admin import AdminClient

    data_dir = bench.broker_dir("broker-bench-admin-aborts")
    result: dict[str, Any] = {
        "bench": "admin_aborts",
        "what": "librdkafka 2.16 process aborts (rd_kafka_enq_once_del_source_return, librdkafka#4605) per "
        "coordinator call kind, a node of 3 SIGKILLed every 20 s",
        "run": f"python bench/bench_admin_aborts.py --minutes {minutes:g} --out {bench.shown(out)}",
        "commit": bench.git("rev-parse", "--short", "HEAD"),
        "broker": f"{broker_helper.describe()}, 3 nodes (KRaft combined), RF 3, __consumer_offsets 16 partitions",
        "client": f"confluent-kafka {metadata.version('confluent-kafka')}, librdkafka {confluent_kafka.libversion()[0]}",
        "machine": f"{os.cpu_count()} cores, shared",
        "setup": f"each kind in its own child process, all at once, a call every {INTERVAL_S} s after the last "
        f"returned, request timeout {REQUEST_TIMEOUT_S:g} s; a node SIGKILLed every {KILL_EVERY_S:g} s (every other "
        f"kill the groups' coordinator), restarted {RESTART_AFTER_S:g} s after",
        "fields": FIELDS,
        "minutes": minutes,
    }
    with broker_helper.running(data_dir, nodes=3) as bootstrap:
        logs = data_dir / "child-stderr"  # each child's stderr (the assertion line of an abort)
        logs.mkdir(parents=True, exist_ok=True)
        config = {"bootstrap.servers": bootstrap, "log_level": 0}
        admin = AdminClient(config)
        topic = bench.new_topic(config, "aborts", PARTITIONS, replication=3)
        busy = broker_faults.group_coordinated_by(admin, 1, "bench-aborts-busy")
        partition = broker_faults.offsets_partition(busy)
        groups = {k: _same_partition(f"bench-aborts-{k}", partition) for k in KINDS}
        groups["describe_groups"] = groups["churn"] = busy
        result.update(topic=topic, groups=groups, offsets_partition=partition)
        driver = Driver()
        runners = {}
        for kind in [*kinds, "churn"]:
            argv = [sys.executable, __file__, "--child", kind, "--bootstrap", bootstrap]
            argv += ["--group", groups[kind], "--topic", topic]
            runners[kind] = Kind(kind, argv, logs, driver)
        result["load_start"] = [round(x, 2) for x in os.getloadavg()]
        for r in runners.values():
            r.thread.start()
        try:
            _drive(data_dir, admin, partition, driver, minutes, result, runners, out)
        finally:
            for r in runners.values():
                r.halt.set()
            for r in runners.values():
                r.stop()
        result["seconds"] = round(time.monotonic() - driver.t0, 1)
        _write(result, runners, out, final=True)
    return result


def _drive(
    data_dir: Path, admin: Any, partition: int, driver: Driver, minutes: float, result: dict[str, Any],
    runners: dict[str, Kind], out: Path,
) -> None:  # fmt: skip
    """Kill a node every KILL_EVERY_S (every other kill the groups' coordinator), restart it after
    RESTART_AFTER_S, until ``minutes`` from the start."""
    kills: list[list[Any]] = result.setdefault("kills", [])
    brokers = [1, 2, 3]
    end = driver.t0 + minutes * 60
    time.sleep(10)
    n = 0
    while time.monotonic() + KILL_EVERY_S < end:
        coordinator = _coordinator(admin, partition)
        if n % 2 == 0 and coordinator > 0:
            victim = coordinator
        else:
            others = [b for b in brokers if b != coordinator]  # the one killed least often so far
            victim = min(others, key=lambda b: sum(1 for k in kills if k[1] == b))
        n += 1
        killed_at = time.monotonic()
        apache_kafka.kill_node(data_dir, victim)
        driver.last_kill = (killed_at, victim, victim == coordinator)
        row = [round(killed_at - driver.t0, 1), victim, victim == coordinator, None]
        kills.append(row)
        bench.progress(f"{row[0]:7.1f} s kill {victim}{' (coordinator)' if row[2] else ''}")
        time.sleep(max(0.0, RESTART_AFTER_S - (time.monotonic() - killed_at)))
        try:
            apache_kafka.start(data_dir, nodes=3)
            row[3] = round(time.monotonic() - killed_at, 1)
        except Exception as exc:  # noqa: BLE001 - recorded; the next round starts it again
            row[3] = f"restart failed: {str(exc)[:120]}"
        time.sleep(max(0.0, KILL_EVERY_S - (time.monotonic() - killed_at)))
        _write(result, runners, out, final=False)
    time.sleep(max(0.0, end - time.monotonic()))
    result["load_end"] = [round(x, 2) for x in os.getloadavg()]


def _write(result: dict[str, Any], runners: dict[str, Kind], out: Path, final: bool) -> None:
    result["kinds"] = {k: r.result(CALLS[k]) for k, r in runners.items()}
    result["complete"] = final
    if "load_end" not in result:
        result["load_now"] = [round(x, 2) for x in os.getloadavg()]
    else:
        result.pop("load_now", None)
    result["conclusion"] = _conclusion(result["kinds"])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, default=str) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=25.0)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated, of {', '.join(KINDS)}")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    parser.add_argument("--group", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, args.bootstrap, args.group, args.topic)
        return 0
    if broker_helper.external_config() is not None:
        raise SystemExit("this bench kills brokers of its own 3-node cluster: unset KSTATE_BOOTSTRAP_SERVERS")
    result = measure(args.minutes, args.out, [k for k in args.kinds.split(",") if k])
    print(f"wrote {bench.shown(args.out)}")
    for kind, row in result["kinds"].items():
        top = ", ".join(f"{name} {n}" for name, n in list(row["errors"].items())[:4])
        print(f"{kind:<16} calls {row['calls']:>6}  aborts {row['aborts']:>2}  errors: {top}")
    print(result["conclusion"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
