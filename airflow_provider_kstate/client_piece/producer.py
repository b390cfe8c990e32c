"""``ControlledProducer``: a confluent-kafka producer that places records by the control topic's layouts.

It picks every partition itself with Kafka's Java default partitioner (murmur2, as
``partitioner=murmur2_random``) over the topic's *live* partition count: the ``Layout`` of the topic on the
control topic when there is one, else the partition count in the metadata at first use. So a topic that
gains partitions keeps receiving each key in its old partition until the controller raises the layout.

On a ``Layout`` with a higher epoch it refreshes the topic's metadata (so librdkafka knows the new
partitions), switches, and acknowledges with ``Ack(state="layout", partitions=n)``.

A ``Layout`` with ``hold`` (the key-order barrier of a safe increase) makes it flush what it has, block
``produce()`` for the topic and acknowledge ``Ack(state="held")``; the next layout releases it (each hold is
recorded in :attr:`ControlledProducer.holds`, with the time ``produce()`` was blocked). A hold that outlives
its ``hold_until`` is released by the producer itself, on the layout it has.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException, Producer

from airflow_provider_kstate.client_piece.channel import ControlChannel
from airflow_provider_kstate.client_piece.follower import ControlFollower, ControlTail
from airflow_provider_kstate.client_piece.helper_config import connection_config, default_client_id
from airflow_provider_kstate.client_piece.murmur2 import partition_for
from airflow_provider_kstate.client_piece.protocol import (
    DEFAULT_CONTROL_TOPIC,
    STATE_HELD,
    STATE_LAYOUT,
    Ack,
    Layout,
    Record,
)

log = logging.getLogger(__name__)

_LAYOUT_PREFIX = "layout/"


#: Longest single wait of a blocked ``produce()`` before it looks at the control records again.
HOLD_SLICE = 0.005


@dataclass
class Hold:
    """One hold of a topic's producer: when it began and ended (``time.monotonic()``), how long
    ``produce()`` calls were blocked in it, since when a ``produce()`` call is blocked in it now (None when
    none is), and whether it ended by ``hold_until`` instead of a layout."""

    topic: str
    epoch: int
    started: float
    ended: float | None = None
    blocked_s: float = 0.0
    expired: bool = False
    blocked_since: float | None = None

    @property
    def held_s(self) -> float | None:
        """Seconds from the hold to its release (None while held)."""
        return None if self.ended is None else self.ended - self.started


def _key_bytes(key: Any) -> bytes:
    if isinstance(key, bytes):
        return key
    if isinstance(key, str):
        return key.encode()
    return bytes(key)


class ControlledProducer:
    """A confluent-kafka ``Producer`` that writes each topic over its live partition count only.

    :param config: librdkafka producer settings (a ``partitioner`` setting is irrelevant: the partition is
        always given explicitly).
    :param topics: topics to resolve (and acknowledge layouts for) at start; others are resolved at first use.
    :param control_topic: the control topic.
    :param client_id: the id acknowledgements are keyed by; default ``client.id`` or ``host-pid``.
    :param check_interval: seconds between looks at the control topic (one end-offset request each, in a
        background thread); new layouts are applied in the next ``produce``/``poll`` call.
    :param ensure_control_topic: create the control topic if it is missing.
    :param timeout: bound in seconds for start-up reads, metadata refreshes and acknowledgements.
    """

    def __init__(
        self,
        config: dict[str, Any],
        topics: list[str] | None = None,
        *,
        control_topic: str = DEFAULT_CONTROL_TOPIC,
        client_id: str | None = None,
        check_interval: float = 0.2,
        ensure_control_topic: bool = True,
        timeout: float = 30.0,
    ) -> None:
        self.config = dict(config)
        self.client_id = client_id or default_client_id(config)
        self.check_interval = check_interval
        self._timeout = timeout
        self._producer = Producer(self.config)
        self._channel = ControlChannel(connection_config(config), control_topic)
        if ensure_control_topic:
            self._channel.ensure(timeout)
        tail = ControlTail(config, control_topic, timeout)
        self._layouts: dict[str, Layout] = {}
        self._live: dict[str, int] = {}
        self._epochs: dict[str, int] = {}
        self._next_rr: dict[str, int] = {}
        self._held: dict[str, Layout] = {}
        #: Every hold this producer applied, oldest first.
        self.holds: list[Hold] = []
        self._closed = False
        self._retry_at = 0.0
        self._absorb(tail.catch_up())
        self._due = False
        self._follower = ControlFollower(self._interrupt, tail, check_interval)
        self._follower.start()
        for topic in topics or []:
            self.partitions(topic)

    # -- layouts -----------------------------------------------------------------------------------------

    def partitions(self, topic: str) -> int:
        """Return the live partition count of ``topic`` (resolving it on first use)."""
        n = self._live.get(topic)
        if n is None:
            n = self._resolve(topic)
        return n

    def layout_epoch(self, topic: str) -> int:
        """Return the epoch of the layout applied for ``topic`` (0: none, metadata count in use)."""
        return self._epochs.get(topic, 0)

    def _resolve(self, topic: str) -> int:
        layout = self._layouts.get(topic)
        if layout is not None and self._switch(layout):
            return self._live[topic]
        n = self._metadata_count(topic)
        if n <= 0:
            raise KafkaException(f"topic {topic} has no partitions in the metadata")
        if layout is not None:
            n = min(n, layout.partitions)  # its partitions are not all visible yet: retried on each check
        self._live[topic] = n
        return n

    def _metadata_count(self, topic: str) -> int:
        """The topic's partition count in the producer's metadata; 0 when the request failed (a broker
        down, a timeout under load: the layout is retried at the next control check, never raised out of
        ``produce()``; found by the stay bench at 4,096 x 100, where it ended the producing thread)."""
        try:
            meta = self._producer.list_topics(topic, timeout=self._timeout).topics.get(topic)
        except KafkaException as exc:
            log.warning("topic %s: metadata not read (%s); retrying", topic, exc)
            return 0
        if meta is None or meta.error is not None:
            return 0
        return len(meta.partitions)

    def _absorb(self, records: list[tuple[str, Record | None]]) -> None:
        """Keep the newest layout per topic; apply it at once for topics already in use."""
        for key, record in records:
            if not key.startswith(_LAYOUT_PREFIX) or not isinstance(record, Layout):
                continue
            known = self._layouts.get(record.topic)
            if known is not None and record.epoch <= known.epoch:
                continue
            self._layouts[record.topic] = record
            if record.topic in self._live:
                self._switch(record)

    def _switch(self, layout: Layout) -> bool:
        """Make librdkafka see ``layout.partitions`` partitions, switch, acknowledge; False if not yet (the
        metadata does not show them all: retried at the next control check). A layout with ``hold`` holds
        the topic instead; any other layout ends a hold."""
        if layout.epoch <= self._epochs.get(layout.topic, 0):
            return layout.topic in self._live
        if self._metadata_count(layout.topic) < layout.partitions:
            log.warning("topic %s: metadata lacks partitions of %s; retrying", layout.topic, layout)
            return False
        if layout.hold:
            self._hold(layout)
            return True
        self._live[layout.topic] = layout.partitions
        self._epochs[layout.topic] = layout.epoch
        self._unhold(layout.topic, expired=False)
        self._ack(layout, STATE_LAYOUT)
        return True

    def _hold(self, layout: Layout) -> None:
        """Flush what was produced, block ``produce()`` for the topic, acknowledge ``held``."""
        self._live[layout.topic] = layout.partitions
        self._epochs[layout.topic] = layout.epoch
        remaining = self._producer.flush(self._timeout)
        if remaining:
            log.warning(
                "topic %s: %s messages undelivered at the hold: not acknowledging", layout.topic, remaining
            )
        if layout.topic not in self._held:
            self.holds.append(Hold(layout.topic, layout.epoch, time.monotonic()))
        self._held[layout.topic] = layout
        wait = (layout.hold_until / 1000.0 - time.time()) if layout.hold_until else 60.0
        self._follower.hurry(max(wait, 1.0))  # the release comes within a control round trip
        if not remaining:
            self._ack(layout, STATE_HELD)
        log.info("topic %s: producer held (epoch %s)", layout.topic, layout.epoch)

    def _unhold(self, topic: str, expired: bool) -> None:
        if self._held.pop(topic, None) is None:
            return
        hold = next(h for h in reversed(self.holds) if h.topic == topic)
        hold.ended, hold.expired = time.monotonic(), expired
        self._follower.hurry(0)
        if expired:
            log.warning(
                "topic %s: the hold outlived its hold_until: producing again on the held layout", topic
            )

    def _wait_released(self, topic: str) -> None:
        """Block until ``topic`` is no longer held: a new layout, or ``hold_until`` has passed."""
        hold = next(h for h in reversed(self.holds) if h.topic == topic)
        began = time.monotonic()
        hold.blocked_since = began
        try:
            while topic in self._held:
                until = self._held[topic].hold_until
                if until and time.time() * 1000 >= until:
                    self._unhold(topic, expired=True)
                    return
                self.check_control(HOLD_SLICE)
        finally:
            hold.blocked_s += time.monotonic() - began
            hold.blocked_since = None

    def held(self, topic: str) -> bool:
        """True while ``produce()`` for ``topic`` blocks on a hold."""
        return topic in self._held

    def _ack(self, layout: Layout, state: str) -> None:
        ack = Ack(
            client=self.client_id,
            epoch=layout.epoch,
            state=state,
            topic=layout.topic,
            partitions=layout.partitions,
        )
        try:
            self._channel.publish(ack, timeout=self._timeout)
        except KafkaException as exc:
            log.warning("topic %s: could not acknowledge layout: %s", layout.topic, exc)

    def _interrupt(self) -> None:
        """Called by the follower when control records arrived: the next call applies them."""
        self._due = True

    def check_control(self, timeout: float = 0.0) -> None:
        """Apply layouts that arrived on the control topic, waiting up to ``timeout`` for a record."""
        self._due = False
        records = self._follower.take()
        if not records and timeout > 0:
            self._follower.wait(timeout)
            records = self._follower.take()
        self._absorb(records)
        waiting = [
            lay for t, lay in self._layouts.items() if t in self._live and lay.epoch > self._epochs.get(t, 0)
        ]
        if not waiting:
            return
        self._due = (
            True  # a layout whose partitions were not in the metadata yet: retry, at most every interval
        )
        if time.monotonic() >= self._retry_at:
            self._retry_at = time.monotonic() + self.check_interval
            for layout in waiting:
                self._switch(layout)
            self._due = any(lay.epoch > self._epochs.get(lay.topic, 0) for lay in waiting)

    # -- Producer API ------------------------------------------------------------------------------------

    def produce(self, topic: str, value: Any = None, key: Any = None, **kwargs: Any) -> None:
        """Like ``Producer.produce``; the partition is ``murmur2(key) % live_n`` for keyed records and
        round-robin over ``range(live_n)`` for keyless ones, unless ``partition=`` is given."""
        if self._due:
            self.check_control()
        if self._held and topic in self._held:
            self._wait_released(topic)
        if kwargs.get("partition", -1) < 0:
            n = self._live.get(topic) or self._resolve(topic)
            if key is None:
                part = self._next_rr.get(topic, 0) % n
                self._next_rr[topic] = part + 1
            else:
                part = partition_for(_key_bytes(key), n)
            kwargs["partition"] = part
        self._producer.produce(topic, value, key, **kwargs)

    def poll(self, timeout: float = 0.0) -> int:
        """Like ``Producer.poll``: serve delivery callbacks; also looks at the control topic."""
        if self._due:
            self.check_control()
        return int(self._producer.poll(timeout))

    def flush(self, timeout: float | None = None) -> int:
        """Like ``Producer.flush``: wait for outstanding deliveries; return how many remain."""
        if timeout is None:
            return int(self._producer.flush())
        return int(self._producer.flush(timeout))

    def close(self, timeout: float = 30.0) -> int:
        """Flush, stop watching control; return the number of undelivered messages."""
        if self._closed:
            return 0
        self._closed = True
        self._follower.stop()
        try:
            return self.flush(timeout)
        finally:
            self._channel.close()

    def __len__(self) -> int:
        return len(self._producer)

    @property
    def producer(self) -> Producer:
        """The inner confluent-kafka ``Producer`` (for calls this wrapper does not forward; producing
        through it bypasses the layout)."""
        return self._producer

    def __enter__(self) -> ControlledProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
