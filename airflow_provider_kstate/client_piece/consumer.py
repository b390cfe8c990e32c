"""``ControlledConsumer``: a confluent-kafka consumer that honours kstate pause/resume commands.

It reads the control topic (see :mod:`airflow_provider_kstate.client_piece.protocol`) with a second, group-less
consumer (:class:`ControlTail`). At start it reads the topic to its end; afterwards a daemon thread
(:class:`ControlFollower`) asks for the end offset (one ListOffsets request) on every tick and reads only
when it moved. Ticks fall on multiples of the interval on the wall clock, so the members of a group, even in
other processes, look at the same instants and react to a command together: they leave within milliseconds
of each other and rejoin in one generation. The interval is ``check_interval`` while running and
``paused_check_interval`` for the first seconds of a pause, when the resume is imminent. New records raise
a flag that :meth:`ControlledConsumer.poll` / :meth:`ControlledConsumer.consume` test (a paused consumer
blocks on the follower and wakes at once); the commands are applied in the caller's thread, between two
polls, so every message handed out before has been processed by a single-threaded service loop.

At start it acknowledges under ``ack/<group>/<client>`` (``running`` or ``paused``, with the epoch of the
group's latest command, 0 when there is none): its *presence*, by which the increase's plan tells the
members that run the client piece (keyed by ``client.id``, which it sets to ``client_id`` when the config
has none, so the broker's member list and the acknowledgements name members alike) from those that do not.

On ``pause`` (epoch higher than the last applied) it commits the offsets of the messages already handed to
the application, closes the inner consumer (that sends LeaveGroup: the group is EMPTY within milliseconds)
and acknowledges. While paused ``poll`` waits on the control topic and returns None. On ``resume`` it
creates a new inner consumer, subscribes again and acknowledges. A consumer that starts while its group's
latest command is ``pause`` starts paused and does not join.

Why close and not ``unsubscribe()`` (which keeps the connections): the rejoin is dominated by the broker
holding the JoinGroup (~0.3 s on the embedded broker) either way, and ``unsubscribe()`` depends on the join
state: in 6 safe increases with 4 members (librdkafka 2.16, embedded broker), a member that unsubscribed
(likely in the middle of a rebalance) never got the revoke callback the leave waits for in one run, and
stayed in the group until ``max.poll.interval.ms`` (300 s) in another. ``close()`` leaves in every state. Static membership
(``group.instance.id``) is not supported: librdkafka does not send LeaveGroup for static members.

One exception (:func:`close_and_leave`): librdkafka 2.16 sends no LeaveGroup when a classic-protocol member
with a cooperative assignor closes owning no partition (an idle member: more members than partitions), so the
broker keeps it until its session times out and the group is EMPTY only then (6.0 s in each of 20 rounds with
``session.timeout.ms=6000``, on loopback and over +5.6 ms round trips: the broker's log says "has failed",
not "has left group through explicit LeaveGroup"). Such a member unsubscribes first, which leaves (0.1-0.2 s).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from airflow_provider_kstate.client_piece.barrier import PENDING_FAST_SECONDS, BarrierKeeper, Passage
from airflow_provider_kstate.client_piece.channel import ControlChannel
from airflow_provider_kstate.client_piece.follower import ControlFollower, ControlTail
from airflow_provider_kstate.client_piece.helper_config import (
    CONSUMER_PROTOCOL,
    check_group_protocol,
    connection_config,
    default_client_id,
    group_protocol,
    incremental_assignment,
)
from airflow_provider_kstate.client_piece.positions import PositionKeeper
from airflow_provider_kstate.client_piece.protocol import (
    DEFAULT_CONTROL_TOPIC,
    PAUSE,
    STATE_BARRIER,
    STATE_LEFT,
    STATE_PAUSED,
    STATE_PENDING,
    STATE_RELEASED,
    STATE_RUNNING,
    Ack,
    Barrier,
    Command,
    Release,
    command_key,
)

log = logging.getLogger(__name__)

_monotonic = time.monotonic

RUNNING = STATE_RUNNING
PAUSED = STATE_PAUSED

#: Seconds after a pause during which a paused consumer looks at the control topic every
#: ``paused_check_interval``: the resume of a safe increase comes within a fraction of a second (one task),
#: or a few seconds (one task per step); after that it falls back to ``check_interval``.
PAUSED_FAST_SECONDS = 10.0
#: Longest single wait of an idle ``poll`` on the inner consumer: a command the follower found is applied
#: within this (a ``consume`` waits in slices of ``check_interval``, so as not to cut batches short).
#: An idle consumer wakes 100 times a second for it; a busy one never waits.
POLL_SLICE = 0.01


def _deadline(timeout: float | None) -> float | None:
    return None if timeout is None or timeout < 0 else _monotonic() + timeout


def _poll_one(consumer: Consumer, timeout: float) -> Message | None:
    return consumer.poll(timeout)


class _PendingCommit:
    """Offsets to commit without membership after leaving: the broker takes them only once the group is
    EMPTY, which happens as soon as the other members have left too."""

    def __init__(self, config: dict[str, Any], positions: list[TopicPartition], deadline: float) -> None:
        self.positions = positions
        self.deadline = deadline
        self._probe = Consumer({**config, "enable.auto.commit": False})

    def attempt(self) -> bool:
        """Commit the positions that are ahead of the committed offsets; False if the broker refused."""
        try:
            committed = {
                (tp.topic, tp.partition): tp.offset for tp in self._probe.committed(self.positions, 10)
            }
            ahead = [tp for tp in self.positions if tp.offset > committed.get((tp.topic, tp.partition), -1)]
            if ahead:
                self._probe.commit(offsets=ahead, asynchronous=False)
        except KafkaException as exc:
            log.debug("commit after leaving refused: %s", exc)
            return False
        return True

    def close(self) -> None:
        self._probe.close()


class ControlledConsumer:
    """A confluent-kafka ``Consumer`` for ``topics`` that pauses and resumes on the control topic's commands.

    Use it like a ``Consumer`` from one thread: ``poll``, ``consume``, ``commit``, ``close``,
    ``assignment``, ``position``, ``committed``, ``store_offsets``; :attr:`consumer` is the inner
    ``Consumer`` while running, for anything else.

    :param config: librdkafka consumer settings; ``group.id`` is required and names the controlled group.
        ``group.protocol=consumer`` (KIP-848) works as the classic protocol does (a pause closes the
        consumer, which leaves the group at once); under it ``session.timeout.ms``,
        ``heartbeat.interval.ms`` and ``partition.assignment.strategy`` are refused with the place each
        moved to (:func:`~airflow_provider_kstate.client_piece.helper_config.check_group_protocol`).
    :param topics: the topics to subscribe to.
    :param control_topic: the control topic.
    :param client_id: the id acknowledgements are keyed by; default ``client.id`` or ``host-pid`` (also the
        inner consumer's ``client.id`` when the config sets none: keep the two equal, the plan matches the
        group's members to their acknowledgements by it).
    :param check_interval: seconds between looks at the control topic while running (one end-offset
        request each, in a background thread, on the multiples of the interval on the wall clock); it
        bounds how late a pause is seen.
    :param paused_check_interval: the same during the first :data:`PAUSED_FAST_SECONDS` of a pause: it
        bounds how late a resume is seen, which is part of the consumers' downtime.
    :param on_assign: passed to ``subscribe``, like ``Consumer.subscribe(on_assign=...)``.
    :param on_revoke: passed to ``subscribe``.
    :param on_lost: passed to ``subscribe``.
    :param on_pause: called with this consumer on a pause, before the commit, while still in the group (a
        hook for apps that batch: flush and commit your own work here).
    :param on_state_change: called with the new state (``"paused"`` / ``"running"``) after each transition.
    :param ensure_control_topic: create the control topic if it is missing.
    :param commit_positions: commit where the consumer starts on each partition it is assigned without a
        committed offset (control protocol rule 7: the evidence that lets its group stay in the group while
        a topic grows); False: commit only what the application commits (its group is then paused instead).
    :param timeout: bound in seconds for start-up reads and acknowledgements.
    """

    #: Replaced per instance in ``__init__``; this one keeps no topic, so it never holds anything.
    _barriers: BarrierKeeper = BarrierKeeper("", [], 1.0)
    #: Likewise: it has nothing to position.
    _positions: PositionKeeper = PositionKeeper("", False, True, 1.0)
    _commit_positions: bool = True

    def __init__(
        self,
        config: dict[str, Any],
        topics: list[str],
        *,
        control_topic: str = DEFAULT_CONTROL_TOPIC,
        client_id: str | None = None,
        check_interval: float = 0.2,
        paused_check_interval: float = 0.01,
        on_assign: Callable[..., Any] | None = None,
        on_revoke: Callable[..., Any] | None = None,
        on_lost: Callable[..., Any] | None = None,
        on_pause: Callable[[ControlledConsumer], Any] | None = None,
        on_state_change: Callable[[str], Any] | None = None,
        ensure_control_topic: bool = True,
        commit_positions: bool = True,
        timeout: float = 30.0,
    ) -> None:
        if not config.get("group.id"):
            raise ValueError("ControlledConsumer needs group.id in config")
        if config.get("group.instance.id"):
            raise ValueError("static membership (group.instance.id) cannot leave the group on a pause")
        check_group_protocol(config)
        self._inner: Consumer | None = None
        self.config = dict(config)
        self.group: str = str(config["group.id"])
        self.topics = list(topics)
        self.client_id = client_id or default_client_id(config)
        # The broker names members by client.id (DescribeGroups): the same id as the acknowledgements lets the
        # plan tell which members run the client piece (librdkafka's default would be "rdkafka").
        self.config.setdefault("client.id", self.client_id)
        self.check_interval = check_interval
        self._callbacks = {
            k: v for k, v in (("on_assign", on_assign), ("on_revoke", on_revoke), ("on_lost", on_lost)) if v
        }
        self._on_pause = on_pause
        self._on_state_change = on_state_change
        self._timeout = timeout
        self._key = command_key(self.group)
        self._epoch = 0
        reset = str(config.get("auto.offset.reset", "latest")).lower()
        earliest = reset in ("earliest", "smallest", "beginning")
        self._barriers = BarrierKeeper(self.group, self.topics, check_interval, earliest)
        classic = group_protocol(self.config) != CONSUMER_PROTOCOL
        self._positions = PositionKeeper(self.group, earliest, classic, check_interval)
        self._commit_positions = commit_positions
        self._closed = False
        self._pending: _PendingCommit | None = None
        self._channel = ControlChannel(connection_config(config), control_topic)
        if ensure_control_topic:
            self._channel.ensure(timeout)
        tail = ControlTail(config, control_topic, timeout)
        self._due = False
        self._follower = ControlFollower(self._interrupt, tail, check_interval, paused_check_interval)
        self._start(tail)
        self._follower.start()

    # -- state -------------------------------------------------------------------------------------------

    @property
    def state(self) -> str:
        """``"running"`` (in the group) or ``"paused"`` (out of it)."""
        return RUNNING if self._inner is not None else PAUSED

    @property
    def paused(self) -> bool:
        """True while the consumer stays out of its group."""
        return self._inner is None

    @property
    def epoch(self) -> int:
        """The epoch of the last command applied (0 before any)."""
        return self._epoch

    @property
    def passages(self) -> list[Passage]:
        """The key-order barriers this consumer went through (or keeps now), oldest first."""
        return self._barriers.passages

    @property
    def held_partitions(self) -> dict[str, set[int]]:
        """``{topic: partitions}`` paused here at a key-order barrier."""
        return {t: set(p) for t, p in self._barriers.held.items() if p}

    def _start(self, tail: ControlTail) -> None:
        latest: Command | None = None
        for key, record in tail.catch_up():
            if isinstance(record, Barrier | Release):
                self._barrier_record(record, ack=False)
                continue
            if key != self._key:
                continue
            if record is None:  # a tombstone deletes the instruction
                latest = None
            elif isinstance(record, Command) and record.group == self.group:
                latest = record if latest is None or record.epoch > latest.epoch else latest
        if latest is not None:
            self._epoch = latest.epoch
        if latest is not None and latest.command == PAUSE:
            log.info("group %s is paused (epoch %s): starting without joining", self.group, latest.epoch)
            self._follower.hurry(PAUSED_FAST_SECONDS)
            self._ack(STATE_PAUSED)
            return
        self._join()
        # Always acknowledge the start (epoch 0 when no command exists yet): the presence the plan reads to
        # tell a group whose members all run the client piece (they can hold at a barrier) from one that
        # cannot (relaxed, named in the plan).
        self._ack(STATE_RUNNING)

    # -- control -----------------------------------------------------------------------------------------

    def check_control(self, timeout: float = 0.0) -> str:
        """Apply control records that arrived, waiting up to ``timeout`` for one; return the state."""
        self._due = False
        if self._pending is not None:
            self._retry_pending()
            timeout = min(timeout, 0.005)  # the group may be EMPTY for only a few ms: retry often
        records = self._follower.take()
        if not records and timeout > 0:
            self._follower.wait(timeout)
            records = self._follower.take()
        for key, record in records:
            if key == self._key and isinstance(record, Command):
                self._apply(record)
            elif isinstance(record, Barrier | Release):
                self._barrier_record(record)
        return self.state

    def _barrier_record(self, record: Barrier | Release, ack: bool = True) -> None:
        """Apply a key-order barrier or release (see :mod:`airflow_provider_kstate.client_piece.barrier`)."""
        if isinstance(record, Release):
            if self._barriers.on_release(record, self._inner) and ack:
                self._ack(STATE_RELEASED, record.epoch, record.topic)
            return
        done = self._barriers.on_barrier(record, self._inner)
        if done == "pending":
            self._follower.hurry(PENDING_FAST_SECONDS)
            if ack:
                self._positions.announced(record)  # at start the join reads fresh metadata anyway
                self._ack(STATE_PENDING, record.epoch, record.topic)
        elif done == "hold":
            self._indirect()  # every message goes through the wrapper while a barrier is kept
            if ack:
                self._ack(STATE_BARRIER, record.epoch, record.topic)

    def _apply(self, command: Command) -> None:
        if command.group != self.group or command.epoch <= self._epoch:
            log.debug("ignoring stale command %s (applied epoch %s)", command, self._epoch)
            return
        self._epoch = command.epoch
        if command.command == PAUSE:
            if self._inner is not None:
                self._leave()
            # out of the group either way: with its commit still to land (once EMPTY), ``left`` lets the
            # controller remove this member should the coordinator still list it (its LeaveGroup lost in a
            # broker fault), instead of the commit and the group waiting for each other until its session ends
            self._ack(STATE_PAUSED if self._pending is None else STATE_LEFT)
        else:
            if self._pending is not None:
                self._retry_pending(last=True)
            if self._inner is None:
                self._join()
            self._ack(STATE_RUNNING)

    def _join(self) -> None:
        inner = Consumer(self.config)
        self._subscribe(inner)
        self._set_inner(inner)
        self._follower.hurry(0)
        self._notify(RUNNING)

    def _subscribe(self, inner: Consumer) -> None:
        inner.subscribe(
            self.topics, on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
        )

    def _resubscribe(self) -> None:
        """Subscribe again to the same topics: the classic protocol's member rejoins at once and the group
        takes the partitions its metadata shows (rule 8)."""
        if self._inner is not None:
            self._subscribe(self._inner)

    def _look(self) -> None:
        """Between two polls: the key-order barrier's checks, and the positions still to commit."""
        if self._barriers.active:
            self._barrier_tick()
        if self._positions.waiting:
            self._positions.tick(self._inner, self._resubscribe)

    def _leave(self) -> None:
        inner = self._inner
        assert inner is not None
        if self._on_pause is not None:
            self._on_pause(self)
        positions = self._returned_positions(inner)
        committed = self._commit_returned(inner)
        if not _assigned(inner):
            # nothing assigned: idle, or rejoining after its session was lost (a coordinator that answered
            # no heartbeat through a broker fault), when close() waits for the group's JoinGroup until the
            # old members' sessions end. Said now, without waiting, so the controller may remove them.
            self._ack(STATE_LEFT, wait=False)
        self._set_inner(None)
        self._barriers.forget_all()
        self._positions.forget_all()
        close_and_leave(inner, self.config)  # LeaveGroup in every join state: the broker drops it at once
        if not committed and positions:
            self._pending = _PendingCommit(self.config, positions, _monotonic() + self._timeout)
            self._retry_pending()
        self._follower.hurry(PAUSED_FAST_SECONDS)
        self._notify(PAUSED)

    def _returned_positions(self, inner: Consumer) -> list[TopicPartition]:
        """The offsets after the last message returned per assigned partition (= the stored offsets when
        ``enable.auto.offset.store`` is on, the default; when it is off the app's store is unknown: [])."""
        if str(self.config.get("enable.auto.offset.store", True)).lower() in ("false", "0"):
            return []
        try:
            return [tp for tp in inner.position(inner.assignment()) if tp.offset >= 0]
        except KafkaException:
            return []

    def _commit_returned(self, inner: Consumer) -> bool:
        """Commit the stored offsets: with the default ``enable.auto.offset.store`` those of every message
        poll/consume returned; with it off, those the application stored. False if the commit failed."""
        try:
            inner.commit(asynchronous=False)
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError._NO_OFFSET:
                return True
            # typically ILLEGAL_GENERATION / REBALANCE_IN_PROGRESS: another member left first
            log.info("group %s: commit before leaving failed (%s); committing once EMPTY", self.group, exc)
            return False
        return True

    def _retry_pending(self, last: bool = False) -> None:
        """Try the commit that failed before leaving again; acknowledge the pause once it is done (or
        given up after ``timeout`` seconds, or on a resume: ``last``)."""
        pending = self._pending
        assert pending is not None
        done = pending.attempt()
        if not done and not last and _monotonic() < pending.deadline:
            return
        if not done:
            log.warning("group %s: could not commit %s after leaving", self.group, pending.positions)
        pending.close()
        self._pending = None
        if self._inner is None:
            self._ack(STATE_PAUSED)

    def _notify(self, state: str) -> None:
        if self._on_state_change is not None:
            self._on_state_change(state)

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Rebalance callback: the application's, then (while a barrier is kept) assign at once and pause
        the partitions whose committed offset is already at the barrier, before anything is fetched."""
        user = self._callbacks.get("on_assign")
        if user is not None:
            user(consumer, partitions)
        if self._barriers.active:
            if incremental_assignment(self.config):
                consumer.incremental_assign(partitions)
            else:
                consumer.assign(partitions)
        if self._commit_positions:
            self._positions.assigned(consumer, partitions)  # before anything is fetched (rule 7)
        if self._positions.waiting:  # a start to commit again: the next polls go through the wrapper
            self._indirect()
        for topic in self._barriers.active:
            self._barriers.hold_reached(consumer, topic, [tp for tp in partitions if tp.topic == topic])

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._forget(partitions)
        user = self._callbacks.get("on_revoke")
        if user is not None:
            user(consumer, partitions)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._forget(partitions)
        user = self._callbacks.get("on_lost") or self._callbacks.get("on_revoke")
        if user is not None:
            user(consumer, partitions)

    def _forget(self, partitions: list[TopicPartition]) -> None:
        self._positions.revoked(partitions)
        for topic in {tp.topic for tp in partitions}:
            self._barriers.forget(topic, [tp.partition for tp in partitions if tp.topic == topic])

    def _ack(self, state: str, epoch: int | None = None, topic: str = "", wait: bool = True) -> None:
        ack = Ack(
            client=self.client_id,
            epoch=self._epoch if epoch is None else epoch,
            state=state,
            group=self.group,
            topic=topic,
        )
        try:
            self._channel.publish(ack, timeout=self._timeout, wait=wait)
        except KafkaException as exc:
            log.warning("group %s: could not acknowledge %s: %s", self.group, state, exc)

    # -- Consumer API ------------------------------------------------------------------------------------

    def poll(self, timeout: float | None = None) -> Message | None:
        """Like ``Consumer.poll``: a message, or None after ``timeout`` seconds (None/negative: forever).

        While paused it waits on the control topic and returns None.

        While running and nothing is due, ``consumer.poll`` *is* the inner consumer's own (C) method, so
        the wrapper adds no Python frame per message (only a slower attribute lookup, ~40 ns): this method
        installs it on the instance after handing out a message, and the follower removes it when control
        records arrive, which routes the next call back here. A command is therefore applied at the next call after the one in progress: at once while
        messages flow, and after at most that call's ``timeout`` when the consumer was idle. Look ``poll``
        up on the wrapper at every call (``consumer.poll(1.0)``), as a service loop does; do not keep the
        bound method, which a pause closes.
        """
        if self._due:
            self.check_control()
        self._look()
        inner = self._inner
        msg = inner.poll(0) if inner is not None else None  # a message is often queued already
        if msg is None:
            msg = self._wait(_deadline(timeout), _poll_one, POLL_SLICE)
        if msg is not None:
            self._at_barrier(msg)
            self._direct()
        return msg

    def _barrier_tick(self) -> None:
        for barrier in self._barriers.tick(self._inner):
            self._ack(STATE_RELEASED, barrier.epoch, barrier.topic)

    def _at_barrier(self, msg: Message) -> None:
        """While a key-order barrier is kept, every message handed out is checked against it."""
        if self._barriers.active and self._inner is not None and not msg.error():
            self._barriers.handed_out(self._inner, msg)

    def _direct(self) -> None:
        """Route ``poll`` straight to the inner consumer until control records arrive (see :meth:`poll`)."""
        inner = self._inner
        if inner is None or self._barriers.active or self._positions.waiting:
            return
        self.__dict__["poll"] = inner.poll
        if self._due:  # records came in between: the follower may have looked before the line above
            self._indirect()

    def _indirect(self) -> None:
        """Route ``poll`` through :meth:`poll` again (the follower's thread, or the owner's)."""
        self.__dict__.pop("poll", None)

    def _interrupt(self) -> None:
        """Called by the follower when control records arrived: the next ``poll``/``consume`` applies them."""
        self._due = True
        self._indirect()

    def _set_inner(self, inner: Consumer | None) -> None:
        self._indirect()
        self._inner = inner

    def consume(self, num_messages: int = 1, timeout: float | None = None) -> list[Message]:
        """Like ``Consumer.consume``: up to ``num_messages`` messages; an empty list while paused."""
        if self._due:
            self.check_control()
        self._look()
        if self._barriers.active:
            return self._consume_at_barrier(num_messages, timeout)
        inner = self._inner
        if inner is not None:
            interval = self.check_interval
            if timeout is not None and 0 <= timeout <= interval:
                return inner.consume(num_messages, timeout)
            batch = inner.consume(num_messages, interval)
            if batch:
                return batch
            timeout = None if timeout is None or timeout < 0 else timeout - interval
        found = self._wait(
            _deadline(timeout), lambda c, t: self._batch(c, num_messages, t), self.check_interval
        )
        return found or []

    def _batch(self, inner: Consumer, num_messages: int, timeout: float) -> list[Message] | None:
        """One slice of ``consume``: a batch, or one checked message once a barrier became active."""
        if not self._barriers.active:
            return inner.consume(num_messages, timeout) or None
        msg = inner.poll(timeout)
        if msg is None:
            return None
        self._at_barrier(msg)
        return [msg]

    def _consume_at_barrier(self, num_messages: int, timeout: float | None) -> list[Message]:
        """``consume`` while a key-order barrier is kept: one message at a time (a batch would store the
        offsets of records past the barrier before they could be held back)."""
        out: list[Message] = []
        msg = self.poll(timeout)
        while msg is not None:
            out.append(msg)
            if len(out) >= num_messages or not self._barriers.active:
                break
            msg = self.poll(0)
        return out

    def _wait(self, deadline: float | None, fetch: Callable[[Consumer, float], Any], step: float) -> Any:
        """Wait until ``deadline`` (None: forever) in slices of at most ``step`` seconds, looking for
        control records between slices; while paused, block on the control topic itself (woken at once)."""
        while True:
            slice_ = step if self._inner is not None else self.check_interval
            if deadline is not None:
                slice_ = min(slice_, deadline - _monotonic())
                if slice_ <= 0:
                    return None
            if self._inner is None:
                self.check_control(slice_)
                continue
            if self._due:
                self.check_control()
                continue
            self._look()
            found = fetch(self._inner, slice_)
            if found is not None:
                return found

    def commit(self, *args: Any, **kwargs: Any) -> Any:
        """Like ``Consumer.commit``. While paused it does nothing and returns None: the offsets were
        committed at the pause, and the controller may be moving the group's offsets."""
        if self._inner is None:
            log.warning("group %s is paused: commit() ignored", self.group)
            return None
        return self._inner.commit(*args, **kwargs)

    def close(self) -> None:
        """Close the inner consumer (committing as ``Consumer.close`` does) and stop watching control."""
        if self._closed:
            return
        self._closed = True
        self._follower.stop()
        if self._pending is not None:
            self._retry_pending(last=True)
        inner = self._inner
        self._set_inner(None)
        try:
            if inner is not None:
                close_and_leave(inner, self.config)
        finally:
            self._channel.close()

    @property
    def consumer(self) -> Consumer | None:
        """The inner confluent-kafka ``Consumer`` while running, None while paused; for calls this wrapper
        does not forward. Do not keep it: a pause closes it."""
        return self._inner

    def _running(self) -> Consumer:
        if self._inner is None:
            raise RuntimeError(f"group {self.group} is paused: no inner consumer")
        return self._inner

    def assignment(self) -> list[TopicPartition]:
        """Like ``Consumer.assignment``; empty while paused."""
        return self._inner.assignment() if self._inner is not None else []

    def store_offsets(self, *args: Any, **kwargs: Any) -> None:
        """Like ``Consumer.store_offsets`` (only while running)."""
        self._running().store_offsets(*args, **kwargs)

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """Like ``Consumer.position`` (only while running)."""
        return self._running().position(partitions)

    def committed(self, partitions: list[TopicPartition], timeout: float = -1) -> list[TopicPartition]:
        """Like ``Consumer.committed`` (only while running)."""
        return self._running().committed(partitions, timeout=timeout)

    def __enter__(self) -> ControlledConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _assigned(inner: Consumer) -> bool:
    """Whether ``inner`` holds any partition now."""
    try:
        return bool(inner.assignment())
    except KafkaException:
        return False


def close_and_leave(inner: Consumer, config: dict[str, Any]) -> None:
    """Close ``inner`` so that it leaves its group at once: a classic-protocol member with a cooperative
    assignor that owns no partition unsubscribes first (librdkafka 2.16's ``close()`` sends it no LeaveGroup:
    its cooperative revoke of nothing returns before the leave, and the broker waits for its session to time
    out). ``close()`` then waits for the LeaveGroup's answer.

    :param config: the consumer's librdkafka settings (its protocol and assignor).
    """
    if incremental_assignment(config) and group_protocol(config) != CONSUMER_PROTOCOL:
        try:
            if not inner.assignment():
                inner.unsubscribe()
        except KafkaException as exc:  # closing anyway: at worst the member waits for its session timeout
            log.info("unsubscribe before close failed (%s)", exc)
    inner.close()
