"""The lease log's transport: append lease records to a one-partition topic and read them back (no Airflow).

The lease's rules (the replay, the owners, the takeover rule), its verbs and its keeper live in
:mod:`airflow_provider_kstate.lease_rules`; this writes and reads the log (default ``_kstate_leases``,
``cleanup.policy=delete``, broker-assigned ``LogAppendTime``). A record is the dict of a
:class:`~airflow_provider_kstate.lease_rules.LeaseRecord`, validated where it is replayed.
"""

from __future__ import annotations

import json
import time
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

from airflow_provider_kstate.client_piece.channel import base_config, end_offset
from airflow_provider_kstate.cluster.admin import ClusterAdmin
from airflow_provider_kstate.increase.model import DEFAULT_LEASE_TOPIC

LEASE_TOPIC_CONFIG = {
    "cleanup.policy": "delete",
    "retention.ms": str(7 * 24 * 3600 * 1000),
    "message.timestamp.type": "LogAppendTime",
}


class KafkaLeaseLog:
    """The lease log on a cluster: append records, read a topic's records back in log order.

    :param admin: the cluster's admin verbs (its config and timeout are the log's).
    :param lease_topic: the lease log topic.
    """

    def __init__(self, admin: ClusterAdmin, lease_topic: str = DEFAULT_LEASE_TOPIC) -> None:
        self.admin = admin
        self.lease_topic = lease_topic
        self._ensured = False

    def _ensure(self) -> None:
        if not self._ensured:
            self.admin.ensure_internal_topic(self.lease_topic, LEASE_TOPIC_CONFIG)
            self._ensured = True

    def append(self, record: dict[str, Any]) -> int:
        """Append one lease record (keyed by its topic); return its offset once the broker acknowledged it."""
        self._ensure()
        producer = Producer(
            {
                **base_config(self.admin.config),
                "acks": "all",
                "linger.ms": 0,
                "max.in.flight.requests.per.connection": 1,
            }
        )
        delivered: list[Any] = []
        producer.produce(
            self.lease_topic,
            key=record["topic"],
            value=json.dumps(record, sort_keys=True).encode(),
            on_delivery=lambda err, msg: delivered.append((err, msg)),
        )
        producer.flush(self.admin.timeout)
        if not delivered or delivered[0][0] is not None:
            raise KafkaException(f"lease log {self.lease_topic}: write not acknowledged ({delivered})")
        return int(delivered[0][1].offset())

    def read(self, topic: str, upto: int | None) -> list[tuple[int, dict[str, Any]]]:
        """Return ``topic``'s lease records up to offset ``upto`` (inclusive; None: to the current end)."""
        self._ensure()
        consumer = Consumer(
            {
                **base_config(self.admin.config),
                "group.id": "kstate-lease-reader",
                "enable.auto.commit": False,
            }
        )
        try:
            high = end_offset(consumer, self.lease_topic, self.admin.timeout)
            last = high - 1 if upto is None else upto
            if last < 0:
                return []
            consumer.assign([TopicPartition(self.lease_topic, 0, OFFSET_BEGINNING)])
            return self._collect(consumer, topic, last)
        finally:
            consumer.close()

    def _collect(self, consumer: Consumer, topic: str, last: int) -> list[tuple[int, dict[str, Any]]]:
        out: list[tuple[int, dict[str, Any]]] = []
        deadline = time.monotonic() + self.admin.timeout
        position = -1
        while position < last:
            if time.monotonic() > deadline:
                raise KafkaException(f"lease log {self.lease_topic}: read timed out at offset {position}")
            for msg in consumer.consume(500, 0.05):
                offset = int(msg.offset() or 0)
                if msg.error() or offset > last:
                    continue
                position = offset
                if (msg.key() or b"").decode() == topic:
                    out.append((msg.timestamp()[1], json.loads(msg.value() or b"{}")))
        return out
