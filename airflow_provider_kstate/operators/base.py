"""What every step of the safe partition increase shares: the plan argument and its hooks."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_provider_kstate.client.protocol import DEFAULT_CONTROL_TOPIC
from airflow_provider_kstate.utils.model import DEFAULT_CONN_ID, DEFAULT_LEASE_TOPIC
from airflow_provider_kstate.utils.steps import SafeIncreaseSteps

if TYPE_CHECKING:  # the hooks import confluent-kafka: load them when a task runs, not when a DAG is parsed
    from airflow_provider_kstate.hooks.admin import KStateAdminHook
    from airflow_provider_kstate.hooks.control import KStateControlHook
    from airflow_provider_kstate.hooks.lease import KStateLeaseHook


def run_owner(context: Any) -> str:
    """Return the lease owner of this task's DAG run: ``dag_id/run_id``."""
    ti = context["ti"]
    return f"{ti.dag_id}/{ti.run_id}"


class KStateStepOperator(BaseOperator):
    """Base of the steps after the plan: each takes the plan (an XCom) and is idempotent.

    :param plan: the plan pushed by :class:`KStatePlanOperator` (pass its ``.output``).
    :param kafka_config_id: the Airflow connection id (``kafka`` type of the Kafka provider).
    :param control_topic: the control topic services with the client piece watch.
    :param lease_topic: the topic that holds per-topic leases.
    :param request_timeout: seconds to wait for each request to the cluster.
    """

    template_fields: tuple[str, ...] = ("plan",)
    ui_color = "#fdf1e3"

    def __init__(
        self,
        *,
        plan: Any,
        kafka_config_id: str = DEFAULT_CONN_ID,
        control_topic: str = DEFAULT_CONTROL_TOPIC,
        lease_topic: str = DEFAULT_LEASE_TOPIC,
        request_timeout: float = 30.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.plan = plan
        self.kafka_config_id = kafka_config_id
        self.control_topic = control_topic
        self.lease_topic = lease_topic
        self.request_timeout = request_timeout

    @cached_property
    def admin(self) -> KStateAdminHook:
        from airflow_provider_kstate.hooks.admin import KStateAdminHook

        return KStateAdminHook(kafka_config_id=self.kafka_config_id, timeout=self.request_timeout)

    @cached_property
    def control(self) -> KStateControlHook:
        from airflow_provider_kstate.hooks.control import KStateControlHook

        return KStateControlHook(
            self.kafka_config_id, control_topic=self.control_topic, timeout=self.request_timeout
        )

    @cached_property
    def lease(self) -> KStateLeaseHook:
        from airflow_provider_kstate.hooks.lease import KStateLeaseHook

        return KStateLeaseHook(
            self.kafka_config_id, lease_topic=self.lease_topic, timeout=self.request_timeout
        )

    @property
    def topic(self) -> str:
        return str(self.plan["topic"])

    def steps(self, context: Any) -> SafeIncreaseSteps:
        """Return the steps of this operator's plan, run as this task's DAG run."""
        return SafeIncreaseSteps(self.plan, self.admin, self.control, self.log, run_owner(context))
