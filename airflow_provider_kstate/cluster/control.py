"""The controller side of the control protocol (``docs/control-protocol.md``), without Airflow: pause and
resume commands, producer layouts, the key-order barrier, and a cheap follower of the control topic."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaException

from airflow_provider_kstate.client_piece.channel import ControlChannel
from airflow_provider_kstate.client_piece.follower import ControlTail
from airflow_provider_kstate.client_piece.protocol import (
    BARRIER_HOLD,
    BARRIER_PENDING,
    CONTROL_TOPIC_CONFIG,
    DEFAULT_CONTROL_TOPIC,
    PAUSE,
    RESUME,
    Ack,
    Barrier,
    Command,
    Layout,
    Record,
    Release,
    now_ms,
)
from airflow_provider_kstate.cluster.admin import ClusterAdmin
from airflow_provider_kstate.increase.key_order import client_piece_clients

log = logging.getLogger(__name__)


class Controller:
    """The controller side of the client piece: commands for consumer groups and layouts for producers.

    :param admin: the cluster's admin verbs (its config and timeout are the controller's).
    :param control_topic: the compacted control topic the services watch.
    """

    def __init__(self, admin: ClusterAdmin, control_topic: str = DEFAULT_CONTROL_TOPIC) -> None:
        self.admin = admin
        self.control_topic = control_topic
        self.timeout = admin.timeout
        self._channel: ControlChannel | None = None
        self._acks: ControlWatch | None = None

    def channel(self) -> ControlChannel:
        """Return the control channel, creating the control topic on first use."""
        if self._channel is None:
            self.admin.ensure_internal_topic(self.control_topic, CONTROL_TOPIC_CONFIG)
            self._channel = ControlChannel(self.admin.config, self.control_topic)
        return self._channel

    def send_commands(self, groups: list[str], command: str, topic: str, issuer: str) -> int:
        """Publish ``command`` (pause or resume) for each group; return the epoch used."""
        epoch = now_ms()
        records = [Command(group=g, command=command, epoch=epoch, topic=topic, issuer=issuer) for g in groups]
        if records:
            self.channel().publish(*records, timeout=self.timeout)
        return epoch

    def follow(self) -> None:
        """Start following the acknowledgements now, the control topic read to its end (nothing when
        already following): before a pause, while the consumers still run. The run reads them while the
        consumers are out (ghosts, the commits that follow a leave), when a follower's first read (a new
        consumer, the topic from its start) may meet a broker fault: 1.7 s between the seed and the resume
        with the control topic's leader just killed, 0.0 to 0.8 s with it started before the pause (3 Apache
        Kafka 4.4 nodes). A read that fails here is made by the first look, as before."""
        if self._acks is None:
            try:
                self._acks = self.watch()
            except KafkaException as exc:
                log.info("CONTROL acknowledgements not followed before the pause (%s)", exc)

    def pause(self, groups: list[str], topic: str, issuer: str) -> int:
        """Ask the services of ``groups`` to leave their groups; return the epoch."""
        return self.send_commands(groups, PAUSE, topic, issuer)

    def resume(self, groups: list[str], topic: str, issuer: str) -> int:
        """Ask the services of ``groups`` to rejoin; return the epoch."""
        return self.send_commands(groups, RESUME, topic, issuer)

    def set_layout(self, topic: str, partitions: int, issuer: str) -> int:
        """Tell producers of ``topic`` to place records over ``partitions`` partitions; return the epoch."""
        epoch = now_ms()
        self.channel().publish(
            Layout(topic=topic, partitions=partitions, epoch=epoch, issuer=issuer), timeout=self.timeout
        )
        return epoch

    def hold_producers(self, topic: str, partitions: int, hold_s: float, issuer: str) -> int:
        """Tell producers of ``topic`` to flush, block ``produce()`` and acknowledge ``held``, on the layout
        of ``partitions``; they release themselves after ``hold_s`` seconds without a new layout."""
        epoch = now_ms()
        layout = Layout(
            topic=topic,
            partitions=partitions,
            epoch=epoch,
            issuer=issuer,
            hold=True,
            hold_until=epoch + int(hold_s * 1000),
        )
        self.channel().publish(layout, timeout=self.timeout)
        return epoch

    def announce_barrier(
        self, topic: str, groups: list[str], issuer: str, partitions: int = 0, grown_from: int = 0
    ) -> int:
        """Announce a key-order barrier to the consumers of ``groups`` (they look at the control topic
        often from then on and acknowledge ``pending``); return its epoch.

        :param partitions: sent once the topic grew (consumers stay in their groups): its count now; the
            consumers refresh their metadata and take the new partitions at once (0: not said).
        :param grown_from: with ``partitions``, the count before the grow: the new partitions are empty
            until the switch, so the consumers commit 0 there without asking where their log ends.
        """
        epoch = now_ms()
        barrier = Barrier(
            topic=topic,
            epoch=epoch,
            state=BARRIER_PENDING,
            groups=groups,
            issuer=issuer,
            partitions=partitions,
            grown_from=grown_from,
        )
        self.channel().publish(barrier, timeout=self.timeout)
        return epoch

    def set_barrier(self, topic: str, offsets: list[int], groups: list[str], issuer: str) -> int:
        """Publish the key-order barrier ``offsets`` (per partition) for ``groups``; return its epoch."""
        epoch = now_ms()
        barrier = Barrier(
            topic=topic, epoch=epoch, state=BARRIER_HOLD, offsets=offsets, groups=groups, issuer=issuer
        )
        self.channel().publish(barrier, timeout=self.timeout)
        return epoch

    def release_group(self, topic: str, group: str, epoch: int, issuer: str) -> None:
        """Release ``group``'s consumers from ``topic``'s barrier of ``epoch``."""
        self.channel().publish(
            Release(topic=topic, group=group, epoch=epoch, issuer=issuer), timeout=self.timeout
        )

    def watch(self) -> ControlWatch:
        """Return a follower of the control topic (read to its end now; :meth:`ControlWatch.refresh` reads
        what came since), for waits on acknowledgements that must not re-read the topic every time."""
        self.channel()
        return ControlWatch(self.admin.config, self.control_topic, self.timeout)

    def client_piece_clients(self) -> dict[str, set[str]]:
        """Return ``{group: client ids}`` of the consumers that acknowledged on the control topic (they run
        the client piece); ``{}`` when the control topic does not exist yet (it is not created here: the
        plan of a dry run changes nothing)."""
        if self.control_topic not in self.admin.metadata().topics:
            return {}
        watch = ControlWatch(self.admin.config, self.control_topic, self.timeout)
        try:
            return client_piece_clients(watch.state)
        finally:
            watch.close()

    def commands(self) -> dict[str, Command]:
        """Return the current command of every group: ``{group: Command}``."""
        state = self.channel().snapshot("cmd/", timeout=self.timeout)
        return {r.group: r for r in state.values() if isinstance(r, Command)}

    def acks(self, epoch: int, group: str = "", topic: str = "", refresh: bool = True) -> list[Ack]:
        """Return the acknowledgements of ``epoch`` by consumers of ``group`` or producers of ``topic``.

        Read through a follower of the control topic this controller keeps: the first call reads the topic
        to its end, each later one only what came since (one end-offset request when nothing is new; none
        with ``refresh`` off, for the other groups of one look). The wait for EMPTY asks once a look while a
        group stays listed (the ghost rule): a new reader each time reads the whole topic again, and during a
        broker fault its start costs seconds."""
        prefix = f"ack/{group}/" if group else f"ack-layout/{topic}/"
        if self._acks is None:
            self._acks = self.watch()
        elif refresh:
            self._acks.refresh()
        return self._acks.acks(prefix, epoch)

    def close(self) -> None:
        """Flush the control producer; stop following the acknowledgements."""
        if self._acks is not None:
            self._acks.close()
            self._acks = None
        if self._channel is not None:
            self._channel.close()


class ControlWatch:
    """The control topic's current records by key, kept up to date cheaply (one end-offset request per
    :meth:`refresh` when nothing is new).

    :param config: librdkafka settings of the cluster.
    :param topic: the control topic.
    """

    def __init__(self, config: dict[str, Any], topic: str, timeout: float = 30.0) -> None:
        self._tail = ControlTail(config, topic, timeout)
        self.state: dict[str, Record] = {}
        self._absorb(self._tail.catch_up())

    def _absorb(self, records: list[tuple[str, Record | None]]) -> None:
        for key, record in records:
            if record is None:
                self.state.pop(key, None)
            else:
                self.state[key] = record

    def refresh(self) -> None:
        """Read the records published since the last look."""
        self._absorb(self._tail.fetch_new())

    def acks(self, prefix: str, epoch: int, states: tuple[str, ...] = ()) -> list[Ack]:
        """The acknowledgements under ``prefix`` of ``epoch`` (in one of ``states``, when given)."""
        return [
            r
            for k, r in self.state.items()
            if k.startswith(prefix)
            and isinstance(r, Ack)
            and r.epoch == epoch
            and (not states or r.state in states)
        ]

    def wait(self, done: Callable[[], bool], timeout: float, interval: float = 0.005) -> bool:
        """Refresh until ``done()`` or ``timeout`` seconds; return ``done()``."""
        deadline = time.monotonic() + timeout
        while True:
            self.refresh()
            if done():
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(interval)

    def close(self) -> None:
        """Stop following."""
        self._tail.close()
