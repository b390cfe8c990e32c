"""Pause and resume consumers through the control channel; resume refuses while it would skip data."""

from __future__ import annotations

from typing import Any

from airflow_provider_kstate.exceptions import UnsafeResumeError
from airflow_provider_kstate.operators.base import KStateStepOperator, run_owner
from airflow_provider_kstate.utils.plan import groups_where
from airflow_provider_kstate.utils.safety import partial_increase_runbook, unseeded


class KStatePauseConsumersOperator(KStateStepOperator):
    """Tell the services of every group at risk to leave its group, and pin producers to the old layout.

    Services that wrap their clients with ``airflow_provider_kstate.client`` obey; for others, put your own
    task in this one's place (a ``BashOperator`` running ``kubectl scale --replicas=0``, say): the next
    step, :class:`KStateGroupsEmptySensor`, waits for the broker to report the groups EMPTY either way.
    Re-sending a pause is harmless, so the step is idempotent.
    """

    def execute(self, context: Any) -> dict[str, Any]:
        groups = groups_where(self.plan, "pause")
        owner = run_owner(context)
        epoch = self.control.pause(groups, self.topic, issuer=owner)
        for group in groups:
            self.log.info(
                "PAUSE group %s: pause command sent (epoch %s) on %s", group, epoch, self.control_topic
            )
        layout = self.control.set_layout(self.topic, int(self.plan["original_partitions"]), issuer=owner)
        self.log.info(
            "PAUSE producers of %s pinned to the current %s partitions (epoch %s)",
            self.topic,
            self.plan["original_partitions"],
            layout,
        )
        self.control.close()
        return {"epoch": epoch, "groups": groups}


class KStateResumeConsumersOperator(KStateStepOperator):
    """Tell paused services to rejoin, but only once every group has an offset on every new partition.

    :raises UnsafeResumeError: partitions exist that a seeded group has no offset on; nothing is resumed.
    """

    def execute(self, context: Any) -> dict[str, Any]:
        missing = unseeded(self.admin, self.plan)
        if missing:
            raise UnsafeResumeError(partial_increase_runbook(self.plan, missing))
        groups = groups_where(self.plan, "pause")
        epoch = self.control.resume(groups, self.topic, issuer=run_owner(context))
        for group in groups:
            self.log.info(
                "RESUME group %s: every new partition has a committed offset; resume sent (epoch %s)",
                group,
                epoch,
            )
        self.control.close()
        return {"epoch": epoch, "groups": groups}
