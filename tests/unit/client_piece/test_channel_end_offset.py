"""``end_offset`` waits for a control topic created a moment ago (issue 33): on a multi-broker cluster the
broker asked may not know it yet and answers ``UNKNOWN_TOPIC_OR_PART`` (a ControlledConsumer starting beside
the member that created it died of it on a fresh 3-node Apache Kafka cluster), and for a leader that died
(issue 41: the request is tried in short attempts, the leader looked up between them); other errors raise."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from airflow_provider_kstate.client_piece import channel


class Consumer:
    def __init__(self, errors: list[int]) -> None:
        self.errors = errors
        self.refreshed = 0
        self.timeouts: list[float] = []

    def get_watermark_offsets(self, _tp: Any, timeout: float = 0) -> tuple[int, int]:
        self.timeouts.append(timeout)
        if self.errors:
            raise KafkaException(KafkaError(self.errors.pop(0)))
        return 0, 7

    def list_topics(self, _topic: str, timeout: float = 0) -> None:
        self.refreshed += 1


@pytest.fixture(autouse=True)
def _no_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(channel.time, "sleep", lambda _s: None)


def test_a_topic_the_broker_asked_does_not_know_yet_is_waited_for() -> None:
    errors = [
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError._UNKNOWN_PARTITION,
    ]
    consumer = Consumer(errors)
    assert channel.end_offset(consumer, "_kstate_control", timeout=5) == 7  # type: ignore[arg-type]
    assert consumer.refreshed == 3


def test_a_dead_leader_is_asked_in_short_attempts_with_the_leader_looked_up_between_them() -> None:
    """librdkafka asks again only the broker its metadata named: a request bound to the call's whole timeout
    waited for the dead node's restart. Each attempt is short, and the metadata is read between them."""
    gone = [
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
        KafkaError._DESTROY_BROKER,
        KafkaError.OFFSET_NOT_AVAILABLE,
    ]
    consumer = Consumer(gone)
    assert channel.end_offset(consumer, "_kstate_control", timeout=30) == 7  # type: ignore[arg-type]
    assert consumer.refreshed == 4 and max(consumer.timeouts) <= channel.ATTEMPT_S
    late = Consumer([KafkaError._TIMED_OUT] * 10**6)  # never answers within the timeout
    with pytest.raises(KafkaException):
        channel.end_offset(late, "_kstate_control", timeout=0.05, attempt=0.01)  # type: ignore[arg-type]


def test_another_error_raises_at_once() -> None:
    consumer = Consumer([KafkaError.TOPIC_AUTHORIZATION_FAILED])
    with pytest.raises(KafkaException):
        channel.end_offset(consumer, "_kstate_control", timeout=5)  # type: ignore[arg-type]
    assert consumer.refreshed == 0
