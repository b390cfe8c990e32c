"""Send pause, resume and layout signals on the kstate control topic (see ``docs/control-protocol.md``):
the controller (:class:`~airflow_provider_kstate.cluster.control.Controller`) on an Airflow connection."""

from __future__ import annotations

from functools import cached_property

from airflow.sdk import BaseHook

from airflow_provider_kstate.client_piece.protocol import DEFAULT_CONTROL_TOPIC
from airflow_provider_kstate.cluster.control import Controller
from airflow_provider_kstate.hooks.admin import KStateAdminHook
from airflow_provider_kstate.increase.model import DEFAULT_CONN_ID

__all__ = ["KStateControlHook"]


class KStateControlHook(BaseHook):
    """The controller side of the client piece on a ``kafka`` connection: ``get_conn`` is the
    :class:`~airflow_provider_kstate.cluster.control.Controller` the steps drive (commands for consumer
    groups, layouts for producers, the key-order barrier). It has an admin hook (the connection), it is
    not one.

    :param kafka_config_id: the Airflow connection id (``kafka`` type).
    :param control_topic: the compacted control topic the services watch.
    :param request_timeout: seconds each request may take.
    """

    hook_name = "Kafka State control channel"

    def __init__(
        self,
        kafka_config_id: str = DEFAULT_CONN_ID,
        control_topic: str = DEFAULT_CONTROL_TOPIC,
        request_timeout: float = 30.0,
    ) -> None:
        super().__init__()
        self.admin = KStateAdminHook(kafka_config_id=kafka_config_id, request_timeout=request_timeout)
        self.control_topic = control_topic

    @cached_property
    def get_conn(self) -> Controller:  # type: ignore[override]
        """The controller on this connection's cluster."""
        return Controller(self.admin.cluster, self.control_topic)

    def client_piece_clients(self) -> dict[str, set[str]]:
        """Return ``{group: client ids}`` of the consumers that acknowledged on the control topic."""
        return self.get_conn.client_piece_clients()
