"""The verification rule of a safe increase: per group and partition, would a consumer skip a message?

A group must hold an offset on every partition of the topic; an offset this run seeded must have been the
log start at seed time; on a partition this run created the offset must not be below today's log start. An
offset the group already had before the run is safe, whatever its value: the run did not move it (one below
the log start of an old partition is a *caution*: retention overtook a slow group before the run).

:func:`judge` states the rule for one row; :func:`judge_group` applies it to a group's partitions at once
(tight loops: 4,096 partitions x 100 groups in well under a second) from the topic's :class:`Marks` and
the seed report's :class:`SeedEvidence`. The verify step
(:class:`~airflow_provider_kstate.operators.verify.KStateVerifyOperator`) reads the cluster and the
reports, calls them and logs and writes what they found. No Airflow, no Kafka client here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.increase.plan import Plan, PlanMode
from airflow_provider_kstate.increase.report import expand, read_evidence, read_report

if TYPE_CHECKING:
    from airflow_provider_kstate.increase.ports import ReportStorage


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
