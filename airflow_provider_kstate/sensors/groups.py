"""Sensors on consumer-group state: EMPTY before the increase, STABLE after the resume."""

from __future__ import annotations

from typing import Any

from airflow_provider_kstate import errors
from airflow_provider_kstate.exceptions import GroupNotStableError
from airflow_provider_kstate.increase.steps import not_empty_error
from airflow_provider_kstate.sensors.base import KStateConditionSensor


class KStateGroupsEmptySensor(KStateConditionSensor):
    """Wait until every group the plan pauses is EMPTY: its members have left, so offsets can be set.

    On timeout it fails with :class:`GroupNotEmptyError` naming each member still present.
    """

    check_name = "groups_empty"

    def check_arguments(self) -> dict[str, Any]:
        plan = self.typed_plan
        return {"topic": plan.topic, "groups": plan.where("seed")}

    def timeout_error(self, detail: dict[str, Any]) -> errors.GroupNotEmptyError:
        return not_empty_error(self.typed_plan, detail, self.timeout)


class KStateGroupsStableSensor(KStateConditionSensor):
    """Wait until every group that was active at plan time is back, STABLE, with all partitions assigned.

    Groups that were EMPTY at plan time are seeded but not waited for.
    """

    check_name = "groups_stable"

    def check_arguments(self) -> dict[str, Any]:
        plan = self.typed_plan
        return {"topic": plan.topic, "groups": plan.where("wait"), "partitions": plan.target_partitions}

    def timeout_error(self, detail: dict[str, Any]) -> GroupNotStableError:
        plan = self.typed_plan
        return GroupNotStableError(
            f"timed out after {self.timeout}s waiting for consumer groups on {plan.topic!r} to come back "
            f"STABLE with all {plan.target_partitions} partitions assigned: {detail}. Offsets are seeded, "
            "so restarting those consumers is safe."
        )
