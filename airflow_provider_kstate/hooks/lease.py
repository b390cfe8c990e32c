"""The lease log's transport: append lease records to a one-partition topic and read them back.

The lease's rules (the replay, the owners, the takeover rule) and its keeper live in
:mod:`airflow_provider_kstate.lease`; this hook writes and reads the log (default ``_kstate_leases``,
``cleanup.policy=delete``, broker-assigned ``LogAppendTime``) and gives each verb the replay's verdict.
"""

from __future__ import annotations

import json
import time
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

from airflow_provider_kstate.client.channel import base_config, end_offset
from airflow_provider_kstate.exceptions import LeaseHeldError
from airflow_provider_kstate.hooks.admin import KStateAdminHook
from airflow_provider_kstate.increase.model import DEFAULT_LEASE_TOPIC
from airflow_provider_kstate.lease import Lease, replay

LEASE_TOPIC_CONFIG = {
    "cleanup.policy": "delete",
    "retention.ms": str(7 * 24 * 3600 * 1000),
    "message.timestamp.type": "LogAppendTime",
}


class KStateLeaseHook(KStateAdminHook):
    """Acquire, inspect and release the per-topic lease.

    :param kafka_config_id: the Airflow connection id (``kafka`` type).
    :param lease_topic: the lease log topic.
    """

    hook_name = "Kafka State topic lease"

    def __init__(
        self,
        kafka_config_id: str = KStateAdminHook.default_conn_name,
        lease_topic: str = DEFAULT_LEASE_TOPIC,
        timeout: float = 30.0,
    ) -> None:
        super().__init__(kafka_config_id=kafka_config_id, timeout=timeout)
        self.lease_topic = lease_topic
        self._ensured = False

    def _ensure(self) -> None:
        if not self._ensured:
            self.ensure_internal_topic(self.lease_topic, LEASE_TOPIC_CONFIG)
            self._ensured = True

    def _append(self, record: dict[str, Any]) -> int:
        self._ensure()
        producer = Producer(
            {
                **base_config(self.client_config()),
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
        producer.flush(self.timeout)
        if not delivered or delivered[0][0] is not None:
            raise KafkaException(f"lease log {self.lease_topic}: write not acknowledged ({delivered})")
        return int(delivered[0][1].offset())

    def _read(self, topic: str, upto: int | None) -> list[tuple[int, dict[str, Any]]]:
        """Return ``topic``'s lease records up to offset ``upto`` (inclusive; None: to the current end)."""
        self._ensure()
        consumer = Consumer(
            {
                **base_config(self.client_config()),
                "group.id": "kstate-lease-reader",
                "enable.auto.commit": False,
            }
        )
        try:
            high = end_offset(consumer, self.lease_topic, self.timeout)
            last = high - 1 if upto is None else upto
            if last < 0:
                return []
            consumer.assign([TopicPartition(self.lease_topic, 0, OFFSET_BEGINNING)])
            return self._collect(consumer, topic, last)
        finally:
            consumer.close()

    def _collect(self, consumer: Consumer, topic: str, last: int) -> list[tuple[int, dict[str, Any]]]:
        out: list[tuple[int, dict[str, Any]]] = []
        deadline = time.monotonic() + self.timeout
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

    def current(self, topic: str) -> Lease | None:
        """Return the live lease on ``topic``, or None when it is free."""
        holder = replay(self._read(topic, None))
        if holder is not None and holder.expires <= int(time.time() * 1000):
            return None
        return holder

    def acquire(
        self, topic: str, owner: str, ttl_seconds: float, plan: dict[str, Any] | None = None
    ) -> Lease:
        """Take (or renew) the lease on ``topic`` for ``owner``.

        :raises LeaseHeldError: another owner holds an unexpired lease.
        """
        record = {
            "op": "acquire",
            "topic": topic,
            "owner": owner,
            "ttl_ms": int(ttl_seconds * 1000),
            "plan": plan or {},
        }
        offset = self._append(record)
        holder = replay(self._read(topic, offset))
        if holder is None or holder.owner != owner:
            desc = holder.describe() if holder else "unknown"
            raise LeaseHeldError(
                f"topic {topic!r} is being changed by another run ({desc}); this run changed nothing. "
                "Wait for it to finish, or, if it died, for its lease to expire."
            )
        return holder

    def take_over(
        self, topic: str, owner: str, from_owner: str, ttl_seconds: float, plan: dict[str, Any] | None = None
    ) -> Lease:
        """Take the lease on ``topic`` from ``from_owner`` (a run that is no longer running).

        :raises LeaseHeldError: the lease is no longer ``from_owner``'s (another run took it first).
        """
        record = {
            "op": "takeover",
            "topic": topic,
            "owner": owner,
            "from_owner": from_owner,
            "ttl_ms": int(ttl_seconds * 1000),
            "plan": plan or {},
        }
        holder = replay(self._read(topic, self._append(record)))
        if holder is None or holder.owner != owner:
            raise LeaseHeldError(
                f"topic {topic!r}: could not take the lease over from {from_owner} "
                f"({holder.describe() if holder else 'free'}); this run changed nothing."
            )
        return holder

    def release(self, topic: str, owner: str) -> None:
        """Give up ``owner``'s lease on ``topic`` (a no-op if it does not hold it)."""
        self._append({"op": "release", "topic": topic, "owner": owner})
