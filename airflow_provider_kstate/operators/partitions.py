"""Grow the topic: validate with the broker first, then create; a no-op when already at the target."""

from __future__ import annotations

import time
from typing import Any

from airflow_provider_kstate.exceptions import KStateError
from airflow_provider_kstate.operators.base import KStateStepOperator


class KStateIncreasePartitionsOperator(KStateStepOperator):
    """Increase the topic to the plan's target partition count.

    Runs ``CreatePartitions`` with ``validate_only`` first, then for real, and waits until metadata
    shows the new count. If the topic already has the target count (a retry), it does nothing.
    """

    def execute(self, context: Any) -> dict[str, Any]:
        original = int(self.plan["original_partitions"])
        target = int(self.plan["target_partitions"])
        current = self.admin.partition_count(self.topic)
        if current == target:
            self.log.info("INCREASE topic %s already has %s partitions: nothing to do", self.topic, target)
            return {"created": False, "partitions": target}
        if current != original:
            raise KStateError(
                f"topic {self.topic!r} has {current} partitions; the plan expected {original} (or {target}). "
                "Someone else changed it: nothing was done here. Plan again."
            )
        self.admin.increase_partitions(self.topic, target, validate_only=True)
        self.log.info("INCREASE topic %s: the broker validated %s -> %s", self.topic, original, target)
        self.admin.increase_partitions(self.topic, target)
        self._wait_for_metadata(target)
        for partition in self.plan["new_partitions"]:
            self.log.info("INCREASE topic %s: created partition %s", self.topic, partition)
        return {"created": True, "partitions": target}

    def _wait_for_metadata(self, target: int) -> None:
        deadline = time.monotonic() + self.request_timeout
        while self.admin.partition_count(self.topic) != target:
            if time.monotonic() > deadline:
                raise KStateError(f"topic {self.topic!r}: metadata did not show {target} partitions in time")
            time.sleep(0.2)
