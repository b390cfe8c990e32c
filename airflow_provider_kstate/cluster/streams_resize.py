"""Resize a stateful Kafka Streams application in one window (issue 32, item 3): its co-partitioned sources,
its repartition topics and its changelogs grow together, and its state moves with its keys.

The plan names the application, its topics and its stores (:class:`~.streams_apps.StreamsAppPlan`); the
run, :meth:`StreamsResize.run`, then:

1. **drains**: stops the producers of its sources by their drivers (command pairs), and waits until the
   application has consumed every record of its sources and repartition topics (its committed offsets reach
   the ends, read ``read_committed``). A key whose records still wait in its old partition would otherwise be
   counted there again from nothing once its state has moved;
2. **stops** the application by its driver and waits until its group is EMPTY (ListGroups v5: the classic
   protocol's and KIP-1071's streams groups alike); checks again that nothing is in flight;
3. **grows** every source, repartition topic and changelog to the target (CreatePartitions);
4. **re-places** each changelog with the Spark application ``replace_changelog.py`` (a moved key's latest
   value to its new partition, a tombstone in its old one), whose deep check proves every live key sits in
   ``murmur2(record key) % N`` and that the live rows are those of before; a failed check stops the run
   with the application stopped (the re-placement is idempotent: run it again);
5. **seeds** the application's group at offset 0 on the new partitions of its sources and repartition topics;
6. **starts** the application by its driver (its ready check), then the producers.

A failure before the first grow starts the application and the producers again: nothing was changed. The
application's downtime is from its stop command to its ready check passing (``downtime_s``). No Airflow
here: an operator, the command line or a test drives it.

**A run again continues an interrupted resize.** A failure after the first grow (a failed deep check, a
seed refused, the worker gone) leaves the application stopped with its topics grown, fully or in part. A
run again with the same target plans from the current counts (its sources are at the target: no resize),
so :meth:`StreamsResize.run` first asks :meth:`StreamsResize.interrupted`: with the application's group
EMPTY (or gone), a topic of the application below the target, a source or repartition partition the group
has no offset on while it has offsets on the topic (the seed did not run), or a changelog key outside
``murmur2(record key) % N`` (a read-only deep check) is an interrupted resize, and the run **continues**
it (:meth:`StreamsResize.resume`): grows what is left, re-places every changelog (a changelog grown
before this run is re-read on all its partitions: each misplaced key moves, the keys at home stay; the deep
check proves the placement and that the live rows are unchanged), seeds every gap at offset 0, and starts
the application and its producers; the report says ``continued``. A running application, or a stopped one
with none of these marks, is left untouched (``resized`` False). A re-placement stopped between a moved
key's new copy and its old copy's tombstone leaves that key live twice: the continue moves it once more and
its check, which counts the rows before the moves, fails; the next run again finds every key at home and
passes (the application stays stopped until then).

Where the changelogs are re-placed is :func:`replacer_for` (``spark`` or ``local``); the run's report, and its
log lines, are :func:`resize_report` and :func:`report_lines`.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from airflow_provider_kstate.errors import StreamsResizeError
from airflow_provider_kstate.increase.drivers import ActionDriver, CommandPairs
from airflow_provider_kstate.increase.model import DEAD, EMPTY, state_name
from airflow_provider_kstate.increase.streams_apps import KEY_SUFFIX, StreamsAppPlan, StreamsChangelog

#: Runs the re-placement of an application's changelogs: ``(changelogs, partitions before, partitions now)``
#: -> ``{changelog: its report}`` (``ok``, ``replace``, ``check``; ``error`` when the application failed).
Replacer = Callable[[list[StreamsChangelog], int, int], dict[str, dict[str, Any]]]
#: The read-only deep check of changelogs on ``N`` partitions: ``(changelogs, N)`` -> ``{changelog: live keys
#: outside murmur2(record key) % N}`` (it writes nothing).
Checker = Callable[[list[StreamsChangelog], int], dict[str, int]]


def pending_records(
    kafka_config: Mapping[str, Any], topic: str, ranges: Mapping[int, tuple[int, int]]
) -> int:
    """How many records a ``read_committed`` consumer would read in ``ranges`` (``{partition: (from, end)}``):
    transaction markers take offsets but are no records, so an offset gap alone is not a backlog."""
    from airflow_provider_kstate.spark_apps import kafka_io

    todo = {p: r for p, r in ranges.items() if r[0] < r[1]}
    return kafka_io.drain_count(kafka_config, topic, todo) if todo else 0


def group_state(admin: Any, kafka_config: Mapping[str, Any], group: str) -> str:
    """The group's state as ListGroups v5 names it on every broker (``EMPTY``, ``STABLE`` ...; ``DEAD``
    when not listed): the classic protocol's groups and KIP-1071's streams groups alike."""
    from airflow_provider_kstate.doctor import wire

    cluster = getattr(admin, "cluster", admin)
    brokers = [(b.host, b.port) for b in cluster.metadata().brokers.values()]
    for listing in wire.list_groups(dict(kafka_config), brokers, 10.0):
        if listing.group_id == group:
            return state_name(listing.state)
    return DEAD


class OtherReaders(Protocol):
    """The other readers of the application's sources (consumer groups on their drivers; a share group the
    broker starts on new partitions at their first record is left alone): out of their groups before the
    grow, seeded and back after it, drained before the producers start
    (:class:`~airflow_provider_kstate.increase.run.IncreaseRun`)."""

    def leave_for_grow(self) -> dict[str, Any]: ...

    def back_after_grow(self) -> dict[str, Any]: ...

    def wait_drained(self, timeout: float) -> dict[str, Any]: ...


@dataclass
class StreamsResize:
    """The resize of one application of ``app``'s plan.

    :param app: the application's plan (``plan.streams_apps[application id]``).
    :param admin: the admin verbs (partition counts, watermarks, committed offsets, grow, seed).
    :param kafka_config: librdkafka settings (the drain's reads, the group's state; never logged).
    :param driver: stops and starts the application (a command pair: ``kubectl scale``, ``systemctl`` ...).
    :param replacer: runs ``replace_changelog.py`` for one changelog (:func:`spark_submit_replacer`).
    :param producers: ``{service: driver}`` of the producers of its sources, stopped for the drain.
    :param others: the other readers of its sources, taken out around the grow in the same run (None: the
        application is their only reader).
    """

    app: StreamsAppPlan
    admin: Any
    kafka_config: Mapping[str, Any]
    driver: ActionDriver
    replacer: Replacer
    producers: Mapping[str, ActionDriver] = field(default_factory=dict)
    log: Any = field(default_factory=lambda: logging.getLogger(__name__))
    drain_timeout: float = 120.0
    empty_timeout: float = 120.0
    pairs: CommandPairs | None = None
    #: The group's state (ListGroups v5 through the admin's cluster by default; tests give a fake).
    state_of: Callable[[str], str] | None = None
    #: The read-only deep check :meth:`interrupted` runs last (:func:`local_checker` by default).
    checker: Checker | None = None
    #: Seconds of each step, and the application's downtime.
    timings: dict[str, float] = field(default_factory=dict)
    replaced: dict[str, dict[str, Any]] = field(default_factory=dict)
    others: OtherReaders | None = None

    def __post_init__(self) -> None:
        if self.pairs is None:
            self.pairs = CommandPairs(self.app.sources[0], self.log)

    @property
    def group(self) -> str:
        return self.app.application_id

    @property
    def commands(self) -> CommandPairs:
        assert self.pairs is not None
        return self.pairs

    def _timed(self, step: str, started: float) -> None:
        self.timings[step] = round(time.monotonic() - started, 3)

    def run(self) -> dict[str, Any]:
        """Resize the application (the module's docstring says how); return what it did."""
        app, n, m = self.app, self.app.partitions, self.app.target
        if m <= n:
            reasons = self.interrupted() if m == n else []
            if reasons:
                return self.resume(reasons)
            return {"application_id": self.group, "resized": False, "partitions": n}
        t0 = time.monotonic()
        self.commands.stop(dict(self.producers), "producer")
        self._timed("stop_producers", t0)
        stopped_at = None
        try:
            t = time.monotonic()
            self.wait_drained(self.drain_timeout)
            self._timed("drain", t)
            stopped_at = time.monotonic()
            self.commands.stop({self.group: self.driver}, "group")
            self.wait_empty(self.empty_timeout)
            self._timed("stop_app", stopped_at)
            left = self.backlog()
            if left:
                raise StreamsResizeError(
                    f"application {self.group!r} stopped with records in flight {left}: its producers were "
                    "not all stopped. Nothing was grown; the application and producers are started again. "
                    "Give every producer of its sources a driver (producer_drivers), then run again."
                )
            others = self._others_leave()
        except Exception:
            self._undo(stopped_at is not None)
            raise
        t = time.monotonic()
        counts = self.counts()
        for topic in app.grown:
            self.grow(topic, m)
        self._timed("grow", t)
        t = time.monotonic()
        self.replace(app.changelogs, counts)
        self._timed("replace", t)
        t = time.monotonic()
        self.seed(n)
        self._timed("seed", t)
        self._others_back(others)
        t = time.monotonic()
        failed = self.commands.start({self.group: self.driver}, "group")
        self._timed("start_app", t)
        self.timings["downtime_s"] = round(time.monotonic() - stopped_at, 3)
        self._others_drained(others)
        failed += self.commands.start(dict(self.producers), "producer")
        self.timings["producer_downtime_s"] = round(time.monotonic() - t0, 3)
        self.log.info("STREAMS %s resized %s -> %s: %s", self.group, n, m, self.timings)
        return {
            "application_id": self.group,
            "resized": True,
            "partitions": m,
            "grown": app.grown,
            "timings": dict(self.timings),
            "replaced": self.replaced,
            "others": others,
            "start_failures": [r.describe() for r in failed],
        }

    # -- a run again: the continue of an interrupted resize ------------------------------------------------

    def state(self) -> str:
        """The application's group state (ListGroups v5, or :attr:`state_of`)."""
        return (self.state_of or (lambda g: group_state(self.admin, self.kafka_config, g)))(self.group)

    def counts(self) -> dict[str, int]:
        """``{topic: partitions now}`` of every topic the resize grows."""
        return {topic: self.admin.partition_count(topic) for topic in self.app.grown}

    def offset_gaps(self) -> dict[str, list[int]]:
        """``{topic: partitions}`` of its sources and repartition topics where the group has no committed
        offset while it has offsets on other partitions of the topic (a seed that did not run)."""
        out = {}
        for topic in [*self.app.sources, *self.app.repartitions]:
            count = self.admin.partition_count(topic)
            held = dict(self.admin.committed_offsets_many([self.group], topic, count)).get(self.group, {})
            gaps = [p for p in range(count) if p not in held]
            if held and gaps:
                out[topic] = gaps
        return out

    def interrupted(self) -> list[str]:
        """Why the application looks like a resize to the target that did not finish (empty: it does not).

        Only a stopped application (group EMPTY or gone) can be one; then, cheapest first: a topic of it below
        the target, an offset gap (:meth:`offset_gaps`), a changelog key outside its home partition (the
        read-only deep check, run only when nothing else told)."""
        state = self.state()
        if state not in (EMPTY, DEAD):
            self.log.info("STREAMS %s is %s: no resize to continue", self.group, state)
            return []
        m = self.app.target
        reasons = []
        below = {t: c for t, c in self.counts().items() if c < m}
        if below:
            reasons.append(f"topics below {m} partitions: {below}")
        gaps = self.offset_gaps()
        if gaps:
            reasons.append(f"group {self.group!r} has no offsets on partitions {gaps}")
        if not reasons and self.app.changelogs:
            checker = self.checker or local_checker(self.kafka_config)
            misplaced = {t: n for t, n in checker(self.app.changelogs, m).items() if n}
            if misplaced:
                reasons.append(f"changelog keys outside murmur2(key) % {m}: {misplaced}")
        if reasons:
            self.log.warning(
                "STREAMS %s is stopped (%s) and %s: an interrupted resize, continued",
                self.group,
                state,
                "; ".join(reasons),
            )
        return reasons

    def resume(self, reasons: list[str]) -> dict[str, Any]:
        """Continue an interrupted resize to the target (the module's docstring says when): the application
        is stopped already; grow what is left, re-place, seed every gap, start it and its producers."""
        m = self.app.target
        counts = self.counts()
        waiting = self.backlog()
        stale = {t: n for t, n in waiting.items() if t in self.app.repartitions or counts.get(t, m) < m}
        if stale:
            raise StreamsResizeError(
                f"application {self.group!r} is stopped with records in flight {stale} on topics not grown yet "
                "or on its repartition topics: consumed after the re-placement they would meet their keys' "
                "state on another task. The run did not continue; nothing was changed. Drain them on the old "
                "layout (or reset the application) first."
            )
        t0 = time.monotonic()
        self.commands.stop(dict(self.producers), "producer")  # held by the interrupted run, or running again
        self._timed("stop_producers", t0)
        t = time.monotonic()
        self.wait_empty(self.empty_timeout)
        self._timed("stop_app", t)
        others = self._others_leave()
        t = time.monotonic()
        grown = [topic for topic in self.app.grown if counts[topic] < m]
        for topic in grown:
            self.grow(topic, m)
        self._timed("grow", t)
        t = time.monotonic()
        self.replace(self.app.changelogs, counts)
        self._timed("replace", t)
        t = time.monotonic()
        self.seed(0)
        self._timed("seed", t)
        self._others_back(others)
        t = time.monotonic()
        failed = self.commands.start({self.group: self.driver}, "group")
        self._timed("start_app", t)
        self.timings["downtime_s"] = round(time.monotonic() - t0, 3)
        self._others_drained(others)
        failed += self.commands.start(dict(self.producers), "producer")
        self.timings["producer_downtime_s"] = round(time.monotonic() - t0, 3)
        self.log.info("STREAMS %s: the resize to %s continued: %s", self.group, m, self.timings)
        return {
            "application_id": self.group,
            "resized": True,
            "continued": True,
            "continued_because": reasons,
            "partitions": m,
            "grown": grown,
            "timings": dict(self.timings),
            "replaced": self.replaced,
            "others": others,
            "start_failures": [r.describe() for r in failed],
        }

    # -- the other readers of its sources, in the same run ------------------------------------------------

    def _others_leave(self) -> dict[str, Any]:
        """The other readers leave before the grow (the producers are stopped, the application too)."""
        if self.others is None:
            return {}
        t = time.monotonic()
        out = {"paused": self.others.leave_for_grow(), "left_at": t}
        self._timed("others_leave", t)
        return out

    def _others_back(self, others: dict[str, Any]) -> None:
        """After the grow and the application's seed: the other readers seeded and back."""
        if self.others is None:
            return
        others.update(self.others.back_after_grow())
        self.timings["others_out_s"] = round(time.monotonic() - others.pop("left_at"), 3)

    def _others_drained(self, others: dict[str, Any]) -> None:
        """Before the producers start: the other readers consumed the old partitions (key order)."""
        if self.others is None:
            return
        t = time.monotonic()
        others["drain"] = self.others.wait_drained(self.drain_timeout)
        self._timed("others_drain", t)

    def _undo(self, app_stopped: bool) -> None:
        """Before anything grew: start the application (when stopped here) and the producers again."""
        if app_stopped:
            self.commands.start({self.group: self.driver}, "group")
        self.commands.start(dict(self.producers), "producer")

    # -- the steps ---------------------------------------------------------------------------------------

    def backlog(self) -> dict[str, int]:
        """``{topic: records}`` of its sources and repartition topics not consumed by the application yet."""
        out = {}
        for topic in [*self.app.sources, *self.app.repartitions]:
            count = self.admin.partition_count(topic)
            committed = dict(self.admin.committed_offsets_many([self.group], topic, count)).get(
                self.group, {}
            )
            marks = self.admin.watermarks(topic, range(count))
            ranges = {p: (committed.get(p, low), high) for p, (low, high) in marks.items()}
            left = pending_records(self.kafka_config, topic, ranges)
            if left:
                out[topic] = left
        return out

    def wait_drained(self, timeout: float) -> None:
        """Wait until :meth:`backlog` is empty (the producers are stopped: the application catches up)."""
        deadline = time.monotonic() + timeout
        while True:
            left = self.backlog()
            if not left:
                self.log.info("STREAMS %s drained its sources and repartition topics", self.group)
                return
            if time.monotonic() > deadline:
                raise StreamsResizeError(
                    f"application {self.group!r} did not consume its sources and repartition topics within "
                    f"{timeout}s (records left {left}): is it running, and are its producers stopped? Nothing "
                    "was changed; the producers are started again."
                )
            time.sleep(0.5)

    def wait_empty(self, timeout: float) -> None:
        """Wait until the application's group is EMPTY (its members left, or their session expired)."""
        deadline = time.monotonic() + timeout
        while True:
            state = (self.state_of or (lambda g: group_state(self.admin, self.kafka_config, g)))(self.group)
            if state in (EMPTY, DEAD):
                return
            if time.monotonic() > deadline:
                raise StreamsResizeError(
                    f"application {self.group!r} is still {state} {timeout}s after its stop command: check its "
                    "driver. Nothing was changed; it is started again."
                )
            time.sleep(0.2)

    def grow(self, topic: str, partitions: int) -> None:
        """Grow ``topic`` to ``partitions`` (a no-op when it has them: a run again)."""
        current = self.admin.partition_count(topic)
        if current < partitions:
            self.admin.increase_partitions(topic, partitions)
            deadline = time.monotonic() + 60
            while self.admin.partition_count(topic) < partitions and time.monotonic() < deadline:
                time.sleep(0.05)
        self.log.info("STREAMS %s: %s has %s partitions", self.group, topic, partitions)

    def replace(self, changelogs: list[StreamsChangelog], counts: Mapping[str, int] | None = None) -> None:
        """Re-place the changelogs (one Spark application per count before) and require every deep check to
        pass.

        :param counts: each changelog's partition count before this run grew it: its re-placement reads
            those partitions (all of them for a changelog grown by an interrupted run: every misplaced key
            moves, wherever it sits); the plan's count when not given.
        """
        if not changelogs:
            return
        m = self.app.target
        by_count: dict[int, list[StreamsChangelog]] = {}
        for c in changelogs:
            before = min(max((counts or {}).get(c.topic, self.app.partitions), 1), m)
            by_count.setdefault(before, []).append(c)
        reports: dict[str, dict[str, Any]] = {}
        for before, group in sorted(by_count.items()):
            reports.update(self.replacer(group, before, m))
        self.replaced.update(reports)
        failed = {
            c.topic: (reports.get(c.topic) or {}).get("check") or (reports.get(c.topic) or {}).get("error")
            for c in changelogs
            if not (reports.get(c.topic) or {}).get("ok")
        }
        if failed:
            raise StreamsResizeError(
                f"the re-placement of changelogs {sorted(failed)} did not pass its check ({failed}). The "
                "application stays stopped with its topics grown: run the re-placement again (it is "
                "idempotent) before starting it."
            )

    def seed(self, first: int | None = None) -> None:
        """Commit offset 0 for the application on the partitions from ``first`` (the plan's count: the new
        ones; 0 when continuing) of its sources and repartition topics that have no offset of it."""
        new = range(self.app.partitions if first is None else first, self.app.target)
        for topic in [*self.app.sources, *self.app.repartitions]:
            committed = dict(self.admin.committed_offsets_many([self.group], topic, self.app.target))
            gaps = {p: 0 for p in new if p not in committed.get(self.group, {})}
            if gaps:
                self.admin.seed_offsets_many(topic, {self.group: gaps})
            held = dict(self.admin.committed_offsets_many([self.group], topic, self.app.target))
            missing = [p for p in range(self.app.target) if p not in held.get(self.group, {})]
            if missing:
                raise StreamsResizeError(
                    f"group {self.group!r} has no offset on partitions {missing} of {topic!r} after the seed: "
                    "the application stays stopped. Run the seed again (the resize is safe to run again)."
                )


def spark_submit_replacer(
    kafka_config: Mapping[str, Any],
    workdir: Path,
    spark_submit: str = "spark-submit",
    spark_args: tuple[str, ...] = ("--master", "local[2]"),
    timeout: float = 1800.0,
) -> Replacer:
    """A :data:`Replacer` that runs ``spark-submit replace_changelog.py`` here (its config file mode 0600,
    removed afterwards) and returns its report (``error``: its failure)."""
    app = Path(__file__).resolve().parent.parent / "spark_apps" / "replace_changelog.py"

    def run(changelogs: list[StreamsChangelog], before: int, now: int) -> dict[str, dict[str, Any]]:
        workdir.mkdir(parents=True, exist_ok=True)
        report = workdir / f"replace-{int(time.time() * 1000)}.json"
        report.unlink(missing_ok=True)
        fd, config = tempfile.mkstemp(prefix="kstate-kafka-", suffix=".json", dir=workdir)
        with os.fdopen(fd, "w") as fh:
            json.dump(dict(kafka_config), fh)
        env = {**os.environ, "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable)}
        cmd = [spark_submit, *spark_args, str(app), "--kafka-config-file", config]
        cmd += ["--report-file", str(report), "--from-partitions", str(before), "--partitions", str(now)]
        for changelog in changelogs:
            cmd += ["--topic", changelog.topic, "--key-suffix", str(KEY_SUFFIX[changelog.store_type])]
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
        finally:
            os.unlink(config)
        out: dict[str, Any] = json.loads(report.read_text()) if report.exists() else {}
        reports: dict[str, dict[str, Any]] = dict(out.get("changelogs") or {})
        error = out.get("error") or (proc.stderr or proc.stdout)[-2000:]
        return {c.topic: reports.get(c.topic) or {"ok": False, "error": error} for c in changelogs}

    return run


def local_replacer(kafka_config: Mapping[str, Any], workers: int = 4) -> Replacer:
    """A :data:`Replacer` that runs the re-placement's tasks in threads of this process, without Spark: the
    same steps and deep check, for changelogs small enough that a Spark application's start-up would be most
    of the application's downtime."""

    def run(changelogs: list[StreamsChangelog], before: int, now: int) -> dict[str, dict[str, Any]]:
        from airflow_provider_kstate.spark_apps.replace_changelog import replace_local

        layout = {c.topic: KEY_SUFFIX[c.store_type] for c in changelogs}
        try:
            return replace_local(dict(kafka_config), layout, before, now, workers)
        except Exception as exc:  # noqa: BLE001 - reported as the failed re-placement of each changelog
            return {c.topic: {"ok": False, "error": f"{type(exc).__name__}: {exc}"} for c in changelogs}

    return run


def local_checker(kafka_config: Mapping[str, Any], workers: int = 4) -> Checker:
    """A :data:`Checker` that runs the deep check of ``replace_changelog.py`` (``--check-only``) in threads
    of this process: it reads every partition of each changelog and writes nothing."""

    def run(changelogs: list[StreamsChangelog], now: int) -> dict[str, int]:
        from airflow_provider_kstate.spark_apps import replace_changelog as rc

        argv = ["--kafka-config-file", "-", "--report-file", "-", "--from-partitions", str(now)]
        argv += ["--partitions", str(now), "--check-only"]
        for changelog in changelogs:
            argv += ["--topic", changelog.topic]
        args = rc.parse_args(argv)
        tasks = rc.local_tasks(workers)
        config = dict(kafka_config)
        return {
            c.topic: int(
                rc.replace(tasks, args, config, c.topic, KEY_SUFFIX[c.store_type])["check"]["misplaced"]
            )
            for c in changelogs
        }

    return run


#: Where the changelogs are re-placed: ``spark`` (:func:`spark_submit_replacer`) or ``local``
#: (:func:`local_replacer`).
REPLACERS = ("spark", "local")


def replacer_for(
    kind: str,
    kafka_config: Mapping[str, Any],
    workdir: Path,
    spark_submit: str = "spark-submit",
    spark_args: tuple[str, ...] = ("--master", "local[2]"),
) -> Replacer:
    """The :data:`Replacer` of ``kind`` (one of :data:`REPLACERS`): :func:`local_replacer` (threads of this
    process) or :func:`spark_submit_replacer` (``spark_submit`` with ``spark_args``, its files in
    ``workdir``)."""
    if kind == "local":
        return local_replacer(kafka_config)
    if kind == "spark":
        return spark_submit_replacer(kafka_config, workdir, spark_submit=spark_submit, spark_args=spark_args)
    raise ValueError(f"replacer {kind!r} is none of {REPLACERS}")


def resize_report(
    topic: str,
    app: StreamsAppPlan,
    result: Mapping[str, Any],
    replacer: str,
    readers: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The report of a resize (:meth:`StreamsResize.run`'s ``result``): what grew, the downtime, each
    changelog's moved keys, rate and check, the other readers' run (``others``), every reader of the sources
    with what the run did to it (``readers``), the start commands that failed."""
    timings = dict(result.get("timings") or {})
    changelogs: dict[str, dict[str, Any]] = {}
    for name, report in dict(result.get("replaced") or {}).items():
        replace = dict(report.get("replace") or {})
        check = dict(report.get("check") or {})
        changelogs[name] = {
            "ok": bool(report.get("ok")),
            "moved_keys": replace.get("moved"),
            "live_keys": replace.get("live_keys"),
            "records_read": replace.get("records_read"),
            "records_per_s": replace.get("records_per_s"),
            "seconds": replace.get("seconds"),
            "deep_check": {k: check.get(k) for k in ("ok", "live_keys", "misplaced") if k in check},
        }
    return {
        "topic": topic,
        "application_id": app.application_id,
        "protocol": app.protocol,
        "resized": bool(result.get("resized")),
        "continued": bool(result.get("continued")),
        "continued_because": list(result.get("continued_because") or []),
        "partitions": {"before": app.partitions, "after": int(result.get("partitions") or app.target)},
        "grown": list(result.get("grown") or []),
        "replacer": replacer,
        "downtime_s": timings.get("downtime_s"),
        "producer_downtime_s": timings.get("producer_downtime_s"),
        "moved_keys": sum(int(c["moved_keys"] or 0) for c in changelogs.values()),
        "changelogs": changelogs,
        "deep_check_passed": all(
            c["ok"] and (c["deep_check"].get("misplaced") or 0) == 0 for c in changelogs.values()
        ),
        "timings": timings,
        "others": dict(result.get("others") or {}),
        "start_failures": list(result.get("start_failures") or []),
        "readers": dict(readers or {}),
    }


def report_lines(report: Mapping[str, Any]) -> list[str]:
    """The log lines of a :func:`resize_report`."""
    if not report["resized"]:
        return [
            f"{report['application_id']} not resized: its sources are at {report['partitions']['after']} "
            "partitions and no interrupted resize was found (nothing changed)"
        ]
    done = (
        f"continued the interrupted resize to {report['partitions']['after']} "
        f"({'; '.join(report['continued_because'])})"
        if report["continued"]
        else f"resized {report['partitions']['before']} -> {report['partitions']['after']}"
    )
    lines = [
        f"{report['application_id']} {done}: downtime {report['downtime_s']} s, {report['moved_keys']} keys "
        f"moved, deep check {'passed' if report['deep_check_passed'] else 'FAILED'}"
    ]
    for name, c in report["changelogs"].items():
        lines.append(
            f"changelog {name}: {c['moved_keys']} of {c['live_keys']} live keys moved, {c['records_per_s']} "
            f"records/s ({report['replacer']}), deep check {c['deep_check']}"
        )
    lines.append(f"steps (s): {report['timings']}")
    return lines
