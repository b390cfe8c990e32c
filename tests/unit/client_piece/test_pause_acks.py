"""The client piece's acknowledgements of a pause (control protocol, rule 4.3) on fakes of librdkafka and the
control topic: ``paused`` once the consumer is closed and its commit done; ``left`` at once when that commit
failed before leaving (it lands once the group is EMPTY), then ``paused`` when it has landed. The real
broker's side: ``tests/integration/test_client.py`` and the broker-fault matrix."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from airflow_provider_kstate.client_piece import consumer as consumer_mod
from airflow_provider_kstate.client_piece.protocol import PAUSE, Ack, Command


class Inner:
    """A librdkafka consumer of partition 0 at offset 7; its commit fails with ``commit_error``; a probe
    (``enable.auto.commit`` false and no subscription) commits only while :attr:`empty`."""

    commit_error: int | None = None
    empty = False
    partitions: list[int] = [0]
    committed_offsets: dict[int, int] = {}

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.closed = False

    def subscribe(self, topics: list[str], **callbacks: Any) -> None:
        self.topics = topics

    def assignment(self) -> list[TopicPartition]:
        return [TopicPartition("t", p) for p in Inner.partitions]

    def position(self, tps: list[TopicPartition]) -> list[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition, 7) for tp in tps]

    def committed(self, tps: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        return [
            TopicPartition(tp.topic, tp.partition, Inner.committed_offsets.get(tp.partition, -1001))
            for tp in tps
        ]

    def commit(self, offsets: list[TopicPartition] | None = None, asynchronous: bool = True) -> None:
        if offsets is None and not Inner.partitions:
            raise KafkaException(KafkaError(KafkaError._NO_OFFSET))
        if offsets is None and Inner.commit_error is not None:  # the member's own commit before leaving
            raise KafkaException(KafkaError(Inner.commit_error))
        if offsets is not None and not Inner.empty:  # generation -1: only once the group is EMPTY
            raise KafkaException(KafkaError(KafkaError.UNKNOWN_MEMBER_ID))
        for tp in offsets or self.position(self.assignment()):
            Inner.committed_offsets[tp.partition] = tp.offset

    def close(self) -> None:
        self.closed = True


class Channel:
    """The control topic's producer side: what was published."""

    published: list[Any] = []
    waited: list[bool] = []

    def __init__(self, config: dict[str, Any], topic: str) -> None:
        pass

    def ensure(self, timeout: float) -> None:
        pass

    def publish(self, *records: Any, timeout: float = 30.0, wait: bool = True) -> None:
        Channel.published.extend(records)
        Channel.waited.extend([wait] * len(records))

    def close(self) -> None:
        pass


class Tail:
    def __init__(self, config: dict[str, Any], topic: str, timeout: float) -> None:
        pass

    def catch_up(self) -> list[Any]:
        return []


class Follower:
    """Hands out :attr:`records` at the next look."""

    records: list[Any] = []

    def __init__(self, *args: Any) -> None:
        pass

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def hurry(self, seconds: float) -> None:
        pass

    def take(self) -> list[Any]:
        out, Follower.records = Follower.records, []
        return out

    def wait(self, timeout: float) -> None:
        pass


@pytest.fixture
def controlled(monkeypatch: pytest.MonkeyPatch) -> Any:
    for name, fake in (("Consumer", Inner), ("ControlChannel", Channel), ("ControlTail", Tail),
                       ("ControlFollower", Follower)):  # fmt: skip
        monkeypatch.setattr(consumer_mod, name, fake)
    Inner.commit_error, Inner.empty, Inner.committed_offsets, Inner.partitions = None, False, {}, [0]
    Channel.published, Channel.waited, Follower.records = [], [], []
    consumer = consumer_mod.ControlledConsumer({"group.id": "g", "client.id": "c0"}, ["t"])
    yield consumer
    consumer.close()


def _pause(consumer: Any, epoch: int = 5) -> None:
    Follower.records = [("cmd/g", Command(group="g", command=PAUSE, epoch=epoch, topic="t", issuer="run"))]
    consumer.check_control()


def _states() -> list[str]:
    return [r.state for r in Channel.published if isinstance(r, Ack)]


def test_a_pause_whose_commit_landed_is_acknowledged_paused(controlled: Any) -> None:
    _pause(controlled)
    assert controlled.state == "paused" and _states() == ["running", "paused"]
    assert Inner.committed_offsets == {0: 7}


def test_a_pause_whose_commit_failed_is_acknowledged_left_then_paused_once_the_commit_lands(
    controlled: Any,
) -> None:
    """The coordinator still lists the member (its LeaveGroup lost): ``left`` lets the controller remove it;
    ``paused`` follows the commit, which the broker takes once the group is EMPTY."""
    Inner.commit_error = KafkaError.ILLEGAL_GENERATION
    _pause(controlled)
    assert controlled.state == "paused" and _states() == ["running", "left"]
    assert Inner.committed_offsets == {}, "refused while the group lists a member"
    controlled.check_control()
    assert _states() == ["running", "left"], "not EMPTY yet: no commit, no paused"
    Inner.empty = True
    controlled.check_control()
    assert _states() == ["running", "left", "paused"] and Inner.committed_offsets == {0: 7}
    assert {a.epoch for a in Channel.published if isinstance(a, Ack) and a.state != "running"} == {5}


def test_a_member_holding_nothing_says_left_before_it_closes_without_waiting(controlled: Any) -> None:
    """Idle, or rejoining after its session was lost in a broker fault: its close() waits for the group's
    JoinGroup until the old members' sessions end, so ``left`` goes first (queued, not waited for) and the
    controller may remove the members meanwhile; ``paused`` follows the close."""
    Inner.partitions = []
    _pause(controlled)
    assert _states() == ["running", "left", "paused"]
    assert Channel.waited[1:] == [False, True], "left queued before the close, paused delivered after"
