"""Seed every affected group's offsets on the new partitions to the log start (earliest)."""

from __future__ import annotations

from typing import Any

from airflow_provider_kstate.exceptions import GroupNotEmptyError, SeedError
from airflow_provider_kstate.operators.base import KStateStepOperator
from airflow_provider_kstate.utils.checks import groups_empty
from airflow_provider_kstate.utils.plan import groups_where


class KStateSeedOffsetsOperator(KStateStepOperator):
    """Commit, for each group the plan seeds, the log-start offset of each new partition it has no offset on.

    Every group must be EMPTY first (the broker refuses offsets otherwise): if one is not, the step fails
    before writing anything. Offsets a group already has are kept, so a rerun continues where the last one
    stopped. The result, pushed to XCom, records per group and partition the offset committed and the log
    start and end at seed time: the evidence the verify step checks.
    """

    def execute(self, context: Any) -> dict[str, Any]:
        groups = groups_where(self.plan, "seed")
        blockers = groups_empty(self.admin, self.topic, groups)
        if not blockers.ok:
            raise GroupNotEmptyError(
                f"cannot seed {self.topic!r}: these groups are not EMPTY: {blockers.detail}. Nothing was written; "
                "consumers stay paused. Stop those members, then clear this task."
            )
        new = [int(p) for p in self.plan["new_partitions"]]
        marks = self.admin.watermarks(self.topic, new)
        report = {group: self._seed_group(group, new, marks) for group in groups}
        return {"topic": self.topic, "groups": report}

    def _seed_group(self, group: str, new: list[int], marks: dict[int, tuple[int, int]]) -> dict[str, Any]:
        before = self.admin.committed_offsets(group, self.topic)
        wanted = {p: marks[p][0] for p in new if p not in before}
        self.admin.seed_offsets(group, self.topic, wanted)
        after = self.admin.committed_offsets(group, self.topic)
        rows: dict[str, Any] = {}
        for p in new:
            if p not in after:
                raise SeedError(f"group {group!r}: partition {p} has no committed offset after seeding")
            rows[str(p)] = {
                "committed": after[p],
                "log_start": marks[p][0],
                "log_end": marks[p][1],
                "seeded": p in wanted,
            }
            action = "seeded to log start" if p in wanted else "kept existing offset"
            self.log.info(
                "SEED group %s partition %s: %s %s (log start %s, end %s)",
                group,
                p,
                action,
                after[p],
                marks[p][0],
                marks[p][1],
            )
        return rows
