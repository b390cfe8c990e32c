"""The consumer's side of the key-order barrier (``barrier/<topic>`` and ``release/<topic>/<group>``).

A safe increase switches producers from the old partition layout to the new one; a key's records written
before the switch sit on its old partition, later ones on its new partition, and two members may process
them at different lags. The controller holds the producers, reads every partition's end offset (the barrier
``B``), publishes it, then switches. A consumer of a protected group processes records below ``B[p]``
freely and *pauses* partition ``p`` once it has handed out the record just before ``B[p]`` (new partitions:
``B = 0``, paused at once). It resumes them when its group has committed offsets ``>= B`` on every
partition (it checks that itself, every ``check_interval``) or when the controller releases the group. So
every record written before the switch is processed before any record written after it, whichever member
holds which partition.

The hold is by offset: a partition assigned after a rebalance or a restart is paused at assignment when the
group's committed offset there is already at the barrier, and the committed offsets never pass ``B`` while
the partition is held (the record at ``B`` is never handed out: the partition is paused as the record
before it is handed out, so an auto-stored offset stops at ``B``).

Assumption: offsets below ``B[p]`` end with a data record at ``B[p] - 1`` (non-transactional producers, an
uncompacted tail). When a record at or past ``B[p]`` is handed out anyway (the record before was a
transaction marker, or the partition was consumed by a client without the barrier), it is counted in
``overruns`` and the partition is paused after it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaException, Message, TopicPartition

from airflow_provider_kstate.client_piece.protocol import BARRIER_PENDING, Barrier, Release

log = logging.getLogger(__name__)

#: Seconds a consumer looks at the control topic every ``paused_check_interval`` after a barrier is
#: announced (``pending``): the barrier itself follows within a control round trip, and the producers are
#: held until every live member has acknowledged it.
PENDING_FAST_SECONDS = 30.0
#: Bound of the committed-offsets request of the release check.
COMMITTED_TIMEOUT = 5.0
#: ListOffsets' special timestamps: a partition's log start and its end.
LIST_EARLIEST, LIST_LATEST = -2, -1


@dataclass
class Passage:
    """How one consumer went through one barrier (``time.monotonic()`` instants)."""

    topic: str
    epoch: int
    seen: float
    first_hold: float | None = None
    released: float | None = None
    by: str = ""
    held_partitions: set[int] = field(default_factory=set)
    overruns: int = 0

    @property
    def held_s(self) -> float | None:
        """Seconds from the first paused partition to the release (None: never held, or not released)."""
        if self.first_hold is None or self.released is None:
            return None
        return self.released - self.first_hold


class BarrierKeeper:
    """The barriers one consumer keeps, per topic: which partitions it holds and when to check for release.

    :param group: the consumer's group.
    :param topics: the topics it subscribes to.
    :param check_interval: seconds between two release checks (one committed-offsets request each).
    :param reset_earliest: the consumer's ``auto.offset.reset`` is earliest (where a partition without a
        committed offset starts).
    """

    def __init__(
        self, group: str, topics: list[str], check_interval: float, reset_earliest: bool = False
    ) -> None:
        self.group = group
        self.reset_earliest = reset_earliest
        self.topics = set(topics)
        self.check_interval = check_interval
        self.active: dict[str, Barrier] = {}
        self.held: dict[str, set[int]] = {}
        self.passages: list[Passage] = []
        self._seen: dict[str, int] = {}
        self._released: dict[str, int] = {}
        self._commit_due = False
        self._next_check = 0.0

    # -- records ------------------------------------------------------------------------------------------

    def on_barrier(self, barrier: Barrier, inner: Consumer | None) -> str:
        """Apply a barrier record; return what it did: ``hold``, ``pending``, ``off`` or ``""`` (ignored)."""
        if barrier.topic not in self.topics or barrier.epoch <= self._seen.get(barrier.topic, 0):
            return ""
        self._seen[barrier.topic] = barrier.epoch
        if barrier.state == BARRIER_PENDING and self.group in barrier.groups:
            return "pending"
        if not barrier.applies(self.group) or self._released.get(barrier.topic, 0) >= barrier.epoch:
            self.release(barrier.topic, inner, "off")
            return "off"
        self.release(barrier.topic, inner, "replaced")  # an older barrier of the topic
        self.active[barrier.topic] = barrier
        self.held[barrier.topic] = set()
        self.passages.append(Passage(barrier.topic, barrier.epoch, time.monotonic()))
        self._next_check = 0.0
        if inner is not None:
            self.hold_reached(inner, barrier.topic, _assigned(inner, barrier.topic), announced=True)
        log.info(
            "group %s: key-order barrier of %s (epoch %s): holding each partition at %s",
            self.group,
            barrier.topic,
            barrier.epoch,
            barrier.offsets,
        )
        return "hold"

    def on_release(self, release: Release, inner: Consumer | None) -> bool:
        """Apply a release record; True when it ended a barrier this consumer kept."""
        if release.group != self.group or release.topic not in self.topics:
            return False
        self._released[release.topic] = max(self._released.get(release.topic, 0), release.epoch)
        barrier = self.active.get(release.topic)
        if barrier is None or release.epoch < barrier.epoch:
            return False
        self.release(release.topic, inner, "controller")
        return True

    # -- holding ------------------------------------------------------------------------------------------

    def hold_reached(
        self, inner: Consumer, topic: str, partitions: list[TopicPartition], announced: bool = False
    ) -> None:
        """Pause those of ``partitions`` whose position (or, with none yet, committed offset) is at the
        barrier. A partition without either starts where ``auto.offset.reset`` puts it: when that is at
        the barrier, it is paused and that offset committed (so the group can pass the barrier).

        :param announced: called as the barrier arrives: the producers are held, so every partition ends at
            its barrier offset and where ``auto.offset.reset`` puts it is known without asking the broker
            (a new partition's offsets can take seconds to be served while its leader loads it).
        """
        barrier = self.active.get(topic)
        if barrier is None or not partitions:
            return
        known = {tp.partition: tp.offset for tp in _safe(inner.position, partitions) if tp.offset >= 0}
        unknown = [tp for tp in partitions if tp.partition not in known]
        if unknown:
            committed = _safe(lambda tps: inner.committed(tps, timeout=COMMITTED_TIMEOUT), unknown)
            known.update({tp.partition: tp.offset for tp in committed if tp.offset >= 0})
        unstarted = [tp for tp in partitions if tp.partition not in known]
        starts = self._held_starts(barrier, unstarted) if announced else {}
        starts.update(self._reset_offsets(inner, [tp for tp in unstarted if tp.partition not in starts]))
        known.update(starts)
        at = [p for p, offset in known.items() if offset >= barrier.offset(p)]
        self._pause(inner, topic, at)
        seed = [TopicPartition(topic, p, starts[p]) for p in at if p in starts]
        if seed:
            _safe(lambda tps: inner.commit(offsets=tps, asynchronous=False), seed)

    def _held_starts(self, barrier: Barrier, partitions: list[TopicPartition]) -> dict[int, int]:
        """Where ``partitions`` start while the producers are held: at the end (the barrier offset) with
        ``latest``; at the log start with ``earliest``, known only for a partition that never had a record
        (barrier offset 0, so log start 0: every new partition)."""
        if not self.reset_earliest:
            return {tp.partition: barrier.offset(tp.partition) for tp in partitions}
        return {tp.partition: 0 for tp in partitions if barrier.offset(tp.partition) == 0}

    def _reset_offsets(self, inner: Consumer, partitions: list[TopicPartition]) -> dict[int, int]:
        """Where partitions without a committed offset start: their log start or end, asked in one ListOffsets
        per leader (Kafka's timestamps ``-2``/``-1``: earliest/latest), not two requests per partition."""
        if not partitions:
            return {}
        spot = LIST_EARLIEST if self.reset_earliest else LIST_LATEST
        asked = [TopicPartition(tp.topic, tp.partition, spot) for tp in partitions]
        found = _safe(lambda tps: inner.offsets_for_times(tps, timeout=COMMITTED_TIMEOUT), asked)
        return {tp.partition: int(tp.offset) for tp in found if tp.error is None and tp.offset >= 0}

    def handed_out(self, inner: Consumer, msg: Message) -> None:
        """Called for every message handed to the application while a barrier is active: pause the
        partition as the record just before its barrier offset goes out."""
        topic = msg.topic()
        barrier = self.active.get(topic) if topic is not None else None
        if barrier is None or topic is None:
            return
        partition, offset = msg.partition() or 0, msg.offset() or 0
        limit = barrier.offset(partition)
        if offset + 1 < limit:
            return
        if offset >= limit:
            self.passages[-1].overruns += 1
            log.warning(
                "group %s: %s[%s] offset %s handed out at or past the barrier %s",
                self.group,
                topic,
                partition,
                offset,
                limit,
            )
        self._pause(inner, topic, [partition])

    def _pause(self, inner: Consumer, topic: str, partitions: list[int]) -> None:
        held = self.held.setdefault(topic, set())
        new = [p for p in partitions if p not in held]
        if not new:
            return
        inner.pause([TopicPartition(topic, p) for p in new])
        held.update(new)
        passage = self._passage(topic)
        if passage is not None:
            passage.held_partitions.update(new)
            if passage.first_hold is None:
                passage.first_hold = time.monotonic()
        self._commit_due = True

    def forget(self, topic: str, partitions: list[int]) -> None:
        """Partitions left this consumer (revoked, lost, or it left the group): no longer held here."""
        held = self.held.get(topic)
        if held:
            held.difference_update(partitions)

    def forget_all(self) -> None:
        """The consumer left its group: it holds nothing (the barriers stay)."""
        for held in self.held.values():
            held.clear()

    # -- release ------------------------------------------------------------------------------------------

    def tick(self, inner: Consumer | None) -> list[Barrier]:
        """Between two polls: commit what the application processed up to a held partition, and every
        ``check_interval`` release the barriers the group has passed; return those."""
        if inner is None or not self.active:
            return []
        if self._commit_due:
            self._commit_due = False
            try:
                inner.commit(asynchronous=True)
            except KafkaException as exc:  # _NO_OFFSET and friends: nothing to commit
                log.debug("group %s: commit at the barrier: %s", self.group, exc)
        now = time.monotonic()
        if now < self._next_check:
            return []
        self._next_check = now + self.check_interval
        passed = []
        for topic, barrier in list(self.active.items()):
            partitions = [TopicPartition(topic, p) for p in range(len(barrier.offsets))]
            committed = _safe(lambda tps: inner.committed(tps, timeout=COMMITTED_TIMEOUT), partitions)
            offsets = {tp.partition: tp.offset for tp in committed if tp.offset >= 0}
            if committed and barrier.passed(offsets, len(barrier.offsets)):
                self.release(topic, inner, "committed")
                passed.append(barrier)
        return passed

    def release(self, topic: str, inner: Consumer | None, by: str) -> None:
        """Stop keeping ``topic``'s barrier: resume the partitions held here."""
        barrier = self.active.pop(topic, None)
        held = self.held.pop(topic, set())
        if barrier is None:
            return
        self._released[topic] = max(self._released.get(topic, 0), barrier.epoch)
        if inner is not None and held:
            try:
                inner.resume([TopicPartition(topic, p) for p in sorted(held)])
            except KafkaException as exc:
                log.warning("group %s: resuming %s %s: %s", self.group, topic, sorted(held), exc)
        passage = self._passage(topic, barrier.epoch)
        if passage is not None:
            passage.released, passage.by = time.monotonic(), by
        log.info(
            "group %s: passed the key-order barrier of %s (epoch %s, released by %s)",
            self.group,
            topic,
            barrier.epoch,
            by,
        )

    def _passage(self, topic: str, epoch: int | None = None) -> Passage | None:
        for passage in reversed(self.passages):
            if passage.topic == topic and (epoch is None or passage.epoch == epoch):
                return passage
        return None


def _assigned(inner: Consumer, topic: str) -> list[TopicPartition]:
    return [tp for tp in _safe(lambda _x: inner.assignment(), []) if tp.topic == topic]


def _safe(call: Any, arg: Any) -> list[TopicPartition]:
    try:
        return list(call(arg))
    except (KafkaException, RuntimeError) as exc:
        log.debug("barrier: %s", exc)
        return []
