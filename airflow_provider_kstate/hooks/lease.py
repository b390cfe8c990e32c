"""The per-topic lease on an Airflow connection: the lease's verbs (:class:`~airflow_provider_kstate.lease_rules.LeaseRecords`)
over the lease log's transport (:class:`~airflow_provider_kstate.cluster.lease_log.KafkaLeaseLog`)."""

from __future__ import annotations

from functools import cached_property
from typing import Any

from airflow.sdk import BaseHook

from airflow_provider_kstate.cluster.lease_log import KafkaLeaseLog
from airflow_provider_kstate.hooks.admin import KStateAdminHook
from airflow_provider_kstate.increase.model import DEFAULT_CONN_ID, DEFAULT_LEASE_TOPIC
from airflow_provider_kstate.lease_rules import Lease, LeaseRecords

__all__ = ["KStateLeaseHook"]


class KStateLeaseHook(BaseHook):
    """Acquire, inspect and release the per-topic lease (stored in the lease log topic of the connection's
    cluster). It has an admin hook (the connection), it is not one.

    :param kafka_config_id: the Airflow connection id (``kafka`` type).
    :param lease_topic: the lease log topic.
    :param request_timeout: seconds each request may take.
    """

    hook_name = "Kafka State topic lease"

    def __init__(
        self,
        kafka_config_id: str = DEFAULT_CONN_ID,
        lease_topic: str = DEFAULT_LEASE_TOPIC,
        request_timeout: float = 30.0,
    ) -> None:
        super().__init__()
        self.admin = KStateAdminHook(kafka_config_id=kafka_config_id, request_timeout=request_timeout)
        self.lease_topic = lease_topic

    @cached_property
    def get_conn(self) -> LeaseRecords:  # type: ignore[override]
        """The lease's verbs over this connection's lease log."""
        return LeaseRecords(KafkaLeaseLog(self.admin.cluster, self.lease_topic))

    def current(self, topic: str) -> Lease | None:
        """Return the live lease on ``topic``, or None when it is free."""
        return self.get_conn.current(topic)

    def acquire(
        self, topic: str, owner: str, ttl_seconds: float, plan: dict[str, Any] | None = None
    ) -> Lease:
        """Take (or renew) the lease on ``topic`` for ``owner``; LeaseHeldError when another owner holds it."""
        return self.get_conn.acquire(topic, owner, ttl_seconds, plan)

    def take_over(
        self, topic: str, owner: str, from_owner: str, ttl_seconds: float, plan: dict[str, Any] | None = None
    ) -> Lease:
        """Take the lease on ``topic`` from ``from_owner`` (a run that is no longer running)."""
        return self.get_conn.take_over(topic, owner, from_owner, ttl_seconds, plan)

    def release(self, topic: str, owner: str) -> None:
        """Give up ``owner``'s lease on ``topic`` (a no-op if it does not hold it)."""
        self.get_conn.release(topic, owner)
