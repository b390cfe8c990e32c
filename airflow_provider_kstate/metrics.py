"""The provider's metrics, sent through Airflow's own metrics path.

Every metric goes to Airflow's ``Stats`` (:func:`~airflow_provider_kstate.compat.airflow_stats`), so
it reaches whatever the deployment's ``[metrics]`` section configures: StatsD (``statsd_on``), DogStatsD
(``statsd_datadog_enabled``) or OpenTelemetry (``otel_on``), with ``statsd_prefix`` / ``otel_prefix``,
``metrics_allow_list`` / ``metrics_block_list`` and ``stat_name_handler`` applied by Airflow; nothing is
sent when none is on. Names follow Airflow's conventions: dotted, lowercase, one static name per metric with
the ids as tags (DogStatsD tags, OpenTelemetry attributes, InfluxDB-style tags with
``statsd_influxdb_enabled``), and, while ``[metrics] legacy_names_on`` is true (Airflow's default; Airflow
3.1 has no such option and always sends both), the same value once more under a name that carries the ids,
as Airflow's own ``ti.finish.<dag_id>.<task_id>.<state>`` does, for plain StatsD, which drops tags:
``kstate.increase.group_downtime.<topic>.<group>``. In those names a ``.`` of an id becomes ``__`` (Airflow's
rule) and any character StatsD does not allow becomes ``_``; a name longer than :data:`MAX_NAME` is not
sent (the tagged one is).

Tags are topic, group and check kind only: never a snapshot URI (it may carry credentials and is not
bounded), never a run id or a partition number.

Metrics are for watching: an emitter that fails is logged, never raised (:meth:`Metrics.emit`).
:data:`METRICS` lists them; the README's table is checked against it by a unit test.
"""

from __future__ import annotations

import datetime
import functools
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol

from airflow_provider_kstate.increase import events
from airflow_provider_kstate.increase.events import GroupState, ProducerState

if TYPE_CHECKING:
    from airflow_provider_kstate.increase.events import ProgressFile
    from airflow_provider_kstate.increase.plan import Plan

log = logging.getLogger(__name__)

COUNTER, GAUGE, TIMER = "counter", "gauge", "timer"
#: The longest name carrying ids that is sent (Airflow refuses names over 250 characters, OpenTelemetry's
#: limit is 255 with the prefix).
MAX_NAME = 200


@dataclass(frozen=True)
class Metric:
    """One metric: its name, type, unit, tags (in the order they go into the name with ids) and when it is
    emitted."""

    name: str
    kind: str
    unit: str
    tags: tuple[str, ...]
    when: str


GROUP_DOWNTIME = Metric(
    "kstate.increase.group_downtime",
    TIMER,
    "ms",
    ("topic", "group"),
    "a group that had live members at plan time works again after the run asked it back, once per group "
    "and run: the time from its leave (pause record, or stop command) to every partition held again and a "
    "record processed, as the broker showed it (as in `progress.json`; the processing moment is its first "
    "commit, at most its commit interval late; not seen within 15 s: to the last moment seen)",
)
PARTITIONS_CREATED = Metric(
    "kstate.increase.partitions_created",
    COUNTER,
    "partitions",
    ("topic",),
    "the increase created the partitions (target - original); not on a retry that found them, nor a repair",
)
PARTITIONS_SEEDED = Metric(
    "kstate.increase.partitions_seeded",
    COUNTER,
    "offsets (group x partition)",
    ("topic",),
    "after a seed step or window: the offsets it committed at the log start (the seed summary's `seeded`)",
)
BARRIER_HOLD = Metric(
    "kstate.increase.barrier_hold",
    TIMER,
    "ms",
    ("topic",),
    "producers switched through the key-order barrier: from their hold to the switch (the switch's "
    "`hold_to_switch_s`)",
)
DRAIN_HOLD = Metric(
    "kstate.increase.drain_hold",
    TIMER,
    "ms",
    ("topic",),
    "after a drain, `start_producers` started the producers: how long they were stopped "
    "(`producer_downtime_s`)",
)
VERIFY_OK = Metric(
    "kstate.increase.verify.ok",
    COUNTER,
    "runs",
    ("topic",),
    "`verify` found no partition on which a protected group would skip a message",
)
VERIFY_FAILED = Metric(
    "kstate.increase.verify.failed",
    COUNTER,
    "runs",
    ("topic",),
    "`verify` found partitions that would skip messages (the task then fails)",
)
CHECK_OK = Metric(
    "kstate.store.check.ok",
    COUNTER,
    "checks",
    ("topic", "check"),
    "a fast or deep check (`check` = `fast` / `deep`, re-checks included) found the store good",
)
CHECK_FAILED = Metric(
    "kstate.store.check.failed",
    COUNTER,
    "checks",
    ("topic", "check"),
    "a fast or deep check found the store bad (a missing snapshot too)",
)
DAMAGED_PARTITIONS = Metric(
    "kstate.store.damaged_partitions",
    GAUGE,
    "partitions",
    ("topic", "check"),
    "every fast or deep check: the partitions it found bad (0 when good)",
)
REBUILD_ROWS = Metric(
    "kstate.store.rebuild.rows",
    GAUGE,
    "rows",
    ("topic",),
    "a rebuild committed a new version: its rows (every partition, kept ones included)",
)
REBUILD_DURATION = Metric(
    "kstate.store.rebuild.duration",
    TIMER,
    "ms",
    ("topic",),
    "a rebuild committed a new version: the wall time of its Spark application (JVM start-up included)",
)

#: Every metric the provider emits, in the README's order.
METRICS = (
    GROUP_DOWNTIME,
    PARTITIONS_CREATED,
    PARTITIONS_SEEDED,
    BARRIER_HOLD,
    DRAIN_HOLD,
    VERIFY_OK,
    VERIFY_FAILED,
    CHECK_OK,
    CHECK_FAILED,
    DAMAGED_PARTITIONS,
    REBUILD_ROWS,
    REBUILD_DURATION,
)


class Emitter(Protocol):
    """What the metrics are sent through: Airflow's ``Stats`` (any of its backends) has these methods."""

    def incr(self, stat: str, count: int = ..., rate: float = ..., *, tags: Any = ...) -> Any: ...

    def gauge(
        self, stat: str, value: float, rate: float = ..., delta: bool = ..., *, tags: Any = ...
    ) -> Any: ...

    def timing(self, stat: str, dt: Any, *, tags: Any = ...) -> Any: ...


_NOT_IN_NAME = re.compile(r"[^a-zA-Z0-9_-]")
_NOT_IN_TAG = re.compile(r"[|,#\s]")


def name_part(value: str) -> str:
    """Return an id as a component of a StatsD name: ``.`` -> ``__`` (as Airflow does with task ids), any
    other character StatsD does not allow -> ``_``."""
    return _NOT_IN_NAME.sub("_", value.replace(".", "__"))


def id_name(metric: Metric, tags: dict[str, str]) -> str | None:
    """Return the name carrying ``metric``'s ids (``kstate.store.check.failed.<topic>.<check>``), or None
    when an id is missing or the name would be longer than :data:`MAX_NAME`."""
    if not all(tags.get(key) for key in metric.tags):
        return None
    name = ".".join([metric.name, *(name_part(tags[key]) for key in metric.tags)])
    return name if len(name) <= MAX_NAME else None


def legacy_names_on() -> bool:
    """Whether Airflow sends names carrying ids too (``[metrics] legacy_names_on``; 3.1: always)."""
    from airflow_provider_kstate.compat import conf

    return bool(conf.getboolean("metrics", "legacy_names_on", fallback=True))


P = ParamSpec("P")


def never_raises(fn: Callable[P, None]) -> Callable[P, None]:
    """Log what ``fn`` raises instead of raising it: metrics never fail the task that sends them."""

    @functools.wraps(fn)
    def quiet(*args: P.args, **kwargs: P.kwargs) -> None:
        try:
            fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - metrics are for watching: they never fail the task
            log.warning("METRICS %s not sent (%s: %s)", fn.__name__, type(exc).__name__, exc)

    return quiet


def _default_emitter() -> Emitter:
    from airflow_provider_kstate.compat import airflow_stats

    emitter: Emitter = airflow_stats()
    return emitter


class Metrics:
    """Sends the provider's metrics; never raises.

    :param emitter: where to send them (default: Airflow's ``Stats``, looked up at each emit, so a worker
        that initialises ``Stats`` after this object exists is followed).
    :param id_names: also send the names carrying ids (default: ``[metrics] legacy_names_on``).
    """

    def __init__(self, emitter: Emitter | None = None, id_names: bool | None = None) -> None:
        self._emitter = emitter
        self._id_names = id_names

    def emit(self, metric: Metric, value: float, **tags: str) -> None:
        """Send ``value`` (seconds for a timer) of ``metric`` with ``tags``; an error is logged, not raised."""
        try:
            self._send(metric, value, {k: _NOT_IN_TAG.sub("_", str(v)) for k, v in tags.items()})
        except Exception as exc:  # noqa: BLE001 - metrics are for watching: they never fail the task
            log.warning("METRICS %s not sent (%s: %s)", metric.name, type(exc).__name__, exc)

    def _send(self, metric: Metric, value: float, tags: dict[str, str]) -> None:
        emitter = self._emitter or _default_emitter()
        names: list[tuple[str, dict[str, str] | None]] = [(metric.name, tags)]
        with_ids = self._id_names if self._id_names is not None else legacy_names_on()
        named = id_name(metric, tags) if with_ids else None
        if named is not None:  # as Airflow's legacy names: the ids are in the name, not also in tags
            names.append((named, None))
        for name, tagged in names:
            if metric.kind == COUNTER:
                emitter.incr(name, int(value), tags=tagged)
            elif metric.kind == GAUGE:
                emitter.gauge(name, value, tags=tagged)
            else:
                emitter.timing(name, datetime.timedelta(seconds=value), tags=tagged)

    # -- the increase --------------------------------------------------------------------------------

    @never_raises
    def group_downtime(self, topic: str, group: str, seconds: float) -> None:
        self.emit(GROUP_DOWNTIME, seconds, topic=topic, group=group)

    @never_raises
    def created(self, plan: Plan, result: dict[str, Any]) -> None:
        """After the create (a step's or the window's result): the partitions it created, if it did."""
        if result.get("created"):
            self.emit(PARTITIONS_CREATED, plan.target_partitions - plan.original_partitions, topic=plan.topic)

    @never_raises
    def seeded(self, topic: str, summary: dict[str, Any]) -> None:
        """After a seed: the offsets it committed (the summary's ``seeded``)."""
        self.emit(PARTITIONS_SEEDED, int(summary.get("seeded") or 0), topic=topic)

    @never_raises
    def switched(self, topic: str, switch: dict[str, Any] | None) -> None:
        """After the producers' switch: the barrier's hold, when they went through one."""
        held = (switch or {}).get("hold_to_switch_s")
        if held is not None:
            self.emit(BARRIER_HOLD, float(held), topic=topic)

    @never_raises
    def window(self, plan: Plan, summary: dict[str, Any]) -> None:
        """After the pause window: partitions created and seeded, the barrier's hold."""
        self.created(plan, summary)
        self.seeded(plan.topic, summary)
        self.switched(plan.topic, summary.get("switch"))

    @never_raises
    def drained(self, topic: str, started: dict[str, Any]) -> None:
        """After ``start_producers``: how long the drain kept the producers stopped."""
        stopped = started.get("producer_downtime_s")
        if stopped is not None:
            self.emit(DRAIN_HOLD, float(stopped), topic=topic)

    @never_raises
    def verified(self, topic: str, ok: bool) -> None:
        self.emit(VERIFY_OK if ok else VERIFY_FAILED, 1, topic=topic)

    # -- the state store -----------------------------------------------------------------------------

    @never_raises
    def checked(self, topic: str, check: str, ok: bool, damaged: Iterable[int]) -> None:
        """A fast or deep check's verdict and the partitions it found bad."""
        self.emit(CHECK_OK if ok else CHECK_FAILED, 1, topic=topic, check=check)
        self.emit(DAMAGED_PARTITIONS, len(list(damaged)), topic=topic, check=check)

    @never_raises
    def rebuilt(self, topic: str, report: dict[str, Any], seconds: float) -> None:
        """A committed rebuild: the new version's rows and the Spark application's wall time."""
        self.emit(REBUILD_ROWS, int(report.get("rows") or 0), topic=topic)
        self.emit(REBUILD_DURATION, seconds, topic=topic)


#: The provider's metrics, through Airflow's ``Stats``.
METRICS_OUT = Metrics()


class RunMetrics:
    """A :class:`~airflow_provider_kstate.increase.events.RunEvents` sink: each live group's downtime as its
    service saw it (from the leave to every partition held again and a record processed:
    :mod:`~airflow_provider_kstate.increase.served`), read from the run's progress document once the run
    watched it, so a per-step run (pause and resume in two tasks) is measured as the window is, and the
    number equals the one ``progress.json`` shows.

    Put it after the :class:`ProgressFile` in :class:`Events` (which then has set the group's times). Only
    groups with live members at plan time count (``wait``): an offline group has no consumer to be down; a
    group is sent once per run (a later task, or the guard resuming again, sends nothing).

    :param progress: the run's progress file (this task's).
    :param plan: the run's plan.
    :param out: where the metrics go.
    """

    def __init__(self, progress: ProgressFile, plan: Plan, out: Metrics | None = None) -> None:
        self.file = progress
        self.live = set(plan.where("wait"))
        self.out = out or METRICS_OUT
        self.sent = {
            g for g, entry in progress.progress.groups.items() if entry.held_at or entry.processing_at
        }

    def step(self, name: str) -> None:
        pass

    def groups(self, groups: Iterable[str], state: GroupState) -> None:
        pass

    def served(self, served: Mapping[str, Any]) -> None:
        doc = self.file.progress
        for group in served:
            entry = doc.groups.get(group)
            if group not in self.live or group in self.sent or entry is None:
                continue
            seconds = entry.downtime_s(events.now_ms())
            if seconds is not None:
                self.sent.add(group)
                self.out.group_downtime(doc.topic, group, seconds)

    def producers(self, state: ProducerState) -> None:
        pass

    def finish(self, outcome: str) -> None:
        pass


def metric_rows(metrics: Iterable[Metric] = METRICS) -> list[str]:
    """Return the README table's rows (``| name | type | unit | tags | when emitted |``)."""
    return [f"| `{m.name}` | {m.kind} | {m.unit} | {', '.join(m.tags)} | {m.when} |" for m in metrics]
