"""Sensor on the new partitions: wait until producers write to them after the scale signal."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.errors import KStateError
from airflow_provider_kstate.sensors.base import KStateConditionSensor

if TYPE_CHECKING:
    from airflow.sdk import Context


class KStateNewPartitionsWrittenSensor(KStateConditionSensor):
    """Wait until every new partition has grown past its end offset at the time of the scale signal.

    :param baseline: ``{"partition": end_offset}`` (the XCom of the scale-producers step).
    """

    check_name = "partitions_written"
    template_fields: tuple[str, ...] = ("plan", "baseline")

    def __init__(self, *, baseline: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.baseline = baseline

    def check_arguments(self) -> dict[str, Any]:
        return {"topic": self.typed_plan.topic, "baseline": dict(self.baseline.get("baseline") or {})}

    def execute(self, context: Context) -> Any:
        if not (self.baseline or {}).get("baseline"):
            self.log.info("partitions_written: no baseline (the producers start after a drain): not waiting")
            return {}
        return super().execute(context)

    def timeout_error(self, detail: dict[str, Any]) -> KStateError:
        return KStateError(
            f"timed out after {self.timeout}s waiting for producers to write to the new partitions of "
            f"{self.typed_plan.topic!r}: {detail}. Producers may not have picked up the new layout."
        )
