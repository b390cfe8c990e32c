"""Sensor on the new partitions: wait until producers write to them after the scale signal."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.errors import KStateError
from airflow_provider_kstate.sensors.base import KStateConditionSensor

if TYPE_CHECKING:
    from airflow.sdk import Context


class KStateNewPartitionsWrittenSensor(KStateConditionSensor):
    """Wait until every new partition of every topic has grown past its end offset at the time of the
    scale signal.

    :param baseline: the XCom of the scale-producers step (each topic's ``switch`` holds its ``baseline``,
        ``{"partition": end_offset}``).
    """

    check_name = "partitions_written"
    template_fields: tuple[str, ...] = ("plan", "baseline")

    def __init__(self, *, baseline: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.baseline = baseline

    def check_arguments(self) -> dict[str, Any]:
        from airflow_provider_kstate.increase.run import switch_of

        each = {
            t: dict(switch_of(self.baseline, t).get("baseline") or {}) for t in self.typed_plan.topic_names
        }
        return {"baselines": {t: b for t, b in each.items() if b}}

    def execute(self, context: Context) -> Any:
        if not self.check_arguments()["baselines"]:
            self.log.info("partitions_written: no baseline (the producers start after a drain): not waiting")
            return {}
        return super().execute(context)

    def timeout_error(self, detail: dict[str, Any]) -> KStateError:
        return KStateError(
            f"timed out after {self.timeout}s waiting for producers to write to the new partitions of "
            f"{', '.join(self.typed_plan.topic_names)}: {detail}. Producers may not have picked up the new layout."
        )
