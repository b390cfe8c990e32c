"""The in-window steps in one task, for the shortest consumer downtime."""

from __future__ import annotations

from typing import Any

from airflow_provider_kstate.operators.base import KStateStepOperator


class KStatePauseWindowOperator(KStateStepOperator):
    """Pause, wait for EMPTY, increase, seed, scale and resume back-to-back in one task.

    The same idempotent steps as the per-step operators, without the scheduler's latency between them:
    consumers are out of their groups only for the leave, the create, the seed and the rejoin. If it
    fails midway, the failure guard decides from the cluster exactly as in the per-step layout. Returns
    the seed report (the input of :class:`KStateVerifyOperator`).

    :param empty_timeout: seconds to wait for the paused groups to become EMPTY.
    """

    def __init__(self, *, empty_timeout: float = 600.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.empty_timeout = empty_timeout

    def execute(self, context: Any) -> dict[str, Any]:
        steps = self.steps(context)
        try:
            steps.pause()
            steps.wait_empty(self.empty_timeout)
            steps.increase(self.request_timeout)
            report = steps.seed()
            steps.scale()
            steps.resume()
        finally:
            self.control.close()
        return report
