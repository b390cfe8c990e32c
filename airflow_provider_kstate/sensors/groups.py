"""Sensors on consumer-group state: EMPTY before the increase, STABLE after the resume."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_kstate import errors
from airflow_provider_kstate.sensors.base import KStateConditionSensor

if TYPE_CHECKING:
    from airflow.sdk import Context


class KStateGroupsEmptySensor(KStateConditionSensor):
    """Wait until every group the plan pauses is EMPTY: its members have left, so offsets can be set.

    On timeout it fails with :class:`GroupNotEmptyError` naming each member still present.
    """

    check_name = "groups_empty"

    def check_arguments(self) -> dict[str, Any]:
        plan = self.typed_plan
        return {"topic": plan.topic, "groups": plan.where("seed")}

    def timeout_error(self, detail: dict[str, Any]) -> errors.GroupNotEmptyError:
        from airflow_provider_kstate.increase.steps import not_empty_error

        return not_empty_error(self.typed_plan, detail, self.timeout)


class KStateGroupsStableSensor(KStateConditionSensor):
    """Wait until every group that was active at plan time is back, STABLE, with all partitions assigned.

    Groups that were EMPTY at plan time are seeded but not waited for.
    """

    check_name = "groups_stable"

    def check_arguments(self) -> dict[str, Any]:
        plan = self.typed_plan
        out = {"topic": plan.topic, "groups": plan.where("wait"), "partitions": plan.target_partitions}
        if plan.several:  # every group on every topic it reads
            out["topics"] = {view.topic: view.where("wait") for view in plan.views()}
        return out

    def timeout_error(self, detail: dict[str, Any]) -> errors.GroupNotStableError:
        plan = self.typed_plan
        return errors.GroupNotStableError(
            f"timed out after {self.timeout}s waiting for consumer groups on {', '.join(plan.topic_names)!r} to come back "
            f"STABLE with all {plan.target_partitions} partitions assigned: {detail}. Offsets are seeded, "
            "so restarting those consumers is safe."
        )


class KStateGroupsDrainedSensor(KStateConditionSensor):
    """Wait until every drained group has consumed the old partitions up to their end offsets when the
    producers stopped (committed offsets at or past them): then the producers may start on the new layout
    without reordering its keys. Done at once when the plan drains no group.

    On timeout it fails with :class:`DrainTimeoutError` naming each group still behind and by how much;
    the failure guard then starts the producers (their keys may reorder for those groups).

    :param switch: the XCom of the step that switched (the pause window, or the scale step): its
        ``drain`` names the groups and the offsets they must reach.

    A plan of several co-partitioned topics waits until every drained group has consumed each topic it
    reads up to where that topic's producers stopped (``<group> on <topic>`` names what is behind); it
    pokes from the worker (the triggerer's check takes one topic).
    """

    check_name = "groups_drained"
    template_fields: tuple[str, ...] = ("plan", "switch")

    def __init__(self, *, switch: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.switch = switch

    def check_arguments(self) -> dict[str, Any]:
        from airflow_provider_kstate.increase.key_order import drain_of

        drain = drain_of(self.switch)
        return {"topic": self.typed_plan.topic, "groups": drain["groups"], "offsets": drain["offsets"]}

    def _drains(self) -> dict[str, dict[str, Any]]:
        """Per topic, the drain to wait for (one topic: the plan's topic, when it drains a group)."""
        from airflow_provider_kstate.increase.key_order import drain_of
        from airflow_provider_kstate.increase.topic_set import drains_by_topic

        plan = self.typed_plan
        if plan.several:
            return drains_by_topic(plan, self.switch)
        drain = drain_of(self.switch)
        return {plan.topic: drain} if drain["groups"] else {}

    def poke(self, context: Context) -> bool:
        if not self.typed_plan.several:
            return super().poke(context)
        from airflow_provider_kstate.hooks.admin import KStateAdminHook
        from airflow_provider_kstate.increase.checks import CheckResult, groups_drained

        hook = KStateAdminHook(kafka_config_id=self.kafka_config_id, timeout=self.request_timeout)
        behind: dict[str, Any] = {}
        for topic, drain in self._drains().items():
            found = groups_drained(hook, topic, drain["groups"], drain["offsets"])
            behind.update({f"{g} on {topic}": d for g, d in found.detail.items()})
        self._last = CheckResult(not behind, behind)
        if behind:
            self.log.info("%s: still waiting for %s", self.check_name, behind)
        return self._last.ok

    def execute(self, context: Context) -> Any:
        drains = self._drains()
        if not drains:
            self.log.info("groups_drained: the plan drains no group: nothing to wait for")
            return {}
        if self.typed_plan.several and self.deferrable:
            self.log.info("groups_drained: several topics (%s): poking from the worker", sorted(drains))
            self.deferrable = False
        return super().execute(context)

    def timeout_error(self, detail: dict[str, Any]) -> errors.DrainTimeoutError:
        return errors.DrainTimeoutError(
            f"timed out after {self.timeout}s waiting for drained groups on {', '.join(self.typed_plan.topic_names)!r} to "
            f"consume the old partitions up to where the producers stopped; still behind: {detail}. "
            "Offsets are seeded: nothing is lost. The failure guard starts the producers now; keys of these "
            "groups that move may be processed out of order."
        )
