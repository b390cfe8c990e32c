"""Unit tests of the client piece's positions (client_piece/positions.py, control protocol rules 7 and 8) on
a fake librdkafka consumer: the start of every assigned partition without a committed offset is committed,
never over an existing offset; a partition whose offset cannot be read yet is tried again; a grow announced
with the topic's count makes a classic member subscribe again once its metadata shows it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from confluent_kafka import KafkaError, TopicPartition

from airflow_provider_kstate.client_piece import positions
from airflow_provider_kstate.client_piece.positions import LIST_LATEST, PositionKeeper
from airflow_provider_kstate.client_piece.protocol import BARRIER_PENDING, Barrier


class FakeConsumer:
    """Committed offsets, log ends (None: the leader is not serving it yet) and a metadata count."""

    def __init__(self, committed: dict[int, int], ends: dict[int, int | None], count: int = 4) -> None:
        self.offsets = dict(committed)
        self.ends = ends
        self.count = count
        self.commits: list[list[tuple[int, int]]] = []
        self.asked: list[int] = []

    def committed(self, tps: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition, self.offsets.get(tp.partition, -1001)) for tp in tps]

    def offsets_for_times(self, tps: list[TopicPartition], timeout: float) -> list[Any]:
        out = []
        for tp in tps:
            assert tp.offset == LIST_LATEST
            end = self.ends.get(tp.partition)
            error = KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION) if end is None else None
            out.append(
                SimpleNamespace(
                    topic=tp.topic, partition=tp.partition, offset=-1 if end is None else end, error=error
                )
            )
        return out

    def commit(self, offsets: list[TopicPartition], asynchronous: bool) -> list[TopicPartition]:
        assert not asynchronous
        self.commits.append([(tp.partition, tp.offset) for tp in offsets])
        for tp in offsets:
            self.offsets[tp.partition] = tp.offset
        return offsets

    def assignment(self) -> list[TopicPartition]:
        return [TopicPartition("t", p) for p in range(self.count)]

    def list_topics(self, topic: str, timeout: float) -> Any:
        self.asked.append(self.count)
        parts = dict.fromkeys(range(self.count))
        return SimpleNamespace(topics={topic: SimpleNamespace(partitions=parts, error=None)})


def tps(*partitions: int) -> list[TopicPartition]:
    return [TopicPartition("t", p) for p in partitions]


def test_the_start_of_each_partition_without_an_offset_is_committed_and_no_other() -> None:
    inner = FakeConsumer({0: 17, 1: 3}, {2: 0, 3: 0})
    keeper = PositionKeeper("g", reset_earliest=False, classic=True, check_interval=0.0)
    keeper.assigned(inner, tps(0, 1, 2, 3))  # type: ignore[arg-type]
    assert inner.commits == [[(2, 0), (3, 0)]], "only where the group has no offset: never backwards"
    assert not keeper.waiting and keeper.committed_starts == 2


def test_a_partition_whose_end_cannot_be_read_yet_is_tried_again_until_committed() -> None:
    inner = FakeConsumer({0: 5}, {1: 0, 2: None})
    keeper = PositionKeeper("g", reset_earliest=False, classic=True, check_interval=0.0)
    keeper.assigned(inner, tps(0, 1, 2))  # type: ignore[arg-type]
    assert inner.commits == [[(1, 0)]] and keeper.unpositioned == {("t", 2)}
    keeper.tick(inner, lambda: None)  # type: ignore[arg-type]
    assert len(inner.commits) == 1, "still not served: nothing committed"
    inner.ends[2] = 0
    keeper.tick(inner, lambda: None)  # type: ignore[arg-type]
    assert inner.commits[-1] == [(2, 0)] and not keeper.waiting


def test_a_revoked_partition_is_not_positioned_any_more() -> None:
    keeper = PositionKeeper("g", reset_earliest=False, classic=True, check_interval=0.0)
    keeper.assigned(FakeConsumer({}, {0: None}), tps(0))  # type: ignore[arg-type]
    keeper.revoked(tps(0))
    assert not keeper.waiting


def announce(partitions: int, grown_from: int = 0) -> Barrier:
    return Barrier(
        topic="t", epoch=1, state=BARRIER_PENDING, groups=["g"], partitions=partitions, grown_from=grown_from
    )


def test_a_grow_makes_a_classic_member_subscribe_again_once_its_metadata_shows_the_count(
    monkeypatch: Any,
) -> None:
    monkeypatch.setattr(positions, "METADATA_WAIT", 0.05)
    inner = FakeConsumer({}, {}, count=4)
    keeper = PositionKeeper("g", reset_earliest=False, classic=True, check_interval=0.0)
    subscribed: list[int] = []
    keeper.announced(announce(8))
    keeper.tick(inner, lambda: subscribed.append(inner.count))  # type: ignore[arg-type]
    assert subscribed == [] and keeper.waiting, "the metadata shows 4 of 8: not yet"
    inner.count = 8
    keeper.tick(inner, lambda: subscribed.append(inner.count))  # type: ignore[arg-type]
    assert subscribed == [8] and not keeper.grows


def test_on_kip_848_the_broker_assigns_new_partitions_itself() -> None:
    inner = FakeConsumer({}, {}, count=8)
    keeper = PositionKeeper("g", reset_earliest=False, classic=False, check_interval=0.0)
    subscribed: list[int] = []
    keeper.announced(announce(8))
    keeper.tick(inner, lambda: subscribed.append(1))  # type: ignore[arg-type]
    assert subscribed == [] and not keeper.grows


def test_an_announcement_without_a_count_asks_nothing() -> None:
    keeper = PositionKeeper("g", reset_earliest=False, classic=True, check_interval=0.0)
    keeper.announced(announce(0))
    assert not keeper.waiting


def test_after_a_grow_a_new_partition_starts_at_0_without_asking_its_leader() -> None:
    """Found by the stay bench at 4,096 x 100: the new partitions' leaders load for seconds, and asking each
    look where their log ends held the application's poll. The grow's announcement says which partitions
    are new (empty until the producers switch): their start is 0, committed at once."""
    inner = FakeConsumer({0: 9}, {0: 12, 4: None, 5: None})  # 4 and 5: not served yet
    keeper = PositionKeeper("g", reset_earliest=False, classic=True, check_interval=0.0)
    keeper.announced(announce(8, grown_from=4))
    keeper.assigned(inner, tps(0, 4, 5))  # type: ignore[arg-type]
    assert inner.commits == [[(4, 0), (5, 0)]] and not keeper.unpositioned
