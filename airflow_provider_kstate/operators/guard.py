"""What runs when a step fails: resume consumers only where that cannot skip data, else fail loudly."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.compat import AirflowSkipException
from airflow_provider_kstate.operators.step import KStateStepOperator

if TYPE_CHECKING:
    from airflow.sdk import Context


class KStateFailureGuardOperator(KStateStepOperator):
    """Run on failure (``trigger_rule=one_failed``) and decide from the cluster, not from task states
    (the decisions: :class:`~airflow_provider_kstate.increase.guard.FailureGuard`).

    * Another run holds the topic's lease: change nothing (its consumers are its business).
    * An increase whose partitions were not created yet: resume consumers, restore the producer layout
      (and start the producer services a drain stopped), release the lease.
    * Otherwise, per group: a group with an offset on every partition of the topic is resumed (safe); a
      group without is NOT resumed, and the guard fails with :class:`UnsafeResumeError` and the runbook.
      Producers a drain stopped are started (loss-safe: a group without offsets stays out of its group,
      and its seed starts at the log start); their keys may reorder for a group that had not drained.

    A plan of several topics is decided the same way over the set: nothing created on any topic resumes
    everyone and releases every lease; otherwise a group is resumed when it holds an offset on every
    partition of every topic it reads, and the others stay out (the runbook names each topic's gaps).

    Each group is resumed by its driver: the resume record, and the start commands of the command-driven
    groups that were live at plan time (start commands are idempotent).

    The guard always fails the run: something upstream failed. It reads the plan from the plan task's
    XCom itself, so it skips quietly when the plan step failed (then nothing was changed), and, with an
    approval step, when the run was not approved (the request expired, or the cluster changed since the
    plan: nobody was paused; the lease is released).

    :param plan_task_id: the task id of the plan step.
    :param approval_task_id: the task id of the approval step, if the run has one.
    """

    template_fields: tuple[str, ...] = ()

    def __init__(
        self,
        *,
        plan_task_id: str,
        approval_task_id: str | None = None,
        trigger_rule: str = "one_failed",
        **kwargs: Any,
    ) -> None:
        super().__init__(plan=None, trigger_rule=trigger_rule, **kwargs)
        self.plan_task_id = plan_task_id
        self.approval_task_id = approval_task_id

    def execute(self, context: Context) -> None:
        from airflow_provider_kstate.increase.guard import FailureGuard, answered_yes

        self.plan = context["ti"].xcom_pull(task_ids=self.plan_task_id)
        if not self.plan:
            raise AirflowSkipException(
                "the plan step did not finish: this run changed nothing, no guard needed"
            )
        keeper = self.keeper(context)
        if self.approval_task_id and not answered_yes(
            context["ti"].xcom_pull(task_ids=self.approval_task_id)
        ):
            keeper.release()  # a no-op unless this run still holds it (the approval step releases it)
            raise AirflowSkipException(
                "the run was not approved (the request expired, or the cluster changed since the plan): "
                "nobody was paused and nothing was changed; no guard needed"
            )
        guard = FailureGuard(self.typed_plan, self.admin, self.control, keeper, self.log)
        guard.check_lease()
        self.events(context).finish("failed")
        guard.run()
