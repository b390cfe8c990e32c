"""The gate after the plan of the safe partition increase: a dry run stops here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_provider_kstate.compat import AirflowSkipException
from airflow_provider_kstate.task_edge import TranslatesDomainErrors

if TYPE_CHECKING:
    from airflow.sdk import Context


class KStateDryRunGateOperator(TranslatesDomainErrors, BaseOperator):
    """Stop the run after the plan when it was a dry run: this task is skipped, and so is everything after it.

    :param plan: the plan (XCom of :class:`~airflow_provider_kstate.operators.plan.KStatePlanOperator`).
    """

    template_fields: tuple[str, ...] = ("plan",)
    ui_color = "#e3f2fd"

    def __init__(self, *, plan: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.plan = plan

    def execute(self, context: Context) -> None:
        from airflow_provider_kstate.increase.plan import Plan

        plan = Plan.from_dict(self.plan)
        if plan.dry_run:
            raise AirflowSkipException("dry run: the plan is in XCom; nothing was changed")
        self.log.info("PLAN not a dry run: proceeding with %s", plan.topic)
