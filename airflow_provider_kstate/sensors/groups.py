"""Sensors on consumer-group state: EMPTY before the increase, STABLE after the resume."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_kstate import errors
from airflow_provider_kstate.defaults import DEFAULT_CONTROL_TOPIC
from airflow_provider_kstate.sensors.base import KStateConditionSensor

if TYPE_CHECKING:
    from airflow.sdk import Context


class KStateGroupsEmptySensor(KStateConditionSensor):
    """Wait until every group the run seeds is EMPTY: its members have left, so offsets can be set (the
    groups that stay in their groups are not waited for).

    On timeout it fails with :class:`GroupNotEmptyError` naming each member still present.

    Given the pause step's XCom, it removes ghosts as the pause window does
    (:mod:`~airflow_provider_kstate.increase.ghosts`): the members the coordinator still lists although every
    one of their clients acknowledged that pause on the control topic (their LeaveGroup lost in a broker
    fault), instead of waiting out their session (6 s to 45 s).

    :param pause: the XCom of the pause step (its ``epoch``: the pause record's); None, or an XCom without
        one (your own pause task): no ghost is removed.
    :param control_topic: the control topic the pause's acknowledgements are read from.
    """

    check_name = "groups_empty"
    template_fields: tuple[str, ...] = ("plan", "pause")

    def __init__(
        self, *, pause: Any = None, control_topic: str = DEFAULT_CONTROL_TOPIC, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.pause = pause
        self.control_topic = control_topic

    def check_arguments(self) -> dict[str, Any]:
        from airflow_provider_kstate.increase.ghosts import pause_epoch_of

        plan = self.typed_plan
        out: dict[str, Any] = {"topic": plan.topic, "groups": plan.seeded_by_run()}
        epoch = pause_epoch_of(self.pause)
        if epoch is not None:
            out["pause_epoch"] = epoch
        return out

    def timeout_error(self, detail: dict[str, Any]) -> errors.GroupNotEmptyError:
        from airflow_provider_kstate.increase.steps import not_empty_error

        return not_empty_error(self.typed_plan, detail, self.timeout)


class KStateGroupsStableSensor(KStateConditionSensor):
    """Wait until every group that was active at plan time is back, STABLE, with all partitions assigned
    (those that stayed in their groups too: they hold the new partitions).

    Groups that were EMPTY at plan time are seeded but not waited for.
    """

    check_name = "groups_stable"

    def check_arguments(self) -> dict[str, Any]:
        plan = self.typed_plan
        # each group on every topic it reads
        topics = {view.topic: [*view.where("wait"), *view.staying()] for view in plan.views()}
        return {"topics": topics, "partitions": plan.target_partitions}

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

    Each drained group waits on every topic it reads, up to where that topic's producers stopped (for
    several topics ``<group> on <topic>`` names what is behind).
    """

    check_name = "groups_drained"
    template_fields: tuple[str, ...] = ("plan", "switch")

    def __init__(self, *, switch: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.switch = switch

    def check_arguments(self) -> dict[str, Any]:
        from airflow_provider_kstate.increase.run import drains_by_topic

        drains = drains_by_topic(self.typed_plan, self.switch)
        return {"drains": {t: {"groups": d["groups"], "offsets": d["offsets"]} for t, d in drains.items()}}

    def execute(self, context: Context) -> Any:
        if not self.check_arguments()["drains"]:
            self.log.info("groups_drained: the plan drains no group: nothing to wait for")
            return {}
        return super().execute(context)

    def timeout_error(self, detail: dict[str, Any]) -> errors.DrainTimeoutError:
        return errors.DrainTimeoutError(
            f"timed out after {self.timeout}s waiting for drained groups on {', '.join(self.typed_plan.topic_names)!r} to "
            f"consume the old partitions up to where the producers stopped; still behind: {detail}. "
            "Offsets are seeded: nothing is lost. The failure guard starts the producers now; keys of these "
            "groups that move may be processed out of order."
        )
