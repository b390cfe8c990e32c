"""The approval step of the safe partition increase, like a production change: plan, approve, apply.

Built on the standard provider's human-in-the-loop :class:`~airflow.providers.standard.operators.hitl.ApprovalOperator`
(Airflow 3.1+): the request appears under the run's *Required actions* in the UI, and in the REST API
(``/api/v2/dags/{dag_id}/dagRuns/{run_id}/hitlDetails``; answered by ``PATCH
.../taskInstances/{task_id}/-1/hitlDetails`` with ``{"chosen_options": ["Approve"]}``).
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.providers.standard.operators.hitl import ApprovalOperator

from airflow_provider_kstate.compat import HITL_AWAITS_INPUT
from airflow_provider_kstate.defaults import DEFAULT_APPROVAL_TIMEOUT
from airflow_provider_kstate.operators.base import KStateStepOperator
from airflow_provider_kstate.params import as_bool

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_kstate.increase.approval import BrokerCheck
    from airflow_provider_kstate.increase.approval_step import ApprovalRecord
    from airflow_provider_kstate.increase.plan import Plan

#: Earlier runs of the topic whose progress documents the prompt reads, at most (the newest).
HISTORY_RUNS = 20


class KStateApprovalOperator(KStateStepOperator, ApprovalOperator):
    """Ask a human to approve the plan before anyone is paused; with ``require_approval`` off, go on at once.

    The prompt (Markdown, from the typed plan: :mod:`~airflow_provider_kstate.increase.approval`) shows the
    partitions now and after, each group with its class, driver, key-order mark and what the run will do to
    it, the broker doctor's last verdict and the downtime this topic's earlier runs measured. While it
    waits, the run's progress document says ``awaiting_approval`` and the topics' leases are held until the
    deadline. A plan of several co-partitioned topics is approved as one.

    * **Approve**: the plan is made again from the request stored in it (the one planner,
      :func:`~airflow_provider_kstate.increase.planner.plan_again`) and compared with the approved one; a
      change fails the task with :class:`~airflow_provider_kstate.errors.PlanChangedError` naming each
      change, before anyone is paused (the leases released).
    * **Reject**: nothing is changed, the leases are released and every later task of the run is skipped
      (this task succeeds: the decision was made).
    * **No answer before** ``approval_timeout``: the same, but the task fails with
      :class:`~airflow_provider_kstate.errors.ApprovalTimeoutError` (nobody decided: alerts fire).

    It holds no worker slot while it waits (``awaiting_input`` on Airflow 3.3, deferred on 3.1 and 3.2).
    What each answer does to the run, the lease and ``progress.json``: ``docs/guides/approval.md``; the
    decisions: :mod:`~airflow_provider_kstate.increase.approval_step`.

    :param plan: the plan (XCom of :class:`~airflow_provider_kstate.operators.plan.KStatePlanOperator`;
        ``docs/reference/parameters.md``).
    :param require_approval: ask for an approval; off, the task returns at once (templated).
    :param approval_timeout: seconds (or a ``timedelta``) to wait for an answer (templated).
    :param history_runs: earlier runs of the topic whose downtime the prompt shows, at most.
    """

    template_fields: tuple[str, ...] = (
        "plan",
        "require_approval",
        "approval_timeout",
    )
    ui_color = "#fff8e1"

    def __init__(
        self,
        *,
        plan: Any,
        require_approval: bool | str = False,
        approval_timeout: float | str | timedelta = DEFAULT_APPROVAL_TIMEOUT,
        history_runs: int = HISTORY_RUNS,
        **kwargs: Any,
    ) -> None:
        # The wait's deadline is approval_timeout: a step-wide execution_timeout (default_args) would race it
        # (the HITL operator would even take it for the response timeout).
        kwargs.pop("execution_timeout", None)
        super().__init__(
            plan=plan,
            subject="Approve the partition increase",
            ignore_downstream_trigger_rules=True,
            **kwargs,
        )
        self.require_approval = require_approval
        self.approval_timeout = approval_timeout
        self.history_runs = history_runs

    @property
    def serialized_params(self) -> dict[str, dict[str, Any]]:
        """The request asks for no input but the choice. (On Airflow 3.1 a Param does not record whether it
        is the DAG's or the task's, so the HITL form would show every DAG param: apache/airflow#57498.)"""
        return {}

    def execute(self, context: Context) -> Any:
        from airflow_provider_kstate.increase import approval_step as step
        from airflow_provider_kstate.increase.approval import approval_text, wait_lease_ttl
        from airflow_provider_kstate.lease_rules import run_owner

        if not as_bool("require_approval", self.require_approval):
            self.log.info("APPROVE not required (require_approval is off): the run goes on with the plan")
            return dict(step.NOT_REQUIRED)
        plan, timeout = self.typed_plan, step.approval_timeout(self.approval_timeout)
        storage, owner = self.report_storage.path, run_owner(context)
        history = step.topic_history(plan, owner, storage, self.history_runs, self.log)
        text = approval_text(
            plan, broker=self._broker_check(), history=history, deadline=step.deadline_text(timeout)
        )
        self.subject, self.body, self.response_timeout = text.subject, text.body, timeout
        parked = "awaiting_input" if HITL_AWAITS_INPUT else "deferred to the triggerer"
        self._record(context, wait_lease_ttl(self.lease_ttl, timeout.total_seconds())).wait(
            plan, timeout, parked
        )
        return super().execute(context)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        from airflow_provider_kstate.increase.approval_step import Answer

        answer, record = Answer(event, self.APPROVE), self._record(context)
        record.answered(answer, self.typed_plan)  # no answer in time, or a reject: the run ends here
        super().execute_complete(context, event)  # validates; a Reject skips every later task from here
        return record.decided(answer, self.typed_plan, self._replan)

    def _broker_check(self) -> BrokerCheck | None:
        """The broker doctor's cached verdict (never probes); None when there is none or it cannot be read."""
        from airflow_provider_kstate.doctor.promises import INCREASE_NEEDS
        from airflow_provider_kstate.hooks.doctor import KStateDoctorHook
        from airflow_provider_kstate.increase.approval import BrokerCheck

        def last_verdict() -> Any:
            return KStateDoctorHook(self.kafka_config_id, request_timeout=self.request_timeout).last_verdict()

        return BrokerCheck.read(last_verdict, INCREASE_NEEDS, self.log)

    def _record(self, context: Context, ttl: float | None = None) -> ApprovalRecord:
        """What this task records: the topics' leases (at ``ttl``; default the steps') and the run's progress
        document."""
        from airflow_provider_kstate.increase.approval_step import ApprovalRecord

        return ApprovalRecord(self.keeper(context, ttl), self.events(context), self.log)

    def _replan(self, approved: Plan) -> tuple[Plan, str]:
        """The approved plan made again now and "", or at the counts now and why the planner refuses it
        (:func:`~airflow_provider_kstate.increase.planner.plan_again`)."""
        from airflow_provider_kstate.increase.planner import plan_again

        return plan_again(self.admin, approved, self.control.client_piece_clients)


__all__ = ["KStateApprovalOperator"]
