"""Tell producers the new layout is live."""

from __future__ import annotations

from typing import Any

from airflow_provider_kstate.operators.base import KStateStepOperator, run_owner


class KStateScaleProducersOperator(KStateStepOperator):
    """Publish the target layout so producers with the client piece place records over all partitions.

    Services without the client piece pick up new partitions on their next metadata refresh; put your own
    signal task in this one's place if they need one. The XCom holds the new partitions' end offsets at
    signal time, the baseline of :class:`KStateNewPartitionsWrittenSensor`.
    """

    def execute(self, context: Any) -> dict[str, Any]:
        target = int(self.plan["target_partitions"])
        epoch = self.control.set_layout(self.topic, target, issuer=run_owner(context))
        self.control.close()
        self.log.info(
            "SCALE producers of %s: layout of %s partitions is live (epoch %s)", self.topic, target, epoch
        )
        marks = self.admin.watermarks(self.topic, [int(p) for p in self.plan["new_partitions"]])
        return {
            "epoch": epoch,
            "partitions": target,
            "baseline": {str(p): end for p, (_s, end) in marks.items()},
        }
