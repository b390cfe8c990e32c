"""Grow the topics: validate with the broker first, then create; a no-op when already at the target."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.operators.step import KStateStepOperator

if TYPE_CHECKING:
    from airflow.sdk import Context


class KStateIncreasePartitionsOperator(KStateStepOperator):
    """Increase every topic of the plan to its target partition count.

    Runs ``CreatePartitions`` with ``validate_only`` first, then for real, and waits until metadata
    shows the new count. A topic that already has the target count (a retry) is left as it is. Every topic
    must still have its planned count (or the target) before the first create; XCom has each topic's
    result under ``topics``.
    """

    lineage_kind = "increase"

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_provider_kstate.metrics import METRICS_OUT

        plan = self.typed_plan
        result = self.run(context).increase(self.request_timeout)
        for view in plan.views():
            METRICS_OUT.created(view, result["topics"][view.topic])
        self.log.info("INCREASE %s: every topic has %s partitions", plan.topic_names, plan.target_partitions)
        return result
