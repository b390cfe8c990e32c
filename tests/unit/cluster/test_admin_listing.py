"""Unit tests of ClusterAdmin's group listing and committed offsets when a broker answers in part: a partial
answer is asked again or refused, never read as "no such group" or "no offset" (fakes of confluent-kafka's
admin results and of a group's consumer; real KafkaError values)."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest
from confluent_kafka import KafkaError, KafkaException

from airflow_provider_kstate.cluster.admin import ClusterAdmin
from airflow_provider_kstate.errors import (
    BrokerUnavailableError,
    KafkaRequestError,
    KafkaRequestRefusedError,
    SeedError,
)

LOADING = KafkaException(KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS))
DENIED = KafkaException(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED))


def _done(value: Any) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_result(value)
    return future


class Listing:
    """A client whose ListGroups answers come from ``answers`` in turn (the last one repeats)."""

    def __init__(self, *answers: tuple[list[str], list[Any]]) -> None:
        self.answers = list(answers)
        self.calls = 0

    def list_consumer_groups(self, request_timeout: float) -> Future[Any]:
        valid, errors = self.answers[min(self.calls, len(self.answers) - 1)]
        self.calls += 1
        return _done(SimpleNamespace(valid=[SimpleNamespace(group_id=g) for g in valid], errors=errors))


def _admin(client: Any, timeout: float = 2.0) -> ClusterAdmin:
    return ClusterAdmin({"bootstrap.servers": "b:1"}, timeout=timeout, client=client)


def test_a_loading_coordinator_is_asked_again_and_every_group_listed() -> None:
    client = Listing((["a"], [LOADING]), (["a", "idle"], []))
    assert _admin(client).list_groups() == ["a", "idle"]
    assert client.calls == 2


def test_a_partial_list_is_never_returned() -> None:
    client = Listing((["a"], [LOADING]))
    with pytest.raises(KafkaRequestError, match="COORDINATOR_LOAD_IN_PROGRESS") as err:
        _admin(client, timeout=1.0).list_groups()
    assert err.value.retryable and "would not be protected" in str(err.value)
    assert client.calls >= 2


def test_a_denied_list_fails_at_once_without_a_retry() -> None:
    client = Listing((["a"], [DENIED]))
    with pytest.raises(KafkaRequestRefusedError, match="GROUP_AUTHORIZATION_FAILED") as err:
        _admin(client).list_groups()
    assert not err.value.retryable and client.calls == 1


class Reader:
    """A consumer of one group whose OffsetFetch answers partition 1 with each of ``errors`` in turn (then
    in full), as confluent-kafka's ``Consumer.committed`` does: partition errors on the TopicPartitions, a
    request error raised."""

    made: list[Reader] = []

    def __init__(self, config: dict[str, Any], errors: list[Any]) -> None:
        self.config, self.errors, self.calls, self.closed = config, list(errors), 0, False
        Reader.made.append(self)

    def committed(self, partitions: list[Any], timeout: float) -> list[Any]:
        self.calls += 1
        error = self.errors.pop(0) if self.errors else None
        if isinstance(error, KafkaException):
            raise error
        return [  # confluent-kafka's TopicPartition: its error is read-only, None when the partition is fine
            SimpleNamespace(
                topic=tp.topic,
                partition=tp.partition,
                offset=-1001 if tp.partition == 1 and error else 7,
                error=error if tp.partition == 1 else None,
            )
            for tp in partitions
        ]

    def close(self) -> None:
        self.closed = True


def _reading(*errors: Any, timeout: float = 2.0) -> ClusterAdmin:
    Reader.made = []
    return ClusterAdmin(
        {"bootstrap.servers": "b:1"},
        timeout=timeout,
        client=SimpleNamespace(),
        consumer=lambda config: Reader(config, list(errors)),
    )


def test_offsets_answered_in_full_are_read_by_a_consumer_of_each_group_never_joining() -> None:
    found = dict(_reading().committed_offsets_many(["g", "h", "g"], "t", partitions=3))
    assert found == {"g": {0: 7, 1: 7, 2: 7}, "h": {0: 7, 1: 7, 2: 7}}
    assert sorted(r.config["group.id"] for r in Reader.made) == ["g", "h"]
    assert all(r.closed and r.config["enable.auto.commit"] is False for r in Reader.made)


def test_large_groups_are_read_in_chunks() -> None:
    found = dict(_reading().committed_offsets_many(["g"], "t", partitions=600))
    assert len(found["g"]) == 600 and Reader.made[0].calls == 3  # 256 + 256 + 88


def test_a_coordinator_loading_or_moving_is_asked_again() -> None:
    loading = KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS)
    moved = KafkaException(KafkaError(KafkaError.NOT_COORDINATOR))
    found = dict(_reading(loading, moved).committed_offsets_many(["g"], "t", 3))
    assert found == {"g": {0: 7, 1: 7, 2: 7}} and Reader.made[0].calls == 3


def test_a_partition_still_loading_at_the_deadline_is_not_read_as_no_offset() -> None:
    loading = KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS)
    with pytest.raises(KafkaRequestError, match="partition 1") as err:
        dict(_reading(*[loading] * 100, timeout=0.5).committed_offsets_many(["g"], "t", 3))
    assert err.value.retryable and "not read as 'no offset'" in str(err.value)
    assert Reader.made[0].closed


def test_a_denied_read_fails_at_once_naming_it() -> None:
    denied = KafkaException(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED))
    with pytest.raises(KafkaRequestRefusedError, match="GROUP_AUTHORIZATION_FAILED") as err:
        dict(_reading(denied).committed_offsets_many(["g"], "t", 3))
    assert not err.value.retryable and Reader.made[0].calls == 1


class Seeder:
    """A consumer of one group that seeds it: its asynchronous commits are answered at its next ``poll``,
    every partition with ``first`` at the first commit, then taken (``answer``: per call)."""

    made: ClassVar[list[Seeder]] = []

    def __init__(self, config: dict[str, Any], answer: Callable[[int], KafkaError | None]) -> None:
        self.config, self.answer = config, answer
        self.commits: list[list[int]] = []
        self.queued: list[tuple[None, list[Any]]] = []
        self.closed = False
        Seeder.made.append(self)

    def commit(self, offsets: list[Any], asynchronous: bool) -> None:
        assert asynchronous
        error = self.answer(len(self.commits))
        self.commits.append([tp.partition for tp in offsets])
        self.queued.append((None, [SimpleNamespace(partition=tp.partition, error=error) for tp in offsets]))

    def poll(self, timeout: float) -> None:
        while self.queued:
            self.config["on_commit"](*self.queued.pop(0))

    def close(self) -> None:
        self.closed = True


def _seeding(answer: Callable[[int], KafkaError | None], timeout: float = 2.0) -> ClusterAdmin:
    Seeder.made = []
    return ClusterAdmin(
        {"bootstrap.servers": "b:1"},
        timeout=timeout,
        client=SimpleNamespace(),
        consumer=lambda config: Seeder(config, answer),
    )


def test_a_seed_a_loading_coordinator_refused_is_sent_again() -> None:
    """A fresh Apache Kafka 4.4 broker answers the first offset commit COORDINATOR_LOAD_IN_PROGRESS on every
    partition (measured); the seed asks again instead of failing the window's step."""
    loading = KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS)
    _seeding(lambda call: loading if call == 0 else None).seed_offsets("g", "t", {0: 0, 1: 0})
    (seeder,) = Seeder.made
    assert seeder.commits == [[0, 1], [0, 1]] and seeder.closed
    assert seeder.config["group.id"] == "g" and seeder.config["enable.auto.commit"] is False


def test_a_seed_refused_for_another_reason_fails_at_once_naming_it() -> None:
    member = KafkaError(KafkaError.UNKNOWN_MEMBER_ID)
    with pytest.raises(SeedError, match="group 'g'.*Unknown member"):
        _seeding(lambda call: member).seed_offsets("g", "t", {0: 0})
    assert len(Seeder.made[0].commits) == 1


def test_the_seed_commits_through_a_consumer_of_each_group_every_chunk_in_flight_at_once() -> None:
    """The seed goes through a consumer of each group that never joins (an OffsetCommit with generation -1),
    not the AdminClient, whose alter_consumer_group_offsets librdkafka 2.16 aborts the process in when a
    coordinator dies (31 aborts in 6,016 calls, measured); a group's chunks go out before any is answered."""
    admin = _seeding(lambda call: None)
    admin.seed_offsets_many("t", {"a": dict.fromkeys(range(600), 0), "b": {3: 7}, "none": {}})
    by_group = {s.config["group.id"]: s for s in Seeder.made}
    assert set(by_group) == {"a", "b"}, "a group with nothing to seed gets no consumer"
    assert [len(c) for c in by_group["a"].commits] == [256, 256, 88] and by_group["b"].commits == [[3]]
    assert all(s.closed for s in Seeder.made)


def test_a_seed_not_answered_in_time_is_a_broker_unavailable_error() -> None:
    class Silent(Seeder):
        def poll(self, timeout: float) -> None:
            time.sleep(timeout)

    admin = ClusterAdmin(
        {"bootstrap.servers": "b:1"},
        timeout=0.3,
        client=SimpleNamespace(),
        consumer=lambda c: Silent(c, lambda n: None),
    )
    with pytest.raises(BrokerUnavailableError, match="not answered in time"):
        admin.seed_offsets("g", "t", {0: 0})


def test_the_topics_a_group_has_offsets_on_are_read_by_one_consumer_of_it() -> None:
    """A Kafka Streams plan's question (which topics does the application read): one consumer of the group
    asks every partition of the candidate topics, in chunks; a topic without an offset, or not in the
    cluster, is left out."""
    Reader.made = []
    listed = {"a": 300, "b": 2}

    class Partial(Reader):
        def committed(self, partitions: list[Any], timeout: float) -> list[Any]:
            self.calls += 1
            return [
                SimpleNamespace(
                    topic=tp.topic, partition=tp.partition, offset=5 if tp.topic == "a" else -1001, error=None
                )
                for tp in partitions
            ]

    client = SimpleNamespace(
        list_topics=lambda topic=None, timeout=None: SimpleNamespace(
            topics={t: SimpleNamespace(partitions=dict.fromkeys(range(n))) for t, n in listed.items()}
        )
    )
    admin = ClusterAdmin({"bootstrap.servers": "b:1"}, client=client, consumer=lambda c: Partial(c, []))
    assert admin.group_topics("app", ["a", "b", "gone"]) == {"a"}
    (reader,) = Reader.made
    assert reader.config["group.id"] == "app" and reader.calls == 2 and reader.closed  # 302 partitions


def test_the_reader_keeps_the_connection_s_client_id_and_names_itself_otherwise() -> None:
    for config, expected in (({}, "kstate-offsets"), ({"client.id": "billing-ops"}, "billing-ops")):
        Reader.made = []
        admin = ClusterAdmin(
            {"bootstrap.servers": "b:1", **config},
            client=SimpleNamespace(),
            consumer=lambda c: Reader(c, []),
        )
        dict(admin.committed_offsets_many(["g"], "t", 1))
        assert Reader.made[0].config["client.id"] == expected
        assert Reader.made[0].config["enable.auto.commit"] is False
