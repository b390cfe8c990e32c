"""A position on every partition the consumer is assigned, and new partitions taken at once (the control
protocol's consumer rules 7 and 8, ``docs/control-protocol.md``).

Kafka's loss on a partition increase (KAFKA-12261) has one cause: a record written to a new partition before a
``latest``-reset consumer has a position there. A consumer that **commits** where it starts on every
partition it is assigned without a committed offset gives the controller evidence it can read from the
broker (the group's committed offsets): while the producers write nothing to the new partitions, the log end
resolved there is offset 0, so once every staying group holds an offset on every new partition, the
producers may write there and no consumer ever left its group.

librdkafka's own auto-commit commits only offsets stored after a record was handed out, so a position
resolved on an empty partition is never committed (measured, librdkafka 2.16.1 on Apache Kafka 4.4); the
Java client's auto-commit commits the position of every assigned partition.

On the classic protocol librdkafka learns of new partitions at its periodic metadata refresh
(``topic.metadata.refresh.interval.ms``, 5 minutes by default); a metadata request of the application's
(``list_topics``) updates the partition count but does not make the group rebalance (measured: no
assignment within 20 s). Subscribing again to the same topics once the metadata shows the new count makes
the member rejoin at once: with ``cooperative-sticky`` only the new partitions are assigned, nothing is
revoked (9-17 ms); with an eager assignor every partition is revoked and assigned again (5-35 ms). On
KIP-848 (``group.protocol=consumer``) the broker assigns them at the member's next heartbeat (0.9 s).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from airflow_provider_kstate.client_piece.protocol import Barrier

log = logging.getLogger(__name__)

#: Bound of one committed-offsets or ListOffsets request (in the application's poll: kept short; a
#: partition whose offsets are not served yet, a new one whose leader is loading, is tried again later).
REQUEST_TIMEOUT = 1.0
#: Seconds between two attempts for the starts still to commit, at most (the wait doubles from
#: ``check_interval``).
RETRY_MAX = 5.0
#: Seconds one look's metadata request may take (the next look asks again: the application's poll is not
#: held up longer than that).
METADATA_WAIT = 0.5
#: Seconds after a grow's announcement during which the metadata is asked again at each look.
GROW_PATIENCE = 60.0
#: ListOffsets' special timestamps: a partition's log start and its end.
LIST_EARLIEST, LIST_LATEST = -2, -1


class PositionKeeper:
    """Commit where the consumer starts on each assigned partition that has no committed offset, and take a
    grown topic's new partitions at once.

    :param group: the consumer's group.
    :param reset_earliest: the consumer's ``auto.offset.reset`` is earliest (else the log end).
    :param classic: the group runs the classic protocol (subscribe again to take new partitions; on
        KIP-848 the broker assigns them on its own).
    :param check_interval: seconds between two attempts for partitions whose offset could not be read yet.
    """

    def __init__(self, group: str, reset_earliest: bool, classic: bool, check_interval: float) -> None:
        self.group = group
        self.reset_earliest = reset_earliest
        self.classic = classic
        self.check_interval = check_interval
        #: ``{(topic, partition)}`` assigned without a committed offset, whose start is not committed yet.
        self.unpositioned: set[tuple[str, int]] = set()
        #: ``{topic: (partitions announced, until)}``: grows whose new partitions the metadata lacks yet.
        self.grows: dict[str, tuple[int, float]] = {}
        #: ``{topic: first new partition}`` of the grows announced: empty until the producers switch, so a
        #: start there is offset 0, committed without asking the partition's leader (which may be loading).
        self.new_from: dict[str, int] = {}
        #: How many partitions this consumer committed a start on, over its life.
        self.committed_starts = 0
        self._next_try = 0.0
        self._retry_wait = check_interval
        self._next_grow_look = 0.0

    @property
    def waiting(self) -> bool:
        """Whether something is left to do at the next look (an unpositioned partition, a grow)."""
        return bool(self.unpositioned or self.grows)

    # -- rule 7 ---------------------------------------------------------------------------------------------

    def assigned(self, inner: Consumer, partitions: list[TopicPartition]) -> None:
        """Called in the rebalance callback (before anything is fetched): commit the start of each of
        ``partitions`` that has no committed offset; the ones whose start could not be read are retried."""
        if not partitions:
            return
        committed = _safe(lambda tps: inner.committed(tps, timeout=REQUEST_TIMEOUT), partitions)
        if len(committed) != len(partitions):  # the request failed: try every one again at the next look
            self.unpositioned.update((tp.topic, tp.partition) for tp in partitions)
            log.info("group %s: committed offsets not read: trying again at the next look", self.group)
            return
        bare = [tp for tp in committed if tp.offset < 0]
        self.unpositioned.update((tp.topic, tp.partition) for tp in bare)
        self._commit_starts(inner, bare)

    def revoked(self, partitions: list[TopicPartition]) -> None:
        """Forget partitions the consumer no longer holds."""
        self.unpositioned.difference_update((tp.topic, tp.partition) for tp in partitions)

    def forget_all(self) -> None:
        """The consumer left its group: nothing it held is its to position."""
        self.unpositioned.clear()

    def _commit_starts(self, inner: Consumer, partitions: list[TopicPartition]) -> None:
        if not partitions:
            return
        new = [tp for tp in partitions if tp.partition >= self.new_from.get(tp.topic, 1 << 62)]
        starts = [TopicPartition(tp.topic, tp.partition, 0) for tp in new]  # empty until the switch
        asked = [tp for tp in partitions if tp not in new]
        if asked:
            spot = LIST_EARLIEST if self.reset_earliest else LIST_LATEST
            tps = [TopicPartition(tp.topic, tp.partition, spot) for tp in asked]
            found = _safe(lambda x: inner.offsets_for_times(x, timeout=REQUEST_TIMEOUT), tps)
            starts += [
                TopicPartition(tp.topic, tp.partition, int(tp.offset))
                for tp in found
                if tp.error is None and tp.offset >= 0
            ]
        if not starts:
            return
        try:
            done = inner.commit(offsets=starts, asynchronous=False) or []
        except KafkaException as exc:  # a rebalance in progress, a coordinator moving: the next look
            log.info(
                "group %s: could not commit the start of %s partitions (%s): trying again",
                self.group,
                len(starts),
                exc,
            )
            return
        ok = [tp for tp in done if tp.error is None]
        self.unpositioned.difference_update((tp.topic, tp.partition) for tp in ok)
        self.committed_starts += len(ok)
        log.info(
            "group %s: committed the start of %s partitions it was assigned without an offset",
            self.group,
            len(ok),
        )

    # -- rule 8 ---------------------------------------------------------------------------------------------

    def announced(self, barrier: Barrier) -> None:
        """A ``pending`` barrier naming the group: when it carries the topic's grown count, take the new
        partitions at the next look."""
        if barrier.partitions > 0:
            self.grows[barrier.topic] = (barrier.partitions, time.monotonic() + GROW_PATIENCE)
        if 0 < barrier.grown_from < barrier.partitions:
            self.new_from[barrier.topic] = barrier.grown_from
            self._next_try = 0.0  # starts left to commit on new partitions: at the next look

    # -- each look ------------------------------------------------------------------------------------------

    def tick(self, inner: Consumer | None, subscribe: Callable[[], None]) -> None:
        """Between two polls: follow the grows announced, then (every ``check_interval``) try again the
        starts that could not be committed yet.

        :param subscribe: subscribes ``inner`` again to its topics (the classic protocol's rejoin).
        """
        if inner is None:
            return
        now = time.monotonic()
        if self.grows and now >= self._next_grow_look:
            self._next_grow_look = now + self.check_interval
            self._follow_grows(inner, subscribe)
        if self.unpositioned and now >= self._next_try:
            self._next_try = now + self._retry_wait
            self._retry_wait = min(RETRY_MAX, max(self._retry_wait * 2, self.check_interval))
            tps = [TopicPartition(t, p) for t, p in sorted(self.unpositioned)]
            still = {(tp.topic, tp.partition) for tp in _safe(inner.assignment, None)}
            self.unpositioned &= still
            self.assigned(inner, [tp for tp in tps if (tp.topic, tp.partition) in still])

    def _follow_grows(self, inner: Consumer, subscribe: Callable[[], None]) -> None:
        shown = {topic: _partition_count(inner, topic) for topic in self.grows}
        ready = [t for t, (wanted, _) in self.grows.items() if shown[t] >= wanted]
        expired = [t for t, (_, until) in self.grows.items() if t not in ready and time.monotonic() > until]
        for topic in expired:
            log.warning(
                "group %s: the metadata of %s never showed %s partitions (it shows %s): the group takes them "
                "at its next metadata refresh",
                self.group,
                topic,
                self.grows[topic][0],
                shown[topic],
            )
        for topic in ready + expired:
            del self.grows[topic]
        if ready and self.classic:
            subscribe()  # the classic protocol rejoins at once; KIP-848's broker assigns them itself
        if ready:
            log.info("group %s: %s grew: taking the new partitions now", self.group, ", ".join(ready))


def _partition_count(inner: Consumer, topic: str) -> int:
    """The topic's partition count in the consumer's metadata, asked once (a metadata request, up to
    :data:`METADATA_WAIT`; 0 when it failed)."""
    try:
        meta = inner.list_topics(topic, timeout=METADATA_WAIT).topics.get(topic)
    except KafkaException as exc:
        log.debug("metadata of %s: %s", topic, exc)
        return 0
    return len(meta.partitions) if meta is not None and meta.error is None else 0


def _safe(call: Any, arg: Any) -> list[TopicPartition]:
    try:
        return list(call(arg) if arg is not None else call())
    except (KafkaException, RuntimeError) as exc:
        log.debug("positions: %s", exc)
        return []
