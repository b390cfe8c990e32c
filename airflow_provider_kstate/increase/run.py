"""The run of a safe increase over its topics: one topic is a set of one.

An :class:`IncreaseRun` runs the steps of a plan (the pause window's, or one task per step) over every topic
the plan grows:

* the groups at risk leave once, each by its driver (command-driven groups are stopped first and waited
  for), are waited for once, and rejoin once, each only when it holds an offset on every partition of every
  topic it reads;
* each topic (:class:`~airflow_provider_kstate.increase.steps.TopicSteps`) has its producers pinned and
  switched, its partitions created and the groups that read it seeded;
* for a drain, each topic a drained group reads has its ControlledProducers held and started on its own,
  the producer services stopped and started once.

Each step returns a small JSON-safe summary for XCom, with what concerns one topic under ``topics``
(``{topic: ...}``), for one topic as for several: the readers of the summaries (the drain's sensor, the
start of the producers, verify, lineage) read that one shape.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from airflow_provider_kstate.errors import KStateError, PositionsTimeoutError, TopicChangedError
from airflow_provider_kstate.increase.checks import empty_of, groups_drained
from airflow_provider_kstate.increase.drivers import CommandPairs, CommandResult
from airflow_provider_kstate.increase.events import GroupState, ProducerState
from airflow_provider_kstate.increase.fleet import commanded_live, commands_of, producer_commands
from airflow_provider_kstate.increase.ghosts import GhostRemoval, committing
from airflow_provider_kstate.increase.key_order import ORDER_DRAINED, drain_of
from airflow_provider_kstate.increase.plan import GroupClass, Plan, PlanMode
from airflow_provider_kstate.increase.safety import describe_missing
from airflow_provider_kstate.increase.steps import (
    FAST_POLL,
    RunPorts,
    SeedResult,
    TopicSteps,
    names,
    not_empty_error,
    together,
)

if TYPE_CHECKING:
    from airflow_provider_kstate.increase.model import GroupInfo
    from airflow_provider_kstate.increase.report import ReportWriter

T = TypeVar("T")

#: The longest pause between two looks of the wait for EMPTY (:meth:`IncreaseRun.wait_empty`). A wait past
#: its first 2 s is a broker fault's (the consumers out until the cluster's failover), and the group turns
#: EMPTY at its end: with a look every second the run saw it up to a second late (a broker killed right
#: after the pause, 3 Apache Kafka 4.4 nodes); one request to the coordinator every 0.2 s costs it nothing.
EMPTY_POLL_MAX = 0.2
#: Seconds the resume waits for clients that left their group to land their commit (a consumer gives its
#: own up after its request timeout, 30 s by default, and acknowledges ``paused`` all the same).
COMMITS_WITHIN = 10.0


@dataclass
class IncreaseRun(RunPorts):
    """The steps of a plan over its topics, with the hooks and the logger of the task that runs them (the
    fields they share with each topic's steps: :class:`~airflow_provider_kstate.increase.steps.RunPorts`)."""

    #: Seconds to wait for the paused (or stopped) groups to become EMPTY.
    empty_timeout: float = 600.0
    #: Runs the command pairs of the plan's drivers.
    pairs: CommandPairs | None = None
    #: Seconds the resume waits for clients that left their group to land their commit (:meth:`wait_commits`).
    commits_within: float = COMMITS_WITHIN
    #: What this run stopped (for :meth:`undo_before_create`): command-driven groups and producer services.
    stopped_groups: list[str] = field(default_factory=list)
    producers_stopped: dict[str, Any] | None = None
    #: Start or readiness commands that failed (logged; the broker's view of the group decides what follows).
    start_failures: list[CommandResult] = field(default_factory=list)
    #: ``time.monotonic()`` when the control pause was sent: the live groups' downtime starts there.
    paused_at: float | None = None
    #: The pause record's epoch (its acknowledgements tell which clients left: :meth:`_remove_ghosts`).
    pause_epoch: int | None = None
    #: Members the run removed from their groups as ghosts (their clients acknowledged the pause).
    ghosts_removed: list[str] = field(default_factory=list)
    #: Seconds the command-driven groups took to stop and become EMPTY (None: none was stopped).
    stop_s: float | None = None
    #: ``time.monotonic()`` when the resume record was sent (the control groups' downtime ends about there),
    #: and the seconds the command-driven groups' start and readiness commands took after it.
    resumed_at: float | None = None
    start_s: float | None = None
    #: The steps of each topic, in the plan's order (built from the plan).
    topics: list[TopicSteps] = field(default_factory=list)
    #: Seconds to wait for the groups that stay to hold a committed offset on every partition; those still
    #: without one then are paused and seeded alone (:meth:`wait_positions`).
    positions_timeout: float = 330.0
    #: What :meth:`wait_positions` found (empty until it ran, or without groups that stay).
    stayed: dict[str, Any] = field(default_factory=dict)
    #: Seconds a step that failed with a retryable error (a broker down, a coordinator moving) is tried
    #: again inside the task (:meth:`again`) before the task fails and Airflow's retry, after its delay,
    #: takes over; 0: never.
    retry_within: float = 30.0
    #: The steps tried again inside the task: ``(step, error, seconds after its first attempt)``.
    retried: list[tuple[str, str, float]] = field(default_factory=list)
    #: With groups that stay: ``time.monotonic()`` when the producer services (command pairs, which the
    #: layout does not pin) were stopped before the create; None: not stopped (:meth:`start_services`).
    services_stopped_at: float | None = None

    def __post_init__(self) -> None:
        if self.pairs is None:
            self.pairs = CommandPairs(self.plan.topic, self.log)
        if not self.topics:
            self.topics = [TopicSteps(view, **self.ports()) for view in self.plan.views()]

    @property
    def commands(self) -> CommandPairs:
        assert self.pairs is not None  # set in __post_init__
        return self.pairs

    @property
    def drains(self) -> bool:
        """Whether some group is drained: producers stop before the create and start once it drained."""
        return bool(self.plan.marked(ORDER_DRAINED))

    def of(self, steps: TopicSteps, groups: Iterable[str]) -> list[str]:
        """The groups of ``groups`` that read the topic of ``steps``, in the given order."""
        return [g for g in groups if g in steps.plan.groups]

    # -- a step tried again inside the task -------------------------------------------------------------

    def again(self, step: str, call: Callable[[], T]) -> T:
        """Run ``call`` (an idempotent step); while it fails with a retryable error and ``retry_within``
        seconds have not passed since its first failure, try it again after a short wait (0.2 s, doubling up
        to 2 s). The consumers out of their groups wait a fault's time, not Airflow's retry delay (20 s)
        after a failed task, which also resumes them before the create and pauses them again. Counted from
        the first failure, not the first attempt: an attempt that itself waited a request's whole timeout (a
        coordinator killed with the request in flight) still gets its tries, when the cluster's own failover
        has had that long to move the role.

        :raises KStateError: a non-retryable error at once; a retryable one once the time is up.
        """
        started = time.monotonic()
        failed_at: float | None = None
        pause = 0.2
        while True:
            try:
                return call()
            except KStateError as exc:
                now = time.monotonic()
                failed_at = now if failed_at is None else failed_at
                if not exc.retryable or now - failed_at + pause > self.retry_within:
                    raise
                spent = now - started
                self.retried.append((step, type(exc).__name__, round(spent, 3)))
                self.log.warning(
                    "RETRY %s in this task after %.3f s (%s: %s); up to %.0f s here before the task fails",
                    step,
                    spent,
                    type(exc).__name__,
                    exc,
                    self.retry_within,
                )
                time.sleep(pause)
                pause = min(2.0, pause * 2)

    # -- the groups leave --------------------------------------------------------------------------------

    def pause(self) -> dict[str, Any]:
        """Take every group at risk out of its group once, each by its driver, then pin each topic's
        producers to its current partition count (for a drain: hold them first).

        Command-driven groups with live members are stopped first and waited for (up to
        ``empty_timeout``); only then are the others asked to leave, so no group is out of its group while
        another's stop is slow or fails. A failure here changes nothing and resumes what was stopped
        (:meth:`undo_before_create`). Each create is validated by the broker first (:meth:`TopicSteps.validate`:
        nothing changes), every topic at once, before anyone leaves: a create the broker would refuse fails
        with every consumer in its group, and the validation is no round trip of their time out.
        """
        groups = self.plan.where("pause")
        if self.plan.mode == PlanMode.INCREASE:
            together(*(steps.validate for steps in self.topics))
        epoch = self.leave(groups)
        for steps in self.topics:
            steps.pin()
        out: dict[str, Any] = {
            "epoch": epoch,
            "groups": len(groups),
            "topics": {s.topic: {"pinned_to": s.plan.original_partitions} for s in self.topics},
            "stopped_groups": self.stopped_groups,
        }
        if self.producers_stopped is not None:
            out["producers_stopped"] = self.producers_stopped
        return out

    def leave(self, groups: list[str]) -> int:
        """Stop the command-driven groups (and, for a drain, the producers first), then send the others the
        pause record, once for the run; return its epoch."""
        self.lease_check()
        self.events.step("pause")
        # with groups that stay, the ControlledProducers go on writing to the old partitions (the pin) until
        # the groups hold their positions; a drain stops them only then (:meth:`scale`). Producer services
        # the layout cannot pin stop before the create.
        if self.drains and self.producers_stopped is None and not self.plan.staying():
            self.stop_producers()
        if self.plan.staying():
            self.stop_services()
        self._stop_command_groups(groups)
        if groups:
            self.control.follow()  # while the consumers still run: their downtime starts below
        self.paused_at = time.monotonic()
        epoch = self.pause_epoch = self.control.pause(groups, self.plan.topic, issuer=self.owner)
        self.events.groups(
            [g for g in self.plan.where("wait") if g not in self.stopped_groups], GroupState.STOPPING
        )
        self.log.info("PAUSE groups %s: pause command sent (epoch %s)", names(groups), epoch)
        return epoch

    def _stop_command_groups(self, groups: list[str]) -> None:
        """Stop the command-driven groups with live members, then wait until the broker reports them EMPTY."""
        live = commanded_live(self.plan, groups)
        if not live:
            return
        started = time.monotonic()
        self.stopped_groups = list(dict.fromkeys([*self.stopped_groups, *live]))
        self.events.groups(live, GroupState.STOPPING)
        self.commands.stop(commands_of(self.plan, live), "group")
        self.wait_empty(self.empty_timeout, groups=live)
        self.stop_s = round(time.monotonic() - started, 3)
        self.log.info(
            "PAUSE groups %s: stopped by their commands and EMPTY after %.3f s", names(live), self.stop_s
        )

    def wait_empty(
        self, timeout: float, max_interval: float = EMPTY_POLL_MAX, groups: list[str] | None = None
    ) -> dict[str, Any]:
        """Block until every seeded group is EMPTY: polls every 5 ms for the first 2 s (paused consumers
        leave within milliseconds of each other, and every millisecond of this wait is consumer downtime),
        then backs off to ``max_interval``. On timeout: :class:`GroupNeverLeftError`, naming the members
        still present.

        Each look describes only the groups not seen EMPTY yet (the offline ones are EMPTY at the first; a
        smaller answer comes back sooner over a network). A group seen EMPTY is not asked again here: the
        seed checks every group it writes to again right before its commits, and the broker accepts them only
        from an EMPTY group."""
        groups = self.plan.seeded_by_run() if groups is None else groups
        started = time.monotonic()
        deadline = started + timeout
        interval = FAST_POLL
        pending = list(groups)
        while True:
            described = self.admin.describe_groups(pending, self.plan.topic)
            result = empty_of(described)
            pending = [g for g in pending if g in result.detail]
            if result.ok:
                waited = set(self.plan.where("wait"))
                self.events.groups([g for g in groups if g in waited], GroupState.PAUSED)
                self.log.info("WAIT groups %s are EMPTY", names(groups))
                return {"groups": len(groups)}
            if time.monotonic() > deadline:
                raise not_empty_error(self.plan, result.detail, timeout)
            self._remove_ghosts(described)
            time.sleep(interval)
            if time.monotonic() - started > 2.0:
                interval = min(max_interval, interval * 2)

    def _remove_ghosts(self, described: Mapping[str, GroupInfo]) -> None:
        """Remove the ghosts of the groups ``described`` (:mod:`~airflow_provider_kstate.increase.ghosts`: the
        members the coordinator still lists although every one of their clients acknowledged this run's
        pause); never raises."""
        ghosts = GhostRemoval(self.admin, self.control, self.pause_epoch, self.log, self.ghosts_removed)
        ghosts.remove(described)

    # -- producers, for a drain --------------------------------------------------------------------------

    def stop_producers(self) -> dict[str, Any]:
        """For a drain, before the create: hold the ControlledProducers of every topic a drained group reads
        (the other topics switch through their barrier as usual), then stop the command-driven producer
        services once; :meth:`start_producers` starts them once the drained groups consumed the rest."""
        self.lease_check()
        held = {s.topic: s.hold_for_drain() for s in self.topics if s.drains}
        services = producer_commands(self.plan)
        self.producers_stopped = {"topics": held, "services": sorted(services)}
        self.commands.stop(services, "producer")
        self.events.producers(ProducerState.STOPPED)
        return self.producers_stopped

    def start_producers(self, drains: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """After a drain: each drained topic's ControlledProducers switch to the target layout, then the
        command-driven producer services start once; per topic, the producers' downtime against the drained
        groups' backlog at the switch.

        :param drains: ``{topic: drain}`` (:func:`drains_by_topic`).
        :raises UnsafeResumeError: a protected group lacks an offset on a partition; nothing was started.
        """
        self.require_offsets(self.plan.where("seed"))
        self.events.step("start_producers")
        out = {s.topic: s.release_after_drain(drains[s.topic]) for s in self.topics if s.topic in drains}
        failed = self.commands.start(producer_commands(self.plan), "producer")
        self.start_failures += failed
        self.events.producers(ProducerState.SWITCHED)
        return {
            "topics": out,
            "services": sorted(producer_commands(self.plan)),
            "start_failures": [r.describe() for r in failed],
        }

    # -- the create ----------------------------------------------------------------------------------------

    def increase(self, timeout: float) -> dict[str, Any]:
        """Create the partitions of every topic, one after the other (a no-op on a topic at its target).
        Before the first create every topic must still have its planned count (or the target): each count
        is read once, every topic at once, and each topic's create goes on from the count read here."""
        counts = together(*(steps.partition_count for steps in self.topics))
        for steps, current in zip(self.topics, counts, strict=True):
            plan = steps.plan
            if current not in (plan.original_partitions, plan.target_partitions):
                raise TopicChangedError(
                    f"topic {steps.topic!r} has {current} partitions; the plan of {self.plan.topic_names} "
                    f"expected {plan.original_partitions} (or {plan.target_partitions}). Someone else changed it: "
                    "nothing was created here. Run again: the new run repairs every gap."
                )
        each = {
            steps.topic: steps.increase(timeout, current)
            for steps, current in zip(self.topics, counts, strict=True)
        }
        for steps in self.topics:
            steps.announce_grow()
        return {
            "created": any(r["created"] for r in each.values()),
            "partitions": self.plan.target_partitions,
            "topics": each,
        }

    @property
    def create_unknown(self) -> bool:
        """Whether a create got no answer (it may be applied later): nobody may be resumed on the old count."""
        return any(s.create_unknown for s in self.topics)

    def created_nothing(self) -> bool:
        """Whether every topic the plan grows still has its count at plan time (the run created nothing)."""
        return all(
            s.partition_count() == s.plan.original_partitions
            for s in self.topics
            if s.plan.target_partitions > s.plan.original_partitions
        )

    def undo_before_create(self) -> None:
        """After a failure before any create: every paused group resumes at once (the control record, and
        the start commands of the groups this run stopped), each topic's producers go on on its layout (a
        drain's hold released), the producer services a drain stopped start once."""
        groups = self.plan.where("pause")
        epoch = self.control.resume(groups, self.plan.topic, issuer=self.owner)
        self.log.warning("UNDO resumed groups %s (epoch %s): nothing was created", names(groups), epoch)
        self.start_failures += self.commands.start(commands_of(self.plan, self.stopped_groups), "group")
        self.events.groups(groups, GroupState.RESUMED)
        for steps in self.topics:
            steps.undo_layout()
        if self.producers_stopped is not None or self.services_stopped_at is not None:
            self.start_failures += self.commands.start(producer_commands(self.plan), "producer")

    # -- seed, rejoin, switch ------------------------------------------------------------------------------

    def seed(
        self, groups: list[str] | None = None, reports: dict[str, ReportWriter] | None = None
    ) -> dict[str, SeedResult]:
        """Seed ``groups`` (default: every group the plan seeds) on every topic each reads; per topic, what
        was seeded and kept (a report per topic in ``reports``)."""
        groups = self.plan.seeded_by_run() if groups is None else groups
        reports = reports or {}
        return {s.topic: s.seed(self.of(s, groups), reports.get(s.topic)) for s in self.topics}

    def require_offsets(self, groups: Iterable[str]) -> None:
        """Go on only while every seeded group of ``groups`` holds an offset on every partition of every
        topic it reads, and the run still holds its leases.

        :raises UnsafeResumeError: a group lacks an offset (the runbook of the partial increase).
        """
        wanted = list(groups)
        for steps in self.topics:
            steps.require_offsets(self.of(steps, wanted))

    def wait_commits(self, groups: list[str]) -> None:
        """Wait until no client of ``groups`` is still committing after leaving (acknowledged this run's
        pause ``left``, not ``paused`` yet), up to :attr:`commits_within` seconds. Its commit lands once the
        group is EMPTY, as it is now; resumed first, another member could rejoin before it, and the broker
        would refuse it (the records since its last commit delivered again: never lost). On time out the
        clients are named and the groups resumed all the same."""
        if self.pause_epoch is None:
            return
        deadline = time.monotonic() + self.commits_within
        left = self._committing(self.pause_epoch, groups)
        while left and time.monotonic() <= deadline:
            time.sleep(FAST_POLL)
            left = self._committing(self.pause_epoch, list(left))
        if left:
            self.log.warning(
                "RESUME groups %s: clients %s still commit after leaving after %.0f s; resuming "
                "(records since their last commit are delivered again)",
                names(list(left)),
                left,
                self.commits_within,
            )

    def _committing(self, epoch: int, groups: list[str]) -> dict[str, list[str]]:
        """``{group: clients still committing after leaving}``, from one read of the control topic; ``{}``
        when it cannot be read (never fails the resume: each consumer tries its commit once more first)."""
        try:
            read = [self.control.acks(epoch, g, refresh=i == 0) for i, g in enumerate(groups)]
        except Exception as exc:  # noqa: BLE001 - the resume goes on; the consumers commit before they rejoin
            self.log.info("RESUME acknowledgements not read (%s: %s): resuming", type(exc).__name__, exc)
            return {}
        return {g: c for g, acks in zip(groups, read, strict=True) if (c := committing(acks))}

    def resume(self, groups: list[str] | None = None) -> dict[str, Any]:
        """Resume ``groups`` (default: every group the plan pauses) once, when each holds an offset on every
        partition of every topic it reads. Groups this run seeded are known to (the broker acknowledged
        every offset); the others are read from the cluster, concurrently."""
        groups = self.plan.where("pause") if groups is None else groups
        if not groups:
            return {"epoch": None, "groups": 0}
        self.require_offsets(groups)
        self.wait_commits(groups)
        self.events.step("resume")
        epoch = self.control.resume(groups, self.plan.topic, issuer=self.owner)
        self.log.info(
            "RESUME groups %s: each has a committed offset on every partition; resume sent (epoch %s)",
            names(groups),
            epoch,
        )
        self.resumed_at = time.monotonic()
        started = commanded_live(self.plan, groups)
        self.events.groups([g for g in groups if g not in started], GroupState.RESUMED)
        failed = self.commands.start(commands_of(self.plan, started), "group")
        self.events.groups(started, GroupState.RESUMED)
        self.start_failures += failed
        if started:
            self.start_s = round(time.monotonic() - self.resumed_at, 3)
        return {
            "epoch": epoch,
            "groups": len(groups),
            "started_groups": started,
            "start_failures": [r.describe() for r in failed],
        }

    def scale(self, live: list[str] | None = None, baseline: bool = False) -> dict[str, Any]:
        """Each topic's producers switch to the target layout (through its key-order barrier, once its new
        partitions' leaders serve them: :meth:`TopicSteps.scale`); ``{"topics": {topic: {"switch": ...}}}``,
        with ``stayed`` (:meth:`wait_positions`) when groups stayed in their groups.

        :param live: the protected groups with live members now (default: none, as in the per-step layout).
        :param baseline: also return each topic's new partitions' end offsets now.
        """
        self.wait_positions()
        if self.drains and self.producers_stopped is None:  # groups stayed: the drain's stop comes now
            self.stop_producers()
        self.events.step("switch")
        live = list(dict.fromkeys([*(live or []), *self.plan.staying()]))
        out: dict[str, Any] = {
            "topics": {s.topic: {"switch": s.scale(self.of(s, live), baseline=baseline)} for s in self.topics}
        }
        if self.stayed:
            out["stayed"] = {**self.stayed, **self.start_services()}
        return out

    def stop_services(self) -> None:
        """With groups that stay, before the create: stop the producer services the run stops by commands
        (the layout pins only ControlledProducers; a service writing to a new partition before a staying
        group has a position there would lose records), once."""
        services = producer_commands(self.plan)
        if not services or self.services_stopped_at is not None:
            return
        self.services_stopped_at = time.monotonic()  # before: a failed stop starts them all again (undo)
        self.commands.stop(services, "producer")
        self.log.info("STAY producer services %s stopped until the switch", names(sorted(services)))

    def start_services(self) -> dict[str, Any]:
        """After the switch (without a drain; a drain starts them after it, :meth:`start_producers`): start
        the producer services :meth:`stop_services` stopped (in this task, or in the pause step of the
        layout of one task per step); their downtime when this task stopped them."""
        services = producer_commands(self.plan)
        if not services or not self.plan.staying() or self.drains:
            return {}
        self.start_failures += self.commands.start(services, "producer")
        down = (
            None
            if self.services_stopped_at is None
            else round(time.monotonic() - self.services_stopped_at, 3)
        )
        self.services_stopped_at = None
        self.log.info("STAY producer services %s started (stopped %s s)", names(sorted(services)), down)
        return {"services_stopped_s": down}

    # -- groups that stay in their groups ----------------------------------------------------------------

    def wait_positions(self) -> dict[str, Any]:
        """Wait (up to ``positions_timeout``) until every group that stays holds a committed offset on every
        partition of every topic it reads: the evidence that it has a position on the new partitions while
        nothing is written there yet (:mod:`~airflow_provider_kstate.increase.stay`). A group still without
        one then, or as soon as a record appears on a new partition (a producer the run does not hold), is
        paused and seeded alone; the others never leave their groups. Runs once per run.

        :raises PositionsTimeoutError: a group without evidence that the run cannot pause (no driver).
        """
        staying = self.plan.staying()
        if not staying or self.stayed:
            return self.stayed
        self.events.step("positions")
        self.events.groups(staying, GroupState.STAYING)
        started = time.monotonic()
        missing, stray = self._positions_missing(staying)
        interval = 0.05
        while missing and not stray and time.monotonic() - started < self.positions_timeout:
            time.sleep(interval)
            interval = min(0.5, interval * 1.5)
            missing, stray = self._positions_missing(staying)
        waited = round(time.monotonic() - started, 3)
        lacking = sorted({g for gaps in missing.values() for g in gaps})
        positioned = [g for g in staying if g not in lacking]
        self.events.groups(positioned, GroupState.POSITIONED)
        self.log.info(
            "STAY groups %s hold a committed offset on every partition after %.3f s, without leaving their "
            "groups",
            names(positioned),
            waited,
        )
        if stray:
            self.log.warning(
                "STAY %s records were written to the new partitions before the switch by a producer the run "
                "does not hold: a staying group whose committed offset there is above 0 may have skipped them",
                f"{stray:,}",
            )
        if lacking:
            self._fall_back(lacking, missing, stray, waited)
        # kept once the groups without evidence are back: a retry of the switch waits (or falls back) again
        self.stayed = {
            "groups": staying,
            "positioned": positioned,
            "positioned_after_s": waited,
            "stray_records": stray,
            "fell_back": lacking,
        }
        return self.stayed

    def _positions_missing(self, groups: list[str]) -> tuple[dict[str, dict[str, list[int]]], int]:
        """``{topic: {group: partitions without a committed offset}}`` of ``groups``, and the records on
        the new partitions now."""
        missing = {s.topic: s.positions_missing(self.of(s, groups)) for s in self.topics}
        stray = sum(s.stray_records() for s in self.topics)
        return {t: m for t, m in missing.items() if m}, stray

    def _fall_back(
        self, groups: list[str], missing: dict[str, dict[str, list[int]]], stray: int, waited: float
    ) -> None:
        """Pause, seed and resume ``groups`` alone, as the window does (their drivers make them leave)."""
        why = "; ".join(f"{t}: {describe_missing(m)}" for t, m in missing.items())
        cause = (
            f"{stray} records appeared on the new partitions (a producer the run does not hold)"
            if stray
            else (f"no committed offset after {waited:.3f} s")
        )
        undrivable = [g for g in groups if not self._pausable(g)]
        if undrivable:
            raise PositionsTimeoutError(
                f"groups {undrivable} stay in their groups but gave no evidence of a position on every "
                f"partition ({cause}: {why}), and the run cannot pause them (no driver). The producers stay on "
                "the old layout: nothing written so far is lost. Give them a driver, or make their consumers "
                "commit their positions (the client piece, or Java enable.auto.commit=true), then run again."
            )
        self.log.warning("STAY groups %s: %s (%s): paused and seeded instead", names(groups), cause, why)
        self.leave(groups)
        self.wait_empty(self.empty_timeout, groups=groups)
        self.seed(groups)
        self.resume(groups)

    def _pausable(self, group: str) -> bool:
        """Whether the run can make ``group`` leave: a command pair stops it, or the control record does (every
        live member runs the client piece; a group that stays on its own commits has the control driver by
        default, which its consumers do not follow)."""
        entry = self.plan.groups[group]
        if entry.driver.commands() is not None:
            return True
        return entry.driver.needs_client_piece and entry.client_piece

    # -- around another reader's own grow (a Kafka Streams application's resize) -----------------------------

    def leave_for_grow(self) -> dict[str, Any]:
        """Before another reader's step grows the topics (its producers stopped): every group at risk leaves
        and is waited for EMPTY; a failure resumes them (nothing grew) and is raised."""
        try:
            out = self.pause()
            self.wait_empty(self.empty_timeout)
        except Exception:
            self.undo_before_create()
            raise
        return out

    def back_after_grow(self) -> dict[str, Any]:
        """After the grow: every group is seeded on every topic it reads (each new partition at its log
        start), rejoins, and the ControlledProducers' layout is the target (the producers are still
        stopped: they write nothing until every group holds an offset on every partition)."""
        seeded = {t: r.summary() for t, r in self.seed().items()}
        resumed = self.resume()
        switch = self.scale()
        return {
            "topics": {t: {**summary, **switch["topics"][t]} for t, summary in seeded.items()},
            "seeded": sum(summary["seeded"] for summary in seeded.values()),
            "resumed": resumed,
        }

    def start_when_drained(self, switch: dict[str, Any], within: float) -> dict[str, Any] | None:
        """After a drain's switch (``switch``: ``{topic: {"switch": ...}}``), in the same task: wait up to
        ``within`` seconds for the drained groups to consume the old partitions, then start the producers at
        once (:meth:`start_producers`), so they are not held across Airflow's scheduling of the drain's
        sensor and start step; None when the groups are still behind then (those steps finish the drain,
        deferred: no worker slot held)."""
        drains = drains_by_topic(self.plan, {"topics": switch})
        if not drains:
            return None
        started = time.monotonic()
        result = groups_drained(self.admin, drains)
        while not result.ok and time.monotonic() - started < within:
            time.sleep(0.1)
            result = groups_drained(self.admin, drains)
        if not result.ok:
            self.log.info(
                "DRAIN not drained within %.0f s in this task: the drain's sensor waits (deferred)", within
            )
            return None
        self.log.info(
            "DRAIN groups drained %.3f s after the switch, in this task", time.monotonic() - started
        )
        groups = sorted({g for d in drains.values() for g in d["groups"]})
        return {"drained_groups": groups, **self.start_producers(drains)}

    def wait_drained(self, timeout: float) -> dict[str, Any]:
        """With the producers stopped, wait until every live group has consumed each topic it reads up to
        the old partitions' ends (then the producers may start on the new layout without reordering their
        keys); after ``timeout`` the groups still behind are returned, named (their moved keys may reorder)."""
        live = self.plan.of_class(GroupClass.ACTIVE)
        drains: dict[str, dict[str, Any]] = {}
        for steps in self.topics:
            groups = [g for g in self.of(steps, live) if g in self.plan.where("seed")]
            if groups:
                count = steps.plan.original_partitions
                marks = self.admin.watermarks(steps.topic, range(count))
                drains[steps.topic] = {"groups": groups, "offsets": [marks[p][1] for p in range(count)]}
        started = time.monotonic()
        result = groups_drained(self.admin, drains)
        while not result.ok and time.monotonic() - started < timeout:
            time.sleep(0.2)
            result = groups_drained(self.admin, drains)
        waited = round(time.monotonic() - started, 3)
        if result.ok:
            self.log.info("DRAIN groups %s consumed the old partitions (%.3f s)", names(live), waited)
        else:
            self.log.warning(
                "DRAIN groups still behind after %.3f s, the producers start anyway (their moved keys may "
                "reorder): %s",
                waited,
                result.detail,
            )
        return {"drained": result.ok, "waited_s": waited, "behind": result.detail}


def switch_of(result: Any, topic: str) -> dict[str, Any]:
    """The switch of ``topic`` in the XCom of the step that switched (the pause window's or the scale
    step's: ``topics`` -> topic -> ``switch``); empty when it has none."""
    switch = topic_entry(result, topic).get("switch")
    return switch if isinstance(switch, dict) else {}


def drains_by_topic(plan: Plan, result: Any) -> dict[str, dict[str, Any]]:
    """``{topic: drain}`` (:func:`~airflow_provider_kstate.increase.key_order.drain_of`) of each topic that
    drains a group, from the XCom of the step that switched."""
    out = {t: drain_of(switch_of(result, t)) for t in plan.topic_names}
    return {t: d for t, d in out.items() if d["groups"]}


def topic_entry(result: Any, topic: str) -> dict[str, Any]:
    """What a step's XCom says of ``topic`` (``topics`` -> topic); empty when it says nothing."""
    topics = result.get("topics") if isinstance(result, dict) else None
    entry = topics.get(topic) if isinstance(topics, dict) else None
    return entry if isinstance(entry, dict) else {}
