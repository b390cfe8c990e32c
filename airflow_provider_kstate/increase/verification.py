"""The verification rule of a safe increase: per group and partition, would a consumer skip a message?

A group must hold an offset on every partition of the topic; an offset this run seeded must have been the
log start at seed time; on a partition this run created the offset must not be below today's log start. An
offset the group already had before the run is safe, whatever its value: the run did not move it (one below
the log start of an old partition is a *caution*: retention overtook a slow group before the run).

:func:`judge` states the rule for one row; :func:`judge_group` applies it to a group's partitions at once
(tight loops: 4,096 partitions x 100 groups in well under a second) from the topic's :class:`Marks` and
the seed report's :class:`SeedEvidence`. :class:`TopicVerification` judges one topic of a run with them:
it reads the cluster (through the admin port) and the seed report, releases the key-order barrier, logs and
writes what it found and returns the topic's summary; the verify step
(:class:`~airflow_provider_kstate.operators.verify.KStateVerifyOperator`) gathers its inputs and gives one
verdict over the topics. No Airflow, no Kafka client here.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from airflow_provider_kstate.errors import ReportError
from airflow_provider_kstate.increase.key_order import ORDER_DRAINED, KeyOrderPort, watch_release
from airflow_provider_kstate.increase.plan import Plan, PlanMode
from airflow_provider_kstate.increase.replicas import wait_for_leaders
from airflow_provider_kstate.increase.report import (
    Exceptions,
    ReportWriter,
    expand,
    ranges,
    read_evidence,
    read_report,
    write_report,
)

if TYPE_CHECKING:
    from airflow_provider_kstate.increase.ports import AdminPort, ReportStorage


def judge(row: dict[str, Any]) -> str:
    """Return why the group would skip messages of this partition, or "" when it would skip none.

    An offset the group already had before the run is safe, whatever its value: the run did not move it.
    """
    if row["committed"] is None:
        return "no committed offset: a latest-reset consumer would start at the log end"
    seeded_offset, seed_start = row.get("seeded_offset"), row.get("seed_log_start")
    if (
        row.get("seeded", seeded_offset is not None)
        and seeded_offset is not None
        and seed_start is not None
        and seeded_offset > seed_start
    ):
        return f"seeded at {seeded_offset}, past the log start {seed_start} at seed time"
    if row.get("new", True) and row["committed"] < row["log_start"]:
        return f"committed {row['committed']} is below the log start {row['log_start']}: records were deleted unread"
    return ""


def caution(row: dict[str, Any]) -> str:
    """Return what is unusual but not a skip caused by the run (an old partition's retention overtook
    a slow group), or ""."""
    if row["committed"] is not None and not row.get("new") and row["committed"] < row["log_start"]:
        return f"committed {row['committed']} is below the log start {row['log_start']} (retention overtook the group before this run)"
    return ""


@dataclass(frozen=True)
class Marks:
    """The topic's log start and end per partition, read once for every group; partitions from
    ``new_from`` on are the ones this run created."""

    starts: list[int]
    ends: list[int]
    new_from: int

    @classmethod
    def of(cls, plan: Plan, watermarks: Mapping[int, tuple[int, int]], count: int) -> Marks:
        """The marks of the topic's ``count`` partitions from their ``(log start, log end)``: an increase
        created the partitions from the plan's original count on, a repair none."""
        new_from = plan.original_partitions if plan.mode == PlanMode.INCREASE else count
        return cls(
            [watermarks[p][0] for p in range(count)], [watermarks[p][1] for p in range(count)], new_from
        )


class SeedEvidence:
    """The seed report, held compactly: per group, a flag per partition this run seeded, and the rows whose
    seeded offset was past the log start at seed time (there should be none)."""

    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self.seeded: dict[str, bytearray] = {}
        self.past_start: dict[str, dict[int, tuple[int, int]]] = {}
        self.rows = 0

    @classmethod
    def from_report(cls, partitions: int, uri: str, storage: ReportStorage | None = None) -> SeedEvidence:
        """Read the seed report at ``uri``: its index when it has one (:meth:`read_index`), else its rows
        (:meth:`read`); a report that cannot be read raises the report's error."""
        evidence = cls(partitions)
        index = read_evidence(uri, storage)
        if index is not None:
            evidence.read_index(index)
        else:
            evidence.read(read_report(uri, storage))
        return evidence

    def read(self, rows: Iterable[dict[str, Any]]) -> None:
        count, seeded = self.partitions, self.seeded
        for row in rows:
            self.rows += 1
            p = row["partition"]
            if not row["seeded"] or p >= count:
                continue
            group = row["group"]
            flags = seeded.get(group)
            if flags is None:
                flags = seeded[group] = bytearray(count)
            flags[p] = 1
            if row["committed"] > row["log_start_at_seed"]:
                self.past_start.setdefault(group, {})[p] = (row["committed"], row["log_start_at_seed"])

    def read_index(self, index: dict[str, Any]) -> None:
        """Take the seeded partitions from a seed report's index (``seed.evidence.json``): the same facts
        as the report's rows, without parsing one row per group and partition. The seed step commits the
        log start it read, so no seeded offset is past it."""
        count = self.partitions
        self.rows = int(index.get("rows") or 0)
        for group, text in index.get("seeded", {}).items():
            flags = self.seeded[group] = bytearray(count)
            for p in expand(text):
                if p < count:
                    flags[p] = 1

    def flags(self, group: str) -> bytearray:
        return self.seeded.get(group) or bytearray(self.partitions)


@dataclass(frozen=True)
class GroupVerdict:
    """What the rule found for one group: the partitions it would skip messages of (each with why), the
    cautions, the lag per partition and how many partitions this run seeded."""

    group: str
    offsets: list[int | None]
    bad: list[int]
    problems: dict[int, str]
    cautions: dict[int, str]
    lags: list[int]
    seeded: int

    @property
    def ok(self) -> bool:
        return not self.bad

    @property
    def lag(self) -> int:
        return sum(self.lags)

    @property
    def worst(self) -> tuple[int, int]:
        """``(lag, partition)`` of the partition with the most lag (``(0, -1)`` without partitions)."""
        if not self.lags:
            return 0, -1
        worst = max(range(len(self.lags)), key=self.lags.__getitem__)
        return self.lags[worst], worst


def judge_group(
    group: str, committed: Mapping[int, int], marks: Marks, evidence: SeedEvidence
) -> GroupVerdict:
    """Apply the rule (:func:`judge`, :func:`caution`) to every partition of one group."""
    count = len(marks.starts)
    offsets = [committed.get(p) for p in range(count)]
    flags = evidence.flags(group)
    below = [p for p, o in enumerate(offsets) if o is not None and o < marks.starts[p]]
    bad = sorted(
        {p for p, o in enumerate(offsets) if o is None}
        | {p for p in below if p >= marks.new_from}
        | set(evidence.past_start.get(group, ()))
    )
    past = evidence.past_start.get(group, {})
    problems = {}
    for p in bad:
        seeded_offset, seed_start = past.get(p, (None, None))
        row = _row(p, offsets, marks, flags)
        problems[p] = judge({**row, "seeded_offset": seeded_offset, "seed_log_start": seed_start})
    cautions = {p: caution(_row(p, offsets, marks, flags)) for p in below if p not in problems}
    lags = [0 if o is None else max(e - o, 0) for o, e in zip(offsets, marks.ends, strict=True)]
    return GroupVerdict(group, offsets, bad, problems, cautions, lags, sum(flags))


def _row(p: int, offsets: list[int | None], marks: Marks, flags: bytearray) -> dict[str, Any]:
    return {
        "committed": offsets[p],
        "log_start": marks.starts[p],
        "new": p >= marks.new_from,
        "seeded": bool(flags[p]),
    }


def report_rows(
    group: str,
    offsets: list[int | None],
    marks: Marks,
    lags: list[int],
    flags: bytearray,
    problems: Mapping[int, str],
) -> list[str]:
    """The verify report's rows of one group (JSON lines): offset, log start and end, lag, new, seeded and
    the problem per partition."""
    head = '{"group":' + json.dumps(group) + ',"partition":'
    return [
        f'{head}{p},"committed":{"null" if o is None else o},"log_start":{marks.starts[p]},'
        f'"log_end":{marks.ends[p]},"lag":{lags[p]},"new":{"true" if p >= marks.new_from else "false"},'
        f'"seeded":{"true" if flags[p] else "false"},"problem":{json.dumps(problems[p]) if p in problems else "null"}}}\n'
        for p, o in enumerate(offsets)
    ]


class BarrierPort(KeyOrderPort, Protocol):
    """The control channel verify releases the key-order barrier on; closed once the barrier is done."""

    def close(self) -> None: ...


def _nothing() -> None:
    return None


@dataclass
class TopicVerification:
    """Judge every partition of one topic of a run (:meth:`verify`) for every protected group.

    :param admin: the cluster's admin verbs.
    :param log: where the runbook lines go (one per group, the exceptions up to a cap).
    :param storage: where the reports live (None: this machine's disk).
    :param control: the control channel of the key-order barrier: each live group is released once it
        passed it (closed after); None: no barrier (key order not preserved).
    :param owner: the run's owner (``dag_id/run_id``): only a barrier this run set is released.
    :param barrier_timeout: seconds to wait for the live groups to pass the barrier.
    :param leader_timeout: seconds to wait for the new partitions' leaders.
    :param after_group: called after each group is judged (a crash test's failpoint).
    """

    admin: AdminPort
    log: Any
    storage: ReportStorage | None = None
    control: BarrierPort | None = None
    owner: str = ""
    barrier_timeout: float = 300.0
    leader_timeout: float = 300.0
    after_group: Callable[[], None] = _nothing

    def verify(
        self, plan: Plan, report_uri: str, seed_uri: str, started: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """Judge one topic (``plan``: its view); write its verify report at ``report_uri``; return its
        summary (nothing is released nor raised for a group that would skip messages).

        :param seed_uri: the topic's seed report (unreadable: judged from the cluster alone).
        :param started: what the producers' start said of this topic (their downtime, the backlog at the
            switch), for the drained groups.
        """
        topic = plan.topic
        if plan.new_partitions:  # the switch waited for them already; a per-step run may skip the switch
            wait_for_leaders(self.admin, topic, plan.new_partitions, self.leader_timeout)
        barrier = self.barrier(plan, self.control) if self.control is not None else {}
        barrier = self.drained(plan, barrier, started or {})
        count = self.admin.partition_count(topic)
        watermarks = self.admin.watermarks(topic, range(count))
        marks = Marks.of(plan, watermarks, count)
        evidence, seed_uri = self.evidence(seed_uri, count)
        problems, cautions = Exceptions(self.log, "VERIFY"), Exceptions(self.log, "VERIFY caution:")
        lag_total = 0
        with write_report(report_uri, self.storage) as report:
            for group, committed in self.admin.committed_offsets_many(plan.where("seed"), topic, count):
                lag_total += self.group(group, committed, marks, evidence, report, problems, cautions)
                self.after_group()
            rows = report.rows
        problems.close(report_uri)
        cautions.close(report_uri)
        return {
            "ok": not problems.count,
            "partitions": count,
            "groups": len(plan.where("seed")),
            "problems": problems.count,
            "cautions": cautions.count,
            "lag_total": lag_total,
            "report_uri": report_uri,
            "report_rows": rows,
            "seed_report_uri": seed_uri,
            "key_order": barrier,
        }

    def barrier(self, plan: Plan, control: BarrierPort) -> dict[str, Any]:
        """Release every live group of one topic once it passed the key-order barrier; per group, when."""
        seeded = plan.where("seed")
        live = [g for g, info in self.admin.describe_groups(seeded, plan.topic).items() if info.members]
        try:
            return watch_release(self.admin, control, plan, self.log, self.owner, self.barrier_timeout, live)
        finally:
            control.close()

    def drained(self, plan: Plan, order: dict[str, Any], started: Mapping[str, Any]) -> dict[str, Any]:
        """Add each drained group to the key-order summary: the producers waited until it had consumed
        everything written before them (``drained``), with their downtime and the backlog at the switch."""
        drained = plan.marked(ORDER_DRAINED)
        if not drained:
            return order
        entry = {
            "drained": "the producers started once it had consumed every record written before they stopped",
            "plan": str(ORDER_DRAINED),
            "producer_downtime_s": started.get("producer_downtime_s"),
            "backlog_at_switch": started.get("backlog_at_switch"),
        }
        groups = {**order.get("groups", {}), **{g: dict(entry) for g in drained}}
        for group in drained:
            self.log.info("VERIFY group %s was drained before the producers started: %s", group, entry)
        return {**order, "groups": groups}

    def evidence(self, uri: str, count: int) -> tuple[SeedEvidence, str]:
        """The seed report at ``uri`` and its URI; none readable: no evidence and ``""``."""
        try:
            evidence = SeedEvidence.from_report(count, uri, self.storage)
        except ReportError as exc:
            self.log.warning("VERIFY no seed report (%s): judging from the cluster alone", exc)
            return SeedEvidence(count), ""
        self.log.info("VERIFY read the seed report %s (%s rows)", uri, f"{evidence.rows:,}")
        return evidence, uri

    def group(
        self,
        group: str,
        committed: Mapping[int, int],
        marks: Marks,
        evidence: SeedEvidence,
        report: ReportWriter,
        problems: Exceptions,
        cautions: Exceptions,
    ) -> int:
        """Judge one group's partitions (:func:`judge_group`), log its exceptions and line, write its rows;
        return its lag."""
        verdict = judge_group(group, committed, marks, evidence)
        for p in verdict.bad:
            problems.add("group %s partition %s: SKIP: %s", group, p, verdict.problems[p])
        for p, text in verdict.cautions.items():
            cautions.add("group %s partition %s: %s", group, p, text)
        flags = evidence.flags(group)
        report.write_lines(report_rows(group, verdict.offsets, marks, verdict.lags, flags, verdict.problems))
        self.line(group, len(marks.starts), verdict)
        return verdict.lag

    def line(self, group: str, count: int, verdict: GroupVerdict) -> None:
        """Log the group's line: its partitions, those it would skip messages of, seeded, its lag."""
        bad, worst = verdict.bad, verdict.worst
        judged = (
            f"{len(bad):,} partitions WOULD SKIP messages: {ranges(bad)}"
            if bad
            else "every one holds an offset from which no message is skipped"
        )
        self.log.info(
            "VERIFY group %s: %s partitions, %s; %s seeded by this run at the log start; lag %s (max %s on partition %s)",
            group,
            f"{count:,}",
            judged,
            f"{verdict.seeded:,}",
            f"{verdict.lag:,}",
            f"{worst[0]:,}",
            worst[1],
        )


def passed_groups(summaries: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The groups of every topic that passed the key-order barrier or were drained (``key_order`` ->
    ``groups``; a group of several topics is judged by its last topic's entry)."""
    entries: dict[str, Any] = {}
    for summary in summaries.values():
        entries.update(summary["key_order"].get("groups", {}))
    return [g for g, e in entries.items() if "passed_after_s" in e or "drained" in e]


def failure(summaries: Mapping[str, Mapping[str, Any]]) -> str:
    """Why the run fails: per topic judged not ok, how many partitions would skip messages; ``""``: none."""
    failed = [t for t, s in summaries.items() if not s["ok"]]
    if not failed:
        return ""
    return (
        "; ".join(
            f"{summaries[t]['problems']:,} partitions of {t!r} would have messages skipped (report "
            f"{summaries[t]['report_uri']})"
            for t in failed
        )
        + ". See the lines above. The lease of every topic stays held."
    )


def overall(summaries: Mapping[str, Mapping[str, Any]], groups: int) -> dict[str, Any]:
    """The verify step's XCom once every topic passed: the summaries under ``topics``, and the totals."""
    return {
        "topics": dict(summaries),
        "ok": True,
        "partitions": max(s["partitions"] for s in summaries.values()),
        "groups": groups,
        "problems": 0,
        "cautions": sum(s["cautions"] for s in summaries.values()),
        "lag_total": sum(s["lag_total"] for s in summaries.values()),
    }
