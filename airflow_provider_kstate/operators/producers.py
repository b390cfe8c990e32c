"""Tell producers the new layout is live."""

from __future__ import annotations

from typing import Any

from airflow_provider_kstate.operators.base import KStateStepOperator


class KStateScaleProducersOperator(KStateStepOperator):
    """Publish the target layout so producers with the client piece place records over all partitions.

    Services without the client piece pick up new partitions on their next metadata refresh; put your own
    signal task in this one's place if they need one. The XCom holds the new partitions' end offsets at
    signal time, the baseline of :class:`KStateNewPartitionsWrittenSensor`.
    """

    def execute(self, context: Any) -> dict[str, Any]:
        try:
            return self.steps(context).scale(baseline=True)
        finally:
            self.control.close()
