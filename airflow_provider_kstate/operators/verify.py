"""Prove, per group and partition, that no message is skipped; then free the topic."""

from __future__ import annotations

from array import array
from typing import Any

from airflow_provider_kstate.exceptions import ReportError, VerificationError
from airflow_provider_kstate.operators.base import KStateStepOperator, run_owner
from airflow_provider_kstate.utils.failpoints import failpoint
from airflow_provider_kstate.utils.report import Exceptions, ReportWriter, ranges, read_report, write_report

#: No offset recorded (array slot unused).
NONE = -1


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


class SeedEvidence:
    """The seed report, held compactly: per group, the offset seeded on each partition and the log start then."""

    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self.groups: dict[str, tuple[array[int], array[int]]] = {}
        self.rows = 0

    def add(self, row: dict[str, Any]) -> None:
        self.rows += 1
        p = int(row["partition"])
        if not row.get("seeded") or p >= self.partitions:
            return
        offsets, starts = self.groups.setdefault(
            row["group"], (array("q", [NONE]) * self.partitions, array("q", [NONE]) * self.partitions)
        )
        offsets[p] = int(row["committed"])
        starts[p] = int(row["log_start_at_seed"])

    def of(self, group: str, p: int) -> tuple[int | None, int | None]:
        found = self.groups.get(group)
        if found is None or found[0][p] == NONE:
            return None, None
        return found[0][p], found[1][p]


class KStateVerifyOperator(KStateStepOperator):
    """Judge every partition of the topic for every protected group, from the cluster and the seed report.

    Each group must hold an offset on every partition; an offset this run seeded must have been the log
    start at seed time; on a new partition the offset must not be below today's log start. An offset a
    group already had is safe, whatever its value. The verdict per group and partition (offset, log start
    and end, lag, seeded or kept, problem) goes to the verify report; the log has one line per group and
    the exceptions up to a cap; XCom gets the summary and the reports' URIs. On success the topic's lease
    is released.

    :param seed_report: the XCom of the pause window or of :class:`KStateSeedOffsetsOperator` (a summary
        with ``report_uri``); None: this run's seed report at the default location.
    :param release_lease: release the topic's lease when verification passes.
    """

    template_fields: tuple[str, ...] = ("plan", "seed_report")

    def __init__(self, *, seed_report: Any = None, release_lease: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.seed_report = seed_report
        self.release_lease = release_lease

    def execute(self, context: Any) -> dict[str, Any]:
        plan = self.typed_plan
        count = self.admin.partition_count(self.topic)
        marks = self.admin.watermarks(self.topic, range(count))
        evidence, seed_uri = self._evidence(context, count)
        uri = self.report_uri(context, "verify")
        problems, cautions = Exceptions(self.log, "VERIFY"), Exceptions(self.log, "VERIFY caution:")
        lag_total = 0
        with write_report(uri, self.report_conn_id) as report:
            for group, committed in self.admin.committed_offsets_many(plan.where("seed"), self.topic, count):
                lag_total += self._group(group, committed, marks, evidence, report, problems, cautions)
                failpoint("mid_verify")
            rows = report.rows
        problems.close(uri)
        cautions.close(uri)
        summary = {
            "topic": self.topic,
            "ok": not problems.count,
            "partitions": count,
            "groups": len(plan.where("seed")),
            "problems": problems.count,
            "cautions": cautions.count,
            "lag_total": lag_total,
            "report_uri": uri,
            "report_rows": rows,
            "seed_report_uri": seed_uri,
        }
        if problems.count:
            raise VerificationError(
                f"{problems.count:,} partitions of {self.topic!r} would have messages skipped: see the lines "
                f"above and the report {uri}. The lease stays held."
            )
        self.log.info(
            "VERIFY %s: no group skips a message on any of its %s partitions", self.topic, f"{count:,}"
        )
        if self.release_lease:
            self.lease.release(self.topic, run_owner(context))
            self.log.info("LEASE topic %s released", self.topic)
        return summary

    def _evidence(self, context: Any, count: int) -> tuple[SeedEvidence, str]:
        given = self.seed_report if isinstance(self.seed_report, dict) else {}
        uri = str(given.get("report_uri") or self.report_uri(context, "seed"))
        evidence = SeedEvidence(count)
        try:
            for row in read_report(uri, self.report_conn_id):
                evidence.add(row)
        except ReportError as exc:
            self.log.warning("VERIFY no seed report (%s): judging from the cluster alone", exc)
            return SeedEvidence(count), ""
        self.log.info("VERIFY read the seed report %s (%s rows)", uri, f"{evidence.rows:,}")
        return evidence, uri

    def _group(
        self,
        group: str,
        committed: dict[int, int],
        marks: dict[int, tuple[int, int]],
        evidence: SeedEvidence,
        report: ReportWriter,
        problems: Exceptions,
        cautions: Exceptions,
    ) -> int:
        new = self.typed_plan.new_partitions
        count = len(marks)
        cols: dict[str, list[Any]] = {k: [None] * count for k in ("committed", "log_start", "log_end", "lag")}
        cols.update(new=[p in new for p in range(count)], seeded=[False] * count, problem=[None] * count)
        bad: list[int] = []
        lag_total, worst = 0, (0, -1)
        for p, (start, end) in marks.items():
            seeded_offset, seed_start = evidence.of(group, p)
            row = {
                "committed": committed.get(p),
                "log_start": start,
                "new": p in new,
                "seeded": seeded_offset is not None,
                "seeded_offset": seeded_offset,
                "seed_log_start": seed_start,
            }
            lag = None if row["committed"] is None else max(end - row["committed"], 0)
            cols["committed"][p], cols["log_start"][p], cols["log_end"][p], cols["lag"][p] = (
                row["committed"],
                start,
                end,
                lag,
            )
            cols["seeded"][p] = row["seeded"]
            problem = judge(row)
            if problem:
                bad.append(p)
                cols["problem"][p] = problem
                problems.add("group %s partition %s: SKIP: %s", group, p, problem)
            elif caution(row):
                cautions.add("group %s partition %s: %s", group, p, caution(row))
            lag_total += lag or 0
            worst = max(worst, (lag or 0, p))
        report.write_group(group, cols, range(count))
        self._line(group, count, bad, sum(cols["seeded"]), lag_total, worst)
        return lag_total

    def _line(
        self, group: str, count: int, bad: list[int], seeded: int, lag: int, worst: tuple[int, int]
    ) -> None:
        verdict = (
            f"{len(bad):,} partitions WOULD SKIP messages: {ranges(bad)}"
            if bad
            else "every one holds an offset from which no message is skipped"
        )
        self.log.info(
            "VERIFY group %s: %s partitions, %s; %s seeded by this run at the log start; lag %s (max %s on partition %s)",
            group,
            f"{count:,}",
            verdict,
            f"{seeded:,}",
            f"{lag:,}",
            f"{worst[0]:,}",
            worst[1],
        )
