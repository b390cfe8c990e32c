"""The admin verbs of the increase and the state checks over confluent-kafka's AdminClient: no Airflow.

:class:`ClusterAdmin` implements the increase's :class:`~airflow_provider_kstate.increase.ports.AdminPort`
(and the verbs the control channel, the lease log and the checks need) on a librdkafka configuration. The
Airflow hook (:class:`~airflow_provider_kstate.hooks.admin.KStateAdminHook`) builds it from a ``kafka``
connection; the ``kstate`` command line builds it from its arguments. It raises the domain's errors
(:mod:`airflow_provider_kstate.errors`); a task's edge (:mod:`airflow_provider_kstate.task_edge`) decides
whether a retry can help.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import replace
from queue import Empty, SimpleQueue
from typing import Any, TypeVar

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import ConfigResource, NewPartitions, OffsetSpec

from airflow_provider_kstate.admin_client import AdminClient
from airflow_provider_kstate.client_piece.channel import ensure_topic
from airflow_provider_kstate.doctor import wire
from airflow_provider_kstate.doctor.handshake import refused_connection, security_of
from airflow_provider_kstate.errors import (
    BrokerUnavailableError,
    BrokerUnsupportedError,
    InvalidPartitionCountError,
    KafkaRequestError,
    KafkaRequestRefusedError,
    SeedError,
    TopicNotFoundError,
)
from airflow_provider_kstate.increase.model import (
    CLASSIC,
    SHARE,
    SHARE_RESET,
    STREAMS,
    UNKNOWN_STATE,
    UNKNOWN_TYPE,
    GroupInfo,
    Member,
    PartitionReplicas,
    TopicReplicas,
    state_name,
)
from airflow_provider_kstate.increase.replicas import MIN_ISR_UNKNOWN
from airflow_provider_kstate.increase.streams_apps import StreamsDescription, StreamsTopology

K = TypeVar("K")
#: An answer to ask again (a group coordinator still loading).
_RETRY = object()
log = logging.getLogger(__name__)

#: Partitions per offsets request. librdkafka's admin offset calls cost O(n^2) in the partitions of one
#: request (measured: one 4,096-partition commit 50-60 ms of client CPU; the same as 16 requests of 256,
#: 3.5 ms), so large groups are split into requests of this size, sent concurrently.
OFFSETS_CHUNK = 256
#: Requests in flight at once (bounded concurrency of the per-group calls).
MAX_IN_FLIGHT = 64
#: Groups whose committed offsets are read at once (a consumer each; the reads are bound by the client's CPU).
COMMITTED_READERS = 8
#: Settings of the consumer that reads a group's committed offsets: it never joins, commits nor fetches.
READER_SETTINGS = {"enable.auto.commit": False, "enable.auto.offset.store": False}
#: Its client id unless the connection names one (a quota or an ACL may be keyed on it).
READER_CLIENT_ID = "kstate-offsets"
#: Seconds the first attempt of a metadata read may take before it is asked through the second client
#: (:meth:`ClusterAdmin.metadata`); doubled per attempt, within the request timeout. librdkafka sends an
#: application's Metadata request to one broker (the least idle one that is up) and waits for that broker
#: alone for the whole timeout: a broker SIGKILLed with the request in flight, or one that hangs, held
#: it 30 s with two brokers up (Apache Kafka 4.4, 3 nodes), and every call after a hang goes to the same
#: broker (the least idle: it was just sent one) until ``socket.timeout.ms`` (60 s) drops its connection.
#: A normal answer takes 0.01-0.1 s on 2 cores at load average 15-30, so 3 s never cuts one short.
METADATA_ATTEMPT_S = 3.0
#: The local errors of a metadata attempt that another broker may not have: no answer in time (a broker
#: dead with the request in flight, hung), the broker's connection lost.
METADATA_RETRIABLE = frozenset({KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN})
#: librdkafka settings of the provider's admin clients where the connection sets none (:func:`admin_settings`).
#: ``topic.metadata.refresh.interval.ms``: librdkafka sends CreatePartitions (and the other controller-bound
#: requests) to the broker the last Metadata answer named as controller (under KRaft a random live broker,
#: any of which forwards the request) and waits for that broker to be up: one SIGKILLed just before the
#: create held it until the request timeout ("Timed out waiting for controller", 30.0 s; 30.4 and 30.1 s
#: in the kill matrix). A refresh every 2 s names another broker and the create goes there (2.15 s,
#: measured): one small Metadata request every 2 s (of the brokers, and of the topics the client was asked
#: by name: librdkafka keeps a topic named in a metadata read for the client's life, so the refresh asks it
#: too, one topic's partitions, never the whole cluster's).
ADMIN_SETTINGS: dict[str, Any] = {"topic.metadata.refresh.interval.ms": 2000}
#: librdkafka settings of the provider's admin clients whatever the connection says. librdkafka makes an
#: AdminClient a producer handle, and a producer's Metadata request for a topic asks the broker to create it
#: (``allow.auto.create.topics`` defaults to true for producers): on Apache Kafka 4.4 with its default
#: ``auto.create.topics.enable=true``, ``list_topics(topic="typo")`` created ``typo`` (measured). Off, a
#: topic's own metadata read (:meth:`ClusterAdmin.partition_count`) answers UNKNOWN_TOPIC_OR_PART and
#: creates nothing, also on the client's later periodic refreshes of that topic (measured: none in 10 s).
ADMIN_FORCED: dict[str, Any] = {"allow.auto.create.topics": False}
#: Partition errors that pass: a partition just created has no leader on every broker yet (Apache Kafka
#: answers ListOffsets with NOT_LEADER_OR_FOLLOWER until its metadata reaches the broker asked), a leader
#: that moves. Asked again, by partition, until the request timeout.
LEADER_ERRORS = frozenset(
    {
        "NOT_LEADER_FOR_PARTITION",
        "LEADER_NOT_AVAILABLE",
        "UNKNOWN_TOPIC_OR_PART",
        "REPLICA_NOT_AVAILABLE",
        "OFFSET_NOT_AVAILABLE",
        "FENCED_LEADER_EPOCH",
        "UNKNOWN_LEADER_EPOCH",
        "_UNKNOWN_PARTITION",
        # librdkafka's own "Failed to query partition leaders: No leaders found": its metadata of a topic just
        # created names no leader yet (Apache Kafka 4.4, 3 nodes: a watermarks read right after the create)
        "_NOENT",
    }
)
#: Partition errors of a ListOffsets attempt that mean its answer was missed, not refused: no answer in time
#: (a leader hung, or SIGKILLed with the request in flight: librdkafka waits for that broker until the
#: request timeout), the connection lost, the broker's own timeout. Asked again in the next attempt, after
#: the topic's metadata is read again (a new leader is asked), see :meth:`ClusterAdmin._list_offsets_once`.
OFFSETS_MISSED = frozenset(
    {"_TRANSPORT", "_TIMED_OUT", "_ALL_BROKERS_DOWN", "REQUEST_TIMED_OUT", "NETWORK_EXCEPTION"}
)
#: Seconds between two looks at a ListOffsets attempt that has not been answered: its bound passed, or (from
#: the second attempt on) the leader of a partition it waits for moved (then it is asked of the new one at
#: once: a leader fenced 9-13 s after its broker hung or died, not only at the next doubled bound).
OFFSETS_LOOK_S = 0.25
#: Seconds between two metadata reads of those looks.
LEADER_LOOK_S = 1.0


class ClusterAdmin:
    """Admin verbs for the safe partition increase and the state checks.

    :param config: the librdkafka configuration of the cluster (holds secrets: never log it).
    :param timeout: seconds to wait for each admin request.
    :param max_in_flight: requests in flight at once.
    :param client: the AdminClient to use (default: one made from ``config``); made with
        :func:`admin_settings` (a topic's own metadata read must not create it: see :data:`ADMIN_FORCED`).
    :param name: how errors name the cluster (a connection id, a bootstrap address).
    :param consumer: makes the consumer that reads one group's committed offsets from its configuration
        (confluent-kafka's ``Consumer``).
    :param second_client: makes the second client a metadata read turns to when the first gives no answer
        within :data:`METADATA_ATTEMPT_S` (the provider's ``AdminClient``), from a configuration.
    """

    def __init__(
        self,
        config: Mapping[str, Any],
        timeout: float = 30.0,
        max_in_flight: int = MAX_IN_FLIGHT,
        client: AdminClient | None = None,
        name: str = "",
        consumer: Callable[[dict[str, Any]], Any] = Consumer,
        second_client: Callable[[dict[str, Any]], Any] = AdminClient,
    ) -> None:
        self.config = dict(config)
        self.timeout = timeout
        self.max_in_flight = max_in_flight
        self.client = client if client is not None else AdminClient(admin_settings(self.config))
        self.consumer = consumer
        self.name = name or str(self.config.get("bootstrap.servers", "the cluster"))
        #: Whether the wire client can talk to this listener (None: not asked yet; see :meth:`wire_usable`).
        self._wire: bool | None = None
        self.second_client = second_client
        #: The clients metadata reads go through, the one that answered last first (see :meth:`metadata`).
        self._readers: list[Any] = [self.client]
        #: ``host:port`` of every broker the last metadata listed: the second client's bootstrap.
        self._brokers: list[str] = []
        #: Guards :attr:`_readers` (the watermarks' two ListOffsets passes may read metadata at once).
        self._readers_lock = threading.Lock()

    # -- topics -------------------------------------------------------------------------------------

    def metadata(self, topic: str | None = None) -> Any:
        """The cluster's metadata (of ``topic``, or of every topic), asked in attempts so that a broker that
        does not answer costs seconds, not the request timeout.

        librdkafka sends the request to one broker and waits for that one alone: a broker that dies with the
        request in flight or hangs would hold the read for the whole timeout while the others could answer.
        The first attempt may take :data:`METADATA_ATTEMPT_S`; each next one twice the last, through the other
        of two clients (the second is made on the first miss, bootstrapped at every broker the cluster listed:
        a new client connects past a node that does not answer); the one that answered is asked first next
        time. Every attempt missed until the timeout: the cluster is unreachable, named as before.

        :raises KafkaAuthenticationError: the cluster refused the connection (SASL or TLS: named).
        :raises BrokerUnavailableError: no answer within the timeout.
        """
        deadline = time.monotonic() + self.timeout
        attempt, tried, error = METADATA_ATTEMPT_S, 0, None
        while True:
            left = deadline - time.monotonic()
            reader = self._reader_for(tried)
            try:
                answer = reader.list_topics(topic=topic, timeout=max(min(attempt, left), 0.001))
            except KafkaException as exc:
                error = exc
            else:
                return self._answered(reader, answer, tried)
            if not _metadata_retriable(error) or deadline - time.monotonic() < 0.05:
                break
            following = "second" if self._reader_for(tried + 1) is not self.client else "first"
            log.warning(
                "METADATA no answer within %.1f s (%s): asking again through the %s client",
                min(attempt, left),
                _error_text(error),
                following,
            )
            attempt, tried = attempt * 2, tried + 1
        # Probed outside the except block: a KafkaException raised by confluent-kafka's C code (2.16.1) while
        # another is being handled leaks the handled one, and with its frames this admin client, which then
        # reconnects every second until the process exits.
        self._raise_refused()
        raise BrokerUnavailableError(
            f"Kafka {self.name}: cluster unreachable within {self.timeout}s ({_error_text(error)})"
        ) from error

    def _reader_for(self, tried: int) -> Any:
        """The client of attempt ``tried`` (0: the one that answered last): the two clients take turns, the
        second made on its first turn (bootstrapped at the brokers the cluster listed, and the configured
        ones)."""
        with self._readers_lock:
            if tried and len(self._readers) == 1:
                servers = ",".join(dict.fromkeys([*self._brokers, *_servers(self.config)]))
                config = admin_settings({**self.config, "bootstrap.servers": servers})
                self._readers.append(self.second_client(config))
            return self._readers[tried % len(self._readers)]

    def _answered(self, reader: Any, answer: Any, tried: int) -> Any:
        """Keep what an answer teaches: the brokers' addresses, and its client as the first to ask next."""
        brokers = sorted((getattr(answer, "brokers", None) or {}).items())
        self._brokers = [f"{b.host}:{b.port}" for _, b in brokers] or self._brokers
        with self._readers_lock:
            if self._readers[0] is not reader:
                self._readers.remove(reader)
                self._readers.insert(0, reader)
        if tried:
            by = getattr(answer, "orig_broker_id", "?")
            log.info("METADATA answered after %s missed attempt(s), by broker %s", tried, by)
        return answer

    def check_connection(self, first: float = 3.0) -> None:
        """Connect before anything else: a cluster that refuses the connection's credentials or TLS fails
        within seconds with the cause named, instead of a request timing out later.

        :param first: seconds the first metadata request may take before the handshake is looked at.
        :raises KafkaAuthenticationError: SASL authentication or TLS failed (the listener and cause named).
        :raises BrokerUnavailableError: no answer within the timeout.
        """
        try:
            self.client.list_topics(timeout=min(first, self.timeout))
            return
        except KafkaException:
            pass
        self._raise_refused()  # outside the except block: see metadata()
        self.metadata()

    def _raise_refused(self) -> None:
        """Raise the named refusal when the cluster refuses this connection's handshake (else nothing). A
        ``PLAINTEXT`` connection has no handshake to refuse: not probed (an unreachable cluster is named at once)."""
        if security_of(self.config) == "PLAINTEXT":
            return
        refused = refused_connection(self.config, min(self.timeout, 5.0), self.name)
        if refused is not None:
            raise refused

    def ensure_internal_topic(self, topic: str, config: dict[str, str]) -> None:
        """Create one of the provider's own one-partition topics (lease, control) unless it exists (its own
        metadata read; where it answers an error, the creation's whole listing decides)."""
        meta = self.metadata(topic).topics.get(topic)
        if meta is not None and meta.error is None:
            return
        try:
            ensure_topic(self.client, topic, config, self.timeout)
        except KafkaException as exc:
            raise BrokerUnavailableError(
                f"could not create {topic!r}: {exc.args[0].str() if exc.args else exc}"
            ) from exc

    def list_topics(self) -> list[str]:
        """Return the names of all topics."""
        return sorted(self.metadata().topics)

    def partition_count(self, topic: str) -> int:
        """Return the partition count of ``topic``; raise TopicNotFoundError when it does not exist.

        The topic's own metadata, not the cluster's (4,096 partitions x 100 topics with 5.6 ms more per round
        trip: the whole cluster's read cost the create's poll 0.92 s of 1.88 s); it creates nothing (see
        :data:`ADMIN_FORCED`)."""
        return len(_existing(self.metadata(topic), topic).partitions)

    def topic_ids(self, topics: Iterable[str]) -> dict[str, str]:
        """Return ``{topic: KIP-516 topic id}`` (DescribeTopics); ``""`` where the id cannot be read (a broker
        without topic ids, no DESCRIBE permission): see :func:`~airflow_provider_kstate.store.topic_id.read_topic_ids`."""
        from airflow_provider_kstate.store.topic_id import read_topic_ids

        return read_topic_ids(self.client, topics, self.timeout)

    def topic_config(self, topic: str) -> dict[str, str]:
        """Return the topic's effective configuration."""
        futures = self.client.describe_configs(
            [ConfigResource(ConfigResource.Type.TOPIC, topic)], request_timeout=self.timeout
        )
        entries = _result(next(iter(futures.values())), self.timeout, f"describe configs of {topic!r}")
        return {name: entry.value for name, entry in entries.items()}

    def topic_replicas(self, topic: str, leaders_only: bool = False) -> TopicReplicas:
        """Return each partition's leader, replicas and in-sync replicas (the metadata), the topic's effective
        ``min.insync.replicas`` (DescribeConfigs) and the brokers that do not answer: those the metadata
        no longer lists (fenced) and those it lists that refuse a connection (a cluster without its
        controller quorum keeps listing its dead brokers). ``leaders_only``: the metadata alone.

        :raises TopicNotFoundError: the topic does not exist.
        """
        # The topic's own metadata (every broker is listed in it too): the provider's admin clients never ask
        # a broker to create a topic they name (ADMIN_FORCED), so a typo'd topic is not created.
        cluster = self.metadata(topic)
        meta = _existing(cluster, topic)
        partitions = tuple(
            PartitionReplicas(p, m.leader, tuple(m.replicas), tuple(m.isrs))
            for p, m in sorted(meta.partitions.items())
        )
        if leaders_only:
            return TopicReplicas(topic, partitions)
        brokers = {b.id: (b.host, b.port) for b in cluster.brokers.values()}
        up = wire.answering(self.config, brokers, min(self.timeout, 3.0))
        if up is None:
            log.info("REPLICAS which brokers answer is unknown (the wire client reached none): metadata only")
            up = set(brokers)
        named = {b for p in partitions for b in (*p.replicas, *p.isr, p.leader) if b >= 0}
        down = frozenset(named - up)
        try:
            min_isr = int(self.topic_config(topic).get("min.insync.replicas") or 1)
        except BrokerUnavailableError as exc:
            # librdkafka sends a topic's DescribeConfigs to the controller the metadata names. A cluster that
            # lost its controller quorum often names a dead broker there (one of those its frozen metadata
            # still lists; Apache Kafka 4.4.0, 2 of 3 nodes down: 4 of 12 plans timed out on it). With
            # brokers of the topic down, judge the partitions without it (MIN_ISR_UNKNOWN: the judgement
            # refuses every partition not fully in sync, named) instead of failing without naming them.
            if not down:
                raise
            log.warning(
                "REPLICAS min.insync.replicas of %r unknown (%s): brokers %s down", topic, exc, sorted(down)
            )
            min_isr = MIN_ISR_UNKNOWN
        return TopicReplicas(topic, partitions, min_isr, down)

    def increase_partitions(self, topic: str, total: int, validate_only: bool = False) -> None:
        """Grow ``topic`` to ``total`` partitions (``validate_only``: ask the broker without changing).

        :raises BrokerUnsupportedError: the broker does not serve CreatePartitions.
        """
        futures = self.client.create_partitions(
            [NewPartitions(topic, total)], validate_only=validate_only, request_timeout=self.timeout
        )
        try:
            next(iter(futures.values())).result(timeout=self.timeout)
        except KafkaException as exc:
            err = exc.args[0]
            if err.name() == "INVALID_PARTITIONS":
                raise InvalidPartitionCountError(f"topic {topic!r}: {err.str()}") from exc
            if err.name() == "UNKNOWN_TOPIC_OR_PART":
                raise TopicNotFoundError(f"topic {topic!r} does not exist on the cluster") from exc
            if err.name() == "_UNSUPPORTED_FEATURE":
                raise BrokerUnsupportedError(
                    f"the broker cannot add partitions to {topic!r}: {err.str()} (CreatePartitions, API 37, is "
                    "missing from its ApiVersions). Nothing was changed."
                ) from exc
            if err.name() in UNREACHABLE:
                # the broker asked died with the request in flight (a 3-node cluster, its broker SIGKILLed:
                # issue 33): the create may or may not have been applied; the step's retry looks again.
                raise BrokerUnavailableError(
                    f"create partitions of {topic!r}: no answer ({err.str()}); the partitions may or may not "
                    "have been created: the retry reads the partition count again"
                ) from exc
            raise

    def watermarks(self, topic: str, partitions: Iterable[int]) -> dict[int, tuple[int, int]]:
        """Return ``{partition: (log_start, high_watermark)}``: batched ListOffsets requests, the log starts'
        and the ends' in flight together (each pass waits only for its own answers: over a network the two
        cost one round trip, not two)."""
        wanted = sorted(set(partitions))
        if not wanted:
            return {}
        with ThreadPoolExecutor(2, "kstate-watermarks") as pool:
            ends = pool.submit(self._list_offsets, topic, wanted, OffsetSpec.latest())
            low = self._list_offsets(topic, wanted, OffsetSpec.earliest())
            high = ends.result()
        return {p: (low[p], high[p]) for p in wanted}

    def loaded_ends(self, topic: str, partitions: Iterable[int]) -> dict[int, int]:
        """Return ``{partition: high_watermark}`` in one ListOffsets pass, 0 for a partition its leader has not
        loaded yet (a leader error): nothing can have been written to it, so it is not asked again. For the
        partitions an increase just created (Kafka brings thousands online over seconds)."""
        wanted = sorted(set(partitions))
        out: dict[int, int] = {}
        if wanted:
            deadline = time.monotonic() + self.timeout
            waiting = self._list_offsets_once(topic, wanted, OffsetSpec.latest(), out, deadline)
            out.update(dict.fromkeys((p for p, _err in waiting), 0))
            if waiting:
                log.info("OFFSETS %s partitions of %r not loaded by a leader yet: empty", len(waiting), topic)
        return out

    def unloaded(self, topic: str, partitions: Iterable[int]) -> list[int]:
        """Return the partitions of ``partitions`` whose leader does not serve them yet (one ListOffsets pass;
        a leader error): the metadata names a leader at once, the broker loads the partition later."""
        wanted = sorted(set(partitions))
        if not wanted:
            return []
        waiting = self._list_offsets_once(
            topic, wanted, OffsetSpec.latest(), {}, time.monotonic() + self.timeout
        )
        return sorted(p for p, _err in waiting)

    def log_starts(self, topic: str, partitions: Iterable[int]) -> dict[int, int]:
        """Return ``{partition: log_start}`` (one ListOffsets pass, without the high watermarks)."""
        wanted = sorted(set(partitions))
        return self._list_offsets(topic, wanted, OffsetSpec.earliest()) if wanted else {}

    def _list_offsets(self, topic: str, partitions: list[int], spec: Any) -> dict[int, int]:
        """``{partition: offset}`` of ``spec``; partitions without a leader yet are asked again (see
        :data:`LEADER_ERRORS`), and those whose answer was missed (see :meth:`_list_offsets_once`), until the
        request timeout."""
        out: dict[int, int] = {}
        deadline = time.monotonic() + self.timeout
        pending = partitions
        while pending:
            waiting = self._list_offsets_once(topic, pending, spec, out, deadline)
            if waiting:
                log.info(
                    "OFFSETS %s partitions of %r have no leader yet (%s): asked again",
                    len(waiting),
                    topic,
                    waiting[0][1],
                )
                time.sleep(0.2)
            pending = [p for p, _err in waiting]
        return out

    def _list_offsets_once(
        self, topic: str, partitions: list[int], spec: Any, out: dict[int, int], deadline: float
    ) -> list[tuple[int, str]]:
        """One ListOffsets pass over ``partitions``, its answers put in ``out`` (``{partition: offset}``).

        Asked in attempts, as :meth:`metadata` is: librdkafka sends each partition to its leader and waits for
        that broker alone until the request timeout (a leader SIGKILLed with the request in flight held a scale
        step's ListOffsets 30 s). The first attempt may take :data:`METADATA_ATTEMPT_S`; the partitions it
        missed (no answer, or an error of :data:`OFFSETS_MISSED`) are asked again after the topic's metadata
        is read again (the new leader, through the client that answered it), each attempt twice as long as the
        last, or at once where a partition's leader moved, until ``deadline``.

        :param deadline: ``time.monotonic()`` past which nothing is asked again.
        :returns: the partitions answered with a leader error (:data:`LEADER_ERRORS`), with its name.
        :raises BrokerUnavailableError: partitions still not answered at ``deadline``.
        :raises KafkaException: a partition answered with any other error (at once).
        """
        waiting: list[tuple[int, str]] = []
        pending, bound, tried = partitions, METADATA_ATTEMPT_S, 0
        leaders: dict[int, int] | None = None
        while True:
            started = time.monotonic()
            within = max(min(bound, deadline - started), 0.001)
            attempt = _OffsetsAttempt(
                started + within, leaders, lambda: _leaders(self.metadata(topic), topic)
            )
            self._offsets_attempt(topic, pending, spec, within, attempt, out, waiting, deadline)
            missed = [p for p in pending if p not in attempt.answered]
            if not missed:
                break
            if deadline - time.monotonic() < 0.05:
                raise BrokerUnavailableError(
                    f"list offsets of {topic!r}: {len(missed)} partition(s) not answered within "
                    f"{self.timeout}s ({attempt.cause})"
                )
            log.warning(
                "OFFSETS %s partition(s) of %r not answered in an attempt of %.1f s (%s): asked again",
                len(missed),
                topic,
                within,
                attempt.cause,
            )
            time.sleep(max(0.0, 0.2 - (time.monotonic() - started)))  # an attempt failed at once: no spin
            current = _leaders(self.metadata(topic), topic)
            leaders = {p: current.get(p, -1) for p in missed}
            pending, bound, tried = missed, bound * 2, tried + 1
        if tried:
            log.info("OFFSETS of %r answered after %s missed attempt(s)", topic, tried)
        return waiting

    def _offsets_attempt(
        self,
        topic: str,
        partitions: list[int],
        spec: Any,
        within: float,
        attempt: _OffsetsAttempt,
        out: dict[int, int],
        waiting: list[tuple[int, str]],
        deadline: float,
    ) -> None:
        """One attempt of :meth:`_list_offsets_once`: ``partitions`` asked through the client that answered the
        last metadata read, each request bounded at ``within`` seconds; ``attempt`` ends the wait (its bound,
        a leader moved) and records the partitions answered. Every partition answered by then counts, also
        those of a request another of whose partitions was not (its leader hung).

        :raises KafkaException: a partition answered with an error neither passing nor missed.
        """
        client = self._reader_for(0)
        sent: list[dict[Any, Any]] = []

        def request(chunk: list[int]) -> Callable[[], Any]:
            def call() -> Any:
                futures = client.list_offsets(
                    {TopicPartition(topic, p): spec for p in chunk}, request_timeout=within
                )
                sent.append(futures)
                return futures

            return call

        calls = ((i, request(chunk)) for i, chunk in enumerate(_chunks(partitions, OFFSETS_CHUNK)))
        for _answered in self._bounded(calls, f"list offsets of {topic!r}", attempt.stop):
            pass
        for tp, future in ((tp, f) for futures in sent for tp, f in futures.items() if f.done()):
            try:
                offset = future.result(timeout=0).offset
            except KafkaException as exc:
                name = _error_name(exc)
                if name in OFFSETS_MISSED:
                    attempt.cause = _error_text(exc)
                    continue
                if name not in LEADER_ERRORS or time.monotonic() > deadline:
                    raise
                waiting.append((tp.partition, name))
            else:
                if offset < 0:
                    # librdkafka 2.16 answers a partition whose leader did not answer within the request
                    # timeout with offset -1001 (OFFSET_INVALID) and no error (a SIGSTOPped leader, Apache
                    # Kafka 4.4): missed, never an offset (earliest and latest are never negative)
                    attempt.cause = f"no answer from its leader (offset {offset})"
                    continue
                out[tp.partition] = offset
            attempt.answered.add(tp.partition)

    def _bounded(
        self,
        calls: Iterable[tuple[K, Callable[[], Any]]],
        what: str,
        stop: Callable[[], bool] | None = None,
    ) -> Iterator[tuple[K, Any]]:
        """Send the requests ``calls`` makes, at most ``max_in_flight`` at once; yield ``(key, answer)`` as
        each is answered.

        Each call returns either one future or a dict of futures (confluent-kafka's admin calls); the
        answer is the future's result, or the dict of futures, all of which are done. Completions arrive
        through a done-callback queue: O(1) per future, however many requests are in flight.

        :param stop: asked every :data:`OFFSETS_LOOK_S` while no answer comes; True ends the wait (the
            requests not answered yet are left to their own request timeout). Without it, no answer within
            the timeout raises :class:`BrokerUnavailableError`.
        """
        done: SimpleQueue[Any] = SimpleQueue()
        remaining: dict[int, list[Any]] = {}  # id(answer) -> [key, answer, futures not done yet]
        source = iter(calls)

        def fill() -> None:
            while len(remaining) < self.max_in_flight:
                nxt = next(source, None)
                if nxt is None:
                    return
                key, call = nxt
                answer = call()
                futures = _futures(answer)
                ident = id(answer)
                remaining[ident] = [key, answer, len(futures)]
                for future in futures:
                    future.add_done_callback(lambda _f, a=ident: done.put(a))

        fill()
        while remaining:
            try:
                entry = remaining[done.get(timeout=self.timeout if stop is None else OFFSETS_LOOK_S)]
            except Empty:
                if stop is None:
                    raise BrokerUnavailableError(f"{what}: no answer within {self.timeout}s") from None
                if stop():
                    return
                continue
            entry[2] -= 1
            if not entry[2]:
                del remaining[id(entry[1])]
                yield entry[0], entry[1]
            fill()

    # -- access (ACLs) ------------------------------------------------------------------------------

    def authorized_operations(
        self, topics: Iterable[str] = (), groups: Iterable[str] = ()
    ) -> dict[tuple[str, str], frozenset[str] | None]:
        """Return what this connection's principal may do on each topic and group, as Kafka's authorizer
        answers it (DescribeTopics and DescribeGroups with ``include_authorized_operations``, KIP-430):
        ``{("topic", name): {"READ", "ALTER", ...}}``. An empty set: not even DESCRIBE (the broker answers
        an authorization error, also for a topic that does not exist). None: the broker did not say (a
        topic that does not exist, a group without a coordinator yet, a broker before KIP-430).
        """
        out: dict[tuple[str, str], frozenset[str] | None] = {}
        names = list(dict.fromkeys(topics))
        if names:
            try:
                futures = self.client.describe_topics(
                    TopicCollection(names), request_timeout=self.timeout, include_authorized_operations=True
                )
            except (KafkaException, NotImplementedError, TypeError) as exc:  # a client or broker without it
                log.info("ACCESS topics: the authorizer's answer is unknown (%s)", exc)
                futures = {}
            for topic, future in futures.items():
                out[("topic", topic)] = self._operations(future, f"describe topic {topic!r}")
        wanted = list(dict.fromkeys(groups))
        for _attempt in range(5):  # a group whose coordinator is still loading answers NOT_COORDINATOR
            if not wanted:
                break
            try:
                futures = self.client.describe_consumer_groups(
                    wanted, request_timeout=self.timeout, include_authorized_operations=True
                )
            except (KafkaException, NotImplementedError, TypeError) as exc:
                log.info("ACCESS groups: the authorizer's answer is unknown (%s)", exc)
                break
            retry = []
            for group, future in futures.items():
                ops = self._operations(future, f"describe group {group!r}", retry_on=("NOT_COORDINATOR",))
                if ops is _RETRY:
                    retry.append(group)
                    out[("group", group)] = None
                else:
                    out[("group", group)] = ops
            wanted = retry
            if retry:
                time.sleep(0.3)
        return out

    def _operations(self, future: Any, what: str, retry_on: tuple[str, ...] = ()) -> Any:
        try:
            answer = _result(future, self.timeout, what)
        except KafkaException as exc:
            name = exc.args[0].name() if exc.args and hasattr(exc.args[0], "name") else ""
            if name.endswith("_AUTHORIZATION_FAILED"):
                return frozenset()
            if name in retry_on:
                return _RETRY
            # A topic that does not exist, a broker without KIP-430 or that cannot say: not judged here (the
            # plan's own requests name what they meet).
            log.info("ACCESS %s: the authorizer's answer is unknown (%s)", what, name or exc)
            return None
        except BrokerUnavailableError as exc:
            log.info("ACCESS %s: the authorizer's answer is unknown (%s)", what, exc)
            return None
        ops = getattr(answer, "authorized_operations", None)
        return None if ops is None else frozenset(op.name for op in ops)

    # -- consumer groups ----------------------------------------------------------------------------

    def list_groups(self) -> list[str]:
        """Return the ids of all consumer groups the cluster knows."""
        return sorted(g.group_id for g in self._listed_groups())

    def _listed_groups(self) -> list[Any]:
        """Every group ListGroups names, from every broker: asked again while one answers with an error
        (a group coordinator still loading its ``__consumer_offsets`` partitions), within ``timeout``.

        confluent-kafka returns the groups of the brokers that answered in ``valid`` and the others' errors
        beside them: a partial list would leave the groups it misses out of the plan, unprotected, so it is
        never used (:func:`_list_errors`).
        """
        deadline = time.monotonic() + self.timeout
        while True:
            result = _result(
                self.client.list_consumer_groups(request_timeout=self.timeout), self.timeout, "list groups"
            )
            if not result.errors:
                return list(result.valid)
            if time.monotonic() >= deadline or not all(_retriable(e) for e in result.errors):
                raise _list_errors(result.errors)
            time.sleep(0.5)

    def group_types(self) -> dict[str, str]:
        """Return ``{group: TYPE}`` of every group the cluster lists (``CLASSIC``, ``CONSUMER``, ``SHARE``,
        ``STREAMS``; ``UNKNOWN`` where the client cannot tell).

        confluent-kafka names only classic and consumer groups and lists every other type as UNKNOWN, so
        the types are read from ListGroups v5 on every broker where the wire client reaches them (PLAINTEXT,
        SSL, SASL/PLAIN listeners of Kafka 3.8+); elsewhere they stay as confluent-kafka reports them.
        """
        types = {
            g.group_id: getattr(getattr(g, "type", None), "name", CLASSIC) for g in self._listed_groups()
        }
        config = self.config
        try:
            typed = wire.api_versions(config, self.timeout).get(wire.API_LIST_GROUPS, (0, 0))[1] >= 5
        except wire.WireUnavailable:
            typed = True  # unknown: a group confluent-kafka cannot type stays UNKNOWN
        if not typed:
            # A broker before ListGroups v5 (Kafka 3.8) has only classic groups; it reports no type at all.
            return {g: CLASSIC if t == UNKNOWN_TYPE else t for g, t in types.items()}
        brokers = [(b.host, b.port) for b in self.metadata().brokers.values()]
        try:
            listings = wire.list_groups(config, brokers, self.timeout)
        except wire.WireUnavailable as exc:
            log.info("GROUPS group types from the client only (ListGroups v5 not read: %s)", exc)
            return types
        types.update({g.group_id: (g.type or "classic").upper() for g in listings})
        return types

    def committed_offsets(self, group: str, topic: str, partitions: int | None = None) -> dict[int, int]:
        """Return the group's committed offsets on ``topic`` (partitions without one are absent).

        :param partitions: the topic's partition count, when known (saves a metadata request).
        """
        return dict(self.committed_offsets_many([group], topic, partitions)).get(group, {})

    def committed_offsets_many(
        self, groups: Iterable[str], topic: str, partitions: int | None = None
    ) -> Iterator[tuple[str, dict[int, int]]]:
        """Yield ``(group, {partition: offset})`` for each group's committed offsets on ``topic``.

        Each group is read by a consumer of it (``Consumer.committed``, which never joins the group), not by
        the AdminClient's ListConsumerGroupOffsets: librdkafka 2.16 handles that call answered
        NOT_COORDINATOR, as when a group's coordinator moves in a rolling restart, by calling into a consumer
        group the AdminClient does not have, and the process dies of a SIGSEGV (librdkafka issue 5040,
        found in issue 33's fault matrix). The consumer's group machinery finds the moved coordinator and
        asks again. :data:`COMMITTED_READERS` groups are read at once, each in requests of
        :data:`OFFSETS_CHUNK` partitions (the client's cost grows with the square of one request's
        partitions); a group is yielded as soon as it is read.

        :param partitions: the topic's partition count, when known (saves a metadata request).
        """
        count = self.partition_count(topic) if partitions is None else partitions
        chunks = list(_chunks(list(range(count)), OFFSETS_CHUNK))
        wanted = list(dict.fromkeys(groups))
        if not wanted:
            return
        with ThreadPoolExecutor(min(COMMITTED_READERS, len(wanted)), "kstate-offsets") as pool:
            reads = {pool.submit(self._committed_of, group, topic, chunks): group for group in wanted}
            try:
                for done in as_completed(reads):
                    yield reads[done], done.result()
            finally:
                for future in reads:
                    future.cancel()

    def _committed_of(self, group: str, topic: str, chunks: list[list[int]]) -> dict[int, int]:
        """``group``'s committed offsets on ``topic`` (partitions without one absent), read by a consumer of
        the group; a coordinator loading or moving is asked again until the request timeout."""
        reader = self._reader(group)
        try:
            found: dict[int, int] = {}
            for chunk in chunks:
                asked = [TopicPartition(topic, p) for p in chunk]
                answer = self._committed_chunk(reader, group, repr(topic), asked)
                found.update((tp.partition, tp.offset) for tp in answer if tp.offset >= 0)
            return found
        finally:
            reader.close()

    def _reader(self, group: str, **callbacks: Any) -> Any:
        """A consumer of ``group`` that only reads or commits its offsets (it never subscribes).

        :param callbacks: librdkafka callbacks (``on_commit``: the seed's asynchronous commits).
        """
        return self.consumer(
            {"client.id": READER_CLIENT_ID, **self.config, **READER_SETTINGS, "group.id": group, **callbacks}
        )

    def group_topics(self, group: str, topics: Iterable[str]) -> set[str]:
        """The topics of ``topics`` on which ``group`` has a committed offset, read by one consumer of the
        group over every partition of them (in requests of :data:`OFFSETS_CHUNK`), not by the AdminClient's
        OffsetFetch of the whole group (see :meth:`committed_offsets_many`); topics that do not exist are left
        out."""
        listed = self.metadata().topics
        asked = [
            TopicPartition(t, p) for t in dict.fromkeys(topics) if t in listed for p in listed[t].partitions
        ]
        reader = self._reader(group)
        try:
            found: set[str] = set()
            for start in range(0, len(asked), OFFSETS_CHUNK):
                chunk = asked[start : start + OFFSETS_CHUNK]
                answer = self._committed_chunk(reader, group, "its topics", chunk)
                found.update(tp.topic for tp in answer if tp.offset >= 0)
            return found
        finally:
            reader.close()

    def _committed_chunk(self, reader: Any, group: str, where: str, asked: list[Any]) -> list[Any]:
        """``reader.committed(asked)``, asked again while the group's coordinator loads or moves."""
        what = f"committed offsets of group {group!r} on {where}"
        deadline = time.monotonic() + self.timeout
        while True:
            left = max(0.1, deadline - time.monotonic())
            try:
                answer = reader.committed(asked, timeout=left)
            except KafkaException as exc:
                err: Any = exc.args[0] if exc.args else exc
                name = getattr(err, "name", lambda: "")()
                if name in COORDINATOR_MOVING and time.monotonic() < deadline:
                    time.sleep(0.2)
                    continue
                if name in UNREACHABLE:
                    raise BrokerUnavailableError(f"{what}: cluster unreachable ({err.str()})") from exc
                cls = KafkaRequestError if _retriable(err) else KafkaRequestRefusedError
                raise cls(f"{what}: {err}") from exc
            moving = [tp.error for tp in answer if getattr(tp, "error", None) is not None]
            if moving and _coordinator_moving(moving) and time.monotonic() < deadline:
                time.sleep(0.2)
                continue
            _raise_offset_errors(group, where, answer)
            return list(answer)

    def groups_on_topic(self, topic: str, partitions: int | None = None) -> list[str]:
        """Return the groups at risk on ``topic``: those with committed offsets on it, and those whose live
        members are assigned some of its partitions (a group that has not committed yet).

        One ListGroups, one DescribeGroups and every group's offsets concurrently: the number of round
        trips does not grow with the number of groups.
        """
        names = self.list_groups()
        assigned = {g for g, info in self.describe_groups(names, topic).items() if info.assigned()}
        committed = {g for g, offsets in self.committed_offsets_many(names, topic, partitions) if offsets}
        return [g for g in names if g in assigned or g in committed]

    def describe_groups(self, groups: list[str], topic: str) -> dict[str, GroupInfo]:
        """Describe ``groups``, keeping of each member only its partitions of ``topic``.

        Through the wire client (:func:`~airflow_provider_kstate.doctor.wire.describe_any_groups`: classic,
        KIP-848 consumer and KIP-1071 streams groups, each by its own describe request), not confluent-kafka's
        ``describe_consumer_groups``: librdkafka 2.16 aborts the process in it (SIGABRT,
        ``rd_kafka_enq_once_del_source_return: Assertion 'eonce->refcnt > 0' failed``; upstream issue 4605)
        when a call's timeout races its coordinator's death, and the window's checks call this in a loop.
        Measured on 3 Apache Kafka 4.4 nodes, a node SIGKILLed every 20 s, consumers joining, a call every
        0.1 s with a 1 s timeout: 4 aborts in 1,259 calls through confluent-kafka, 0 in 1,092 through the
        wire. A listener the wire client cannot use (SASL other than PLAIN) is described by confluent-kafka
        (:meth:`_describe_by_client`).

        :raises BrokerUnavailableError: a coordinator did not answer within the timeout.
        :raises KafkaRequestRefusedError: the principal may not describe a group.
        """
        if not groups:
            return {}
        if not self.wire_usable():
            return self._describe_by_client(groups, topic)
        try:
            found = wire.describe_any_groups(self.config, list(groups), self.timeout)
        except wire.WireRefused as exc:
            denied = any(c == wire.GROUP_AUTHORIZATION_FAILED for c in exc.codes.values())
            cls = KafkaRequestRefusedError if denied else KafkaRequestError
            raise cls(f"describe groups {sorted(exc.codes)}: {exc}") from exc
        except wire.WireUnsupported as exc:  # an answer it cannot read: the client from now on
            log.warning(
                "GROUPS the wire client cannot describe the groups (%s): described by the client", exc
            )
            self._wire = False
            return self._describe_by_client(groups, topic)
        infos = {g: _described_info(d, topic) for g, d in found.items()}
        missing = [g for g in groups if g not in infos]
        if missing:  # not answered by the wire (never seen): the client says what it knows
            infos.update(self._describe_by_client(missing, topic))
        return infos

    def leave_members(self, group: str, member_ids: list[str], reason: str) -> dict[str, int]:
        """Remove ``member_ids`` from the classic ``group`` (or KIP-848 consumer group: Kafka 4.0+ fences such
        a member, KAFKA-18188; before, UNKNOWN_MEMBER_ID) at its coordinator, as their own LeaveGroup would
        (Kafka's admin ``removeMembersFromConsumerGroup``; librdkafka has no such call): the wire client's
        LeaveGroup v5, ``reason`` in the broker's log. Returns ``{member id: error code}`` (0 removed, 25
        already gone); ``{}`` when the wire client cannot use this listener.

        :raises BrokerUnavailableError: the coordinator did not answer, or is moving.
        :raises KafkaRequestRefusedError: the coordinator refused (no permission on the group).
        """
        if not member_ids or not self.wire_usable():
            return {}
        try:
            return wire.leave_members(self.config, group, member_ids, reason, min(self.timeout, 10.0))
        except wire.WireRefused as exc:
            raise KafkaRequestRefusedError(f"remove members of group {group!r}: {exc}") from exc

    def wire_usable(self) -> bool:
        """Whether the wire client (:mod:`~airflow_provider_kstate.doctor.wire`) can talk to this listener:
        asked once (a bootstrap broker's ApiVersions and this connection's authentication), then remembered.
        No: a SASL mechanism other than PLAIN, TLS settings it cannot read. When no bootstrap broker answers
        it is asked again next time, and the wire client is tried (it asks again within the timeout)."""
        if self._wire is None:
            try:
                wire.usable(self.config, min(self.timeout, 10.0))
                self._wire = True
            except wire.WireUnsupported as exc:
                log.info(
                    "GROUPS the wire client cannot use this listener (%s): groups described by the client",
                    exc,
                )
                self._wire = False
            except wire.WireUnavailable as exc:  # no broker answered now: asked again next time
                log.info("GROUPS no bootstrap broker answered the wire client (%s)", exc)
                return True
        return self._wire

    def _describe_by_client(self, groups: list[str], topic: str) -> dict[str, GroupInfo]:
        """Describe ``groups`` with confluent-kafka (see :meth:`describe_groups`). It describes a KIP-1071
        streams group DEAD without members, even a STABLE one (the wire client describes it).

        A consumer-protocol group (KIP-848) between two assignments is ``ASSIGNING`` or ``RECONCILING``;
        confluent-kafka 2.16 reports both as UNKNOWN, so those states are read from ListGroups v5 (one
        request, only when a description says UNKNOWN).
        """
        futures = self.client.describe_consumer_groups(groups, request_timeout=self.timeout)
        infos = {
            g: _group_info(_result(f, self.timeout, f"describe group {g!r}"), topic)
            for g, f in futures.items()
        }
        unknown = [g for g, info in infos.items() if info.state == UNKNOWN_STATE]
        if unknown:
            infos.update(self._broker_states(infos, unknown))
        return infos

    def describe_streams_groups(self, groups: Iterable[str], topic: str) -> dict[str, StreamsDescription]:
        """Describe KIP-1071 streams groups (StreamsGroupDescribe, through the wire client: confluent-kafka
        has no call for it): each group's state, its members with their partitions of ``topic`` (the
        partitions of their active tasks whose subtopology reads it) and its topology (the topics its
        subtopologies read, the repartition topics, the changelogs), None when the broker has none for it.
        A group that is not a streams group is left out; empty when the broker cannot be asked (logged).
        """
        wanted = list(dict.fromkeys(groups))
        if not wanted or not self.wire_usable():
            return {}
        try:
            found = wire.describe_streams_groups(self.config, wanted, self.timeout)
        except wire.WireUnavailable as exc:
            log.info("GROUPS streams groups %s: topology not read (%s)", wanted, exc)
            return {}
        return {g: _streams_description(d, topic) for g, d in found.items()}

    def subscriptions(self, groups: Iterable[str]) -> dict[str, frozenset[str]]:
        """``{group: the topics its members subscribe}`` of the classic consumer-protocol groups of ``groups``
        that have members (DescribeGroups through the wire client: the subscription each member sent with
        its JoinGroup; confluent-kafka returns the assignments only). A group without members, of another
        type, or unreadable (logged) is left out."""
        wanted = list(dict.fromkeys(groups))
        if not wanted or not self.wire_usable():
            return {}
        try:
            found = wire.describe_classic_groups(self.config, wanted, self.timeout)
        except wire.WireUnavailable as exc:
            log.info("GROUPS subscriptions of %s not read (%s)", wanted, exc)
            return {}
        return {
            g: frozenset(t for m in d.members for t in m.topics)
            for g, d in found.items()
            if d.protocol_type == "consumer" and any(m.topics for m in d.members)
        }

    def _broker_states(self, infos: dict[str, GroupInfo], groups: list[str]) -> dict[str, GroupInfo]:
        """``infos`` of ``groups`` with the state ListGroups v5 names (unchanged where it cannot be read)."""
        brokers = [(b.host, b.port) for b in self.metadata().brokers.values()]
        try:
            states = {g.group_id: g.state for g in wire.list_groups(self.config, brokers, self.timeout)}
        except wire.WireUnavailable as exc:
            log.info("GROUPS states %s stay UNKNOWN (ListGroups v5 not read: %s)", groups, exc)
            return {}
        return {g: replace(infos[g], state=state_name(states[g])) for g in groups if states.get(g)}

    def share_groups_on_topic(self, topic: str, types: Mapping[str, str]) -> dict[str, str] | None:
        """Return ``{share group: its share.auto.offset.reset}`` of the share groups that read ``topic``
        (DescribeShareGroupOffsets: the group keeps a start offset on some partition of it); None when the
        broker cannot be asked (then which share groups read the topic is unknown).

        :param types: ``{group: TYPE}`` of every listed group (:meth:`group_types`).
        """
        readers = []
        for group in sorted(g for g, t in types.items() if t == SHARE):
            try:
                if topic in wire.share_group_offsets(self.config, group, self.timeout):
                    readers.append(group)
            except wire.WireUnavailable as exc:
                log.info("GROUPS share group %s: topics it reads unknown (%s)", group, exc)
                return None
        return self.share_offset_resets(readers)

    def share_offset_resets(self, groups: list[str]) -> dict[str, str]:
        """Return ``{group: share.auto.offset.reset}`` as the broker applies it (the group's own config,
        else the broker default ``latest``)."""
        if not groups:
            return {}
        resources = [ConfigResource(ConfigResource.Type.GROUP, g) for g in groups]
        futures = self.client.describe_configs(resources, request_timeout=self.timeout)
        out = {}
        for resource, future in futures.items():
            entries = _result(future, self.timeout, f"describe configs of group {resource.name!r}")
            entry = entries.get(SHARE_RESET)
            out[resource.name] = str(entry.value) if entry is not None and entry.value else "latest"
        return out

    def seed_offsets(self, group: str, topic: str, offsets: dict[int, int]) -> None:
        """Commit ``offsets`` for ``group`` on ``topic``; the broker accepts them only while the group is EMPTY.

        :raises SeedError: naming each partition the broker refused.
        """
        self.seed_offsets_many(topic, {group: offsets})

    def seed_offsets_many(self, topic: str, offsets: Mapping[str, Mapping[int, int]]) -> None:
        """Commit ``{group: {partition: offset}}`` on ``topic``, each group through a consumer of it that never
        joins: an OffsetCommit with generation -1 (the request ``AdminClient.alter_consumer_group_offsets``
        sends; the broker accepts it only while the group is EMPTY), not through the AdminClient: librdkafka
        2.16 aborts the process in ``alter_consumer_group_offsets`` when a group's coordinator dies (upstream
        issue 4605: 31 aborts in 6,016 calls with the coordinator SIGKILLed every 40 s, 0 in 7,357 commits
        through a consumer; ``docs/measurements/issue41/admin-aborts.json``). :data:`COMMITTED_READERS`
        groups at once; a group's requests of :data:`OFFSETS_CHUNK` partitions all in flight together; a
        coordinator loading or moving is asked again until the request timeout.

        :raises SeedError: naming each group and partition the broker refused (the others are committed).
        :raises BrokerUnavailableError: a commit was not answered within the request timeout.
        """
        wanted = {g: dict(o) for g, o in offsets.items() if o}
        if not wanted:
            return
        refused: dict[str, dict[int, str]] = {}
        with ThreadPoolExecutor(min(COMMITTED_READERS, len(wanted)), "kstate-seed") as pool:
            seeds = {pool.submit(self._seed_group, g, topic, o): g for g, o in wanted.items()}
            for done in as_completed(seeds):
                errors = done.result()
                if errors:
                    refused[seeds[done]] = errors
        if refused:
            raise SeedError(f"on {topic!r} the broker refused offsets: {_describe_refused(refused)}")

    def _seed_group(self, group: str, topic: str, offsets: Mapping[int, int]) -> dict[int, str]:
        """Commit one group's ``offsets`` (asynchronous commits, answered through ``poll``); return
        ``{partition: error}`` of those the broker refused."""
        answers: SimpleQueue[tuple[Any, list[Any]]] = SimpleQueue()
        seeder = self._reader(group, on_commit=lambda err, parts: answers.put((err, list(parts or []))))
        try:
            remaining = dict(offsets)
            deadline = time.monotonic() + self.timeout
            while True:
                chunks = list(_chunks(sorted(remaining), OFFSETS_CHUNK))
                for chunk in chunks:
                    seeder.commit(
                        offsets=[TopicPartition(topic, p, remaining[p]) for p in chunk], asynchronous=True
                    )
                moving, refused = _sorted_answers(
                    _commit_answers(seeder, answers, len(chunks), deadline, group)
                )
                if not moving or time.monotonic() >= deadline:
                    return {**refused, **{p: e.str() for p, e in moving.items()}}
                # A coordinator still loading (a new __consumer_offsets partition) or just moved: ask it again.
                remaining = {p: offsets[p] for p in moving}
                time.sleep(0.2)
        finally:
            seeder.close()


def _sorted_answers(results: list[tuple[Any, list[Any]]]) -> tuple[dict[int, Any], dict[int, str]]:
    """Split commit answers into ``({partition: error}`` to ask again (:func:`_asked_again`),
    ``{partition: error text}`` refused``)``; a request-level error counts for each of its partitions."""
    moving: dict[int, Any] = {}
    refused: dict[int, str] = {}
    for err, parts in results:
        failed = {tp.partition: tp.error for tp in parts if tp.error is not None}
        if err is not None and not failed:
            failed = {tp.partition: err for tp in parts} or {-1: err}
        if failed and -1 not in failed and _asked_again(failed.values()):
            moving.update(failed)
        else:
            refused.update({p: e.str() for p, e in failed.items()})
    return moving, refused


def _asked_again(errors: Iterable[Any]) -> bool:
    """Whether a commit answered only with ``errors`` is sent again: its coordinator loading or moving, or no
    answer (the coordinator died with the request in flight: the consumer finds the next one)."""
    return all(getattr(e, "name", lambda: "")() in (*COORDINATOR_MOVING, *UNREACHABLE) for e in errors)


def _commit_answers(
    seeder: Any, answers: SimpleQueue[tuple[Any, list[Any]]], count: int, deadline: float, group: str
) -> list[tuple[Any, list[Any]]]:
    """The answers of ``count`` asynchronous commits, served by ``seeder.poll`` until ``deadline``.

    :raises BrokerUnavailableError: not all answered in time.
    """
    out: list[tuple[Any, list[Any]]] = []
    while len(out) < count:
        try:
            out.append(answers.get_nowait())
            continue
        except Empty:
            pass
        left = deadline - time.monotonic()
        if left <= 0:
            raise BrokerUnavailableError(
                f"commit offsets of group {group!r}: {count - len(out)} of {count} requests not answered in time"
            )
        seeder.poll(min(0.05, left))
    return out


class _OffsetsAttempt:
    """What one ListOffsets attempt got, and when its wait ends (:meth:`ClusterAdmin._list_offsets_once`).

    :param ends: ``time.monotonic()`` at which the attempt's bound passes.
    :param leaders: ``{partition: leader}`` the attempt's requests went to (None: unknown, the first attempt).
    :param leaders_now: reads the topic's leaders again (a metadata read).
    """

    def __init__(
        self, ends: float, leaders: dict[int, int] | None, leaders_now: Callable[[], dict[int, int]]
    ) -> None:
        self.ends, self.leaders, self.leaders_now = ends, leaders, leaders_now
        #: The partitions answered (an offset, or a leader error), once the wait ended.
        self.answered: set[int] = set()
        #: Why partitions were missed, for the log and the error.
        self.cause = "no answer"
        self._look = time.monotonic() + LEADER_LOOK_S

    def stop(self) -> bool:
        """Whether to stop waiting: the bound passed, or (leaders known) a partition's leader moved."""
        now = time.monotonic()
        if now >= self.ends:
            return True
        if self.leaders is None or now < self._look:
            return False
        self._look = now + LEADER_LOOK_S
        current = self.leaders_now()
        moved = sorted(
            p for p, leader in self.leaders.items() if current.get(p, -1) >= 0 and current[p] != leader
        )
        if moved:
            self.cause = f"the leader of partition {moved[0]} moved to broker {current[moved[0]]}"
        return bool(moved)


def _leaders(cluster: Any, topic: str) -> dict[int, int]:
    """``{partition: leader}`` of ``topic`` in a metadata answer (-1: no leader; empty: topic not named)."""
    meta = cluster.topics.get(topic)
    return {p: int(m.leader) for p, m in (meta.partitions if meta is not None else {}).items()}


def _error_name(exc: KafkaException) -> str:
    """The name of the ``KafkaError`` a ``KafkaException`` carries (empty without one)."""
    return exc.args[0].name() if exc.args and hasattr(exc.args[0], "name") else ""


def _chunks(items: list[int], size: int) -> Iterator[list[int]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _futures(answer: Any) -> list[Any]:
    return list(answer.values()) if isinstance(answer, dict) else [answer]


def _describe_refused(refused: dict[str, dict[int, str]], cap: int = 10) -> str:
    parts = []
    for group, errors in list(refused.items())[:cap]:
        sample = dict(list(errors.items())[:cap])
        more = f" and {len(errors) - cap} more partitions" if len(errors) > cap else ""
        parts.append(f"group {group!r}: {sample}{more}")
    more_groups = f"; and {len(refused) - cap} more groups" if len(refused) > cap else ""
    return "; ".join(parts) + more_groups


#: librdkafka's errors for a request that got no answer (the broker went away, or never answered).
UNREACHABLE = ("_TRANSPORT", "_TIMED_OUT", "_ALL_BROKERS_DOWN")


def _result(future: Any, timeout: float, what: str) -> Any:
    try:
        return future.result(timeout=timeout)
    except KafkaException as exc:
        err: Any = exc.args[0] if exc.args else exc
        if getattr(err, "name", lambda: "")() in UNREACHABLE:
            raise BrokerUnavailableError(f"{what}: cluster unreachable ({err.str()})") from exc
        raise
    except TimeoutError as exc:
        raise BrokerUnavailableError(f"{what}: no answer within {timeout}s") from exc


#: Errors a retry cannot fix. librdkafka does not mark the errors of an admin result retriable (it leaves
#: COORDINATOR_LOAD_IN_PROGRESS unmarked too), so the others count as passing.
FINAL_ERRORS = frozenset(
    {
        "GROUP_AUTHORIZATION_FAILED",
        "TOPIC_AUTHORIZATION_FAILED",
        "CLUSTER_AUTHORIZATION_FAILED",
        "UNSUPPORTED_VERSION",
        "INVALID_REQUEST",
        "INVALID_GROUP_ID",
    }
)


def _retriable(err: Any) -> bool:
    """Whether a retry may help with ``err`` (a ``KafkaError``, or an exception carrying one)."""
    err = err.args[0] if isinstance(err, KafkaException) and err.args else err
    return getattr(err, "name", lambda: "")() not in FINAL_ERRORS


#: The errors of a group coordinator that is loading its partition or has just moved: asked again.
COORDINATOR_MOVING = frozenset(
    {"COORDINATOR_LOAD_IN_PROGRESS", "NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE"}
)


def _coordinator_moving(errors: Iterable[Any]) -> bool:
    """Whether every one of ``errors`` (``KafkaError`` values) says the group's coordinator is loading or moving."""
    return all(getattr(e, "name", lambda: "")() in COORDINATOR_MOVING for e in errors)


def _list_errors(errors: list[Any]) -> KafkaRequestError:
    """The error of a ListGroups some broker did not answer: never a partial list of groups."""
    kinds = sorted({str(e) for e in errors})
    cls = KafkaRequestError if all(_retriable(e) for e in errors) else KafkaRequestRefusedError
    return cls(
        f"list groups: {len(errors)} broker(s) answered with an error ({'; '.join(kinds)[:300]}): the groups "
        f"they coordinate cannot be seen, and a group missing from the plan would not be protected"
    )


def _raise_offset_errors(group: str, where: str, partitions: list[Any]) -> None:
    """Refuse committed offsets that came back with a partition-level error: reading such a partition as
    "no offset" would call a group with offsets unknown, or seed over an offset it has."""
    failed = [tp for tp in partitions if getattr(tp, "error", None) is not None]
    if not failed:
        return
    first = failed[0].error
    cls = KafkaRequestError if all(_retriable(tp.error) for tp in failed) else KafkaRequestRefusedError
    raise cls(
        f"committed offsets of group {group!r} on {where}: {len(failed)} partition(s) answered with an error "
        f"(partition {failed[0].partition}: {first}); not read as 'no offset'"
    )


def _group_info(desc: Any, topic: str) -> GroupInfo:
    members = tuple(
        Member(
            member_id=m.member_id,
            client_id=m.client_id,
            host=m.host,
            partitions=tuple(
                sorted(tp.partition for tp in m.assignment.topic_partitions if tp.topic == topic)
            ),
        )
        for m in desc.members
    )
    return GroupInfo(
        group=desc.group_id,
        state=desc.state.name,
        type=getattr(getattr(desc, "type", None), "name", "CLASSIC"),
        protocol_type="" if desc.is_simple_consumer_group else "consumer",
        members=members,
        assignor=str(getattr(desc, "partition_assignor", "") or ""),
    )


def _described_info(group: wire.GroupDescription | wire.StreamsGroup, topic: str) -> GroupInfo:
    """The wire client's description of a group as :func:`_group_info` reads confluent-kafka's: members with
    their partitions of ``topic``, the protocol type ``consumer`` for any group with a protocol (empty: a
    group that only commits offsets), the assignor."""
    if isinstance(group, wire.StreamsGroup):
        return _streams_description(group, topic).info
    members = tuple(
        Member(
            member_id=m.member_id,
            client_id=m.client_id,
            host=m.host,
            partitions=tuple(sorted({p for t, parts in m.assignment if t == topic for p in parts})),
        )
        for m in group.members
    )
    return GroupInfo(
        group=group.group_id,
        state=state_name(group.state) if group.state else UNKNOWN_STATE,
        type=group.type.upper(),
        protocol_type="consumer" if group.protocol_type else "",
        members=members,
        assignor=group.protocol,
    )


def _streams_description(group: wire.StreamsGroup, topic: str) -> StreamsDescription:
    """A streams group as the plan reads it: members with their partitions of ``topic``, and the topology."""
    reading = {s.subtopology_id for s in group.subtopologies or () if topic in _sources_of(s)}
    members = tuple(
        Member(
            member_id=m.member_id,
            client_id=m.client_id,
            host=m.host,
            partitions=tuple(sorted({p for sub, parts in m.active if sub in reading for p in parts})),
        )
        for m in group.members
    )
    info = GroupInfo(
        group=group.group_id,
        state=state_name(group.state) if group.state else UNKNOWN_STATE,
        type=STREAMS,
        protocol_type="streams",
        members=members,
    )
    if group.subtopologies is None:
        return StreamsDescription(info, None)
    subs = group.subtopologies
    repartitions = sorted(
        {t for s in subs for t in (*s.repartition_source_topics, *s.repartition_sink_topics)}
    )
    topology = StreamsTopology(
        sources=sorted({t for s in subs for t in s.source_topics} - set(repartitions)),
        repartitions=repartitions,
        changelogs=sorted({t for s in subs for t in s.changelog_topics}),
    )
    return StreamsDescription(info, topology)


def _sources_of(subtopology: wire.Subtopology) -> set[str]:
    return {*subtopology.source_topics, *subtopology.repartition_source_topics}


def _metadata_retriable(error: KafkaException | None) -> bool:
    """Whether a failed metadata attempt may be answered by another broker (see :data:`METADATA_RETRIABLE`)."""
    err = error.args[0] if error is not None and error.args else None
    return isinstance(err, KafkaError) and err.code() in METADATA_RETRIABLE


def _error_text(error: KafkaException | None) -> str:
    """The librdkafka error's own text (``Local: Timed out``), else the exception's."""
    if error is None:
        return "no attempt"
    return error.args[0].str() if error.args and isinstance(error.args[0], KafkaError) else str(error)


def _servers(config: Mapping[str, Any]) -> list[str]:
    """The configured ``bootstrap.servers``, one address each."""
    return [s.strip() for s in str(config.get("bootstrap.servers") or "").split(",") if s.strip()]


def admin_settings(config: Mapping[str, Any]) -> dict[str, Any]:
    """The configuration of one of the provider's admin clients: the connection's, with
    :data:`ADMIN_SETTINGS` where it sets none (the connection's own value wins) and :data:`ADMIN_FORCED`."""
    return {**ADMIN_SETTINGS, **config, **ADMIN_FORCED}


def _existing(cluster: Any, topic: str) -> Any:
    """The metadata of ``topic`` in the answer ``cluster``.

    :raises TopicNotFoundError: the answer names no such topic with partitions (UNKNOWN_TOPIC_OR_PART).
    """
    meta = cluster.topics.get(topic)
    if meta is None or meta.error is not None or not meta.partitions:
        raise TopicNotFoundError(f"topic {topic!r} does not exist on the cluster")
    return meta
