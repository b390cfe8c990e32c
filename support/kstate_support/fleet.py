"""A fleet of foreign services (issue 25): plain KafkaJS consumers and producers that cannot run the
provider's client piece, driven only through command pairs, and the judge of what they did.

The services and their command pair live in ``support/node`` (``consumer.js``, ``producer.js``,
``svc.sh``; ``make node-deps`` installs KafkaJS there). A :class:`Fleet` owns one run directory: it
defines services there (``svc.sh define``), hands out the exact shell strings a user would configure as a
consumer group's stop / start / readiness commands (:meth:`Fleet.commands`, :meth:`Fleet.group_commands`),
runs those same strings itself (:meth:`Fleet.start`, :meth:`Fleet.stop`, :meth:`Fleet.ready`), reads the
services' JSON lines, and judges them (:func:`judge`): records lost (delivered by a producer, never
processed by the group) and keys processed out of order, with the semantics of
:class:`kstate_support.key_order.OrderChecker` (it is replayed in processing order), so a fleet verdict and
a Python-fleet verdict count the same things.

Each service writes, in the run directory: ``NAME.pid`` while it runs, ``NAME.ready`` while it is ready
(a consumer: a member of a settled generation; a producer: after its first delivered batch),
``NAME.jsonl`` (a consumer: one ``{"p","o","key","seq","t"}`` per processed record; a producer: one
``{"key","seq","p","o","t"}`` per delivered record), ``NAME.events.jsonl`` (start, join, rebalancing,
stop, exit, with ``t``) and ``NAME.log`` (its stdout/stderr). ``t`` is wall-clock milliseconds with
microsecond resolution, comparable across the processes of one host.

One producer per topic (or producers with distinct keys): a key's ``seq`` is its producer's.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from kstate_support.key_order import OrderChecker

#: The npm folder of the foreign services.
NODE_DIR = Path(__file__).resolve().parent.parent / "node"
#: Their command pair: ``svc.sh [--run-dir DIR] define|start|stop|ready|status NAME...``.
SVC = NODE_DIR / "svc.sh"

#: Consumer settings sized for tests: joins and leaves well under a second on the embedded broker (which
#: has no fetch long-poll, hence the short ``max-wait-ms``), new partitions seen within ~0.5 s.
TEST_CONSUMER: dict[str, Any] = {
    "session-timeout-ms": 6000,
    "heartbeat-interval-ms": 300,
    "rebalance-timeout-ms": 5000,
    "max-wait-ms": 100,
    "metadata-max-age-ms": 500,
    "commit-interval-ms": 200,
}


class FleetError(RuntimeError):
    """A command of the command pair failed (non-zero exit): its output is in the message."""


@dataclass(frozen=True)
class CommandPair:
    """The shell commands that stop, start and check the readiness of one set of services (a consumer
    group's members): each exits 0 on success, and each is idempotent."""

    stop: str
    start: str
    ready: str


@dataclass
class Verdict:
    """What a group did with what its producers delivered.

    :ivar delivered: records the producers logged as delivered (at or after ``since``).
    :ivar processed: distinct records the group processed (first processings), ``since`` or not.
    :ivar redelivered: processings beyond the first of a record (at least once).
    :ivar lost: ``(key, seq, partition, offset)`` of delivered records never processed.
    :ivar lost_by_partition: how many of ``lost`` were written to each partition.
    :ivar records_out_of_order: records processed for the first time after a later ``seq`` of their key.
    :ivar keys_out_of_order: keys with at least one such record.
    :ivar violations: ``(key, seq, top)``: the record, and the later seq already processed before it.
    """

    delivered: int
    processed: int
    redelivered: int
    lost: list[tuple[str, int, int, int]]
    lost_by_partition: dict[int, int]
    records_out_of_order: int
    keys_out_of_order: int
    violations: list[tuple[str, int, int]] = field(repr=False)

    def summary(self) -> str:
        return (
            f"lost {len(self.lost)} of {self.delivered} delivered {self.lost_by_partition}, "
            f"{self.records_out_of_order} records of {self.keys_out_of_order} keys out of order "
            f"({self.processed} processed, +{self.redelivered} redelivered)"
        )


def read_lines(path: Path) -> list[dict[str, Any]]:
    """The JSON lines of ``path`` ([] when it does not exist); a torn last line (a writer killed in the
    middle of it) is skipped."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def judge(
    delivered: list[dict[str, Any]], processed: list[dict[str, Any]], since: float | None = None
) -> Verdict:
    """Judge a group's processing against its producers' deliveries.

    Order: the processed records are replayed into an :class:`OrderChecker` in processing order (``t``,
    across members), so a redelivery is not a violation and a record processed first after a later
    ``seq`` of its key is. Loss: a delivered record whose ``(key, seq)`` was never processed.

    :param since: count loss only for records delivered at or after this ``t`` (ms): latest-reset
        consumers skip what was written before they first had positions, which is start-up, not the
        scenario. Order is judged over everything processed.
    """
    checker = OrderChecker()
    for record in sorted(processed, key=lambda r: r["t"]):
        checker.record(record["key"], record["seq"])
    counted = [d for d in delivered if since is None or d["t"] >= since]
    lost = sorted(
        (d["key"], d["seq"], d["p"], d["o"]) for d in counted if (d["key"], d["seq"]) not in checker.seen
    )
    return Verdict(
        delivered=len(counted),
        processed=len(checker.seen),
        redelivered=checker.processed - len(checker.seen),
        lost=lost,
        lost_by_partition=dict(sorted(Counter(p for _k, _s, p, _o in lost).items())),
        records_out_of_order=len(checker.violations),
        keys_out_of_order=checker.keys_out_of_order,
        violations=list(checker.violations),
    )


class Fleet:
    """The foreign services of one run directory, and their command pairs.

    :param run_dir: where the services keep their pidfiles, markers, output and logs.
    :param brokers: the bootstrap address (``host:port[,host:port]``) every service gets.
    :param svc: the services' command pair script (the same verbs and files as :data:`SVC`, the KafkaJS
        one, which is the default; :mod:`kstate_support.java_services` passes the Java one).
    """

    def __init__(self, run_dir: Path, brokers: str, svc: Path = SVC) -> None:
        if svc == SVC and not (NODE_DIR / "node_modules" / "kafkajs").is_dir():
            raise FleetError(f"KafkaJS is not installed in {NODE_DIR}: run `make node-deps`")
        if svc == SVC and shutil.which("node") is None:
            raise FleetError("node (Node.js 18+) is not on PATH")
        self.svc = svc
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.brokers = brokers
        self.kinds: dict[str, str] = {}
        self.groups: dict[str, list[str]] = {}

    # -- definitions -------------------------------------------------------------------------------------

    def consumer(self, name: str, topic: str, group: str, delay_ms: float = 0, **options: Any) -> CommandPair:
        """Define a consumer-group member (not started); return its own command pair.

        :param delay_ms: processing time per record.
        :param options: more ``consumer.js`` flags, ``session_timeout_ms=3000`` for
            ``--session-timeout-ms 3000`` (:data:`TEST_CONSUMER` are the defaults here).
        """
        self._define(
            name,
            "consumer",
            {"topic": topic, "group": group, "delay-ms": delay_ms, **TEST_CONSUMER, **_flags(options)},
        )
        self.groups.setdefault(group, []).append(name)
        return self.commands(name)

    def producer(
        self, name: str, topic: str, keys: int = 200, rate: float = 200, **options: Any
    ) -> CommandPair:
        """Define a keyed producer (not started): ``keys`` keys round-robin at ``rate`` records/s."""
        self._define(name, "producer", {"topic": topic, "keys": keys, "rate": rate, **_flags(options)})
        return self.commands(name)

    def _define(self, name: str, kind: str, flags: dict[str, Any]) -> None:
        args = [kind, "--brokers", self.brokers]
        for flag, value in flags.items():
            args += [f"--{flag}", str(value)]
        self._run("define", name, *args)
        self.kinds[name] = kind

    # -- the command pair ----------------------------------------------------------------------------------

    def _command(self, action: str, *words: str) -> str:
        return shlex.join([str(self.svc), "--run-dir", str(self.run_dir), action, *words])

    def commands(self, *names: str, timeout: float = 20) -> CommandPair:
        """The stop / start / ready shell commands of ``names`` (one command each, all names in it): what a
        user configures for a consumer group, what the provider's command-pair driver runs in a shell."""
        return CommandPair(
            stop=self._command("stop", "--timeout", str(int(timeout)), *names),
            start=self._command("start", *names),
            ready=self._command("ready", *names),
        )

    def group_commands(self, group: str, timeout: float = 20) -> CommandPair:
        """The command pair of every member of consumer group ``group`` defined here."""
        return self.commands(*self.groups[group], timeout=timeout)

    def _run(self, action: str, *words: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            self._command(action, *words), shell=True, capture_output=True, text=True, timeout=120
        )
        if check and done.returncode != 0:
            raise FleetError(
                f"svc.sh {action} {' '.join(words)}: rc {done.returncode}\n{done.stdout}{done.stderr}"
            )
        return done

    def start(self, *names: str) -> float:
        """Run the start command of ``names``; return the seconds it took."""
        began = time.monotonic()
        self._run("start", *names)
        return time.monotonic() - began

    def stop(self, *names: str, timeout: float = 20) -> float:
        """Run the stop command of ``names`` (SIGTERM, wait for exit); return the seconds it took."""
        began = time.monotonic()
        self._run("stop", "--timeout", str(int(timeout)), *names)
        return time.monotonic() - began

    def ready(self, *names: str) -> bool:
        """Run the ready command of ``names``: True when it exits 0."""
        return self._run("ready", *names, check=False).returncode == 0

    def wait_ready(self, *names: str, timeout: float = 30) -> float:
        """Poll the ready command until it succeeds; return the seconds waited (FleetError on timeout)."""
        began = time.monotonic()
        while not self.ready(*names):
            if time.monotonic() - began > timeout:
                raise FleetError(f"{names} not ready within {timeout}s: {self._run('status', *names).stdout}")
            time.sleep(0.1)
        return time.monotonic() - began

    def running(self, name: str) -> bool:
        """Whether ``name`` runs (what ``svc.sh status`` says)."""
        return "running" in self._run("status", name).stdout

    def close(self) -> None:
        """Stop every service defined here (bounded); for a test's clean-up, whatever happened."""
        if self.kinds:
            self._run("stop", "--timeout", "20", *self.kinds, check=False)

    def __enter__(self) -> Fleet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what the services did -------------------------------------------------------------------------

    def lines(self, *names: str) -> list[dict[str, Any]]:
        """The output lines of ``names`` (processed records of consumers, delivered ones of producers)."""
        return [r for n in names for r in read_lines(self.run_dir / f"{n}.jsonl")]

    def events(self, name: str) -> list[dict[str, Any]]:
        return read_lines(self.run_dir / f"{name}.events.jsonl")

    def judge(self, producers: list[str], group: str, since: float | None = None) -> Verdict:
        """:func:`judge` the members of ``group`` against ``producers``."""
        return judge(self.lines(*producers), self.lines(*self.groups[group]), since=since)

    def downtime(self, name: str) -> list[float]:
        """Seconds from each SIGTERM of ``name`` to its first join after it started again (a stop never
        followed by a start and a join is left out; a join during the stop itself, a rebalance caused by
        another member leaving, is not the end): the service's part of a stop/start window."""
        out: list[float] = []
        stopped = restarted = None
        for event in self.events(name):
            if event["ev"] == "stop":
                stopped, restarted = event["t"], False
            elif event["ev"] == "start" and stopped is not None:
                restarted = True
            elif event["ev"] == "join" and stopped is not None and restarted:
                out.append((event["t"] - stopped) / 1000)
                stopped = None
        return out

    def assigned(self, group: str) -> set[int]:
        """The partitions the running members of ``group`` hold, by their last join (their own view)."""
        held: set[int] = set()
        for name in self.groups[group]:
            joins = [e for e in self.events(name) if e["ev"] in ("join", "exit")]
            if joins and joins[-1]["ev"] == "join":
                held |= set(joins[-1]["assigned"])
        return held

    def caught_up(self, producers: list[str], group: str) -> bool:
        """Whether the group processed every record the producers delivered (loss aside): the last
        processed offset on each partition is the producers' last delivered one."""
        last: dict[int, int] = {}
        for d in self.lines(*producers):
            last[d["p"]] = max(last.get(d["p"], -1), d["o"])
        done: dict[int, int] = {}
        for r in self.lines(*self.groups[group]):
            done[r["p"]] = max(done.get(r["p"], -1), r["o"])
        return all(done.get(p, -1) >= o for p, o in last.items())


def _flags(options: dict[str, Any]) -> dict[str, Any]:
    return {k.replace("_", "-"): v for k, v in options.items()}


#: What a group's coordinator answers while it loads (a fresh broker's ``__consumer_offsets``).
COORDINATOR_LOADING = (
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
)


def describe_group(admin: Any, group: str, attempts: int = 50) -> Any:
    """``group``'s description from the broker; a coordinator still loading (``NOT_COORDINATOR`` on a fresh
    broker) is asked again, every 0.2 s, ``attempts`` times."""
    for _ in range(attempts):
        try:
            return admin.describe_consumer_groups([group])[group].result(timeout=10)
        except KafkaException as exc:
            if exc.args[0].code() not in COORDINATOR_LOADING:
                raise
            time.sleep(0.2)
    return admin.describe_consumer_groups([group])[group].result(timeout=10)


def group_state(admin: Any, group: str) -> tuple[str, int]:
    """The broker's view of ``group``: its state name (``EMPTY``, ``STABLE`` ...) and member count."""
    desc = describe_group(admin, group)
    return desc.state.name, len(desc.members)


def wait_group(admin: Any, group: str, state: str, members: int | None = None, timeout: float = 30) -> float:
    """Poll the broker until ``group`` is in ``state`` (with ``members`` members, when given); return the
    seconds waited. TimeoutError with the last state seen otherwise."""
    began = time.monotonic()
    while True:
        seen = group_state(admin, group)
        if seen[0] == state and (members is None or seen[1] == members):
            return time.monotonic() - began
        if time.monotonic() - began > timeout:
            raise TimeoutError(f"group {group} not {state}/{members} within {timeout}s: last {seen}")
        time.sleep(0.05)


def start_group(fleet: Fleet, admin: Any, group: str, timeout: float = 30) -> None:
    """Start every member of ``group``, wait until each is ready and the broker reports it STABLE."""
    members = fleet.groups[group]
    fleet.start(*members)
    fleet.wait_ready(*members, timeout=timeout)
    wait_group(admin, group, "STABLE", len(members), timeout=timeout)


def warm_up(fleet: Fleet, group: str, records: int = 50, timeout: float = 30) -> float:
    """Wait until ``group`` processes live traffic; return the ``t`` (ms) from which loss is counted
    (latest-reset members skip what was written before they had positions: start-up, not the scenario)."""
    began = time.monotonic()
    while len(fleet.lines(*fleet.groups[group])) < records:
        if time.monotonic() - began > timeout:
            raise TimeoutError(
                f"{group} processed nothing in {timeout}s: {[fleet.events(m) for m in fleet.groups[group]]}"
            )
        time.sleep(0.2)
    return time.time() * 1000


def drain(fleet: Fleet, producers: list[str], group: str, timeout: float = 40) -> None:
    """Wait until ``group`` processed everything ``producers`` delivered (TimeoutError otherwise)."""
    began = time.monotonic()
    while not fleet.caught_up(producers, group):
        if time.monotonic() - began > timeout:
            raise TimeoutError(f"{group} did not catch up with {producers} within {timeout}s")
        time.sleep(0.2)
