"""The steps of one topic of a safe partition increase, each idempotent; the run
(:class:`~airflow_provider_kstate.increase.run.IncreaseRun`) takes the groups out and back once and runs
these steps for each topic it grows.

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
from collections import ChainMap
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields
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
from airflow_provider_kstate.increase.events import GroupState, NoEvents, ProducerState, RunEvents
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


def together(*calls: Callable[[], Any]) -> list[Any]:
    """Run ``calls`` at once (each in a thread) and return their results in order, once all are done; the
    first failure in that order is raised, after every call finished (none is left running behind a step).

    Requests the window makes while consumers are out and that need no answer from each other go out
    together: over a network each one costs a round trip or more, and their sum is consumer downtime.
    """
    if len(calls) <= 1:
        return [call() for call in calls]
    with ThreadPoolExecutor(len(calls), "kstate-together") as pool:
        futures = [pool.submit(call) for call in calls]
        errors = [f.exception() for f in futures]
    first = next((e for e in errors if e is not None), None)
    if first is not None:
        raise first
    return [f.result() for f in futures]


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
class RunPorts:
    """What a run's steps work on, talk to and report with: the run (:class:`~airflow_provider_kstate.increase.run.IncreaseRun`)
    and each topic's steps (:class:`TopicSteps`) share them.

    :param plan: the plan (for a topic's steps, the topic's: :meth:`Plan.for_topic`).
    :param lease_check: called before every step that changes the cluster; it raises when the run no
        longer holds its topics' leases (and renews them when due).
    """

    plan: Plan
    admin: AdminPort
    control: ControlPort
    log: Any
    owner: str
    lease_check: Callable[[], None] = lambda: None
    #: ``preserve``: producers switch through the key-order barrier (or wait for drained groups);
    #: ``drain``: producers stop before the create and start after every live group drained; ``relax``: at once.
    key_order: str = PRESERVE
    #: Seconds ControlledProducers stay held for a drain before they release themselves (a dead controller).
    drain_hold: float = 1800.0
    #: Seconds to wait for the new partitions' leaders before the producers switch onto them.
    leader_timeout: float = 600.0
    #: Where the run reports its step and each group's state (the run's progress file, metrics).
    events: RunEvents = field(default_factory=NoEvents)

    def ports(self) -> dict[str, Any]:
        """These fields but the plan, to build the steps of one of its topics."""
        return {f.name: getattr(self, f.name) for f in fields(RunPorts) if f.name != "plan"}


@dataclass
class TopicSteps(RunPorts):
    """The steps of one topic of a run (:class:`~airflow_provider_kstate.increase.run.IncreaseRun`): pin and
    switch its producers, create its partitions, seed the groups that read it, check their offsets. The
    groups leave, are waited for and rejoin once per run, in the run."""

    #: Set by :meth:`increase` when this run created the partitions: they hold no offsets yet.
    created_from: int | None = None
    #: Per group, the partition count on which the broker acknowledged an offset for every partition.
    known: dict[str, int] = field(default_factory=dict)
    #: Per group seeded by this task, its committed offsets once seeded (what it held, then the gaps' log
    #: starts), as a view: what the group holds when it is asked back (EMPTY until then, nobody commits).
    held: dict[str, Mapping[int, int]] = field(default_factory=dict)
    #: The most partitions this run has seen the topic have (see :meth:`partition_count`).
    partitions_seen: int = 0
    #: Set by :meth:`increase` when the create got no answer: it may be applied later (see there).
    create_unknown: bool = False
    #: Set by :meth:`hold_for_drain`: the drain's hold pins the producers already.
    held_for_drain: bool = False
    #: Set by :meth:`validate`: the broker validated the create (before the groups left).
    validated: bool = False

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
    def drains(self) -> bool:
        """Whether a group of this topic is drained: its producers stop before the create and start once
        it drained."""
        return bool(self.plan.marked(ORDER_DRAINED))

    def pin(self) -> None:
        """Pin the topic's producers to the current partition count and announce the key-order barrier to
        its protected groups (once per topic, after the groups left)."""
        original = self.plan.original_partitions
        if not self.held_for_drain:  # a drain's hold (before the pin) already pins them to the current count
            layout = self.control.set_layout(self.topic, original, issuer=self.owner)
            self.events.producers(ProducerState.PINNED)
            self.log.info(
                "PAUSE producers of %s pinned to the current %s partitions (epoch %s)",
                self.topic,
                original,
                layout,
            )
        if not self.plan.staying():  # with groups that stay, the barrier is announced once the topic grew
            self.key_order_switch().announce()

    def announce_grow(self) -> int | None:
        """Once the topic grew, with groups that stay in their groups: announce the barrier with the new
        count, so their client-piece consumers take the new partitions at once (control protocol rule 8)."""
        if not self.plan.staying():
            return None
        return self.key_order_switch().announce(partitions=self.plan.target_partitions)

    def positions_missing(self, groups: list[str]) -> dict[str, list[int]]:
        """``{group: [partitions]}`` on which a group of ``groups`` (that stay) holds no committed offset."""
        return unseeded(self.admin, self.plan, groups, self.partition_count()) if groups else {}

    def stray_records(self) -> int:
        """Records on the new partitions now (nothing may be written there before the producers switch: a
        producer the run does not hold wrote them)."""
        new = self.plan.new_partitions
        return sum(self.admin.loaded_ends(self.topic, new).values()) if new else 0

    def hold_for_drain(self) -> dict[str, Any]:
        """For a drain: hold the topic's ControlledProducers on the old layout (before the create; with groups
        that stay, once they hold their positions)."""
        self.held_for_drain = True
        return self.key_order_switch().hold_for_drain(self.drain_hold)

    def undo_layout(self) -> None:
        """After a failure before the create: the topic's producers on the current layout."""
        layout = self.control.set_layout(self.topic, self.plan.original_partitions, issuer=self.owner)
        self.log.warning("UNDO producers of %s on the current layout (epoch %s)", self.topic, layout)
        self.events.producers(ProducerState.RUNNING)

    def key_order_switch(self) -> KeyOrderSwitch:
        """The switch of the producers, through the key-order barrier with ``key_order="preserve"``."""
        control: KeyOrderPort = self.control  # type: ignore[assignment]  # the control hook has both
        return KeyOrderSwitch(self.plan, self.admin, control, self.log, self.owner, self.key_order)

    def validate(self, current: int | None = None) -> bool:
        """Ask the broker to validate the create (``validate_only``: nothing changes) when the topic still has
        its planned count, once; True when it did.

        :param current: the partition count just read (default: read it).
        """
        original, target = self.plan.original_partitions, self.plan.target_partitions
        if self.validated or target <= original:
            return self.validated
        if (self.partition_count() if current is None else current) != original:
            return False  # grown already (a retry) or changed by someone: the create step decides
        self.admin.increase_partitions(self.topic, target, validate_only=True)
        self.log.info("INCREASE topic %s: the broker validated %s -> %s", self.topic, original, target)
        self.validated = True
        return True

    def increase(self, timeout: float, current: int | None = None) -> dict[str, Any]:
        """Grow the topic to the target (validate first); a no-op when it is already there (a retry, a repair).
        Returns once the metadata shows the new partitions (up to ``timeout``), not once each has a leader:
        nothing up to the resume needs their leaders (the seed commits 0 on them, see :meth:`_log_starts`;
        an offset commit goes to the group's coordinator), and Kafka takes its time to bring thousands online
        (4,032 on one 2-core broker: ~20 s) while the old partitions' consumers would wait paused. The
        producers' switch waits for their leaders (:meth:`wait_for_leaders`), after the consumers are back.
        CreatePartitions gives them the topic's replication factor (see :mod:`~airflow_provider_kstate.increase.replicas`).

        :param current: the partition count the run has just read (default: read it here).
        """
        original, target = self.plan.original_partitions, self.plan.target_partitions
        self.events.step("increase")
        current = self.partition_count() if current is None else current
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
        self.validate(current)  # a no-op when validated before the groups left
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
        otherwise. The partition count, the EMPTY check, the lease and every group's offsets (skipping
        partitions this run has just created, which hold none) are read at once (:meth:`_read_for_seed`),
        one ListOffsets pass reads the old gaps' log starts, one pass commits.
        """
        groups = self.plan.seeded_by_run() if groups is None else groups
        if not groups:
            return SeedResult(self.partition_count())
        self.events.step("seed")
        result, before = self._read_for_seed(groups)
        # Compact: 100 groups x 4,032 gaps as lists of int objects would hold ~15 MB; as arrays, 3 MB.
        gaps = {g: array("q", (p for p in range(result.partitions) if p not in before[g])) for g in groups}
        starts = self._log_starts({p for parts in gaps.values() for p in parts})
        self.admin.seed_offsets_many(self.topic, {g: GapOffsets(parts, starts) for g, parts in gaps.items()})
        exceptions = Exceptions(self.log, "SEED")
        for group in groups:
            result.groups[group] = self._record(group, before[group], gaps[group], starts, exceptions, report)
            self.known[group] = result.partitions
            self.held[group] = ChainMap(before[group], starts)  # before wins: the gaps are the rest
        exceptions.close(self.plan.report_uri or "of this step")
        self.events.groups(groups, GroupState.SEEDED)
        return result

    def _read_for_seed(self, groups: list[str]) -> tuple[SeedResult, dict[str, dict[int, int]]]:
        """What the seed reads before it writes, all at once: that every group is EMPTY, the lease, the
        partition count and every group's committed offsets (below the partitions this run created, which
        hold none; without a create they are read once the count is known). Nothing is written before every
        answer is in.

        Right after this run's create the count is the one its create step has just read (the target): the
        metadata of thousands of new partitions is the largest answer of the window (4,096 partitions, one
        2-core Apache Kafka 4.4 node: 0.1 to 0.6 s), and a partition someone else added since is found by
        the resume's own read of the count (:meth:`require_offsets`), which refuses to resume the groups.

        :raises GroupNotEmptyError: a group is not EMPTY (raised before any other failure of the reads).
        """

        def empty_and_leased() -> None:
            self._check_empty(groups)
            self.lease_check()

        created = self.created_from
        if created is not None:
            fresh = self.partitions_seen == self.plan.target_partitions
            count_now = (lambda: self.partitions_seen) if fresh else self.partition_count
            _empty, count, before = together(
                empty_and_leased, count_now, lambda: self._committed(groups, created)
            )
            return SeedResult(count), before
        _empty, count = together(empty_and_leased, self.partition_count)
        return SeedResult(count), self._committed(groups, count)

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
        upto = partitions if self.created_from is None else min(partitions, self.created_from)
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

    def scale(self, live: list[str], baseline: bool = False) -> dict[str, Any]:
        """Switch producers with the client piece to the target layout, once every protected group holds an
        offset on every partition and every new partition's leader serves it; with ``key_order="preserve"``
        through the key-order barrier.

        The leaders are awaited first: on Apache Kafka 4.4 an idempotent producer whose first batch reaches
        a partition its leader has not loaded yet can retry it with OUT_OF_ORDER_SEQUENCE_NUMBER until its
        delivery timeout and lose it (KAFKA-15591, fixed after 4.4). The consumers are back by now; the
        producers keep writing to the old partitions meanwhile.

        :param live: the protected groups with live members now (empty in the per-step layout, where
            consumers are paused until after the switch).
        :param baseline: also return the new partitions' end offsets now (``{"p": end}``), the baseline of
            :class:`KStateNewPartitionsWrittenSensor`.
        :raises UnsafeResumeError: a protected group lacks an offset on a partition; nothing was switched.
        """
        self.require_offsets(self.plan.where("seed"))
        self.wait_for_leaders()
        target = self.plan.target_partitions
        if self.drains:
            drained = self.key_order_switch().drain_barrier(live)
            self.events.groups(drained["held_groups"], GroupState.AT_BARRIER)
            self.events.groups(drained["drain"]["groups"], GroupState.DRAINING)
            return drained
        out: dict[str, Any] = self.key_order_switch().switch(live)
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

    def wait_for_leaders(self) -> None:
        """Wait (up to ``leader_timeout``) until every partition the plan creates has a leader serving it."""
        from airflow_provider_kstate.increase.replicas import wait_for_leaders

        new = self.plan.new_partitions
        if not new:
            return
        took = wait_for_leaders(self.admin, self.topic, new, self.leader_timeout)
        self.log.info(
            "SCALE %s: the %s new partitions have leaders serving them (%.3f s)",
            self.topic,
            f"{len(new):,}",
            took,
        )

    def release_after_drain(self, drain: dict[str, Any]) -> dict[str, Any]:
        """After a drain: the topic's ControlledProducers switch to the target layout; the cost: how long
        the producers were stopped against the drained groups' backlog at the switch.

        :param drain: the switch's ``drain`` (``stopped_at``, the drained groups' ``backlog`` at the switch).
        """
        target = self.plan.target_partitions
        self.events.groups(drain.get("groups") or [], GroupState.DRAINED)
        epoch = self.control.set_layout(self.topic, target, issuer=self.owner)
        downtime = round((time.time() * 1000 - int(drain.get("stopped_at") or 0)) / 1000.0, 3)
        backlog = sum(int(v) for v in (drain.get("backlog") or {}).values())
        self.log.info(
            "DRAIN %s: producers started on %s partitions (epoch %s) after %.3f s stopped; the drained "
            "groups %s had %s records to consume at the switch",
            self.topic,
            target,
            epoch,
            downtime,
            drain.get("groups"),
            f"{backlog:,}",
        )
        return {
            "epoch": epoch,
            "partitions": target,
            "producer_downtime_s": downtime,
            "backlog_at_switch": backlog,
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
