"""The steps of the safe partition increase, each idempotent, shared by the step operators and the window operator.

Each step reads the cluster, changes what it must, logs one runbook line per group (partition ranges, then
exceptions up to a cap) and returns a small JSON-safe summary for XCom. Per-partition evidence goes to a
report file (:mod:`airflow_provider_kstate.increase.report`).

Requests per group go out concurrently (see :meth:`KStateAdminHook.committed_offsets_many`), and nothing
is asked again that the run already knows: partitions the run has just created hold no offsets, and after
a seed every group the broker acknowledged has an offset on every partition that existed then.
"""

from __future__ import annotations

import json
import time
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.client_piece.protocol import PRESERVE
from airflow_provider_kstate.errors import (
    BrokerUnavailableError,
    GroupNeverLeftError,
    GroupNotEmptyError,
    KStateError,
    TopicChangedError,
    UnsafeResumeError,
)
from airflow_provider_kstate.increase.checks import groups_empty
from airflow_provider_kstate.increase.drivers import CommandPairs, CommandResult, DriverKind
from airflow_provider_kstate.increase.events import GroupState, NoEvents, ProducerState, RunEvents
from airflow_provider_kstate.increase.fleet import commands_of, live_groups, producer_commands
from airflow_provider_kstate.increase.key_order import ORDER_DRAINED, KeyOrderPort, KeyOrderSwitch
from airflow_provider_kstate.increase.plan import Plan
from airflow_provider_kstate.increase.report import Exceptions, ReportWriter, ranges
from airflow_provider_kstate.increase.safety import partial_increase_runbook, unseeded

if TYPE_CHECKING:
    from airflow_provider_kstate.increase.ports import AdminPort, ControlPort

#: Seconds between two looks at the cluster while consumers are out of their groups.
FAST_POLL = 0.005
#: Group names written out in one PAUSE / RESUME / WAIT line, at most.
NAME_CAP = 20


def not_empty_error(plan: Plan, detail: dict[str, Any], waited: float) -> GroupNeverLeftError:
    """Return the error for groups that did not leave within ``waited`` seconds, naming their members: not
    retried (a retry would wait again for members that do not leave, with the other groups out meanwhile)."""
    drivers = {g: plan.groups[g].driver.describe() for g in detail if g in plan.groups}
    return GroupNeverLeftError(
        f"timed out after {waited}s waiting for consumer groups to leave topic {plan.topic!r}; "
        f"members still present: {detail} (drivers: {drivers}). Stop those consumers, give their group a "
        "driver that stops them (or make them honour the pause signal), then run again. Partitions were "
        "NOT changed; the groups paused so far are resumed."
    )


def names(groups: list[str], cap: int = NAME_CAP) -> str:
    """Return ``groups`` for a log line: every name up to ``cap``, then how many more."""
    shown = ", ".join(groups[:cap])
    return (
        f"{len(groups)} [{shown}{', ... ' + str(len(groups) - cap) + ' more' if len(groups) > cap else ''}]"
    )


class GapOffsets(Mapping[int, int]):
    """``{partition: log start}`` for one group's gaps, as a view over the shared log starts (no copy per
    group: 100 groups x 4,032 gaps would otherwise hold 400k dict entries)."""

    def __init__(self, partitions: Sequence[int], starts: dict[int, int]) -> None:
        self._partitions = partitions
        self._starts = starts

    def __getitem__(self, partition: int) -> int:
        return self._starts[partition]

    def __iter__(self) -> Iterator[int]:
        return iter(self._partitions)

    def __len__(self) -> int:
        return len(self._partitions)


@dataclass
class SeedResult:
    """What a seed pass did: the partition count it covered and, per group, what it seeded and kept."""

    partitions: int
    groups: dict[str, dict[str, Any]] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        return {
            "partitions": self.partitions,
            "seeded": sum(g["seeded"] for g in self.groups.values()),
            "kept": sum(g["kept"] for g in self.groups.values()),
            "groups": self.groups,
        }


@dataclass
class SafeIncreaseSteps:
    """The steps for one plan, with the hooks and the logger of the task that runs them.

    :param lease_check: called before every step that changes the cluster; it raises when the run no
        longer holds the topic's lease (and renews it when due).
    """

    plan: Plan
    admin: AdminPort
    control: ControlPort
    log: Any
    owner: str
    lease_check: Callable[[], None] = lambda: None
    #: Set by :meth:`increase` when this run created the partitions: they hold no offsets yet.
    created_from: int | None = None
    #: Per group, the partition count on which the broker acknowledged an offset for every partition.
    known: dict[str, int] = field(default_factory=dict)
    #: ``preserve``: producers switch through the key-order barrier (or wait for drained groups);
    #: ``drain``: producers stop before the create and start after every live group drained; ``relax``: at once.
    key_order: str = PRESERVE
    #: Seconds to wait for the paused (or stopped) groups to become EMPTY.
    empty_timeout: float = 600.0
    #: Seconds ControlledProducers stay held for a drain before they release themselves (a dead controller).
    drain_hold: float = 1800.0
    #: Runs the command pairs of the plan's drivers.
    pairs: CommandPairs | None = None
    #: What this run stopped (for :meth:`undo_before_create`): command-driven groups and producer services.
    stopped_groups: list[str] = field(default_factory=list)
    producers_stopped: dict[str, Any] | None = None
    #: Start or readiness commands that failed (logged; the broker's view of the group decides what follows).
    start_failures: list[CommandResult] = field(default_factory=list)
    #: Where the run reports its step and each group's state (the run's progress file, metrics).
    events: RunEvents = field(default_factory=NoEvents)
    #: ``time.monotonic()`` when the control pause was sent: the live groups' downtime starts there.
    paused_at: float | None = None
    #: Seconds the command-driven groups took to stop and become EMPTY (None: none was stopped).
    stop_s: float | None = None
    #: ``time.monotonic()`` when the resume record was sent (the control groups' downtime ends about there),
    #: and the seconds the command-driven groups' start and readiness commands took after it.
    resumed_at: float | None = None
    start_s: float | None = None
    #: The most partitions this run has seen the topic have (see :meth:`partition_count`).
    partitions_seen: int = 0
    #: Set by :meth:`increase` when the create got no answer: it may be applied later (see there).
    create_unknown: bool = False

    def __post_init__(self) -> None:
        if self.pairs is None:
            self.pairs = CommandPairs(self.plan.topic, self.log)

    @property
    def topic(self) -> str:
        return self.plan.topic

    def partition_count(self) -> int:
        """The topic's partition count: the most this run has seen. Each broker answers the metadata from
        its own copy, applied one after another, so two answers in a row can go back after a create (3-node
        Apache Kafka 4.4.0, a node just restarted: 8 partitions, then 4 again; issue 33). Partitions never
        go away: the larger count is the truth, and a seed or a resume rule must never cover fewer."""
        self.partitions_seen = max(self.partitions_seen, self.admin.partition_count(self.topic))
        return self.partitions_seen

    @property
    def commands(self) -> CommandPairs:
        assert self.pairs is not None  # set in __post_init__
        return self.pairs

    @property
    def drains(self) -> bool:
        """Whether some group is drained: producers stop before the create and start once it drained."""
        return bool(self.plan.marked(ORDER_DRAINED))

    def pause(self, groups: list[str] | None = None) -> dict[str, Any]:
        """Take every group at risk out of its group, each by its driver, and pin producers to the current
        partition count (for a drain: stop them first).

        Command-driven groups with live members are stopped first and waited for (up to
        ``empty_timeout``); only then are the others asked to leave, so no group is out of its group while
        another's stop is slow or fails. A failure here changes nothing and resumes what was stopped
        (:meth:`undo_before_create`).
        """
        groups = self.plan.where("pause") if groups is None else groups
        epoch = self.leave(groups)
        self.pin()
        out: dict[str, Any] = {"epoch": epoch, "groups": len(groups), "stopped_groups": self.stopped_groups}
        if self.producers_stopped is not None:
            out["producers_stopped"] = self.producers_stopped
        return out

    def leave(self, groups: list[str]) -> int:
        """The first half of :meth:`pause`: stop the command-driven groups (and, for a drain, the producers),
        then send the others the pause record; return its epoch. A run of several topics sends it once."""
        self.lease_check()
        self.events.step("pause")
        if self.drains and self.producers_stopped is None:
            self.stop_producers()
        self._stop_command_groups(groups)
        self.paused_at = time.monotonic()
        epoch = self.control.pause(groups, self.topic, issuer=self.owner)
        self.events.groups(
            [g for g in self.plan.where("wait") if g not in self.stopped_groups], GroupState.STOPPING
        )
        self.log.info("PAUSE groups %s: pause command sent (epoch %s)", names(groups), epoch)
        return epoch

    def pin(self) -> None:
        """The second half of :meth:`pause`: pin the topic's producers to the current partition count and
        announce the key-order barrier to its protected groups (once per topic)."""
        original = self.plan.original_partitions
        if not self.drains:  # a drain's hold already pins them to the current count
            layout = self.control.set_layout(self.topic, original, issuer=self.owner)
            self.events.producers(ProducerState.PINNED)
            self.log.info(
                "PAUSE producers of %s pinned to the current %s partitions (epoch %s)",
                self.topic,
                original,
                layout,
            )
        self.key_order_switch().announce()

    def _stop_command_groups(self, groups: list[str]) -> None:
        """Stop the command-driven groups with live members, then wait until the broker reports them EMPTY."""
        live = live_groups(self.plan, DriverKind.COMMAND, groups)
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

    def stop_producers(self) -> dict[str, Any]:
        """For a drain: hold the ControlledProducers and stop the command-driven producer services, before
        the create; :meth:`start_producers` starts them once the drained groups have consumed the rest."""
        self.lease_check()
        held = self.key_order_switch().hold_for_drain(self.drain_hold)
        services = producer_commands(self.plan)
        self.producers_stopped = {**held, "services": sorted(services)}
        self.commands.stop(services, "producer")
        self.events.producers(ProducerState.STOPPED)
        return self.producers_stopped

    def undo_before_create(self) -> None:
        """After a failure before the create: resume every paused group at once (the control records, and
        the start commands of the groups this run stopped), and let the producers go on the old layout."""
        self.undo_groups()
        self.undo_layout()

    def undo_groups(self) -> None:
        """The groups' half of :meth:`undo_before_create`: resume every paused group, start what was stopped."""
        groups = self.plan.where("pause")
        epoch = self.control.resume(groups, self.topic, issuer=self.owner)
        self.log.warning("UNDO resumed groups %s (epoch %s): nothing was created", names(groups), epoch)
        self.start_failures += self.commands.start(commands_of(self.plan, self.stopped_groups), "group")
        self.events.groups(groups, GroupState.RESUMED)

    def undo_layout(self) -> None:
        """The producers' half of :meth:`undo_before_create`: the topic's producers on the current layout."""
        layout = self.control.set_layout(self.topic, self.plan.original_partitions, issuer=self.owner)
        self.log.warning("UNDO producers of %s on the current layout (epoch %s)", self.topic, layout)
        if self.producers_stopped is not None:
            self.start_failures += self.commands.start(producer_commands(self.plan), "producer")
        self.events.producers(ProducerState.RUNNING)

    def key_order_switch(self) -> KeyOrderSwitch:
        """The switch of the producers, through the key-order barrier with ``key_order="preserve"``."""
        control: KeyOrderPort = self.control  # type: ignore[assignment]  # the control hook has both
        return KeyOrderSwitch(self.plan, self.admin, control, self.log, self.owner, self.key_order)

    def wait_empty(
        self, timeout: float, max_interval: float = 1.0, groups: list[str] | None = None
    ) -> dict[str, Any]:
        """Block until every seeded group is EMPTY: polls every 5 ms for the first 2 s (paused consumers
        leave within milliseconds of each other, and every millisecond of this wait is consumer downtime;
        one DescribeGroups request for all groups costs well under a millisecond), then backs off to
        ``max_interval``. On timeout: :class:`GroupNeverLeftError`, naming the members still present."""
        groups = self.plan.where("seed") if groups is None else groups
        started = time.monotonic()
        deadline = started + timeout
        interval = FAST_POLL
        while True:
            result = groups_empty(self.admin, self.topic, groups)
            if result.ok:
                waited = set(self.plan.where("wait"))
                self.events.groups([g for g in groups if g in waited], GroupState.PAUSED)
                self.log.info("WAIT groups %s are EMPTY", names(groups))
                return {"groups": len(groups)}
            if time.monotonic() > deadline:
                raise not_empty_error(self.plan, result.detail, timeout)
            time.sleep(interval)
            if time.monotonic() - started > 2.0:
                interval = min(max_interval, interval * 2)

    def increase(self, timeout: float) -> dict[str, Any]:
        """Grow the topic to the target (validate first); a no-op when it is already there (a retry, a repair).
        Returns once the metadata shows the new partitions (up to ``timeout``), not once each has a leader:
        nothing up to the resume needs their leaders (the seed commits 0 on them, see :meth:`_log_starts`;
        an offset commit goes to the group's coordinator), and Kafka takes its time to bring thousands online
        (4,032 on one 2-core broker: ~20 s) while the old partitions' consumers would wait paused. Verify
        waits for their leaders (:func:`~airflow_provider_kstate.increase.replicas.wait_for_leaders`).
        CreatePartitions gives them the topic's replication factor (see :mod:`~airflow_provider_kstate.increase.replicas`)."""
        original, target = self.plan.original_partitions, self.plan.target_partitions
        self.events.step("increase")
        current = self.partition_count()
        if current == target:
            self.log.info(
                "INCREASE topic %s already has %s partitions: nothing to create", self.topic, target
            )
            return {"created": False, "partitions": target}
        if current != original:
            raise TopicChangedError(
                f"topic {self.topic!r} has {current} partitions; the plan expected {original} (or {target}). "
                "Someone else changed it: nothing was done here. Run again: the new run repairs every gap."
            )
        self.lease_check()
        self.admin.increase_partitions(self.topic, target, validate_only=True)
        self.log.info("INCREASE topic %s: the broker validated %s -> %s", self.topic, original, target)
        try:
            self.admin.increase_partitions(self.topic, target)
        except BrokerUnavailableError:
            # the broker died with the create in flight: the controller may still apply it. Nobody may be
            # resumed on the old count now (the new partitions could appear under running latest-reset
            # consumers): the window does not undo; the step's retry, or the failure guard later, decides.
            self.create_unknown = True
            raise
        self.created_from = original
        deadline = time.monotonic() + timeout
        while self.partition_count() != target:
            if time.monotonic() > deadline:
                raise KStateError(f"topic {self.topic!r}: metadata did not show {target} partitions in time")
            time.sleep(FAST_POLL)
        self.log.info(
            "INCREASE topic %s: created partitions %s (%s)",
            self.topic,
            ranges(self.plan.new_partitions),
            f"{len(self.plan.new_partitions):,}",
        )
        return {"created": True, "partitions": target}

    def seed(self, groups: list[str] | None = None, report: ReportWriter | None = None) -> SeedResult:
        """Commit the log start of every partition of the topic on which a group has no offset (every gap,
        not only the new partitions; those this run created at 0, see :meth:`_log_starts`); keep every
        offset a group already has.

        Every group must be EMPTY (the broker accepts offsets only then); it fails before writing anything
        otherwise. One pass reads every group's offsets concurrently (skipping partitions this run has
        just created, which hold none), one ListOffsets pass reads the gaps' log starts, one pass commits.
        """
        groups = self.plan.where("seed") if groups is None else groups
        result = SeedResult(self.partition_count())
        if not groups:
            return result
        self.events.step("seed")
        self._check_empty(groups)
        self.lease_check()
        before = self._committed(groups, result.partitions)
        # Compact: 100 groups x 4,032 gaps as lists of int objects would hold ~15 MB; as arrays, 3 MB.
        gaps = {g: array("q", (p for p in range(result.partitions) if p not in before[g])) for g in groups}
        starts = self._log_starts({p for parts in gaps.values() for p in parts})
        self.admin.seed_offsets_many(self.topic, {g: GapOffsets(parts, starts) for g, parts in gaps.items()})
        exceptions = Exceptions(self.log, "SEED")
        for group in groups:
            result.groups[group] = self._record(group, before[group], gaps[group], starts, exceptions, report)
            self.known[group] = result.partitions
        exceptions.close(self.plan.report_uri or "of this step")
        self.events.groups(groups, GroupState.SEEDED)
        return result

    def _log_starts(self, partitions: set[int]) -> dict[int, int]:
        """The log start of every gap. A partition this run created starts at offset 0 (Kafka creates it
        empty, and only its leader could delete records from it): it is not asked. Asking would wait for
        each to come online (on Apache Kafka 4,032 new partitions answer ``NOT_LEADER_OR_FOLLOWER`` for
        ~20 s on one 2-core broker) while the live groups stay paused; verify still reads every log start."""
        created = set() if self.created_from is None else {p for p in partitions if p >= self.created_from}
        starts = self.admin.log_starts(self.topic, partitions - created) if partitions - created else {}
        return {**starts, **dict.fromkeys(created, 0)}

    def _check_empty(self, groups: list[str]) -> None:
        blockers = groups_empty(self.admin, self.topic, groups)
        if not blockers.ok:
            raise GroupNotEmptyError(
                f"cannot seed {self.topic!r}: these groups are not EMPTY: {blockers.detail}. Nothing was "
                "written; consumers stay paused. Stop those members, then clear this task."
            )

    def _committed(self, groups: list[str], partitions: int) -> dict[str, dict[int, int]]:
        """Every group's committed offsets; partitions this run created are known to hold none."""
        upto = partitions if self.created_from is None else self.created_from
        return dict(self.admin.committed_offsets_many(groups, self.topic, upto))

    def _record(
        self,
        group: str,
        before: dict[int, int],
        gaps: Sequence[int],
        starts: dict[int, int],
        exceptions: Exceptions,
        report: ReportWriter | None,
    ) -> dict[str, Any]:
        new = self.plan.new_partitions
        old_gaps = [p for p in gaps if p not in new]
        kept_new = [p for p in before if p in new]
        self.log.info(
            "SEED group %s: partitions %s (%s) seeded to log start; %s kept an existing offset",
            group,
            ranges(gaps),
            f"{len(gaps):,}",
            f"{len(before):,}",
        )
        for p in old_gaps:
            exceptions.add(
                "group %s partition %s: had no offset before this run (an old partition): seeded to log start %s",
                group,
                p,
                starts[p],
            )
        for p in kept_new:
            exceptions.add("group %s partition %s: kept its existing offset %s", group, p, before[p])
        if report is not None:
            self._write_rows(report, group, before, gaps, starts)
        return {"seeded": len(gaps), "kept": len(before), "seeded_partitions": ranges(gaps, cap=4)}

    def _write_rows(
        self,
        report: ReportWriter,
        group: str,
        before: dict[int, int],
        gaps: Sequence[int],
        starts: dict[int, int],
    ) -> None:
        """One row per partition: the offset the group holds now, whether this run seeded it, the log start
        at seed time (seeded rows)."""
        head = '{"group":' + json.dumps(group) + ',"partition":'
        lines = [
            f'{head}{p},"committed":{o},"seeded":false,"log_start_at_seed":null}}\n'
            for p, o in before.items()
        ]
        lines += [
            f'{head}{p},"committed":{starts[p]},"seeded":true,"log_start_at_seed":{starts[p]}}}\n'
            for p in gaps
        ]
        report.write_lines(lines)
        report.note_seeded(group, gaps)

    def scale(self, baseline: bool = False, live: list[str] | None = None) -> dict[str, Any]:
        """Switch producers with the client piece to the target layout, once every protected group holds an
        offset on every partition; with ``key_order="preserve"`` through the key-order barrier.

        :param baseline: also return the new partitions' end offsets now (``{"p": end}``), the baseline of
            :class:`KStateNewPartitionsWrittenSensor`.
        :param live: the protected groups with live members now (default: none, as in the per-step layout,
            where consumers are paused until after the switch).
        :raises UnsafeResumeError: a protected group lacks an offset on a partition; nothing was switched.
        """
        self.require_offsets(self.plan.where("seed"))
        self.events.step("switch")
        target = self.plan.target_partitions
        if self.drains:
            drained = self.key_order_switch().drain_barrier(live or [])
            self.events.groups(drained["held_groups"], GroupState.AT_BARRIER)
            self.events.groups(drained["drain"]["groups"], GroupState.DRAINING)
            return drained
        out: dict[str, Any] = self.key_order_switch().switch(live or [])
        self.events.groups(out.get("held_groups", []), GroupState.AT_BARRIER)
        self.events.producers(ProducerState.SWITCHED)
        self.log.info(
            "SCALE producers of %s: layout of %s partitions is live (epoch %s)",
            self.topic,
            target,
            out["epoch"],
        )
        if baseline:
            marks = self.admin.watermarks(self.topic, self.plan.new_partitions)
            out["baseline"] = {str(p): end for p, (_start, end) in marks.items()}
        return out

    def resume(self, groups: list[str] | None = None) -> dict[str, Any]:
        """Send resume, but only once every group has an offset on every partition that exists now.

        Groups this run seeded are known to (the broker acknowledged every offset); the rule then needs only
        the partition count now. Others are read from the cluster, concurrently.
        """
        groups = self.plan.where("pause") if groups is None else groups
        if not groups:
            return {"epoch": None, "groups": 0}
        self.require_offsets(groups)
        return self.rejoin(groups)

    def rejoin(self, groups: list[str]) -> dict[str, Any]:
        """Send ``groups`` the resume record (command-driven ones: their start commands), once
        :meth:`require_offsets` passed for them (on every topic of the run)."""
        self.events.step("resume")
        epoch = self.control.resume(groups, self.topic, issuer=self.owner)
        self.log.info(
            "RESUME groups %s: each has a committed offset on every partition; resume sent (epoch %s)",
            names(groups),
            epoch,
        )
        self.resumed_at = time.monotonic()
        started = live_groups(self.plan, DriverKind.COMMAND, groups)
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

    def start_producers(self, drain: dict[str, Any]) -> dict[str, Any]:
        """After a drain: switch the ControlledProducers to the target layout and start the command-driven
        producer services, once every protected group holds an offset on every partition; report the cost.

        :param drain: the switch's ``drain`` (``stopped_at``, the drained groups' ``backlog`` at the switch).
        :raises UnsafeResumeError: a protected group lacks an offset on a partition; nothing was started.
        """
        self.require_offsets(self.plan.where("seed"))
        self.events.step("start_producers")
        self.events.groups(drain.get("groups") or [], GroupState.DRAINED)
        epoch = self.control.set_layout(self.topic, self.plan.target_partitions, issuer=self.owner)
        failed = self.commands.start(producer_commands(self.plan), "producer")
        self.events.producers(ProducerState.SWITCHED)
        self.start_failures += failed
        downtime = round((time.time() * 1000 - int(drain.get("stopped_at") or 0)) / 1000.0, 3)
        backlog = sum(int(v) for v in (drain.get("backlog") or {}).values())
        self.log.info(
            "DRAIN %s: producers started on %s partitions (epoch %s) after %.3f s stopped; the drained "
            "groups %s had %s records to consume at the switch",
            self.topic,
            self.plan.target_partitions,
            epoch,
            downtime,
            drain.get("groups"),
            f"{backlog:,}",
        )
        return {
            "epoch": epoch,
            "partitions": self.plan.target_partitions,
            "producer_downtime_s": downtime,
            "backlog_at_switch": backlog,
            "services": sorted(producer_commands(self.plan)),
            "start_failures": [r.describe() for r in failed],
        }

    def require_offsets(self, groups: Iterable[str]) -> None:
        """Go on only while every seeded group of ``groups`` holds an offset on every partition that exists
        now, and the run still holds the topic's lease.

        :raises UnsafeResumeError: a group lacks an offset (the runbook of the partial increase).
        """
        missing = self.missing(groups)
        if missing:
            raise UnsafeResumeError(partial_increase_runbook(self.plan, missing))
        self.lease_check()

    def missing(self, groups: Iterable[str]) -> dict[str, list[int]]:
        """Return ``{group: [partitions]}`` that exist now but hold no offset of a group that is seeded."""
        seeded = set(self.plan.where("seed"))
        wanted = [g for g in groups if g in seeded]
        count = self.partition_count()
        unknown = [g for g in wanted if self.known.get(g) != count]
        return unseeded(self.admin, self.plan, unknown, count) if unknown else {}
