"""Prove, per group and partition, that no message of a new partition is skipped; then free the topic."""

from __future__ import annotations

from typing import Any

from airflow_provider_kstate.exceptions import VerificationError
from airflow_provider_kstate.operators.base import KStateStepOperator, run_owner
from airflow_provider_kstate.utils.plan import groups_where


def judge(row: dict[str, Any]) -> str:
    """Return why a new partition's messages would be skipped by the group, or "" when none would be."""
    if row["committed"] is None:
        return "no committed offset: a latest-reset consumer would start at the log end"
    if row.get("seeded_offset") is not None and row["seeded_offset"] > row["seed_log_start"]:
        return f"seeded at {row['seeded_offset']}, past the log start {row['seed_log_start']} at seed time"
    if row["committed"] < row["log_start"]:
        return f"committed {row['committed']} is below the log start {row['log_start']}: records were deleted unread"
    return ""


class KStateVerifyOperator(KStateStepOperator):
    """Report committed offsets against the log start and end at seed time, with the lag; fail on a skip.

    For every seeded group and every new partition: the offset committed at seed time must be the log
    start then (so the group reads from the first message), and the group must still hold an offset that
    is not below today's log start. On success the topic's lease is released.

    :param seed_report: the XCom of :class:`KStateSeedOffsetsOperator`.
    :param release_lease: release the topic's lease when verification passes.
    """

    template_fields: tuple[str, ...] = ("plan", "seed_report")

    def __init__(self, *, seed_report: Any, release_lease: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.seed_report = seed_report
        self.release_lease = release_lease

    def execute(self, context: Any) -> dict[str, Any]:
        target = int(self.plan["target_partitions"])
        marks = self.admin.watermarks(self.topic, list(range(target)))
        report = {g: self._group_rows(g, marks) for g in groups_where(self.plan, "seed")}
        failures = {
            f"{g}/{p}": row["problem"]
            for g, rows in report.items()
            for p, row in rows.items()
            if row.get("problem")
        }
        if failures:
            raise VerificationError(f"new-partition messages of {self.topic!r} would be skipped: {failures}")
        self.log.info(
            "VERIFY %s: no group skips a message of the new partitions %s",
            self.topic,
            self.plan["new_partitions"],
        )
        if self.release_lease:
            self.lease.release(self.topic, run_owner(context))
            self.log.info("LEASE topic %s released", self.topic)
        return {"topic": self.topic, "groups": report, "ok": True}

    def _group_rows(self, group: str, marks: dict[int, tuple[int, int]]) -> dict[str, Any]:
        committed = self.admin.committed_offsets(group, self.topic)
        seeded = self.seed_report["groups"].get(group, {})
        new = {int(p) for p in self.plan["new_partitions"]}
        rows: dict[str, Any] = {}
        for p, (start, end) in sorted(marks.items()):
            row: dict[str, Any] = {
                "new": p in new,
                "committed": committed.get(p),
                "log_start": start,
                "log_end": end,
            }
            row["lag"] = None if row["committed"] is None else end - row["committed"]
            if p in new:
                seed = seeded.get(str(p), {})
                row.update(
                    seeded_offset=seed.get("committed"),
                    seed_log_start=seed.get("log_start"),
                    seed_log_end=seed.get("log_end"),
                )
                row["problem"] = judge(row)
            self.log.info("VERIFY group %s partition %s: %s", group, p, _line(row))
            rows[str(p)] = row
        return rows


def _line(row: dict[str, Any]) -> str:
    text = f"committed {row['committed']} log [{row['log_start']}, {row['log_end']}) lag {row['lag']}"
    if row["new"]:
        text += f" | new: seeded {row['seeded_offset']} at log start {row['seed_log_start']} (end then {row['seed_log_end']})"
        text += f" -> {'SKIP: ' + row['problem'] if row['problem'] else 'no message skipped'}"
    return text
