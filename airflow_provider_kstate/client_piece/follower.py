"""Following the control topic: :class:`ControlTail` reads it without a consumer group, cheaply, and
:class:`ControlFollower` (a daemon thread) looks at it on every tick of the wall clock and hands new
records to its owner (a ControlledConsumer, a ControlledProducer) through a callback.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
import uuid
import weakref
from collections.abc import Callable
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

from airflow_provider_kstate.client_piece.channel import end_offset
from airflow_provider_kstate.client_piece.helper_config import tail_config
from airflow_provider_kstate.client_piece.protocol import DEFAULT_CONTROL_TOPIC, Record, decode

log = logging.getLogger(__name__)

_monotonic = time.monotonic
#: How long the broker may hold one of the tail's fetches at the end of the log (see :class:`ControlTail`).
TAIL_FETCH_WAIT_MS = 10


class ControlTail:
    """Follow the one-partition control topic without a consumer group, cheaply.

    The partition is *not* kept assigned: :meth:`fetch_new` asks the broker for the end offset (one
    ListOffsets request) and assigns/reads/unassigns only when it moved. A continuously fetching consumer at
    the end of a log costs a steady trickle of fetch requests (on a broker that answers empty fetches at
    once, a busy loop: 30-50% of a core measured), which the throughput budget cannot afford; ``pause()``/
    ``resume()`` instead of (un)assign delays the first fetch after a resume by 0.5-1 s in librdkafka.

    The tail's fetches wait at most ``fetch.wait.max.ms`` = 10 ms on the broker. Apache Kafka parks a fetch
    at the end of the log for that long (librdkafka's default, 500 ms), and librdkafka sends the next fetch
    to a broker only once the one in flight returns: with the default, a record appended just after a read
    reached the tail a whole 500 ms later (measured on Kafka 4.4: a producer's release 0.505-0.513 s late,
    against 0.02-0.1 s on a broker without long polls). The tail is assigned only while it reads, so the
    shorter wait costs no idle fetches.

    :param config: librdkafka settings of the cluster (bootstrap, SASL/SSL); client roles are dropped.
    :param topic: the control topic.
    :param timeout: bound for reads to the end of the topic.
    """

    def __init__(
        self, config: dict[str, Any], topic: str = DEFAULT_CONTROL_TOPIC, timeout: float = 30.0
    ) -> None:
        self.topic = topic
        self._tp = TopicPartition(topic, 0)
        self.timeout = timeout
        self._position = 0
        # group.id is mandatory for a confluent-kafka Consumer; with assign() and no commits it never joins.
        self._consumer: Consumer | None = Consumer(
            {
                **tail_config(config),
                "group.id": f"kstate-tail-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "enable.partition.eof": False,
                "auto.offset.reset": "earliest",
                "fetch.wait.max.ms": TAIL_FETCH_WAIT_MS,
                "client.id": "kstate-control-tail",
                # errors only: its end-offset requests time out by design after a short attempt (see
                # channel.end_offset), and librdkafka warned of each one in the service's log (92 lines in
                # one 4,096 x 100 bench round on a loaded machine)
                "log_level": 3,
            }
        )

    def catch_up(self) -> list[tuple[str, Record | None]]:
        """Read the topic from the beginning to its current end.

        :return: ``(key, record)`` in log order; ``record`` is None for tombstones and unknown records.
        """
        consumer = self._require()
        high = end_offset(consumer, self.topic, self.timeout)
        consumer.assign([TopicPartition(self.topic, 0, OFFSET_BEGINNING)])
        return self._read_to(high)

    def fetch_new(self) -> list[tuple[str, Record | None]]:
        """Return the records appended since the last call ([] after one cheap end-offset request)."""
        consumer = self._require()
        # in attempts: after the leader's death its successor answers, not a retry on the dead node
        high = end_offset(consumer, self.topic, self.timeout)
        if high <= self._position:
            return []
        consumer.assign([TopicPartition(self.topic, 0, self._position)])
        return self._read_to(high)

    def _read_to(self, high: int) -> list[tuple[str, Record | None]]:
        consumer = self._require()
        records: list[tuple[str, Record | None]] = []
        deadline = _monotonic() + self.timeout
        try:
            while self._position < high:
                if _monotonic() > deadline:
                    raise KafkaException(
                        f"control topic {self.topic}: read timed out at {self._position}/{high}"
                    )
                # ask for exactly what is missing: consume() waits its whole timeout for a fuller batch
                for msg in consumer.consume(min(500, high - self._position), 0.02):
                    if msg.error():
                        continue
                    self._position = max(self._position, (msg.offset() or 0) + 1)
                    records.append((((msg.key() or b"").decode(errors="replace")), decode(msg.value())))
                # compaction can leave gaps: trust the consumer's position too
                self._position = max(self._position, consumer.position([self._tp])[0].offset or 0)
        finally:
            consumer.unassign()
        return records

    def _require(self) -> Consumer:
        if self._consumer is None:
            raise RuntimeError("control tail is closed")
        return self._consumer

    def close(self) -> None:
        """Stop following."""
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


class ControlFollower(threading.Thread):
    """A daemon thread that looks at the control topic through ``tail`` on every tick and hands new records
    to its owner: it queues them, calls ``notify`` (a ControlledConsumer's sets a flag and routes its
    ``poll`` back through the wrapper) and wakes :meth:`wait`. The owner's hot paths test that flag only, or
    nothing at all (no clock read, no I/O: ``time.monotonic()`` alone costs ~0.2 µs on some VMs, a few
    percent of a ``poll``); the owner's thread applies the records.

    Ticks fall on the multiples of the interval on the wall clock (``time.time()``), so followers in
    different processes and hosts (with synchronised clocks) look at the same instants. :meth:`hurry`
    switches to ``fast_interval`` for a while.

    It holds its owner weakly (``notify`` a bound method: through a weak method) and ends with it or on
    :meth:`stop`; it owns ``tail`` from :meth:`start` on.

    :param notify: called, in the follower's thread, when records were queued.
    :param tail: the reader of the control topic.
    :param interval: seconds between two looks normally.
    :param fast_interval: seconds between two looks while hurried.
    """

    def __init__(
        self, notify: Callable[[], None], tail: ControlTail, interval: float, fast_interval: float = 0.01
    ) -> None:
        super().__init__(name="kstate-control-follower", daemon=True)
        self._notify: Callable[[], Callable[[], None] | None] = (
            weakref.WeakMethod(notify) if hasattr(notify, "__self__") else lambda: notify  # type: ignore[arg-type]
        )
        self._tail = tail
        self._interval = interval
        self._fast_interval = min(fast_interval, interval)
        self._fast_until = 0.0
        self._stopping = False
        self._tick = threading.Event()  # set to cut a sleep short: stop or hurry
        self._wakeup = threading.Event()
        self._inbox: collections.deque[tuple[str, Record | None]] = collections.deque()

    def run(self) -> None:
        try:
            while True:
                self._tick.wait(self._next_delay())
                self._tick.clear()
                if self._stopping or not self._look():
                    return
        finally:
            self._tail.close()

    def _next_delay(self) -> float:
        """Seconds to the next multiple of the current interval on the wall clock."""
        interval = self._fast_interval if _monotonic() < self._fast_until else self._interval
        return interval - time.time() % interval

    def hurry(self, seconds: float) -> None:
        """Look every ``fast_interval`` for the next ``seconds`` (0: back to ``interval`` now)."""
        self._fast_until = _monotonic() + seconds if seconds > 0 else 0.0
        if seconds > 0:
            self._tick.set()

    def _look(self) -> bool:
        try:
            records = self._tail.fetch_new()
        except (KafkaException, RuntimeError) as exc:
            log.debug("control topic %s: %s", self._tail.topic, exc)
            return True
        notify = self._notify()
        if notify is None:  # the owner is gone
            return False
        if records:
            self._inbox.extend(records)
            notify()
            self._wakeup.set()
        return True

    def take(self) -> list[tuple[str, Record | None]]:
        """Return and forget the queued records (owner's thread)."""
        self._wakeup.clear()
        out = []
        while self._inbox:
            out.append(self._inbox.popleft())
        return out

    def wait(self, timeout: float) -> None:
        """Block up to ``timeout`` seconds until records are queued."""
        self._wakeup.wait(timeout)

    def stop(self) -> None:
        """End the thread (it closes the tail) and wait a little for it."""
        self._stopping = True
        self._tick.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout=self._interval + self._tail.timeout)
