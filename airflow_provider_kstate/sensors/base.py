"""The shared poke/deferrable machinery of kstate sensors."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseSensorOperator

from airflow_provider_kstate import errors
from airflow_provider_kstate.compat import AirflowSensorTimeout, conf
from airflow_provider_kstate.operators.kafka import KStateKafkaOperator

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_kstate.increase.checks import CheckResult
    from airflow_provider_kstate.increase.plan import Plan


class KStateConditionSensor(KStateKafkaOperator, BaseSensorOperator):
    """Wait for a cluster condition, by poking or (``deferrable=True``) in the triggerer.

    Subclasses name the check (``check_name``), build its arguments from the plan and turn a timeout's
    detail into a clear error.

    :param plan: the plan (XCom of the plan step).
    :param kafka_config_id: the Airflow connection id (``kafka`` type).
    :param request_timeout: seconds to wait for each request of a poke (default 10).
    :param deferrable: wait in the triggerer instead of holding a worker slot. Default: Airflow's
        ``[operators] default_deferrable`` (False unless set), as the Airflow providers' sensors do.
    :param poke_interval: seconds between checks.
    :param timeout: seconds after which the sensor fails, naming what it still waited for.
    """

    check_name = ""
    #: The control topic, for a check that reads the control channel too (None: the check gets none).
    control_topic: str | None = None
    template_fields: tuple[str, ...] = ("plan",)
    ui_color = "#e8f4fd"
    default_request_timeout = 10.0

    def __init__(
        self,
        *,
        plan: Any,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        poke_interval: float = 2.0,
        timeout: float = 600.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(poke_interval=poke_interval, timeout=timeout, **kwargs)
        self.plan = plan
        self.deferrable = deferrable
        self._last: CheckResult | None = None  # the last poke's result

    @property
    def typed_plan(self) -> Plan:
        """The plan, read from its (rendered) XCom once per task: the one place a sensor parses it."""
        from airflow_provider_kstate.increase.plan import parsed_plan

        return parsed_plan(self)

    def check_arguments(self) -> dict[str, Any]:
        """Return the JSON-safe keyword arguments of the check, from the plan."""
        raise NotImplementedError

    def timeout_error(self, detail: dict[str, Any]) -> errors.KStateError:
        """Return the error raised when the wait times out, naming what is still in the way (its ``retryable``
        says whether the task is retried)."""
        raise NotImplementedError

    def poke(self, context: Context) -> bool:
        from airflow_provider_kstate.triggers.groups import run_check

        self._last = run_check(
            self.check_name,
            self.kafka_config_id,
            self.check_arguments(),
            control_topic=self.control_topic,
            request_timeout=self.request_timeout,
        )
        if not self._last.ok:
            self.log.info("%s: still waiting for %s", self.check_name, self._last.detail)
        return self._last.ok

    def execute(self, context: Context) -> Any:
        if self.deferrable:
            from airflow_provider_kstate.triggers.groups import KStateConditionTrigger

            self.log.info(
                "%s: deferring to the triggerer (poll every %ss, up to %ss)",
                self.check_name,
                self.poke_interval,
                self.timeout,
            )
            self.defer(
                trigger=KStateConditionTrigger(
                    check=self.check_name,
                    kafka_config_id=self.kafka_config_id,
                    arguments=self.check_arguments(),
                    poke_interval=float(self.poke_interval),
                    deadline=time.time() + float(self.timeout),
                    control_topic=self.control_topic,
                ),
                method_name="execute_complete",
                timeout=timedelta(seconds=float(self.timeout) + 60),
            )
        try:
            super().execute(context)
        except AirflowSensorTimeout as exc:
            raise self.timeout_error(self._last.detail if self._last else {}) from exc
        self.log.info("%s: condition met", self.check_name)
        return self._last.detail if self._last else {}

    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        """Resume after the trigger fired: return on success, raise a named error otherwise."""
        status = event.get("status")
        self.log.info(
            "%s: resumed from the triggerer with status %s after %s polls",
            self.check_name,
            status,
            event.get("polls"),
        )
        if status == "success":
            return event.get("detail", {})
        if status == "timeout":
            raise self.timeout_error(event.get("detail", {}))
        raise errors.KStateError(f"{self.check_name} failed in the triggerer: {event.get('message')}")
