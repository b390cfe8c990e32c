"""Read and write the control topic. Used by the controller (Airflow side) and by the client wrappers."""

from __future__ import annotations

import logging
import time
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from airflow_provider_kstate.client_piece.protocol import (
    CONTROL_TOPIC_CONFIG,
    DEFAULT_CONTROL_TOPIC,
    Record,
    decode,
    encode,
)

log = logging.getLogger(__name__)

_CLIENT_ONLY = ("group.id", "auto.offset.reset", "enable.auto.commit", "partitioner", "isolation.level")


def base_config(config: dict[str, Any]) -> dict[str, Any]:
    """Return the connection part of a librdkafka config (bootstrap, security), without client roles."""
    return {k: v for k, v in config.items() if k not in _CLIENT_ONLY}


def ensure_topic(admin: AdminClient, topic: str, config: dict[str, str], timeout: float = 30.0) -> None:
    """Create a one-partition topic with ``config`` unless it exists."""
    if topic in admin.list_topics(timeout=timeout).topics:
        return
    futures = admin.create_topics([NewTopic(topic, 1, -1, config=config)], request_timeout=timeout)
    for future in futures.values():
        try:
            future.result(timeout=timeout)
        except KafkaException as exc:
            if exc.args[0].name() != "TOPIC_ALREADY_EXISTS":
                raise


#: Errors of a read of a topic created a moment ago (see :func:`end_offset`).
JUST_CREATED = frozenset(
    {"_UNKNOWN_PARTITION", "UNKNOWN_TOPIC_OR_PART", "NOT_LEADER_FOR_PARTITION", "LEADER_NOT_AVAILABLE"}
)
#: Errors of a read whose leader died (see :func:`end_offset`): the request went to the dead node, whose
#: handle librdkafka may since have dropped, or reached the new leader before it knew its high watermark
#: (KIP-207; both seen on 3 Apache Kafka 4.4 nodes, the control topic's leader SIGKILLed).
LEADER_GONE = frozenset(
    {"_TIMED_OUT", "_TRANSPORT", "_ALL_BROKERS_DOWN", "_DESTROY_BROKER", "OFFSET_NOT_AVAILABLE"}
)
#: Seconds one end-offset request may take before the leader is looked up again (:func:`end_offset`).
ATTEMPT_S = 0.5


def end_offset(consumer: Consumer, topic: str, timeout: float, attempt: float = ATTEMPT_S) -> int:
    """Return the high watermark of ``topic``'s partition 0 within ``timeout`` seconds, in requests of at
    most ``attempt`` seconds with the topic's metadata read again between them.

    librdkafka sends the request to the leader its metadata names and, should that broker be down, tries
    it again on the same broker only, until it is back or the call's timeout ends
    (``rd_kafka_query_watermark_offsets``): a read whose leader was killed waited for the node's restart,
    not for the new leader (the controller saw the consumers' acknowledgements 8 to 15 s after the control
    topic's failover, measured on 3 Apache Kafka 4.4 nodes). Also waited for: a just-created topic, unknown
    to this client's metadata (``_UNKNOWN_PARTITION``) or to the broker asked (``UNKNOWN_TOPIC_OR_PART``), or
    without a leader yet (each seen on a 3-node Apache Kafka 4.4.0 cluster, issue 33).
    """
    deadline = time.monotonic() + timeout

    def within() -> float:
        return max(0.01, min(attempt, deadline - time.monotonic()))

    while True:
        try:
            return int(consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=within())[1])
        except KafkaException as exc:
            name = exc.args[0].name()
            if name not in JUST_CREATED | LEADER_GONE or time.monotonic() > deadline:
                raise
        try:  # the leader again (or the just-created topic), for the next attempt
            consumer.list_topics(topic, timeout=within())
        except KafkaException as exc:
            log.debug("control topic %s: metadata not read (%s); asking again", topic, exc)
        if name in JUST_CREATED or name == "OFFSET_NOT_AVAILABLE":
            time.sleep(0.2)  # the broker answered: it needs a moment, not another broker


class ControlChannel:
    """The compacted control topic: publish protocol records and read its current state.

    :param config: librdkafka settings of the cluster (bootstrap, SASL/SSL).
    :param topic: the control topic.
    """

    def __init__(self, config: dict[str, Any], topic: str = DEFAULT_CONTROL_TOPIC) -> None:
        self.config = base_config(config)
        self.topic = topic
        self._producer: Producer | None = None

    def ensure(self, timeout: float = 30.0) -> None:
        """Create the control topic when it does not exist."""
        ensure_topic(AdminClient(self.config), self.topic, CONTROL_TOPIC_CONFIG, timeout)

    def publish(self, *records: Record, timeout: float = 30.0, wait: bool = True) -> None:
        """Write records and wait until the broker has them all (``wait`` off: return once they are queued,
        their delivery unchecked; a later call that waits delivers them first, in order)."""
        if self._producer is None:
            self._producer = Producer(
                {**self.config, "acks": "all", "linger.ms": 0, "max.in.flight.requests.per.connection": 1}
            )
        errors: list[str] = []

        def _on_delivery(err: Any, _msg: Any) -> None:
            if err is not None:
                errors.append(str(err))

        for record in records:
            self._producer.produce(self.topic, key=record.key, value=encode(record), on_delivery=_on_delivery)
        if not wait:
            self._producer.poll(0)
            return
        remaining = self._producer.flush(timeout)
        if remaining or errors:
            raise KafkaException(f"control topic {self.topic}: {remaining} undelivered, errors: {errors}")

    def snapshot(self, prefix: str = "", timeout: float = 30.0) -> dict[str, Record]:
        """Read the control topic from the beginning to its end; return the latest record per key.

        :param prefix: keep only keys that start with this.
        """
        consumer = Consumer({**self.config, "group.id": "kstate-control-reader", "enable.auto.commit": False})
        try:
            return self._read_all(consumer, prefix, timeout)
        finally:
            consumer.close()

    def _read_all(self, consumer: Consumer, prefix: str, timeout: float) -> dict[str, Record]:
        high = end_offset(consumer, self.topic, timeout)
        state: dict[str, Record] = {}
        if high <= 0:
            return state
        consumer.assign([TopicPartition(self.topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + timeout
        position = -1
        while position < high - 1:
            if time.monotonic() > deadline:
                raise KafkaException(f"control topic {self.topic}: read timed out at {position + 1}/{high}")
            for msg in consumer.consume(500, 0.05):
                if msg.error():
                    continue
                position = int(msg.offset() or 0)
                key = (msg.key() or b"").decode()
                if not key.startswith(prefix):
                    continue
                record = decode(msg.value())
                if record is None:
                    state.pop(key, None)
                else:
                    state[key] = record
        return state

    def close(self) -> None:
        """Flush and drop the producer."""
        if self._producer is not None:
            self._producer.flush(10)
            self._producer = None
