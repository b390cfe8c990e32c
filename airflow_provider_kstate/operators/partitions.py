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

    A plan of several co-partitioned topics creates every topic's partitions, one after the other, once
    every topic still has its planned count (or the target); XCom has each topic's result under ``topics``.
    """

    lineage_kind = "increase"

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_provider_kstate.metrics import METRICS_OUT

        plan = self.typed_plan
        if plan.several:
            each = self.topic_set_steps(context).increase(self.request_timeout)
            for view in plan.views():
                METRICS_OUT.created(view, each[view.topic])
            self.log.info(
                "INCREASE %s: every topic has %s partitions", plan.topic_names, plan.target_partitions
            )
            return {
                "created": any(r["created"] for r in each.values()),
                "partitions": plan.target_partitions,
                "topics": each,
            }
        result = self.steps(context).increase(self.request_timeout)
        METRICS_OUT.created(self.typed_plan, result)
        return result
