"""The librdkafka settings of the client piece's helper clients: the id a client acknowledges under, and the
part of a service's consumer or producer config that a helper client of another role can use (the control
channel's producer, the control tail's consumer).
"""

from __future__ import annotations

import os
import socket
from typing import Any

from airflow_provider_kstate.client.channel import base_config


def default_client_id(config: dict[str, Any]) -> str:
    """Return the id a client acknowledges under: ``client.id`` from ``config``, else ``host-pid``.

    :param config: the librdkafka settings of the wrapped client.
    """
    configured = config.get("client.id")
    if configured:
        return str(configured)
    return f"{socket.gethostname()}-{os.getpid()}"


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
