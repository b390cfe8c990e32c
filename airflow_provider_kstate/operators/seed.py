"""Seed every affected group's offsets on the new partitions to the log start (earliest)."""

from __future__ import annotations

from typing import Any

from airflow_provider_kstate.operators.base import KStateStepOperator


class KStateSeedOffsetsOperator(KStateStepOperator):
    """Commit, for each group the plan seeds, the log-start offset of each new partition it has no offset on.

    Every group must be EMPTY first (the broker refuses offsets otherwise): if one is not, the step fails
    with :class:`GroupNotEmptyError` before writing anything. Offsets a group already has are kept, so a
    rerun continues where the last one stopped. The result, pushed to XCom, records per group and
    partition the offset committed and the log start and end at seed time: the evidence the verify step
    checks.
    """

    def execute(self, context: Any) -> dict[str, Any]:
        return self.steps(context).seed()
