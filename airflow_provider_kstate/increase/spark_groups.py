"""The consumer group names of a Spark query's Kafka source, from the query's options (pure, no Spark).

Spark's Kafka source never joins a group and never commits: it assigns partitions itself and keeps its
offsets in the query's checkpoint, and it reads a partition added to the topic from its earliest offset at
the next micro-batch (measured on Apache Kafka 4.4: ``tests/integration/test_spark_stream_increase.py``).
Its group ids only name the clients: ``<groupIdPrefix>-<uuid>-...`` (``spark-kafka-source`` for a stream,
``spark-kafka-relation`` for a batch read by default) or exactly ``kafka.group.id`` when set. A plan that is
told which groups are Spark queries' (:func:`source_group_names`) leaves them alone instead of refusing them
as unknown or pausing and seeding them.
"""

from __future__ import annotations

from collections.abc import Mapping

STREAM_PREFIX = "spark-kafka-source"
BATCH_PREFIX = "spark-kafka-relation"


def source_group_names(options: Mapping[str, str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Return ``(prefixes, exact names)`` of the group ids a Kafka source with ``options`` uses.

    :param options: the source's options as given to ``spark.readStream.format("kafka")`` (``groupIdPrefix``,
        ``kafka.group.id``; other options are ignored).
    """
    exact = options.get("kafka.group.id")
    if exact:
        return (), (exact,)
    prefix = options.get("groupIdPrefix")
    return ((f"{prefix}-",) if prefix else (f"{STREAM_PREFIX}-", f"{BATCH_PREFIX}-")), ()


def is_source_group(group: str, options: Mapping[str, str]) -> bool:
    """Whether ``group`` is a group id of a Kafka source with ``options``."""
    prefixes, exact = source_group_names(options)
    return group in exact or group.startswith(prefixes)
