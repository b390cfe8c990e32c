"""Benchmark the order of a paused consumer's commit and leave with a broker SIGKILLed (issue 41).

    .venv/bin/python bench/bench_leave_order.py [--rounds 3] [--out docs/measurements/issue41/leave-order.json]

The protocol (docs/control-protocol.md, section 4 rule 3) has a pausing consumer commit its processed
offsets synchronously and THEN leave the group; the controller waits for EMPTY (section 6), grows the topic,
seeds the new partitions' offsets for the EMPTY group and only then resumes. With a broker of a 3-node
cluster dead, a commit to ``__consumer_offsets`` (RF 3, min.insync.replicas 2) waits until the dead node is
fenced, so the group is EMPTY only then. The question: does leaving first (and committing after, without
membership: generation -1) make the *seed* return earlier, i.e. the moment the resume can go?

On a real 3-node Apache Kafka cluster (:func:`kstate_support.broker.running`, ``nodes=3``), with plain
confluent-kafka clients, each case: a fresh topic of 4 partitions (RF 3), 50 records per partition, a fresh
group of 2 consumers (eager assignment, ``enable.auto.commit`` off) that consumed them all (offsets stored,
not committed). The group's name is picked so that its coordinator is not the active controller
(:func:`kstate_support.broker_faults.group_coordinated_by`). Then one broker is SIGKILLed (``t = 0``) by role:

* ``coordinator``: the group's coordinator (leader of its ``__consumer_offsets`` partition);
* ``follower``: the broker that is neither the coordinator nor the controller (a follower of that partition);
* ``controller``: the active controller (KRaft quorum leader; a follower of that partition too);

and immediately, both consumers at once (a thread each, as two processes would):

* ``commit_first`` (the protocol now): ``commit(asynchronous=False)`` then ``close()`` (LeaveGroup);
* ``leave_first`` (the proposal): ``close()`` without committing, then the same offsets committed by a
  group-less consumer of the group (never subscribes: OffsetCommit with generation -1);

meanwhile a watcher describes the group every 50 ms (``ClusterAdmin.describe_groups``, the controller's
own call); as soon as it is EMPTY, the controller's steps: CreatePartitions 4 -> 8
(``ClusterAdmin.increase_partitions``) and the seed, offset 0 of partitions 4..7 for the group
(``ClusterAdmin.seed_offsets``, AlterConsumerGroupOffsets), each tried again until accepted (as the window
retries its steps);

* ``restart``: the plain restart: each consumer commits, closes, and a new consumer joins at once; the
  time until the new members hold every partition again.

The killed node is restarted 10 s after the kill (as ``tests/integration/test_broker_faults.py`` does) and
every replica waited in sync again (:func:`kstate_support.broker_faults.restore`) before the next case.
Writes the cases and a per-role summary to ``--out`` (JSON, with ``fields``) and a markdown table beside it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import threading
import time
import uuid
from importlib import metadata
from pathlib import Path
from typing import Any

import confluent_kafka
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient
from kstate_support import ROOT, apache_kafka, bench, broker_faults
from kstate_support import broker as broker_helper
from kstate_support.bench import Column

from airflow_provider_kstate.cluster.admin import ClusterAdmin
from airflow_provider_kstate.doctor import wire
from airflow_provider_kstate.errors import InvalidPartitionCountError

ROLES = ("coordinator", "follower", "controller")
ORDERS = ("commit_first", "leave_first")
PARTITIONS, GROWN = 4, 8
RECORDS = 50  # per partition, consumed before the kill
RESTART_AFTER_S = 10.0
#: How long a case may wait for the group, the seed, the leavers (a broker is fenced in ~9 s).
CASE_TIMEOUT_S = 90.0
DEFAULT_OUT = ROOT / "docs" / "measurements" / "issue41" / "leave-order.json"

FIELDS = {
    "kill_to_empty_s": "kill to the first describe that reports the group EMPTY (a describe every 50 ms): when the "
    "controller would go on",
    "kill_to_lasting_empty_s": "kill to the group's last change to EMPTY up to the seed (a new coordinator may "
    "report EMPTY for a moment before the members it loaded from the log)",
    "group_states": "[t, state, members] at each change the watcher saw",
    "kill_to_create_s": "kill to CreatePartitions 4 -> 8 returned (sent when EMPTY was seen)",
    "kill_to_seed_s": "kill to the seed (offset 0 of partitions 4..7 for the group) accepted: when the resume "
    "could go. Sent right after the create",
    "kill_to_leavers_done_s": "kill to the last of the two consumers' own commits returned (commit_first: "
    "the commit before close; leave_first: the group-less commit after close); restart: the commit before close",
    "kill_to_assigned_s": "restart only: kill to the new members holding all 4 partitions",
    "leavers": "per consumer: commit_s / close_s (from the kill, when each returned) and the commit's error",
    "seed_attempts": "seed requests sent until accepted (errors in seed_errors)",
    "killed": "the broker SIGKILLed and the roles it held (coordinator, controller, follower of the group's "
    "__consumer_offsets partition, leaders of the topic's partitions)",
    "restart_ready_s": "kill to the restarted node registered again (started 10 s after the kill)",
    "catch_up_s": "after that, until every replica of the topic and __consumer_offsets was in sync again",
    "load": "os.getloadavg() at the case's start and end",
}


def _config(bootstrap: str) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "log_level": 0}


def _consumer(config: dict[str, Any], group: str, **extra: Any) -> Consumer:
    return Consumer(
        {**config, "group.id": group, "enable.auto.commit": False, "auto.offset.reset": "earliest", **extra}
    )


def _produce(config: dict[str, Any], topic: str) -> None:
    producer = Producer({**config, "acks": "all"})
    for p in range(PARTITIONS):
        for i in range(RECORDS):
            producer.produce(topic, value=f"{p}-{i}".encode(), partition=p)
    if producer.flush(30):
        raise RuntimeError("records not delivered")


def _join_and_consume(consumers: list[Consumer], topic: str) -> None:
    """Subscribe both, poll them in turn until every record is consumed and they hold all partitions."""
    for c in consumers:
        c.subscribe([topic])
    got, deadline = 0, time.monotonic() + 60
    while True:
        for c in consumers:
            msg = c.poll(0.05)
            if msg is not None and msg.error() is None:
                got += 1
        held = [tp.partition for c in consumers for tp in c.assignment()]
        both = all(c.assignment() for c in consumers)
        if got >= PARTITIONS * RECORDS and both and sorted(held) == list(range(PARTITIONS)):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"consumed {got} records, assignment {held}")


class Watcher(threading.Thread):
    """Describe the group every 50 ms from the kill: its state changes (``[t, state, members]``) and when it
    is first EMPTY. Through the wire client's DescribeGroups, as ``ClusterAdmin.describe_groups`` does, but
    without its fallback to confluent-kafka's ``describe_consumer_groups`` for a group the wire did not
    answer (a coordinator down): that call aborts the process in librdkafka 2.16 (upstream issue 4605), as
    it did here once."""

    def __init__(self, config: dict[str, Any], group: str, topic: str, t0: float) -> None:
        super().__init__(daemon=True)
        self.config = config
        self.group, self.topic, self.t0 = group, topic, t0
        self.empty_at: float | None = None
        self.empty = threading.Event()
        self.halt = threading.Event()
        self.errors = 0
        self.states: list[list[Any]] = []

    def run(self) -> None:
        while not self.halt.is_set():
            try:
                info = wire.describe_classic_groups(self.config, [self.group], 2.0)[self.group]
            except Exception:  # noqa: BLE001 - a coordinator down: asked again
                self.errors += 1
            else:
                self._seen(info.state.upper(), len(info.members))
            time.sleep(0.05)

    def _seen(self, state: str, members: int) -> None:
        now = round(time.monotonic() - self.t0, 3)
        if not self.states or self.states[-1][1:] != [state, members]:
            self.states.append([now, state, members])
        if state == "EMPTY" and not members and self.empty_at is None:
            self.empty_at = now
            self.empty.set()


def _retry(call: Any, t0: float) -> dict[str, Any]:
    """Call until it returns (the window tries its steps again); when it returned, from the kill."""
    attempts, errors, deadline = 0, [], time.monotonic() + CASE_TIMEOUT_S
    while True:
        attempts += 1
        try:
            call()
            return {"at": time.monotonic() - t0, "attempts": attempts, "errors": errors}
        except InvalidPartitionCountError:  # a create that timed out but was applied
            return {"at": time.monotonic() - t0, "attempts": attempts, "errors": errors}
        except Exception as exc:  # noqa: BLE001 - recorded, tried again
            errors.append(f"{time.monotonic() - t0:.2f}s {type(exc).__name__}: {str(exc)[:160]}")
            if time.monotonic() > deadline:
                return {"at": None, "attempts": attempts, "errors": errors}
            time.sleep(0.2)


def _commit_without_membership(lone: Consumer, positions: list[Any], t0: float, out: dict[str, Any]) -> None:
    """The group-less commit (generation -1), tried again every 0.2 s until the broker accepts it (it does
    once the group is EMPTY), as rule 3's fallback does."""
    attempt = _retry(lambda: lone.commit(offsets=positions, asynchronous=False), t0)
    out["lone_commit_attempts"] = attempt["attempts"]
    if attempt["errors"]:
        out["lone_commit_errors"] = attempt["errors"][:3] + (["..."] if len(attempt["errors"]) > 3 else [])
    out["commit_s"] = attempt["at"]


def _leaver(order: str, consumer: Consumer, lone: Consumer, t0: float, out: dict[str, Any]) -> None:
    """One consumer pausing. ``commit_first``: commit, close; a commit that failed is made without
    membership after the close (rule 3). ``leave_first``: close, then commit without membership."""
    positions = [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]
    out["offsets"] = {tp.partition: tp.offset for tp in positions}
    committed = False
    if order == "commit_first":
        try:
            consumer.commit(asynchronous=False)
            committed = True
        except Exception as exc:  # noqa: BLE001 - recorded: committed without membership below
            out["member_commit_error"] = str(exc)[:200]
        out["member_commit_s"] = time.monotonic() - t0
    with contextlib.suppress(Exception):
        consumer.close()
    out["close_s"] = time.monotonic() - t0
    if committed:
        out["commit_s"] = out["member_commit_s"]
    else:
        _commit_without_membership(lone, positions, t0, out)


def _rejoiner(
    config: dict[str, Any], consumer: Consumer, group: str, topic: str, t0: float, out: dict[str, Any],
    held: dict[int, list[int]], index: int, done: threading.Event,
) -> None:  # fmt: skip
    """The plain restart: commit, close, a new consumer joins; poll it until the group holds all partitions."""
    try:
        consumer.commit(asynchronous=False)
    except Exception as exc:  # noqa: BLE001 - recorded
        out["member_commit_error"] = str(exc)[:200]
    out["commit_s"] = time.monotonic() - t0
    with contextlib.suppress(Exception):
        consumer.close()
    out["close_s"] = time.monotonic() - t0
    fresh = _consumer(config, group)
    fresh.subscribe([topic])
    deadline = time.monotonic() + CASE_TIMEOUT_S
    while not done.is_set() and time.monotonic() < deadline:
        fresh.poll(0.05)
        held[index] = [tp.partition for tp in fresh.assignment()]
    # keep the member in the group until the other is assigned too, then leave
    fresh.close()


def _roles(admin: AdminClient, data_dir: Path, bootstrap: str) -> tuple[int, int, int]:
    """(controller, a broker to coordinate the group, the third broker)."""
    controller = broker_faults.quorum_leader(data_dir, bootstrap)
    others = sorted(b for b in admin.list_topics(timeout=10).brokers if b != controller)
    return controller, others[0], others[1]


class Case:
    """One case: a fresh topic and group of 2 consumers that consumed, the victim picked by role."""

    def __init__(self, config: dict[str, Any], data_dir: Path, role: str, order: str, round_no: int) -> None:
        self.config, self.data_dir, self.order = config, data_dir, order
        self.load_start = os.getloadavg()
        self.admin = AdminClient(config)
        controller, coordinator, third = _roles(self.admin, data_dir, config["bootstrap.servers"])
        tag = uuid.uuid4().hex[:6]
        self.group = broker_faults.group_coordinated_by(self.admin, coordinator, f"bench-leave-{tag}")
        self.topic = bench.new_topic(config, "leave", PARTITIONS, replication=3)
        self.victim = {"coordinator": coordinator, "follower": third, "controller": controller}[role]
        _produce(config, self.topic)
        self.consumers = [_consumer(config, self.group) for _ in range(2)]
        _join_and_consume(self.consumers, self.topic)
        self.lones = [_consumer(config, self.group) for _ in range(2)]
        meta = self.admin.list_topics(self.topic, timeout=10).topics[self.topic]
        led = sorted(p for p, m in meta.partitions.items() if m.leader == self.victim)
        held = [r for r, b in (("coordinator", coordinator), ("controller", controller)) if b == self.victim]
        if self.victim != coordinator:
            held.append("offsets_follower")
        self.row: dict[str, Any] = {
            "round": round_no, "role": role, "order": order, "topic": self.topic, "group": self.group,
            "killed": {"broker": self.victim, "held": held, "topic_leader_of": led},
            "coordinator": coordinator, "controller": controller,
            "offsets_partition": broker_faults.offsets_partition(self.group),
        }  # fmt: skip
        self.outs: list[dict[str, Any]] = [{}, {}]
        self.restart: dict[str, Any] = {}
        self.t0 = 0.0
        bench.progress(
            f"round {round_no} {role:<11} {order:<12} kill broker {self.victim} ({', '.join(held)})"
        )

    def _restart_node(self) -> None:
        try:
            apache_kafka.start(self.data_dir, nodes=3)
            self.restart["ready_s"] = time.monotonic() - self.t0
        except Exception as exc:  # noqa: BLE001 - recorded; restore() tries again
            self.restart["error"] = str(exc)[:200]

    def run(self) -> dict[str, Any]:
        self.t0 = time.monotonic()
        apache_kafka.kill_node(self.data_dir, self.victim)
        timer = threading.Timer(RESTART_AFTER_S - (time.monotonic() - self.t0), self._restart_node)
        timer.start()
        watcher = Watcher(self.config, self.group, self.topic, self.t0)
        watcher.start()
        threads = self._plain_restart() if self.order == "restart" else self._pause(watcher)
        for t in threads:
            t.join(CASE_TIMEOUT_S)
        watcher.halt.set()
        watcher.join(10)
        row = self.row
        row["kill_to_empty_s"], row["describe_errors"] = watcher.empty_at, watcher.errors
        row["group_states"] = watcher.states
        commits = [o.get("commit_s") for o in self.outs]
        row["kill_to_leavers_done_s"] = max(commits) if None not in commits else None  # type: ignore[type-var]
        row["leavers"] = self.outs
        for lone in self.lones:
            lone.close()
        timer.join()
        self._finish(row)
        return row

    def _pause(self, watcher: Watcher) -> list[threading.Thread]:
        threads = [
            threading.Thread(target=_leaver, args=(self.order, c, lone, self.t0, o), daemon=True)
            for c, lone, o in zip(self.consumers, self.lones, self.outs, strict=True)
        ]
        for t in threads:
            t.start()
        if not watcher.empty.wait(CASE_TIMEOUT_S):
            return threads
        cluster = ClusterAdmin(self.config, timeout=30.0)
        create = _retry(lambda: cluster.increase_partitions(self.topic, GROWN), self.t0)
        seeded = {p: 0 for p in range(PARTITIONS, GROWN)}
        seed = _retry(lambda: cluster.seed_offsets(self.group, self.topic, seeded), self.t0)
        self.row["kill_to_create_s"], self.row["create_errors"] = create["at"], create["errors"]
        self.row["kill_to_seed_s"], self.row["seed_attempts"] = seed["at"], seed["attempts"]
        self.row["seed_errors"] = seed["errors"]
        return threads

    def _plain_restart(self) -> list[threading.Thread]:
        assigned: dict[int, list[int]] = {0: [], 1: []}
        done = threading.Event()
        threads = []
        for i, (c, o) in enumerate(zip(self.consumers, self.outs, strict=True)):
            args = (self.config, c, self.group, self.topic, self.t0, o, assigned, i, done)
            threads.append(threading.Thread(target=_rejoiner, args=args, daemon=True))
        for t in threads:
            t.start()
        deadline = time.monotonic() + CASE_TIMEOUT_S
        while time.monotonic() < deadline:
            if sorted(assigned[0] + assigned[1]) == list(range(PARTITIONS)) and assigned[0] and assigned[1]:
                self.row["kill_to_assigned_s"] = time.monotonic() - self.t0
                break
            time.sleep(0.01)
        done.set()
        return threads

    def _finish(self, row: dict[str, Any]) -> None:
        row["restart_ready_s"] = self.restart.get("ready_s")
        if "error" in self.restart:
            row["restart_error"] = self.restart["error"]
        row["catch_up_s"], left = broker_faults.restore(self.data_dir, self.admin, [self.topic])
        if left:
            row["out_of_sync"] = left
        bench.delete_topics(self.config, [self.topic])
        row["load"] = {
            "start": [round(x, 2) for x in self.load_start],
            "end": [round(x, 2) for x in os.getloadavg()],
        }
        _round_seconds(row)
        for o in self.outs:
            _round_seconds(o)
        bench.progress(
            f"  empty {_fmt(row.get('kill_to_empty_s'))}  seed {_fmt(row.get('kill_to_seed_s'))}  leavers "
            f"{_fmt(row.get('kill_to_leavers_done_s'))}  assigned {_fmt(row.get('kill_to_assigned_s'))}"
        )


def _round_seconds(row: dict[str, Any]) -> None:
    for key, value in list(row.items()):
        if key.endswith("_s") and isinstance(value, float):
            row[key] = round(value, 3)


def run_case(config: dict[str, Any], data_dir: Path, role: str, order: str, round_no: int) -> dict[str, Any]:
    return Case(config, data_dir, role, order, round_no).run()


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _stats(values: list[float | None]) -> dict[str, Any] | None:
    got = [v for v in values if v is not None]
    if not got:
        return None
    return {
        "median": round(statistics.median(got), 3), "min": round(min(got), 3), "max": round(max(got), 3),
        "n": len(got), "missing": len(values) - len(got),
    }  # fmt: skip


KEYS = (
    "kill_to_empty_s",
    "kill_to_lasting_empty_s",
    "kill_to_create_s",
    "kill_to_seed_s",
    "kill_to_leavers_done_s",
    "kill_to_assigned_s",
)


def lasting_empty(case: dict[str, Any]) -> float | None:
    """When the group turned EMPTY for good: the last change to EMPTY the watcher saw up to the seed (a
    coordinator that took over may report EMPTY for a moment, then the members it loaded)."""
    until = case.get("kill_to_seed_s")
    changes = [s for s in case.get("group_states", []) if until is None or s[0] <= until]
    if not changes or changes[-1][1] != "EMPTY":
        return None
    return changes[-1][0]


def summary(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per role and order: median, min, max of each of :data:`KEYS` (and every run's value)."""
    for case in cases:
        if "group_states" in case and case["order"] != "restart":
            case["kill_to_lasting_empty_s"] = lasting_empty(case)
    rows = []
    for role in ROLES:
        for order in (*ORDERS, "restart"):
            mine = [c for c in cases if c["role"] == role and c["order"] == order]
            if not mine:
                continue
            row: dict[str, Any] = {"role": role, "order": order, "runs": len(mine)}
            for key in KEYS:
                row[key] = _stats([c.get(key) for c in mine])
                row[key + "_runs"] = [c.get(key) for c in mine]
            rows.append(row)
    return rows


def _cell(key: str) -> Any:
    def cell(row: dict[str, Any]) -> str | None:
        s = row.get(key)
        if not s:
            return None
        return f"{s['median']:.2f} ({s['min']:.2f}-{s['max']:.2f})"

    return cell


COLUMNS = [
    Column("killed", "role", align="<"),
    Column("order", "order", align="<"),
    Column("runs", "runs"),
    Column("kill->EMPTY s", _cell("kill_to_empty_s")),
    Column("kill->EMPTY for good s", _cell("kill_to_lasting_empty_s")),
    Column("kill->create s", _cell("kill_to_create_s")),
    Column("kill->seed s", _cell("kill_to_seed_s")),
    Column("kill->leavers' commits s", _cell("kill_to_leavers_done_s")),
    Column("kill->assigned s", _cell("kill_to_assigned_s")),
]


def measure(rounds: int, out: Path, resume: bool = False) -> dict[str, Any]:
    data_dir = bench.broker_dir("broker-bench-leave-order")
    result: dict[str, Any] = {
        "bench": "leave_order",
        "what": "commit-then-leave vs leave-then-commit (generation -1) of two paused consumers, a broker "
        "SIGKILLed right before: when is the group EMPTY, when is the controller's seed accepted",
        "commit": bench.git("rev-parse", "--short", "HEAD"),
        "broker": f"{broker_helper.describe()}, 3 nodes (KRaft combined), RF 3 (topic and __consumer_offsets, "
        "16 partitions), min.insync.replicas=2, broker.session.timeout.ms default (9000)",
        "client": f"confluent-kafka {metadata.version('confluent-kafka')}, librdkafka {confluent_kafka.libversion()[0]}",
        "machine": f"{os.cpu_count()} cores, shared; load average per case in `load`",
        "setup": f"topic {PARTITIONS} partitions RF 3, {RECORDS} records each consumed by 2 consumers (eager, "
        f"auto commit off); kill; grow {PARTITIONS} -> {GROWN}; killed node restarted {RESTART_AFTER_S:.0f} s "
        "after the kill",
        "fields": FIELDS,
        "rounds": rounds,
        "load_start": [round(x, 2) for x in os.getloadavg()],
        "cases": [],
    }
    done: set[tuple[int, str, str]] = set()
    if resume and out.exists():  # the cases of an interrupted run are kept; the missing ones run
        kept = [c for c in json.loads(out.read_text())["cases"] if "failed" not in c]
        result["cases"], result["resumed"] = kept, True
        done = {(c["round"], c["role"], c["order"]) for c in kept}
    with broker_helper.running(data_dir, nodes=3) as bootstrap:
        config = _config(bootstrap)
        for r in range(1, rounds + 1):
            for role in ROLES:
                orders = ORDERS if r % 2 else ORDERS[::-1]
                for order in (*orders, "restart"):
                    if (r, role, order) in done:
                        continue
                    try:
                        case = run_case(config, data_dir, role, order, r)
                    except Exception as exc:  # noqa: BLE001 - a case that failed is recorded, the run goes on
                        bench.progress(f"  case failed: {exc}")
                        case = {"round": r, "role": role, "order": order, "failed": str(exc)[:300]}
                        with contextlib.suppress(Exception):
                            broker_faults.restore(data_dir, AdminClient(config), [])
                    result["cases"].append(case)
                    result["summary"] = summary(result["cases"])
                    result["load_end"] = [round(x, 2) for x in os.getloadavg()]
                    bench.write_results(out, result)  # after every case: an interrupted run keeps its cases
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument(
        "--resume", action="store_true", help="keep the cases in --out (an interrupted run), run the others"
    )
    parser.add_argument(
        "--tables-only", action="store_true", help="no cluster: summarise the cases already in --out again"
    )
    args = parser.parse_args(argv)
    if args.tables_only:
        result = json.loads(args.out.read_text())
        result["summary"] = summary(result["cases"])
        bench.write_results(args.out, result)
    elif broker_helper.external_config() is not None:
        raise SystemExit("this bench kills brokers of its own 3-node cluster: unset KSTATE_BOOTSTRAP_SERVERS")
    else:
        result = measure(args.rounds, args.out, args.resume)
    title = (
        f"{result['broker']}; {result['rounds']} rounds; load average {result['load_start'][0]} at start, "
        f"{result['load_end'][0]} at end; seconds from the SIGKILL, median (min-max)"
    )
    text = bench.table(result["summary"], COLUMNS, markdown=True)
    args.out.with_suffix(".md").write_text(f"{title}\n\n{text}\n")
    bench.print_table(result["summary"], COLUMNS, title=title)
    return 0


if __name__ == "__main__":
    sys.exit(main())
