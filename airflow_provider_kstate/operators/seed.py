"""Seed every affected group's offsets to the log start (earliest) wherever it has none."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.operators.base import KStateStepOperator

if TYPE_CHECKING:
    from airflow.sdk import Context


class KStateSeedOffsetsOperator(KStateStepOperator):
    """Commit, for each group the plan seeds, the log-start offset of every partition it has no offset on.

    Every group must be EMPTY first (the broker refuses offsets otherwise): if one is not, the step fails
    with :class:`GroupNotEmptyError` before writing anything. Offsets a group already has are kept, so a
    rerun continues where the last one stopped. The per-group, per-partition evidence (offset committed,
    seeded or kept, log start at seed time) goes to the seed report; XCom gets a summary and its URI.
    """

    lineage_kind = "seed"

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_provider_kstate.increase.report import write_report
        from airflow_provider_kstate.metrics import METRICS_OUT

        steps = self.steps(context)
        uri = self.report_uri(context, "seed")
        with write_report(uri, self.report_storage, evidence=True) as report:
            result = steps.seed(None, report)
            rows = report.rows
        METRICS_OUT.seeded(self.topic, result.summary())
        return {"topic": self.topic, **result.summary(), "report_uri": uri, "report_rows": rows}
