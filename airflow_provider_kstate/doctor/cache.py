"""Verdicts cached per cluster in a topic of the cluster itself, so every worker of a deployment shares them.

The cache topic (default ``_kstate_doctor``, one partition, time retention) holds one JSON verdict per
record (:class:`~airflow_provider_kstate.doctor.verdict.Verdict`, ``docs/schemas/doctor/verdict.schema.json``),
keyed by the cluster id; the newest record of a cluster is its verdict. Each record is written as
a batch of its own, so its end offset is right even on a broker whose ListOffsets reports a batch's base
offset + 1 (the doctor's own ``latest_offset`` finding).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from airflow_provider_kstate.admin_client import AdminClient
from airflow_provider_kstate.defaults import (  # re-exported: the value lives there (parse time)
    DEFAULT_CACHE_TOPIC as DEFAULT_CACHE_TOPIC,
)
from airflow_provider_kstate.defaults import (
    DEFAULT_TTL as DEFAULT_TTL,
)
from airflow_provider_kstate.doctor.verdict import Verdict
from airflow_provider_kstate.errors import VerdictError

log = logging.getLogger(__name__)

CACHE_TOPIC_CONFIG = {"cleanup.policy": "delete", "retention.ms": str(30 * 24 * 3600 * 1000)}
_ROLE_KEYS = ("group.id", "auto.offset.reset", "enable.auto.commit", "isolation.level", "transactional.id")


class VerdictCache:
    """Read and write cached verdicts.

    :param config: librdkafka settings of the cluster (never logged).
    :param topic: the cache topic.
    :param timeout: seconds each request may take.
    """

    def __init__(
        self, config: dict[str, Any], topic: str = DEFAULT_CACHE_TOPIC, timeout: float = 20.0
    ) -> None:
        self.config = {k: v for k, v in config.items() if k not in _ROLE_KEYS}
        self.topic = topic
        self.timeout = timeout

    def load(self, cluster: str, max_age: float | None = None) -> Verdict | None:
        """Return the newest cached verdict of ``cluster`` (None: none, older than ``max_age`` seconds, or
        unreadable: a verdict of a newer version, or malformed, is absent, so the doctor checks again).

        A verdict cached before verdicts had a version reads as version 1.
        """
        newest: Verdict | None = None
        for key, value in self._records():
            if key == cluster:
                newest = _verdict(value, self.topic)
        if newest is not None and max_age is not None and time.time() - newest.checked_at > max_age:
            return None
        return newest

    def save(self, verdict: Verdict) -> None:
        """Append ``verdict`` (best effort: a cluster that refuses the write only loses the cache)."""
        try:
            self._ensure()
            producer = Producer({**self.config, "acks": "all", "linger.ms": 0})
            producer.produce(self.topic, key=verdict.cluster.encode(), value=verdict.to_json().encode())
            if producer.flush(self.timeout):
                log.warning("doctor: the verdict was not cached in %s (no acknowledgement)", self.topic)
        except KafkaException as exc:
            log.warning("doctor: the verdict was not cached in %s (%s)", self.topic, exc)

    def _ensure(self) -> None:
        admin = AdminClient(self.config)
        if self.topic in admin.list_topics(timeout=self.timeout).topics:
            return
        futures = admin.create_topics([NewTopic(self.topic, 1, -1, config=CACHE_TOPIC_CONFIG)])
        try:
            futures[self.topic].result(timeout=self.timeout)
        except KafkaException as exc:
            if exc.args[0].name() != "TOPIC_ALREADY_EXISTS":
                raise

    def _records(self) -> list[tuple[str, dict[str, Any]]]:
        try:
            if self.topic not in AdminClient(self.config).list_topics(timeout=self.timeout).topics:
                return []
        except KafkaException as exc:
            log.warning("doctor: the cached verdicts in %s could not be read (%s)", self.topic, exc)
            return []
        consumer = Consumer({**self.config, "group.id": "kstate-doctor-cache", "enable.auto.commit": False})
        try:
            _low, end = consumer.get_watermark_offsets(TopicPartition(self.topic, 0), timeout=self.timeout)
            if end <= 0:
                return []
            consumer.assign([TopicPartition(self.topic, 0, OFFSET_BEGINNING)])
            return _collect(consumer, end, self.timeout)
        except KafkaException as exc:
            log.warning("doctor: the cached verdicts in %s could not be read (%s)", self.topic, exc)
            return []
        finally:
            consumer.close()


def _verdict(value: Any, topic: str) -> Verdict | None:
    try:
        return Verdict.from_dict(value)
    except VerdictError as exc:
        log.warning("doctor: the cached verdict in %s is not readable (%s): checking again", topic, exc)
        return None


def _collect(consumer: Consumer, end: int, timeout: float) -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None or msg.error():
            continue
        try:
            out.append(((msg.key() or b"").decode(), json.loads(msg.value() or b"{}")))
        except ValueError:
            pass  # not a verdict: skipped
        if (msg.offset() or 0) + 1 >= end:
            break
    return out
