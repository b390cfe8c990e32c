"""Changelog reading for the Spark applications: offsets, per-partition reads, the fold.

Every read is a plain confluent-kafka consumer with ``assign()`` on one partition's offset range: no
consumer group is joined and nothing is committed, ``isolation.level=read_committed`` (aborted transactional
records are never returned), ``enable.partition.eof=true``. With read_committed the last stable offset bounds
the reads, and aborted records plus transaction control markers make offsets non-contiguous, so a read stops
on the first record at or past the end offset, or on partition EOF, and fails (never truncates silently)
when neither comes within the timeout.

No Spark and no Airflow imports here: the functions run inside Spark's Python workers and in tests.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_kstate.errors import (
    BrokerDeviationError,
    ChangelogReadError,
    NotCompactedChangelogError,
)
from airflow_provider_kstate.store.contract import NOT_COMPACTED, OFFSET_BOUNDS, live_config

DEFAULT_TIMEOUT = 120.0
#: The first words of an :class:`OffsetBoundError` (the operators turn such a failed app into a refusal).
BATCH = 10_000
_POLL = 0.2  # consume() waits for a full batch or this long: short, so a partition's tail costs little


class KafkaReadError(ChangelogReadError):
    """The changelog could not be read: broker unreachable, topic missing, read timed out."""


class OffsetBoundError(BrokerDeviationError):
    """The end offsets that bound a read disagree with what a read reaches: the broker's ListOffsets and
    its fetches tell two stories (issue 17: Tansu's "latest" is the last batch's base offset + 1, its last
    stable offset is 0 while a transaction is open), so a fold bounded by them would be silently short.

    The message starts with :data:`OFFSET_BOUNDS` and names each partition, its bound and what was reached.
    """


class NotCompactedError(NotCompactedChangelogError):
    """The changelog is not compacted and retention has moved its log start: the state of the keys whose
    only records were deleted is gone, so a rebuild or check from it would be silently incomplete."""


# --------------------------------------------------------------------------------------------- config


def consumer_config(kafka_config: Mapping[str, Any]) -> dict[str, Any]:
    """Return the reader's consumer config: the user's settings plus the fixed read semantics.

    :param kafka_config: librdkafka settings (bootstrap, SASL/SSL); never logged.
    """
    conf = {
        "group.id": "kstate-spark-reader",  # required by the client; never joined (assign only)
        "fetch.max.bytes": 64 * 1024 * 1024,
        "max.partition.fetch.bytes": 16 * 1024 * 1024,
        "queued.max.messages.kbytes": 256 * 1024,
        **live_config(kafka_config),
    }
    conf.update(
        {
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        }
    )
    return conf


def admin_config(kafka_config: Mapping[str, Any]) -> dict[str, Any]:
    """Return the settings for an AdminClient: the user's connection settings without consumer-only keys.

    :param kafka_config: librdkafka settings.
    """
    consumer_only = {
        "group.id",
        "isolation.level",
        "enable.partition.eof",
        "auto.offset.reset",
        "enable.auto.commit",
    }
    settings = {
        "log_level": 3,
        **{k: v for k, v in live_config(kafka_config).items() if k not in consumer_only},
    }
    settings["allow.auto.create.topics"] = False  # a metadata lookup must never create the topic it checks
    return settings


def describe_bootstrap(kafka_config: Mapping[str, Any]) -> str:
    """Return only the bootstrap address of a config, safe to print (the rest may hold secrets).

    :param kafka_config: librdkafka settings.
    """
    return str(kafka_config.get("bootstrap.servers", "<no bootstrap.servers>"))


# -------------------------------------------------------------------------------------------- metadata


def topic_partition_count(kafka_config: Mapping[str, Any], topic: str, timeout: float = 15.0) -> int:
    """Return the topic's partition count.

    :param kafka_config: librdkafka settings.
    :param topic: the topic.
    :param timeout: seconds to wait for the cluster.
    :raises KafkaReadError: when the cluster cannot be reached or the topic does not exist.
    """
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(admin_config(kafka_config))
    try:
        meta = admin.list_topics(topic=topic, timeout=timeout)
    except KafkaException as exc:
        raise KafkaReadError(
            f"cannot reach Kafka at {describe_bootstrap(kafka_config)} within {timeout:g}s: {exc.args[0]}"
        ) from exc
    info = meta.topics.get(topic)
    if info is None or info.error is not None or not info.partitions:
        reason = info.error.str() if info is not None and info.error is not None else "no partitions"
        raise KafkaReadError(
            f"topic {topic!r} does not exist on {describe_bootstrap(kafka_config)} ({reason})"
        )
    return len(info.partitions)


def topic_id(kafka_config: Mapping[str, Any], topic: str, timeout: float = 15.0) -> str:
    """Return the topic's id (KIP-516), ``""`` when it cannot be read (see
    :func:`~airflow_provider_kstate.store.topic_id.read_topic_ids`).

    :param kafka_config: librdkafka settings.
    :param topic: the topic.
    :param timeout: seconds to wait.
    """
    from confluent_kafka.admin import AdminClient

    from airflow_provider_kstate.store.topic_id import read_topic_ids

    return read_topic_ids(AdminClient(admin_config(kafka_config)), [topic], timeout)[topic]


def cleanup_policy(kafka_config: Mapping[str, Any], topic: str, timeout: float = 15.0) -> str | None:
    """Return the topic's ``cleanup.policy``, or None when it cannot be described (e.g. no ACL).

    :param kafka_config: librdkafka settings.
    :param topic: the topic.
    :param timeout: seconds to wait.
    """
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    admin = AdminClient(admin_config(kafka_config))
    try:
        futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)], request_timeout=timeout)
        configs = next(iter(futures.values())).result(timeout=timeout)
    except Exception:  # noqa: BLE001 - the caller warns that the policy could not be checked
        return None
    entry = configs.get("cleanup.policy")
    return None if entry is None else str(entry.value)


def compaction_warnings(kafka_config: Mapping[str, Any], topic: str) -> list[str]:
    """Return warnings when the changelog is not (or cannot be seen to be) ``cleanup.policy=compact``.

    :param kafka_config: librdkafka settings.
    :param topic: the changelog topic.
    """
    policy = cleanup_policy(kafka_config, topic)
    if policy is None:
        return [
            f"could not read cleanup.policy of {topic!r} (DescribeConfigs denied?): compaction not verified"
        ]
    if "compact" not in [p.strip() for p in policy.split(",")]:
        return [
            f"changelog topic {topic!r} has cleanup.policy={policy}, not compact: "
            "retention may delete keys' only records, so the snapshot may lack state"
        ]
    return []


def compaction_guard(kafka_config: Mapping[str, Any], topic: str, allow: bool = False) -> list[str]:
    """Refuse a changelog that is not compacted once retention has moved a log start past 0; return the
    warnings to report otherwise (see :func:`compaction_warnings`).

    A non-compacted changelog still at log start 0 everywhere has lost nothing yet: warned, allowed.

    :param kafka_config: librdkafka settings.
    :param topic: the changelog topic.
    :param allow: the operator acknowledged the risk (``--allow-non-compacted``): warn, do not refuse.
    :raises NotCompactedError: when refused.
    """
    warnings = compaction_warnings(kafka_config, topic)
    policy = cleanup_policy(kafka_config, topic) if warnings else None
    if policy is None or "compact" in [p.strip() for p in policy.split(",")]:
        return warnings
    count = topic_partition_count(kafka_config, topic)
    moved = {p: low for p, (low, _) in list_offsets(kafka_config, topic, list(range(count))).items() if low}
    if not moved:
        return warnings
    shown = dict(sorted(moved.items())[:10])
    where = f"log start past 0 on {len(moved)} partition(s), e.g. {shown}"
    if not allow:
        raise NotCompactedError(
            f"{NOT_COMPACTED}: topic {topic!r} has cleanup.policy={policy} and retention moved its {where}: "
            "keys whose only records were deleted are missing from it, so a snapshot from it is incomplete. "
            "Use a compacted changelog (cleanup.policy=compact), or acknowledge the risk with "
            "allow_non_compacted_changelog=True (--allow-non-compacted)"
        )
    return [*warnings, f"RISK ACCEPTED (--allow-non-compacted): topic {topic!r} is not compacted, {where}"]


def list_offsets(
    kafka_config: Mapping[str, Any], topic: str, partitions: list[int], timeout: float = 30.0
) -> dict[int, tuple[int, int]]:
    """Return ``{partition: (log start offset, last stable offset)}`` in one round of ListOffsets.

    The end is read with ``READ_COMMITTED``: the last stable offset, below which every transaction is
    decided, which is where a read_committed reader stops and where the changelog resumes.

    :param kafka_config: librdkafka settings.
    :param topic: the topic.
    :param partitions: the partitions to query.
    :param timeout: seconds to wait.
    :raises KafkaReadError: when the offsets cannot be listed.
    """
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    admin = AdminClient(admin_config(kafka_config))
    result: dict[int, list[int]] = {p: [0, 0] for p in partitions}
    try:
        pending = [  # both rounds in flight at once: one round trip
            (slot, admin.list_offsets({TopicPartition(topic, p): spec for p in partitions}, **kwargs))
            for slot, spec in ((0, OffsetSpec.earliest()), (1, OffsetSpec.latest()))
            for kwargs in [{"isolation_level": IsolationLevel.READ_COMMITTED, "request_timeout": timeout}]
        ]
        for slot, futures in pending:
            for tp, future in futures.items():
                result[tp.partition][slot] = future.result(timeout=timeout).offset
    except Exception as exc:  # noqa: BLE001 - KafkaException or a timeout: one clear message
        raise KafkaReadError(f"cannot list offsets of {topic!r}: {exc}") from exc
    return {p: (lo, hi) for p, (lo, hi) in result.items()}


def fetch_ends(
    kafka_config: Mapping[str, Any], topic: str, bounds: Mapping[int, tuple[int, int]], timeout: float = 30.0
) -> dict[int, int]:
    """Return ``{partition: the offset where a read_committed fetch hits partition EOF}``, reading each
    partition only from just below its bound (a tail of one record, plus whatever came since).

    :param kafka_config: librdkafka settings.
    :param topic: the topic.
    :param bounds: ``{partition: (log start, end)}`` as :func:`list_offsets` returned them.
    :param timeout: seconds to wait for every partition's EOF.
    :raises KafkaReadError: on a consumer error, or when a partition shows no end within ``timeout``.
    """
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    if not bounds:
        return {}
    consumer = Consumer(consumer_config(kafka_config))
    ends: dict[int, int] = {}
    try:
        consumer.assign([TopicPartition(topic, p, max(lo, hi - 1)) for p, (lo, hi) in bounds.items()])
        deadline = time.monotonic() + timeout
        while len(ends) < len(bounds):
            if time.monotonic() > deadline:
                missing = sorted(set(bounds) - set(ends))[:10]
                raise KafkaReadError(f"{topic}: no partition end within {timeout:g}s on partitions {missing}")
            for m in consumer.consume(1000, timeout=_POLL):
                err = m.error()
                if err is None:
                    continue
                if err.code() != KafkaError._PARTITION_EOF:
                    raise KafkaReadError(f"{topic}[{m.partition()}]: {err.str()}")
                ends.setdefault(int(m.partition() or 0), int(m.offset() or 0))
    finally:
        consumer.close()
    return ends


def bound_problems(
    kafka_config: Mapping[str, Any], topic: str, bounds: Mapping[int, tuple[int, int]], timeout: float = 30.0
) -> tuple[dict[int, int], dict[int, str], dict[int, str]]:
    """Cross-check the end offsets that bound a read (ListOffsets, read_committed) with the end a fetch
    reaches.

    A fetch that ends *short* of its bound means the broker announced offsets nobody can read. A fetch
    that reaches *past* it is new writes, unless ListOffsets, asked again afterwards, still lags behind
    what the fetch already returned: then the broker's end offsets *lag* its data (a read bounded by them
    would stop early and report a stale snapshot as complete).

    :param kafka_config: librdkafka settings.
    :param topic: the topic.
    :param bounds: ``{partition: (log start, end)}`` from :func:`list_offsets`.
    :param timeout: seconds to wait for each round.
    :returns: ``(fetch ends, short, lagging)``: the last two map each disagreeing partition to a text
        naming its bound and what the fetch reached.
    """
    ends = fetch_ends(kafka_config, topic, bounds, timeout)
    short = {
        p: f"bound {bounds[p][1]}, a fetch ends at {e} (short of it)"
        for p, e in ends.items()
        if e < bounds[p][1]
    }
    lagging: dict[int, str] = {}
    beyond = sorted(p for p, e in ends.items() if e > bounds[p][1])
    if beyond:
        again = list_offsets(kafka_config, topic, beyond, timeout)
        for p in beyond:
            if again[p][1] < ends[p]:
                lagging[p] = (
                    f"bound {bounds[p][1]}, a fetch reached {ends[p]} (past it) and ListOffsets still says "
                    f"{again[p][1]} after that fetch"
                )
    return ends, short, lagging


def _describe(wrong: Mapping[int, str]) -> str:
    shown = "; ".join(f"partition {p}: {why}" for p, why in sorted(wrong.items())[:10])
    return shown + (f" (and {len(wrong) - 10} more)" if len(wrong) > 10 else "")


#: The accepted deviations (``--allow-broker-deviation``) that let a read be bounded by where its fetch ends.
FETCH_END_DEVIATIONS = ("latest_offset", "last_stable_offset")


def add_deviation_argument(parser: Any) -> None:
    """Add ``--allow-broker-deviation`` (comma-separated promise names) to an application's parser."""
    parser.add_argument(
        "--allow-broker-deviation",
        default="",
        help="accepted broker deviations (latest_offset, last_stable_offset): bound a read whose ListOffsets "
        "lags its fetch by where the fetch ends (logged as RISK ACCEPTED)",
    )


def accepts_fetch_ends(args: Any) -> bool:
    """Whether the parsed ``--allow-broker-deviation`` names a deviation of :data:`FETCH_END_DEVIATIONS`."""
    named = {n.strip() for n in str(getattr(args, "allow_broker_deviation", "") or "").split(",")}
    return bool(named & set(FETCH_END_DEVIATIONS))


def checked_offsets(
    kafka_config: Mapping[str, Any],
    topic: str,
    partitions: list[int],
    timeout: float = 30.0,
    accept_fetch_ends: bool = False,
    warnings: list[str] | None = None,
) -> dict[int, tuple[int, int]]:
    """Return ``{partition: (log start, end)}`` for every read of the Spark applications: the
    :func:`list_offsets` bounds, refused when a fetch disagrees with them (:func:`bound_problems`).

    :param kafka_config: librdkafka settings.
    :param topic: the topic.
    :param partitions: the partitions to read.
    :param timeout: seconds to wait for each round.
    :param accept_fetch_ends: the user accepted a broker whose end offsets lag its data
        (``--allow-broker-deviation latest_offset,last_stable_offset``): such a partition is bounded by
        where its fetch ended instead, with a ``RISK ACCEPTED`` line in ``warnings``. A fetch ending short
        of its bound is always refused.
    :param warnings: where to append that line.
    :raises OffsetBoundError: naming each disagreeing partition, its bound and what the fetch reached.
    """
    bounds = list_offsets(kafka_config, topic, partitions, timeout)
    ends, short, lagging = bound_problems(kafka_config, topic, bounds, timeout)
    wrong = {**lagging, **short} if not accept_fetch_ends else short
    if wrong:
        raise OffsetBoundError(
            f"{OFFSET_BOUNDS}: topic {topic!r} on {describe_bootstrap(kafka_config)}: {_describe(wrong)}. "
            "The broker's end offsets (ListOffsets, read_committed) do not match what its fetches return, so "
            "a read bounded by them would be silently short or long. Nothing was read or written"
        )
    if lagging:
        if warnings is not None:
            warnings.append(
                f"RISK ACCEPTED (--allow-broker-deviation): {topic!r}: the broker's end offsets lag its data "
                f"({_describe(lagging)}): those partitions are read up to where their fetch ended"
            )
        bounds = {p: (lo, ends[p] if p in lagging else hi) for p, (lo, hi) in bounds.items()}
    return bounds


# ---------------------------------------------------------------------------------------------- reads


@dataclass
class FoldResult:
    """The fold of one partition: ``latest`` maps each key to the message of its latest record.

    The messages are kept as they came (a tombstone's ``value()`` is None): extracting key, value and
    offset of every record would cost more than the read itself, so only the final ones are extracted,
    by :meth:`columns`.
    """

    latest: dict[bytes, Any]
    records: int = 0
    null_keys: int = 0

    def columns(self) -> tuple[list[bytes], list[bytes | None], list[int]]:
        """Return ``(keys, values, offsets)`` of the final records, in the same order."""
        messages = self.latest.values()
        return list(self.latest), [m.value() for m in messages], [m.offset() for m in messages]

    @property
    def state(self) -> dict[bytes, tuple[int, bytes | None]]:
        """Return ``{key: (offset, value or None for a tombstone)}`` (convenient for tests; slower)."""
        return {k: (m.offset(), m.value()) for k, m in self.latest.items()}


def read_batches(
    kafka_config: Mapping[str, Any],
    topic: str,
    partition: int,
    start: int,
    end: int,
    timeout: float = DEFAULT_TIMEOUT,
) -> Iterator[list[Any]]:
    """Yield raw ``consume()`` batches of ``partition`` from ``start`` until ``end`` or partition EOF.

    Batches are passed on untouched (no per-record work here): the last one may hold records at or past
    ``end``, and event messages (``key() is None`` and ``error()`` set: partition EOF or a consumer error)
    may appear; :func:`fold_partition` drops the former and raises on errors other than EOF.

    :param kafka_config: librdkafka settings.
    :param topic: the topic.
    :param partition: the partition.
    :param start: the first offset to read.
    :param end: the exclusive end offset captured at job start.
    :param timeout: seconds without any message after which the read fails (never a silent truncation).
    :raises KafkaReadError: when the timeout passes before the end.
    """
    if start >= end:
        return
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(consumer_config(kafka_config))
    try:
        consumer.assign([TopicPartition(topic, partition, start)])
        deadline = time.monotonic() + timeout
        following = start
        while True:
            # never ask for more than the range still holds: consume() waits for a full batch, so a
            # too-large request at a partition's tail would idle for the whole poll timeout
            msgs = consumer.consume(max(1, min(BATCH, end - following)), timeout=_POLL)
            if not msgs:
                if time.monotonic() > deadline:
                    raise KafkaReadError(
                        f"{topic}[{partition}]: no end of data within {timeout:g}s (wanted offsets {start}..{end})"
                    )
                continue
            last = msgs[-1]
            offset = last.offset() or 0
            _check_short(last, topic, partition, end)
            yield msgs
            if last.error() is not None or offset >= end - 1:
                return  # the last offset before ``end`` (markers may follow it), or EOF at the LSO
            following = offset + 1
            deadline = time.monotonic() + timeout
    finally:
        consumer.close()


def _check_short(last: Any, topic: str, partition: int, end: int) -> None:
    """Raise :class:`OffsetBoundError` when a read hit partition EOF below its bound ``end``."""
    from confluent_kafka import KafkaError

    err = last.error()
    if err is not None and err.code() == KafkaError._PARTITION_EOF and (last.offset() or 0) < end:
        raise OffsetBoundError(
            f"{OFFSET_BOUNDS}: {topic}[{partition}]: the read ended at the partition's end {last.offset()}, "
            f"short of its bound {end}: the broker announced offsets its fetches do not return"
        )


def _event(msg: Any, null_keys: int) -> int:
    """Handle a message without a key: an EOF event (ignored), an error (raised) or a keyless record."""
    from confluent_kafka import KafkaError

    err = msg.error()
    if err is None:
        return null_keys + 1
    if err.code() == KafkaError._PARTITION_EOF:
        return null_keys
    raise KafkaReadError(f"{msg.topic()}[{msg.partition()}]: {err.str()}")


def _fold_slow(latest: dict[bytes, Any], msgs: list[Any], end: int) -> tuple[int, int]:
    """Fold one batch record by record: events, keyless records and records past ``end`` handled.

    :returns: ``(records, null_keys)`` of the batch.
    """
    records = null_keys = 0
    for m in msgs:
        key = m.key()
        if key is None:
            null_keys = _event(m, null_keys)
            continue
        if m.offset() >= end:
            break
        latest[key] = m
        records += 1
    return records, null_keys


def fold_partition(
    kafka_config: Mapping[str, Any],
    topic: str,
    partition: int,
    start: int,
    end: int,
    timeout: float = DEFAULT_TIMEOUT,
    on_batch: Callable[[int], None] | None = None,
) -> FoldResult:
    """Fold a partition's records in ``[start, end)`` to the latest record (value or tombstone) per key.

    A batch whose last message is a record before ``end`` takes the fast path (one dict store per record);
    a keyless record or an event inside it shows up as the key None and sends the batch through the
    record-by-record path, which gives the same result (later records win either way).

    :param kafka_config: librdkafka settings.
    :param topic: the topic.
    :param partition: the partition.
    :param start: the first offset.
    :param end: the exclusive end offset.
    :param timeout: see :func:`read_batches`.
    :param on_batch: called after each batch with the position read up to (the offset after the batch's
        last message), for progress reports; it must not block.
    :raises KafkaReadError: on a consumer error or a timeout.
    """
    latest: dict[Any, Any] = {}  # bytes keys; None only transiently, for a keyless record or an event
    fold = FoldResult(latest)
    for msgs in read_batches(kafka_config, topic, partition, start, end, timeout):
        last = msgs[-1]
        if on_batch is not None:
            on_batch((last.offset() or 0) + 1)
        if last.error() is None and last.key() is not None and last.offset() < end:
            for m in msgs:
                latest[m.key()] = m
            if None not in latest:
                fold.records += len(msgs)
                continue
            del latest[None]
        records, null_keys = _fold_slow(latest, msgs, end)
        fold.records += records
        fold.null_keys += null_keys
    return fold


def drain_count(kafka_config: Mapping[str, Any], topic: str, ranges: Mapping[int, tuple[int, int]]) -> int:
    """Read every range with one consumer doing nothing else and return the number of records in it (the
    limit): each partition up to its range's end, whatever is written after it (a live topic).

    :param kafka_config: librdkafka settings.
    :param topic: the topic.
    :param ranges: ``{partition: (start, end)}``.
    """
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(consumer_config(kafka_config))
    todo = {p for p, (s, e) in ranges.items() if s < e}
    consumer.assign([TopicPartition(topic, p, ranges[p][0]) for p in todo])
    most = sum(e - s for s, e in ranges.values() if s < e)  # records left, at most (markers take offsets)
    count = 0

    def done(partition: int) -> None:
        # a partition is read once its range's end is reached (a record at or past it, or the log's end):
        # records written after the range was taken are not counted, and never waited for
        todo.discard(partition)
        consumer.pause([TopicPartition(topic, partition)])

    try:
        while todo:
            # ask for no more than can still come (records plus one EOF event per partition), so the last
            # batch returns when it is complete instead of idling for the poll timeout
            for m in consumer.consume(max(1, min(BATCH, most - count + len(todo))), timeout=_POLL):
                partition = m.partition()
                if partition not in todo:
                    continue
                offset = m.offset()
                if m.error() is not None or offset is None or offset >= ranges[partition][1]:
                    done(partition)
                    continue
                count += 1
                if offset + 1 >= ranges[partition][1]:
                    done(partition)
    finally:
        consumer.close()
    return count
