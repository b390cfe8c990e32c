"""The approval step of the safe partition increase, like a production change: plan, approve, apply; on the
standard provider's human-in-the-loop ``ApprovalOperator`` (Airflow 3.1+; ``docs/guides/approval.md``)."""

from __future__ import annotations

from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

from airflow.providers.standard.operators.hitl import ApprovalOperator

from airflow_provider_kstate.compat import HITL_AWAITS_INPUT
from airflow_provider_kstate.defaults import DEFAULT_APPROVAL_TIMEOUT, DEFAULT_HISTORY_RUNS
from airflow_provider_kstate.operators.step import KStateStepOperator
from airflow_provider_kstate.params import as_bool

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_kstate.increase.approval_step import ApprovalRecord
    from airflow_provider_kstate.increase.plan import Plan


class KStateApprovalOperator(KStateStepOperator, ApprovalOperator):
    """Ask a human to approve the plan before anyone is paused; with ``require_approval`` off, go on at once.

    The prompt (:mod:`~airflow_provider_kstate.increase.approval`) shows the partitions now and after, each
    group and what the run will do to it, the broker doctor's last verdict and the downtime of the topic's
    earlier runs; the topics' leases are held until the deadline. **Approve**: the plan is made again and a
    change fails the task (:class:`~airflow_provider_kstate.errors.PlanChangedError`); **Reject**: every
    later task is skipped; **no answer** before ``approval_timeout``: the same, but the task fails
    (:class:`~airflow_provider_kstate.errors.ApprovalTimeoutError`). It holds no worker slot while it waits.
    Each answer, step by step: ``docs/guides/approval.md``; the decisions:
    :mod:`~airflow_provider_kstate.increase.approval_step`.

    :param plan: the plan (XCom of :class:`~airflow_provider_kstate.operators.plan.KStatePlanOperator`).
    :param require_approval: ask for an approval; off, the task returns at once. (templated)
    :param approval_timeout: seconds (or a ``timedelta``) to wait for an answer. (templated)
    :param history_runs: earlier runs of the topic whose downtime the prompt shows, at most.
    """

    template_fields: tuple[str, ...] = ("plan", "require_approval", "approval_timeout")
    ui_color = "#fff8e1"

    def __init__(
        self,
        *,
        plan: Any,
        require_approval: bool | str = False,
        approval_timeout: float | str | timedelta = DEFAULT_APPROVAL_TIMEOUT,
        history_runs: int = DEFAULT_HISTORY_RUNS,
        **kwargs: Any,
    ) -> None:
        # The wait's deadline is approval_timeout: a step-wide execution_timeout (default_args) would race it
        # (the HITL operator would even take it for the response timeout).
        kwargs.pop("execution_timeout", None)
        subject = "Approve the partition increase"
        super().__init__(plan=plan, subject=subject, ignore_downstream_trigger_rules=True, **kwargs)
        self.require_approval = require_approval
        self.approval_timeout = approval_timeout
        self.history_runs = history_runs

    @property
    def serialized_params(self) -> dict[str, dict[str, Any]]:
        """The request asks for no input but the choice (on Airflow 3.1 the HITL form would show every DAG
        param: apache/airflow#57498)."""
        return {}

    def execute(self, context: Context) -> Any:
        from airflow_provider_kstate.doctor.promises import INCREASE_NEEDS
        from airflow_provider_kstate.hooks.doctor import KStateDoctorHook
        from airflow_provider_kstate.increase import approval_step as step
        from airflow_provider_kstate.increase.approval import BrokerCheck, approval_text, wait_lease_ttl
        from airflow_provider_kstate.lease_rules import run_owner

        if not as_bool("require_approval", self.require_approval):
            self.log.info("APPROVE not required (require_approval is off): the run goes on with the plan")
            return dict(step.NOT_REQUIRED)
        plan, timeout = self.typed_plan, step.approval_timeout(self.approval_timeout)
        history = step.topic_history(
            plan, run_owner(context), self.report_storage.path, self.history_runs, self.log
        )
        doctor = partial(KStateDoctorHook, self.kafka_config_id, request_timeout=self.request_timeout)
        broker = BrokerCheck.read(lambda: doctor().last_verdict(), INCREASE_NEEDS, self.log)  # never probes
        text = approval_text(plan, broker=broker, history=history, deadline=step.deadline_text(timeout))
        self.subject, self.body, self.response_timeout = text.subject, text.body, timeout
        parked = "awaiting_input" if HITL_AWAITS_INPUT else "deferred to the triggerer"
        ttl = wait_lease_ttl(self.lease_ttl, timeout.total_seconds())
        self._record(context, ttl).wait(plan, timeout, parked)
        return super().execute(context)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        from airflow_provider_kstate.increase.approval_step import Answer

        answer, record = Answer(event, self.APPROVE), self._record(context)
        record.answered(answer, self.typed_plan)  # no answer in time, or a reject: the run ends here
        super().execute_complete(context, event)  # validates; a Reject skips every later task from here
        return record.decided(answer, self.typed_plan, self._replan)

    def _replan(self, approved: Plan) -> tuple[Plan, str]:
        """The approved plan made again now and "", or at the counts now and why the planner refuses it."""
        from airflow_provider_kstate.increase.planner import plan_again

        return plan_again(self.admin, approved, self.control.client_piece_clients)

    def _record(self, context: Context, ttl: float | None = None) -> ApprovalRecord:
        """What this task records: the topics' leases (at ``ttl``; default the steps'), the run's progress."""
        from airflow_provider_kstate.increase.approval_step import ApprovalRecord

        return ApprovalRecord(self.keeper(context, ttl), self.events(context), self.log)
