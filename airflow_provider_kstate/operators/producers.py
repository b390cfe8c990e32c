"""Tell producers the new layout is live."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.defaults import PRESERVE
from airflow_provider_kstate.operators.step import KStateStepOperator

if TYPE_CHECKING:
    from airflow.sdk import Context


class KStateScaleProducersOperator(KStateStepOperator):
    """Switch producers with the client piece to the target layout, once every protected group holds an
    offset on every partition.

    With ``key_order="preserve"`` the switch goes through the key-order barrier: producers are held (they
    flush and block ``produce()``), every partition's end offset becomes the barrier consumers of the
    protected groups hold at, then producers switch and are released (see ``docs/control-protocol.md``).
    Services without the client piece pick up new partitions on their next metadata refresh; put your own
    signal task in this one's place if they need one (for per-key order without the client piece: stop the
    producers there until the groups have drained).

    Each topic's producers switch through its own key-order barrier, once its new partitions' leaders serve
    them. XCom has each topic's switch under ``topics`` -> topic -> ``switch``, with ``baseline``: the new
    partitions' end offsets at signal time, what :class:`KStateNewPartitionsWrittenSensor` waits past.

    :param key_order: ``preserve`` or ``relax`` (templated).
    """

    template_fields: tuple[str, ...] = ("plan", "key_order")

    def __init__(self, *, key_order: str = PRESERVE, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.key_order = key_order

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_provider_kstate.increase.key_order import check_key_order
        from airflow_provider_kstate.metrics import METRICS_OUT

        try:
            result = self.run(context, key_order=check_key_order(self.key_order)).scale(baseline=True)
        finally:
            self.control.close()
        for topic, entry in result["topics"].items():
            METRICS_OUT.switched(topic, entry["switch"])
        return result


class KStateStartProducersOperator(KStateStepOperator):
    """After a drain: start the producers on the new layout (the ControlledProducers switch, the
    command-driven producer services run their start and readiness commands) and report the cost: how
    long the producers were stopped against the backlog the drained groups had at the switch. It runs after
    :class:`~airflow_provider_kstate.sensors.groups.KStateGroupsDrainedSensor`; when the plan drains no
    group the producers switched earlier and this step does nothing. It starts the producers of each topic
    a drained group reads, the producer services once; XCom has each topic's cost under ``topics``.

    :param switch: the XCom of the step that switched (the pause window, or the scale step).
    """

    template_fields: tuple[str, ...] = ("plan", "switch")

    def __init__(self, *, switch: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.switch = switch

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_provider_kstate.increase.run import drains_by_topic
        from airflow_provider_kstate.metrics import METRICS_OUT

        plan = self.typed_plan
        drains = drains_by_topic(plan, self.switch)
        earlier = self.switch.get("producers_started") if isinstance(self.switch, dict) else None
        if earlier:
            self.log.info(
                "SCALE %s: the groups drained and the producers started in the window",
                ", ".join(plan.topic_names),
            )
            return dict(earlier)
        if not drains:
            self.log.info(
                "SCALE %s: no group is drained: the producers switched with the window",
                ", ".join(plan.topic_names),
            )
            return {}
        try:
            started = self.run(context).start_producers(drains)
        finally:
            self.control.close()
        for topic, cost in started["topics"].items():
            METRICS_OUT.drained(topic, cost)
        groups = sorted({g for d in drains.values() for g in d["groups"]})
        return {"drained_groups": groups, **started}
