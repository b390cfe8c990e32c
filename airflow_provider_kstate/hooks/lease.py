"""A per-topic lease kept in Kafka, so two runs on one topic never interleave (across DAGs and workers).

The lease log is a one-partition topic (default ``_kstate_leases``, ``cleanup.policy=delete``, broker-assigned
``LogAppendTime``). A run appends ``acquire``/``release`` records keyed by the topic and then replays the
log up to its own record: the log's order decides, so every reader reaches the same verdict without a
compare-and-set. Replaying, an ``acquire`` takes the lease when it is free, expired (at that record's
broker timestamp) or already held by the same owner (a retry renews it); a ``release`` by the holder frees
it; a ``takeover`` naming the current holder (``from_owner``) takes it over: a run does that only when the
holder's Airflow run is no longer running. The holder's first ``acquire`` carries the plan, so a rerun of
a crashed step finds it again.

Running steps renew the lease before they change anything, so its TTL can be short (15 min by default): a
crashed run blocks the topic for at most that long, and a run on the same topic takes over at once when the
crashed run has ended in Airflow. A later run is safe either way: every run seeds every gap on the topic.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

from airflow_provider_kstate.client.channel import base_config, end_offset
from airflow_provider_kstate.exceptions import LeaseHeldError
from airflow_provider_kstate.hooks.admin import KStateAdminHook
from airflow_provider_kstate.increase.model import DEFAULT_LEASE_TOPIC

LEASE_TOPIC_CONFIG = {
    "cleanup.policy": "delete",
    "retention.ms": str(7 * 24 * 3600 * 1000),
    "message.timestamp.type": "LogAppendTime",
}


@dataclass
class Lease:
    """Who holds the lease on a topic, until when, and the plan it was taken for."""

    topic: str
    owner: str
    since: int
    expires: int
    plan: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        return (
            f"held by {self.owner} since {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(self.since / 1000))}, "
            f"expires {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(self.expires / 1000))}"
        )


def replay(records: list[tuple[int, dict[str, Any]]]) -> Lease | None:
    """Return the holder after applying ``(timestamp_ms, record)`` pairs of one topic in log order."""
    holder: Lease | None = None
    for ts, rec in records:
        if holder is not None and ts >= holder.expires:
            holder = None
        owner = rec.get("owner", "")
        if rec.get("op") == "takeover" and holder is not None and holder.owner == rec.get("from_owner"):
            holder = None
        if rec.get("op") in ("acquire", "takeover") and (holder is None or holder.owner == owner):
            expires = ts + int(rec.get("ttl_ms", 0))
            if holder is None:
                holder = Lease(rec.get("topic", ""), owner, ts, expires, rec.get("plan") or {})
            else:
                holder.expires = expires
        elif rec.get("op") == "release" and holder is not None and holder.owner == owner:
            holder = None
    return holder


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
