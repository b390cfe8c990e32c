"""Grow the topic: validate with the broker first, then create; a no-op when already at the target."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.operators.base import KStateStepOperator

if TYPE_CHECKING:
    from airflow.sdk import Context


class KStateIncreasePartitionsOperator(KStateStepOperator):
    """Increase the topic to the plan's target partition count.

    Runs ``CreatePartitions`` with ``validate_only`` first, then for real, and waits until metadata
    shows the new count. If the topic already has the target count (a retry), it does nothing.
    """

    lineage_kind = "increase"

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_provider_kstate.metrics import METRICS_OUT

        result = self.steps(context).increase(self.request_timeout)
        METRICS_OUT.created(self.typed_plan, result)
        return result
