"""What runs when a step fails: resume consumers only where that cannot skip data, else fail loudly."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.compat import AirflowSkipException
from airflow_provider_kstate.errors import KStateError, LeaseHeldError, UnsafeResumeError
from airflow_provider_kstate.operators.base import KStateStepOperator

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_kstate.increase.plan import Plan
    from airflow_provider_kstate.lease_rules import LeaseSet


class KStateFailureGuardOperator(KStateStepOperator):
    """Run on failure (``trigger_rule=one_failed``) and decide from the cluster, not from task states.

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
        self.plan = context["ti"].xcom_pull(task_ids=self.plan_task_id)
        if not self.plan:
            raise AirflowSkipException(
                "the plan step did not finish: this run changed nothing, no guard needed"
            )
        plan, keeper = self.typed_plan, self.keeper(context)
        if not self._approved(context):
            keeper.release()  # a no-op unless this run still holds it (the approval step releases it)
            raise AirflowSkipException(
                "the run was not approved (the request expired, or the cluster changed since the plan): "
                "nobody was paused and nothing was changed; no guard needed"
            )
        owner = keeper.owner
        self._check_lease(keeper)
        self.events(context).finish("failed")
        self._guard(plan, owner, keeper)

    def _guard(self, plan: Plan, owner: str, keeper: LeaseSet) -> None:
        """Decide from the cluster, for every topic of the plan (a topic is a set of one); always raises:
        something upstream failed."""
        from airflow_provider_kstate.increase.key_order import ORDER_DRAINED
        from airflow_provider_kstate.increase.plan import PlanMode
        from airflow_provider_kstate.increase.safety import partial_increase_runbook, unseeded

        views = plan.views()
        counts = {v.topic: self.admin.partition_count(v.topic) for v in views}
        grown = [
            v.topic for v in views if v.mode == PlanMode.INCREASE and counts[v.topic] != v.original_partitions
        ]
        if plan.mode == PlanMode.INCREASE and not grown:
            self._resume(plan.where("pause"), owner)
            for view in views:
                self.control.set_layout(view.topic, counts[view.topic], issuer=owner)
            self._start_producers(plan)
            keeper.release()
            raise KStateError(
                f"a step failed before partitions of {_named(plan)} were created: nothing changed; "
                "consumers resumed and the lease released. Fix the cause and run again."
            )
        missing = {v.topic: unseeded(self.admin, v, partitions=counts[v.topic]) for v in views}
        unsafe = {g for gaps in missing.values() for g in gaps}
        safe = [g for g in plan.where("pause") if g not in unsafe]
        if safe:
            self._resume(safe, owner)
        if plan.marked(ORDER_DRAINED):  # each drained topic's producers on a layout every group is seeded on
            for view in views:
                if view.marked(ORDER_DRAINED):
                    layout = view.original_partitions if missing[view.topic] else view.target_partitions
                    self.control.set_layout(view.topic, layout, issuer=owner)
            self._start_producers(plan)
        if unsafe:
            runbook = " ".join(
                partial_increase_runbook(v, missing[v.topic]) for v in views if missing[v.topic]
            )
            self.log.error("GUARD %s", runbook)
            raise UnsafeResumeError(runbook)
        raise KStateError(
            f"a step failed after every group was seeded on every topic it reads ({_named(plan)}): consumers "
            "were resumed (safe). "
            "Producers may still be pinned to the old layout: clear the failed steps of this run, or run again "
            "with the same target, to finish."
        )

    def _approved(self, context: Context) -> bool:
        """Whether the run got past its approval step (True without one): its XCom says ``approved``."""
        if not self.approval_task_id:
            return True
        answer = context["ti"].xcom_pull(task_ids=self.approval_task_id)
        return isinstance(answer, dict) and bool(answer.get("approved"))

    def _check_lease(self, keeper: LeaseSet) -> None:
        holder = keeper.current()
        if holder is not None and holder.owner != keeper.owner:
            raise LeaseHeldError(
                f"GUARD: another run holds the lease on {self.topic!r} ({holder.describe()}): this guard "
                "changes nothing, so it cannot undo that run's pause."
            )

    def _resume(self, groups: list[str], owner: str) -> None:
        from airflow_provider_kstate.increase.drivers import CommandPairs
        from airflow_provider_kstate.increase.fleet import commanded_live, commands_of
        from airflow_provider_kstate.increase.steps import names

        epoch = self.control.resume(groups, self.topic, issuer=owner)
        self.control.close()
        self.log.warning("GUARD resumed groups %s (epoch %s)", names(groups), epoch)
        plan = self.typed_plan
        started = commanded_live(plan, groups)
        CommandPairs(self.topic, self.log).start(commands_of(plan, started), "group")

    def _start_producers(self, plan: Plan) -> None:
        """Start the producer services a drain stops (idempotent: they may not have been stopped yet)."""
        from airflow_provider_kstate.increase.drivers import CommandPairs
        from airflow_provider_kstate.increase.fleet import producer_commands
        from airflow_provider_kstate.increase.key_order import ORDER_DRAINED

        if plan.marked(ORDER_DRAINED):
            self.log.warning("GUARD starting the producer services of the drain: %s", sorted(plan.producers))
            CommandPairs(self.topic, self.log).start(producer_commands(plan), "producer")


def _named(plan: Plan) -> str:
    """The plan's topics in a message: ``'orders'``, or ``'orders', 'payments'``."""
    return ", ".join(repr(t) for t in plan.topic_names)
