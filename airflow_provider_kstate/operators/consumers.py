"""Pause and resume consumers through the control channel; resume refuses while it would skip data."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.defaults import PRESERVE
from airflow_provider_kstate.operators.step import KStateStepOperator

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_kstate.increase.run import IncreaseRun


class KStatePausingOperator(KStateStepOperator):
    """Base of the steps that take consumers out of their groups (:class:`KStatePauseConsumersOperator`, and
    the pause window, :class:`~airflow_provider_kstate.operators.window.KStatePauseWindowOperator`): the
    key order, the wait for EMPTY and the drain's deadline, and the run built from them.

    :param key_order: ``preserve``, ``drain`` or ``relax`` (templated).
    :param empty_timeout: seconds to wait for the paused (or stopped) groups to become EMPTY.
    :param drain_timeout: seconds the drain may last (the ControlledProducers' hold outlives it).
    :param positions_timeout: seconds the groups that stay in their groups have to hold a committed offset
        on every partition; those without one then are paused and seeded alone.
    """

    template_fields: tuple[str, ...] = ("plan", "key_order")

    def __init__(
        self,
        *,
        key_order: str = PRESERVE,
        empty_timeout: float = 600.0,
        drain_timeout: float = 600.0,
        positions_timeout: float = 330.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.key_order = key_order
        self.empty_timeout = empty_timeout
        self.drain_timeout = drain_timeout
        self.positions_timeout = positions_timeout

    def pausing_run(self, context: Context) -> IncreaseRun:
        """Return this task's run with the key order, the EMPTY wait and the producers' hold for a drain."""
        from airflow_provider_kstate.increase.key_order import check_key_order, drain_hold

        return self.run(
            context,
            key_order=check_key_order(self.key_order),
            empty_timeout=self.empty_timeout,
            drain_hold=drain_hold(self.empty_timeout, self.drain_timeout),
            positions_timeout=self.positions_timeout,
        )


class KStatePauseConsumersOperator(KStatePausingOperator):
    """Tell the services of every group at risk to leave its group, and pin producers to the old layout.

    Services that wrap their clients with ``airflow_provider_kstate.client_piece`` obey; for others, put your own
    task in this one's place (a ``BashOperator`` running ``kubectl scale --replicas=0``, say): the next
    step, :class:`KStateGroupsEmptySensor`, waits for the broker to report the groups EMPTY either way.
    Re-sending a pause is harmless, so the step is idempotent. With ``key_order="preserve"`` it also
    announces the key-order barrier to the protected groups' consumers.

    Each group is taken out by its driver: command-driven groups are stopped first (and waited for, up to
    ``empty_timeout``), then the others get the pause record; for a drain the producers are stopped before
    both (``empty_timeout``: the wait for the command-driven groups; see :class:`KStatePausingOperator`).
    Every group at risk on any topic of the plan leaves once; then each topic's producers are pinned
    (:meth:`~airflow_provider_kstate.increase.run.IncreaseRun.pause`).
    """

    def execute(self, context: Context) -> dict[str, Any]:
        try:
            return self.pausing_run(context).pause()
        finally:
            self.control.close()


class KStateResumeConsumersOperator(KStateStepOperator):
    """Tell paused services to rejoin (command-driven groups: their start and readiness commands), but
    only once every group has an offset on every partition of every topic it reads.

    :raises UnsafeResumeError: partitions exist that a seeded group has no offset on; nothing is resumed.
    """

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_provider_kstate.increase import served

        try:
            run = self.run(context)
            watched = served.watch(run, run.plan.where("pause"))
            resumed = run.resume()
            resumed["served"] = served.report(run, watched)
            return resumed
        finally:
            self.control.close()
