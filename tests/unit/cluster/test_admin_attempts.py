"""Issue 41, items 4 and 5: a topic's reads ask that topic only, and ListOffsets goes in attempts.

``partition_count`` and ``topic_replicas`` read the topic's own metadata (not the whole cluster's: at 4,096
partitions x 100 topics the create's poll spent 0.92 s of 1.88 s reading it), through clients that never ask a
broker to create the topic they name. ListOffsets, like a metadata read, costs a broker that does not answer an
attempt, not the request timeout: the partitions missed are asked again after the topic's metadata is read
again, in doubling attempts, or at once when their leader moved. Fake clients: ``list_offsets`` answers per
partition, fails, or never answers, as planned per call."""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from airflow_provider_kstate.cluster import admin as admin_module
from airflow_provider_kstate.cluster.admin import ClusterAdmin
from airflow_provider_kstate.errors import BrokerUnavailableError, TopicNotFoundError

TOPIC = "orders"
#: A planned answer of one partition: "answer" (offset 100 + partition), "hang" (never done), or an error code.
Plan = str | int


class Client:
    """An AdminClient whose metadata names ``leaders`` (``{partition: broker}``) of :data:`TOPIC`, and whose
    ListOffsets calls follow ``plans`` in turn (one per call: a behaviour for every partition, or by partition;
    "answer" once the plans run out)."""

    def __init__(self, *plans: Plan | dict[int, Plan], leaders: dict[int, int] | None = None) -> None:
        self.plans = list(plans)
        self.leaders = leaders if leaders is not None else {0: 1, 1: 2, 2: 3}
        self.topics_asked: list[str | None] = []
        self.offsets_asked: list[tuple[list[int], float]] = []

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        self.topics_asked.append(topic)
        parts = {
            p: SimpleNamespace(leader=b, replicas=[1, 2, 3], isrs=[1, 2, 3]) for p, b in self.leaders.items()
        }
        brokers = {b: SimpleNamespace(id=b, host="127.0.0.1", port=9000 + b) for b in (1, 2, 3)}
        meta = SimpleNamespace(error=None, partitions=parts)
        return SimpleNamespace(topics={TOPIC: meta}, brokers=brokers, orig_broker_id=1)

    def list_offsets(self, request: dict[Any, Any], request_timeout: float = -1) -> dict[Any, Future[Any]]:
        self.offsets_asked.append((sorted(tp.partition for tp in request), request_timeout))
        plan = self.plans.pop(0) if self.plans else "answer"
        futures: dict[Any, Future[Any]] = {}
        for tp in request:
            behaviour = plan.get(tp.partition, "answer") if isinstance(plan, dict) else plan
            future: Future[Any] = Future()
            if behaviour == "answer":
                future.set_result(SimpleNamespace(offset=100 + tp.partition))
            elif behaviour != "hang":
                future.set_exception(KafkaException(KafkaError(behaviour)))
            futures[tp] = future
        return futures


def admin_of(client: Client, timeout: float = 5.0) -> ClusterAdmin:
    return ClusterAdmin({"bootstrap.servers": "kafka:9092"}, timeout=timeout, client=client)  # type: ignore[arg-type]


@pytest.fixture
def short_attempts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Attempts of 0.1 s, doubling; looks every 0.01 s, at the leaders every 0.02 s."""
    monkeypatch.setattr(admin_module, "METADATA_ATTEMPT_S", 0.1)
    monkeypatch.setattr(admin_module, "OFFSETS_LOOK_S", 0.01)
    monkeypatch.setattr(admin_module, "LEADER_LOOK_S", 0.02)


# -- item 4: the topic's own metadata ---------------------------------------------------------------


def test_partition_count_and_replicas_ask_the_topic_not_the_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    client = Client()
    admin = admin_of(client)
    assert admin.partition_count(TOPIC) == 3
    assert [p.leader for p in admin.topic_replicas(TOPIC, leaders_only=True).partitions] == [1, 2, 3]
    admin.ensure_internal_topic(TOPIC, {})  # it exists: nothing created
    assert client.topics_asked == [TOPIC, TOPIC, TOPIC]


def test_a_topic_that_does_not_exist_is_still_named() -> None:
    class Missing(Client):
        def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
            self.topics_asked.append(topic)
            unknown = SimpleNamespace(error=KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART), partitions={})
            return SimpleNamespace(topics={topic: unknown}, brokers={}, orig_broker_id=1)

    client = Missing()
    with pytest.raises(TopicNotFoundError, match="topic 'typo' does not exist"):
        admin_of(client).partition_count("typo")
    with pytest.raises(TopicNotFoundError, match="topic 'typo' does not exist"):
        admin_of(client).topic_replicas("typo")
    assert client.topics_asked == ["typo", "typo"]


def test_admin_clients_never_ask_a_broker_to_create_a_topic_whatever_the_connection_says() -> None:
    """librdkafka's AdminClient is a producer handle: its Metadata request for a topic would create it on a
    broker with ``auto.create.topics.enable`` (Kafka's default; measured on Apache Kafka 4.4)."""
    own = {"bootstrap.servers": "b:1", "allow.auto.create.topics": True}
    assert admin_module.admin_settings(own)["allow.auto.create.topics"] is False


def test_the_second_metadata_client_has_the_admin_settings_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(admin_module, "METADATA_ATTEMPT_S", 0.01)
    made: list[dict[str, Any]] = []

    class Hung(Client):
        def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))

    def second(config: dict[str, Any]) -> Client:
        made.append(config)
        return Client()

    admin = ClusterAdmin({"bootstrap.servers": "kafka:9092"}, client=Hung(), second_client=second)  # type: ignore[arg-type]
    assert admin.partition_count(TOPIC) == 3
    [config] = made
    assert config["allow.auto.create.topics"] is False
    assert config["topic.metadata.refresh.interval.ms"] == 2000


# -- item 5: ListOffsets in attempts -------------------------------------------------------------------


def test_a_normal_read_is_one_request_bounded_by_the_first_attempt() -> None:
    client = Client()
    assert admin_of(client).log_starts(TOPIC, [0, 1, 2]) == {0: 100, 1: 101, 2: 102}
    assert client.offsets_asked == [([0, 1, 2], admin_module.METADATA_ATTEMPT_S)]
    assert client.topics_asked == [], "no metadata read when every partition answers"


@pytest.mark.usefixtures("short_attempts")
def test_a_first_attempt_that_never_answers_costs_an_attempt_not_the_timeout(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The leader of partition 1 hangs in the first attempt: the partitions it answered count, partition 1
    alone is asked again (doubled bound) after the topic's metadata is read again, and answers."""
    client = Client({1: "hang"})
    started = time.monotonic()
    with caplog.at_level(logging.INFO, logger=admin_module.__name__):
        assert admin_of(client, timeout=30).log_starts(TOPIC, [0, 1, 2]) == {0: 100, 1: 101, 2: 102}
    # timeout contract: one 0.1 s attempt and the answer of the second, far from the 30 s timeout
    assert time.monotonic() - started < 3
    assert client.offsets_asked == [([0, 1, 2], 0.1), ([1], pytest.approx(0.2))]
    assert client.topics_asked == [TOPIC], "the topic's metadata read again before the second attempt"
    assert "OFFSETS of 'orders' answered after 1 missed attempt(s)" in caplog.text


@pytest.mark.usefixtures("short_attempts")
def test_a_lost_connection_is_asked_again_and_so_is_a_partition_without_a_leader_yet() -> None:
    client = Client(
        {0: KafkaError._TRANSPORT, 2: KafkaError.NOT_LEADER_FOR_PARTITION},
        "answer",
        {2: KafkaError.LEADER_NOT_AVAILABLE},
    )
    assert admin_of(client).log_starts(TOPIC, [0, 1, 2]) == {0: 100, 1: 101, 2: 102}
    assert [asked for asked, _bound in client.offsets_asked] == [[0, 1, 2], [0], [2], [2]]


@pytest.mark.usefixtures("short_attempts")
def test_partitions_whose_leaders_the_client_does_not_know_yet_are_asked_again() -> None:
    """librdkafka answers "Failed to query partition leaders: No leaders found" (_NOENT) for a topic whose
    metadata names no leader yet (right after its create on 3 Apache Kafka 4.4 nodes): asked again."""
    client = Client({0: KafkaError._NOENT, 1: KafkaError._NOENT}, "answer")
    assert admin_of(client).log_starts(TOPIC, [0, 1]) == {0: 100, 1: 101}
    assert [asked for asked, _bound in client.offsets_asked] == [[0, 1], [0, 1]]


@pytest.mark.usefixtures("short_attempts")
def test_watermarks_both_passes_go_in_attempts() -> None:
    client = Client("hang", "hang")
    assert admin_of(client).watermarks(TOPIC, [0, 1]) == {0: (100, 100), 1: (101, 101)}
    assert len(client.offsets_asked) == 4


@pytest.mark.usefixtures("short_attempts")
def test_an_error_a_retry_cannot_fix_is_raised_at_once() -> None:
    client = Client({1: KafkaError.TOPIC_AUTHORIZATION_FAILED})
    with pytest.raises(KafkaException, match="TOPIC_AUTHORIZATION_FAILED"):
        admin_of(client, timeout=30).log_starts(TOPIC, [0, 1, 2])
    assert len(client.offsets_asked) == 1 and client.topics_asked == [], "no second attempt"


@pytest.mark.usefixtures("short_attempts")
def test_a_moved_leader_is_asked_at_once_not_at_the_next_bound(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Partition 1's leader (broker 2) hangs; its leadership moves to broker 3 during the second attempt
    (bound 0.6 s, looked at every 0.02 s): the attempt ends on the move, and the partition is asked of the
    new leader (a leader is fenced 9-13 s after its broker hung or died: asked at once, not at a bound)."""
    monkeypatch.setattr(admin_module, "METADATA_ATTEMPT_S", 0.3)

    class Failover(Client):
        def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
            if len(self.topics_asked) >= 2:  # the first look during the second attempt: moved
                self.leaders = {**self.leaders, 1: 3}
            return super().list_topics(topic, timeout)

    client = Failover({1: "hang"}, {1: "hang"})
    with caplog.at_level(logging.INFO, logger=admin_module.__name__):
        assert admin_of(client, timeout=30).log_starts(TOPIC, [0, 1, 2]) == {0: 100, 1: 101, 2: 102}
    assert [asked for asked, _bound in client.offsets_asked] == [[0, 1, 2], [1], [1]]
    assert "(the leader of partition 1 moved to broker 3): asked again" in caplog.text
    assert "answered after 2 missed attempt(s)" in caplog.text


@pytest.mark.usefixtures("short_attempts")
def test_no_answer_until_the_timeout_is_named() -> None:
    client = Client(*["hang"] * 100)
    started = time.monotonic()
    with pytest.raises(
        BrokerUnavailableError, match=r"list offsets of 'orders': 2 partition\(s\) not answered within 0.5s"
    ):
        admin_of(client, timeout=0.5).log_starts(TOPIC, [0, 1])
    # timeout contract: fails once the 0.5 s timeout is spent, not before (2x + 3 s of margin)
    assert 0.45 <= time.monotonic() - started < 0.5 * 2 + 3
    bounds = [bound for _asked, bound in client.offsets_asked]
    assert bounds[:2] == [0.1, pytest.approx(0.2, abs=0.02)] and all(b <= 0.5 for b in bounds), bounds


@pytest.mark.usefixtures("short_attempts")
def test_loaded_ends_reads_a_missed_partition_again_and_a_leader_error_as_empty() -> None:
    client = Client({0: "hang", 1: KafkaError.NOT_LEADER_FOR_PARTITION})
    assert admin_of(client).loaded_ends(TOPIC, [0, 1, 2]) == {0: 100, 1: 0, 2: 102}
    assert [asked for asked, _bound in client.offsets_asked] == [[0, 1, 2], [0]]
