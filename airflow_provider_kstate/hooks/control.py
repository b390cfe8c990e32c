"""Send pause, resume and layout signals on the kstate control topic (see ``docs/control-protocol.md``)."""

from __future__ import annotations

from typing import Any

from airflow_provider_kstate.client.channel import ControlChannel
from airflow_provider_kstate.client.protocol import (
    CONTROL_TOPIC_CONFIG,
    DEFAULT_CONTROL_TOPIC,
    PAUSE,
    RESUME,
    Ack,
    Command,
    Layout,
    now_ms,
)
from airflow_provider_kstate.hooks.admin import KStateAdminHook


class KStateControlHook(KStateAdminHook):
    """The controller side of the client piece: commands for consumer groups and layouts for producers.

    :param kafka_config_id: the Airflow connection id (``kafka`` type).
    :param control_topic: the compacted control topic the services watch.
    """

    hook_name = "Kafka State control channel"

    def __init__(
        self,
        kafka_config_id: str = KStateAdminHook.default_conn_name,
        control_topic: str = DEFAULT_CONTROL_TOPIC,
        timeout: float = 30.0,
    ) -> None:
        super().__init__(kafka_config_id=kafka_config_id, timeout=timeout)
        self.control_topic = control_topic
        self._channel: ControlChannel | None = None

    def channel(self) -> ControlChannel:
        """Return the control channel, creating the control topic on first use."""
        if self._channel is None:
            self.ensure_internal_topic(self.control_topic, CONTROL_TOPIC_CONFIG)
            self._channel = ControlChannel(self.client_config(), self.control_topic)
        return self._channel

    def send_commands(self, groups: list[str], command: str, topic: str, issuer: str) -> int:
        """Publish ``command`` (pause or resume) for each group; return the epoch used."""
        epoch = now_ms()
        records = [Command(group=g, command=command, epoch=epoch, topic=topic, issuer=issuer) for g in groups]
        if records:
            self.channel().publish(*records, timeout=self.timeout)
        return epoch

    def pause(self, groups: list[str], topic: str, issuer: str) -> int:
        """Ask the services of ``groups`` to leave their groups; return the epoch."""
        return self.send_commands(groups, PAUSE, topic, issuer)

    def resume(self, groups: list[str], topic: str, issuer: str) -> int:
        """Ask the services of ``groups`` to rejoin; return the epoch."""
        return self.send_commands(groups, RESUME, topic, issuer)

    def set_layout(self, topic: str, partitions: int, issuer: str) -> int:
        """Tell producers of ``topic`` to place records over ``partitions`` partitions; return the epoch."""
        epoch = now_ms()
        self.channel().publish(
            Layout(topic=topic, partitions=partitions, epoch=epoch, issuer=issuer), timeout=self.timeout
        )
        return epoch

    def commands(self) -> dict[str, Command]:
        """Return the current command of every group: ``{group: Command}``."""
        state = self.channel().snapshot("cmd/", timeout=self.timeout)
        return {r.group: r for r in state.values() if isinstance(r, Command)}

    def acks(self, epoch: int, group: str = "", topic: str = "") -> list[Ack]:
        """Return the acknowledgements of ``epoch`` by consumers of ``group`` or producers of ``topic``."""
        prefix = f"ack/{group}/" if group else f"ack-layout/{topic}/"
        state = self.channel().snapshot(prefix, timeout=self.timeout)
        return [r for r in state.values() if isinstance(r, Ack) and r.epoch == epoch]

    def close(self) -> None:
        """Flush the control producer."""
        if self._channel is not None:
            self._channel.close()


def describe_acks(acks: list[Ack]) -> list[dict[str, Any]]:
    """Return acknowledgements as plain dicts for logs and XCom."""
    return [{"client": a.client, "state": a.state, "at": a.at} for a in acks]
