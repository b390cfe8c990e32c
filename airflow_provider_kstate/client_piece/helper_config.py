"""The librdkafka settings of the client piece's helper clients: the id a client acknowledges under, and the
part of a service's consumer or producer config that a helper client of another role can use (the control
channel's producer, the control tail's consumer).
"""

from __future__ import annotations

import os
import socket
from typing import Any

from airflow_provider_kstate.client_piece.channel import base_config
from airflow_provider_kstate.errors import InvalidArgumentError

#: ``group.protocol`` of KIP-848: the broker owns the assignment and the session.
CONSUMER_PROTOCOL = "consumer"
#: What librdkafka refuses under ``group.protocol=consumer`` (measured: librdkafka 2.16 fails the
#: constructor with ``_INVALID_ARG``), and where each moved: the broker, or the group's own config.
CONSUMER_PROTOCOL_REFUSED = {
    "session.timeout.ms": "the group config consumer.session.timeout.ms (broker default "
    "group.consumer.session.timeout.ms, 45 s)",
    "heartbeat.interval.ms": "the group config consumer.heartbeat.interval.ms (broker default "
    "group.consumer.heartbeat.interval.ms, 5 s)",
    "partition.assignment.strategy": "group.remote.assignor (uniform or range), or the broker's "
    "group.consumer.assignors",
}


def default_client_id(config: dict[str, Any]) -> str:
    """Return the id a client acknowledges under: ``client.id`` from ``config``, else ``host-pid``.

    :param config: the librdkafka settings of the wrapped client.
    """
    configured = config.get("client.id")
    if configured:
        return str(configured)
    return f"{socket.gethostname()}-{os.getpid()}"


def group_protocol(config: dict[str, Any]) -> str:
    """Return the config's ``group.protocol``, lower-cased: ``classic`` (librdkafka's default) or ``consumer``.

    :param config: librdkafka consumer settings.
    """
    return str(config.get("group.protocol") or "classic").strip().lower()


def incremental_assignment(config: dict[str, Any]) -> bool:
    """True when the consumer's assignment changes incrementally (``incremental_assign`` in a rebalance
    callback): the consumer protocol (KIP-848) always, the classic protocol with a cooperative assignor.

    :param config: librdkafka consumer settings.
    """
    strategy = str(config.get("partition.assignment.strategy", ""))
    return group_protocol(config) == CONSUMER_PROTOCOL or "cooperative" in strategy


def check_group_protocol(config: dict[str, Any]) -> None:
    """Refuse, naming each one and where it moved, the settings librdkafka rejects under
    ``group.protocol=consumer`` (:data:`CONSUMER_PROTOCOL_REFUSED`), before any client is created.

    :param config: librdkafka consumer settings.
    :raises InvalidArgumentError: the config sets one of them under the consumer protocol.
    """
    if group_protocol(config) != CONSUMER_PROTOCOL:
        return
    refused = [key for key in CONSUMER_PROTOCOL_REFUSED if key in config]
    if refused:
        moved = "; ".join(f"{key} -> {CONSUMER_PROTOCOL_REFUSED[key]}" for key in refused)
        raise InvalidArgumentError(
            f"group.protocol=consumer (KIP-848) does not take {', '.join(refused)}: the broker owns the "
            f"group's session and assignment (librdkafka refuses them). Remove them from the consumer's "
            f"config; set them instead as {moved}."
        )


_CONSUMER_ONLY_PREFIXES = ("queued.", "fetch.", "group.", "enable.auto.", "auto.", "partition.assignment")
_CONSUMER_ONLY = {
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "max.poll.interval.ms",
    "enable.partition.eof",
    "check.crcs",
    "isolation.level",
    "on_commit",
    "consume.callback.max.messages",
    "coordinator.query.interval.ms",
    "group.instance.id",
}


def connection_config(config: dict[str, Any]) -> dict[str, Any]:
    """Return the part of a consumer/producer config that a helper client of another role can use."""
    return {
        k: v
        for k, v in base_config(config).items()
        if k not in _CONSUMER_ONLY and not k.startswith(_CONSUMER_ONLY_PREFIXES) and k != "client.id"
    }


#: Producer-only librdkafka settings: a producer's config handed to the control tail must not carry them
#: (librdkafka warns ``CONFWARN ... is a producer property and will be ignored``).
_PRODUCER_ONLY = (
    "acks",
    "request.required.acks",
    "linger.ms",
    "queue.buffering.max.ms",
    "batch.size",
    "batch.num.messages",
    "compression.type",
    "compression.codec",
    "enable.idempotence",
    "transactional.id",
    "message.timeout.ms",
    "delivery.timeout.ms",
    "message.send.max.retries",
    "retries",
    "sticky.partitioning.linger.ms",
)
_PRODUCER_ONLY_PREFIXES = ("queue.buffering.", "compression.")


def tail_config(config: dict[str, Any]) -> dict[str, Any]:
    """Return the part of a consumer's or producer's config the control tail's consumer can use."""
    return {
        k: v
        for k, v in connection_config(config).items()
        if k not in _PRODUCER_ONLY and not k.startswith(_PRODUCER_ONLY_PREFIXES)
    }
