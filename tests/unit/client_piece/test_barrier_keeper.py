"""The consumer's side of the key-order barrier against a fake consumer: what it pauses, commits and asks."""

from __future__ import annotations

import pytest
from confluent_kafka import TopicPartition

from airflow_provider_kstate.client_piece.barrier import BarrierKeeper
from airflow_provider_kstate.client_piece.protocol import Barrier

#: librdkafka's "no offset" (OFFSET_INVALID).
NONE = -1001


class FakeConsumer:
    """Assigned partitions with no position and no committed offset yet (a rebalance just handed them
    out); watermarks per partition; records what the keeper asks and does."""

    def __init__(self, topic: str, partitions: range, watermarks: dict[int, tuple[int, int]]) -> None:
        self.assigned = [TopicPartition(topic, p) for p in partitions]
        self.watermarks = watermarks
        self.asked: list[int] = []
        self.requests = 0
        self.paused: list[int] = []
        self.commits: dict[int, int] = {}

    def assignment(self) -> list[TopicPartition]:
        return self.assigned

    def position(self, tps: list[TopicPartition]) -> list[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition, NONE) for tp in tps]

    def committed(self, tps: list[TopicPartition], timeout: float = -1) -> list[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition, NONE) for tp in tps]

    def offsets_for_times(self, tps: list[TopicPartition], timeout: float = -1) -> list[TopicPartition]:
        """ListOffsets: timestamp -2 is the log start, -1 the end (one request for all)."""
        self.asked.extend(tp.partition for tp in tps)
        self.requests += 1
        return [
            TopicPartition(tp.topic, tp.partition, self.watermarks[tp.partition][tp.offset + 2]) for tp in tps
        ]

    def pause(self, tps: list[TopicPartition]) -> None:
        self.paused.extend(tp.partition for tp in tps)

    def commit(self, offsets: list[TopicPartition], asynchronous: bool = True) -> list[TopicPartition]:
        self.commits.update({tp.partition: tp.offset for tp in offsets})
        return offsets


def _arrive(reset_earliest: bool, consumer: FakeConsumer) -> BarrierKeeper:
    keeper = BarrierKeeper("g", ["t"], check_interval=1.0, reset_earliest=reset_earliest)
    barrier = Barrier(topic="t", epoch=5, offsets=[7, 0], groups=["g"])  # p1 never had a record; p2, p3 new
    assert keeper.on_barrier(barrier, consumer) == "hold"  # type: ignore[arg-type]
    return keeper


@pytest.mark.parametrize("reset_earliest", [True, False])
def test_at_the_barriers_arrival_new_partitions_are_held_without_asking_the_broker(
    reset_earliest: bool,
) -> None:
    # The producers are held while the barrier arrives: every partition ends at its barrier offset. A new
    # partition's offsets can take seconds to be served on Apache Kafka (8 s for 16 partitions measured):
    # the members' acknowledgements (and so the producers) waited for them.
    consumer = FakeConsumer("t", range(4), {0: (3, 7), 1: (0, 0), 2: (0, 0), 3: (0, 0)})
    keeper = _arrive(reset_earliest, consumer)
    assert consumer.asked == ([0] if reset_earliest else []), "only an old partition's log start is asked"
    if reset_earliest:  # p0 starts at its log start 3, below B = 7: it is consumed up to the barrier
        assert sorted(consumer.paused) == [1, 2, 3] and consumer.commits == {1: 0, 2: 0, 3: 0}
    else:  # latest: every partition starts at its end, which is its barrier offset
        assert sorted(consumer.paused) == [0, 1, 2, 3] and consumer.commits == {0: 7, 1: 0, 2: 0, 3: 0}
    assert keeper.held["t"] == set(consumer.paused)


def test_a_partition_assigned_later_asks_the_broker_where_it_starts() -> None:
    # After the switch producers write again: the end is no longer the barrier offset, so it is asked.
    consumer = FakeConsumer("t", range(0), {2: (0, 40)})
    keeper = _arrive(False, consumer)
    keeper.hold_reached(consumer, "t", [TopicPartition("t", 2)])  # type: ignore[arg-type]
    assert consumer.asked == [2]
    assert consumer.paused == [2] and consumer.commits == {2: 40}


def test_starts_are_asked_in_one_request() -> None:
    # Old partitions just handed over by a rebalance under earliest: one ListOffsets for all of them (two
    # requests per partition took 0.4 s each on a loaded broker, and the member's acknowledgement waited).
    consumer = FakeConsumer("t", range(0), {p: (3 if p == 1 else 0, 50) for p in range(6)})
    keeper = BarrierKeeper("g", ["t"], check_interval=1.0, reset_earliest=True)
    keeper.on_barrier(Barrier(topic="t", epoch=5, offsets=[7, 3, 9, 9, 9, 9], groups=["g"]), consumer)  # type: ignore[arg-type]
    keeper.hold_reached(consumer, "t", [TopicPartition("t", p) for p in range(6)])  # type: ignore[arg-type]
    assert consumer.requests == 1 and sorted(consumer.asked) == list(range(6))
    assert consumer.paused == [1] and consumer.commits == {1: 3}, "only p1 starts at its barrier (3)"
