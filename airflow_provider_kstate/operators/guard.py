"""What runs when a step fails: resume consumers only where that cannot skip data, else fail loudly."""

from __future__ import annotations

from typing import Any

from airflow.sdk.exceptions import AirflowSkipException

from airflow_provider_kstate.exceptions import KStateError, UnsafeResumeError
from airflow_provider_kstate.operators.base import KStateStepOperator, run_owner
from airflow_provider_kstate.utils.plan import groups_where
from airflow_provider_kstate.utils.safety import partial_increase_runbook, unseeded


class KStateFailureGuardOperator(KStateStepOperator):
    """Run on failure (``trigger_rule=one_failed``) and decide from the cluster, not from task states.

    * Partitions not created yet: resume consumers, restore the producer layout, release the lease.
    * Created and every group seeded: resuming is safe, so resume consumers; keep the old producer layout.
    * Created but not all seeded: do NOT resume; fail with :class:`UnsafeResumeError` and the runbook.

    The guard always fails the run: something upstream failed. It reads the plan from the plan task's
    XCom itself, so it skips quietly when the plan step failed (then nothing was changed).

    :param plan_task_id: the task id of the plan step.
    """

    template_fields: tuple[str, ...] = ()

    def __init__(self, *, plan_task_id: str, trigger_rule: str = "one_failed", **kwargs: Any) -> None:
        super().__init__(plan=None, trigger_rule=trigger_rule, **kwargs)
        self.plan_task_id = plan_task_id

    def execute(self, context: Any) -> None:
        self.plan = context["ti"].xcom_pull(task_ids=self.plan_task_id)
        if not self.plan:
            raise AirflowSkipException(
                "the plan step did not finish: this run changed nothing, no guard needed"
            )
        owner = run_owner(context)
        current = self.admin.partition_count(self.topic)
        if current == int(self.plan["original_partitions"]):
            self._resume(owner)
            self.control.set_layout(self.topic, current, issuer=owner)
            self.lease.release(self.topic, owner)
            raise KStateError(
                f"a step failed before partitions of {self.topic!r} were created: nothing changed; consumers "
                "resumed and the lease released. Fix the cause and run again."
            )
        missing = unseeded(self.admin, self.plan)
        if missing:
            self.log.error("GUARD %s", partial_increase_runbook(self.plan, missing))
            raise UnsafeResumeError(partial_increase_runbook(self.plan, missing))
        self._resume(owner)
        raise KStateError(
            f"a step failed after every group was seeded on {self.topic!r}: consumers were resumed (safe). "
            "Producers may still be pinned to the old layout: clear the failed steps of this run to finish."
        )

    def _resume(self, owner: str) -> None:
        groups = groups_where(self.plan, "pause")
        epoch = self.control.resume(groups, self.topic, issuer=owner)
        self.control.close()
        self.log.warning("GUARD resumed groups %s (epoch %s)", groups, epoch)
