"""Topics for tests, benchmarks and the demo: uniquely named (safe on a shared cluster), created and deleted."""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic


def unique_name(prefix: str) -> str:
    """Return ``kstate-<prefix>-<8 hex>``: unique to this run, recognisable on a shared cluster."""
    return f"kstate-{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(
    config: dict[str, Any],
    name: str,
    partitions: int,
    topic_config: dict[str, str] | None = None,
    replication: int = -1,
) -> str:
    """Create ``name`` with ``partitions`` partitions and return it.

    :param config: librdkafka settings of the cluster.
    :param topic_config: topic settings, e.g. ``{"cleanup.policy": "compact"}``.
    :param replication: replicas per partition; -1 (the default) is the cluster's default.
    """
    admin = AdminClient(config)
    new = NewTopic(name, partitions, replication, config=topic_config or {})
    for future in admin.create_topics([new]).values():
        future.result(timeout=60)
    return name


def delete_topics(config: dict[str, Any], names: list[str]) -> None:
    """Delete topics, best effort (clean-up must not hide a test's own failure)."""
    if not names:
        return
    for future in AdminClient(config).delete_topics(names).values():
        with contextlib.suppress(Exception):
            future.result(timeout=60)
