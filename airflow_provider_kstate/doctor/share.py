"""The ``share_new_partitions`` check: does a share group (KIP-932) read a partition added while it reads?

A share group starts a partition it has never read at ``share.auto.offset.reset``, ``latest`` by default.
Measured with this check: on Apache Kafka 4.2.2 a partition added to a topic the group reads started at
latest too, so the records written to it before the group's next heartbeat were never delivered; on 4.4.0
they are delivered. The check runs on a topic of its own with confluent-kafka's ``ShareConsumer`` (the only
client the doctor has: it runs where Airflow workers run, without Java); a broker without share groups
(Apache Kafka 4.0, most Kafka-compatible brokers) gets "not applicable", never "broken".
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import confluent_kafka
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import NewPartitions, NewTopic

from airflow_provider_kstate.admin_client import AdminClient
from airflow_provider_kstate.doctor.verdict import CheckResult

#: The APIs of share groups (ShareGroupHeartbeat, ShareFetch, ShareAcknowledge): all three or no share groups.
SHARE_APIS = {76: "ShareGroupHeartbeat", 78: "ShareFetch", 79: "ShareAcknowledge"}
#: Records written to the new partition as soon as it exists.
EARLY = 5
#: The value prefixes of the probe's records: before the increase, right after it, once the group reads it.
START, EARLY_TAG, LATE = b"start", b"early", b"late"


def applicability(versions: dict[int, tuple[int, int]]) -> CheckResult | None:
    """Return the "not applicable" result when ApiVersions ``versions`` lacks a share API, else None.

    :param versions: ``{api_key: (min, max)}`` of the broker.
    """
    missing = [f"{name} ({key})" for key, name in SHARE_APIS.items() if key not in versions]
    if not missing:
        return None
    return CheckResult.not_applicable(f"no share groups here: ApiVersions lacks {', '.join(missing)}")


def refused(exc: KafkaException) -> CheckResult:
    """Return the result of a share consumer that failed before reading anything: share groups not enabled
    (Kafka 4.1 lists their APIs but refuses them until the ``share.version`` feature is enabled) do not
    apply; any other failure leaves the promise unchecked.

    :param exc: what the share consumer raised.
    """
    error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
    if error is not None and error.code() in (
        KafkaError.UNSUPPORTED_VERSION,
        KafkaError._UNSUPPORTED_FEATURE,
    ):
        return CheckResult.not_applicable(
            f"share groups are not enabled here: the broker refused the share group's heartbeat "
            f"({error.name()}; Kafka 4.1 needs the share.version feature)"
        )
    return CheckResult(None, f"not probed: the share consumer failed before reading: {exc}")


def judge(early: list[int], delivered: set[int], seconds: float) -> CheckResult:
    """Return the verdict from the offsets written right after the increase and those the group got.

    :param early: the offsets of the records written to the new partition as soon as it existed.
    :param delivered: the offsets of those records the share group delivered.
    :param seconds: how long after the increase the group delivered a record of the new partition.
    """
    lost = sorted(set(early) - delivered)
    if not lost:
        return CheckResult(
            True, f"the {len(early)} records written as partition 1 appeared were delivered ({seconds:.0f} s)"
        )
    return CheckResult(
        False,
        f"{len(lost)} of the {len(early)} records written to partition 1 as soon as it was added "
        f"(offsets {lost[0]}-{lost[-1]}) were never delivered: the share group started the new partition at "
        "latest (share.auto.offset.reset); a share group loses what producers write there before it reads",
    )


class ShareProbe:
    """One run of the check on its own topic, with a never-used share group.

    :param config: librdkafka settings of the cluster (bootstrap, security); never logged.
    :param topic: the probe's topic: created with one partition, grown to two, deleted afterwards.
    :param group: a share group id never used.
    :param timeout: seconds each request may take.
    :param wait: seconds the share group may take to read a partition (a heartbeat, 5 s by default).
    """

    def __init__(
        self, config: dict[str, Any], topic: str, group: str, timeout: float = 20.0, wait: float = 60.0
    ) -> None:
        self.config = config
        self.topic = topic
        self.group = group
        self.timeout = timeout
        self.wait = wait
        self.admin = AdminClient(config)
        self.seen: set[tuple[int, int, bytes]] = set()
        self.errors: list[str] = []

    def run(self) -> CheckResult:
        """Read partition 0 with a share consumer, add partition 1, write to it at once: were those read?"""
        share_consumer = getattr(confluent_kafka, "ShareConsumer", None)
        if share_consumer is None:
            version = confluent_kafka.version()[0]
            return CheckResult(None, f"not probed: confluent-kafka {version} has no ShareConsumer")
        with self._topic():
            consumer = share_consumer({**self.config, "group.id": self.group})
            try:
                consumer.subscribe([self.topic])
                return self._measure(consumer)
            finally:
                consumer.close()

    def _measure(self, consumer: Any) -> CheckResult:
        try:
            reading = self._read_until(consumer, Producer(self._producer_config()), 0, START)
        except KafkaException as exc:
            return refused(exc)
        if not reading:
            return CheckResult(None, f"the share group read nothing in {self.wait:.0f} s{self._errors()}")
        self._grow()
        grown = time.monotonic()
        producer = Producer(self._producer_config())
        early = [self._send(producer, 1, EARLY_TAG + b"-%d" % i) for i in range(EARLY)]
        if not self._read_until(consumer, producer, 1, LATE):
            return CheckResult(
                None, f"the share group was not given the new partition in {self.wait:.0f} s{self._errors()}"
            )
        seconds = time.monotonic() - grown
        self._poll(consumer, 1.0)  # anything of the partition still on its way
        delivered = {o for p, o, v in self.seen if p == 1 and v.startswith(EARLY_TAG)}
        return judge(early, delivered, seconds)

    def _producer_config(self) -> dict[str, Any]:
        return {**self.config, "acks": "all", "linger.ms": 0}

    def _errors(self) -> str:
        return f" (the consumer said: {self.errors[-1]})" if self.errors else ""

    @contextmanager
    def _topic(self) -> Iterator[None]:
        self.admin.create_topics([NewTopic(self.topic, 1, -1)], request_timeout=self.timeout)[
            self.topic
        ].result(timeout=self.timeout)
        try:
            self._wait_partitions(1)
            yield
        finally:
            try:
                self.admin.delete_topics([self.topic], request_timeout=self.timeout)[self.topic].result(
                    timeout=self.timeout
                )
            except (KafkaException, TimeoutError):
                pass  # best effort: a probe topic left behind is harmless and named _kstate_doctor_*

    def _grow(self) -> None:
        """Add partition 1 and wait until the metadata shows it."""
        self.admin.create_partitions([NewPartitions(self.topic, 2)], request_timeout=self.timeout)[
            self.topic
        ].result(timeout=self.timeout)
        self._wait_partitions(2)

    def _wait_partitions(self, count: int) -> None:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            meta = self.admin.list_topics(self.topic, timeout=self.timeout).topics.get(self.topic)
            if meta is not None and meta.error is None and len(meta.partitions) >= count:
                return
            time.sleep(0.1)
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT, f"{self.topic} has no {count} partitions"))

    def _send(self, producer: Producer, partition: int, value: bytes) -> int:
        """Write one record to ``partition`` and return its offset (a partition the producer does not know
        yet is asked again until the timeout)."""
        delivered: list[Any] = []
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                producer.produce(
                    self.topic,
                    value=value,
                    partition=partition,
                    on_delivery=lambda e, m: delivered.append((e, m)),
                )
                break
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError._UNKNOWN_PARTITION or time.monotonic() > deadline:
                    raise
                producer.poll(0.2)
        producer.flush(self.timeout)
        if not delivered or delivered[0][0] is not None:
            raise KafkaException(delivered[0][0] if delivered else KafkaError(KafkaError._TIMED_OUT))
        return int(delivered[0][1].offset())

    def _read_until(self, consumer: Any, producer: Producer, partition: int, tag: bytes) -> bool:
        """Write a ``tag`` record to ``partition`` each second until the group delivers one (True) or the
        wait ends (False)."""
        deadline = time.monotonic() + self.wait
        sent = 0
        while time.monotonic() < deadline:
            self._send(producer, partition, tag + b"-%d" % sent)
            sent += 1
            self._poll(consumer, 1.0)
            if any(p == partition and v.startswith(tag) for p, _o, v in self.seen):
                return True
        return False

    def _poll(self, consumer: Any, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for msg in consumer.poll(0.2):
                if msg.error() is not None:
                    self.errors.append(str(msg.error()))
                elif msg.topic() == self.topic:
                    self.seen.add((int(msg.partition()), int(msg.offset()), bytes(msg.value() or b"")))
