"""The doctor's checks: the cheap ApiVersions check, and behavioural checks on a private probe topic.

Every behavioural check writes and reads only its own probe topic (``_kstate_doctor_<nonce>``, deleted after)
and its own never-used group ids, so it can run beside live traffic and beside another doctor run.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import ConfigResource, NewTopic, OffsetSpec

from airflow_provider_kstate.admin_client import AdminClient
from airflow_provider_kstate.doctor import promises as P
from airflow_provider_kstate.doctor import share, wire
from airflow_provider_kstate.doctor.verdict import CheckResult, Verdict

PROBE_PREFIX = "_kstate_doctor_"
#: Records of the latest-offset probe, produced as one batch.
BATCH = 10
#: Seconds a probe consumer may take to join: some brokers delay a new group's first assignment (~23 s seen).
JOIN_WAIT = 60.0
_ROLE_KEYS = ("group.id", "auto.offset.reset", "enable.auto.commit", "isolation.level", "transactional.id")


def api_checks(versions: dict[int, tuple[int, int]]) -> dict[str, CheckResult]:
    """Return the API promises judged from an ApiVersions answer ``{api_key: (min, max)}``."""

    def has(key: int, at_least: int = 0) -> bool:
        return key in versions and versions[key][1] >= at_least

    def result(ok: bool, missing: str) -> CheckResult:
        return CheckResult(True, "") if ok else CheckResult(False, f"missing from ApiVersions: {missing}")

    describe = has(wire.API_DESCRIBE_GROUPS) or has(wire.API_CONSUMER_GROUP_DESCRIBE)
    return {
        P.API_CREATE_PARTITIONS: result(has(wire.API_CREATE_PARTITIONS), "CreatePartitions (37)"),
        P.API_ALTER_GROUP_OFFSETS: result(
            has(wire.API_OFFSET_COMMIT) and has(wire.API_OFFSET_FETCH), "OffsetCommit (8) or OffsetFetch (9)"
        ),
        P.API_DESCRIBE_GROUPS: result(
            describe and has(wire.API_LIST_GROUPS),
            "ListGroups (16), or DescribeGroups (15)/ConsumerGroupDescribe (69)",
        ),
        P.API_LIST_OFFSETS: result(
            has(wire.API_LIST_OFFSETS, 2) and has(wire.API_FETCH, 4), "ListOffsets v2+ (2) or Fetch v4+ (1)"
        ),
    }


def cheap_checks(config: dict[str, Any], timeout: float = 10.0) -> dict[str, CheckResult]:
    """Return the API promises from the first bootstrap broker's ApiVersions (``ok`` None: not reachable),
    and the promises that do not apply to it (share groups it does not serve)."""
    try:
        versions = wire.api_versions(config, timeout)
    except wire.WireUnavailable as exc:
        return {p: CheckResult(None, f"ApiVersions not read: {exc}") for p in P.API_PROMISES}
    absent = share.applicability(versions)
    return {**api_checks(versions), **({P.SHARE_NEW_PARTITIONS: absent} if absent else {})}


class Probe:
    """Run the behavioural checks on a private topic of the cluster of ``config``.

    :param config: librdkafka settings of the cluster (bootstrap, security); never logged.
    :param timeout: seconds each wait may take.
    """

    def __init__(self, config: dict[str, Any], timeout: float = 20.0) -> None:
        self.config = {k: v for k, v in config.items() if k not in _ROLE_KEYS}
        self.timeout = timeout
        self.nonce = uuid.uuid4().hex[:10]
        self.topic = f"{PROBE_PREFIX}{self.nonce}"
        self.admin = AdminClient(self.config)

    def run(self) -> Verdict:
        """Create the probe topic, run every check, delete the topic; return the verdict."""
        results: dict[str, CheckResult] = {}
        with self._topic() as created:
            if created is not None:
                for promise in P.BEHAVIOUR_PROMISES:
                    results[promise] = CheckResult(None, f"probe topic not created: {created}")
                return Verdict(self.cluster_id(), time.time(), results)
            for promise, check in self._checks():
                results[promise] = _guarded(check)
            self._delete_groups()
        return Verdict(self.cluster_id(), time.time(), results)

    def _delete_groups(self) -> None:
        """Delete the probe's groups (best effort: a broker without DeleteGroups keeps them, named kstate-doctor-*)."""
        groups = [f"kstate-doctor-{kind}-{self.nonce}" for kind in ("reader", "live", "seed", "share")]
        try:
            for future in self.admin.delete_consumer_groups(groups, request_timeout=self.timeout).values():
                try:
                    future.result(timeout=self.timeout)
                except (KafkaException, TimeoutError):
                    pass  # never created (reader groups commit nothing), or not deletable here
        except (KafkaException, ValueError):
            pass

    def _checks(self) -> list[tuple[str, Callable[[], CheckResult]]]:
        return [
            (P.LATEST_OFFSET, self.check_latest_offset),
            (P.LOG_APPEND_TIME, self.check_log_append_time),
            (P.READ_COMMITTED, self.check_read_committed),
            (P.LAST_STABLE_OFFSET, self.check_last_stable_offset),
            (P.UNKNOWN_GROUP, self.check_unknown_group),
            (P.GROUP_MEMBERS, self.check_group_members),
            (P.OFFSET_READBACK, self.check_offset_readback),
            (P.CONFIG_DEFAULTS, self.check_config_defaults),
            (P.SHARE_NEW_PARTITIONS, self.check_share_new_partitions),
        ]

    def cluster_id(self) -> str:
        """Return the cluster id, or the bootstrap servers when the broker reports none."""
        return cluster_id(self.config, self.timeout)

    @contextmanager
    def _topic(self) -> Iterator[str | None]:
        new = NewTopic(self.topic, 1, -1, config={"message.timestamp.type": "LogAppendTime"})
        try:
            self.admin.create_topics([new], request_timeout=self.timeout)[self.topic].result(
                timeout=self.timeout
            )
        except (KafkaException, TimeoutError) as exc:
            yield str(exc)
            return
        _wait_for_topic(self.admin, self.topic, self.timeout)
        try:
            yield None
        finally:
            try:
                self.admin.delete_topics([self.topic], request_timeout=self.timeout)[self.topic].result(
                    timeout=self.timeout
                )
            except (KafkaException, TimeoutError):
                pass  # best effort: a probe topic left behind is harmless and named _kstate_doctor_*

    # -- clients ------------------------------------------------------------------------------------

    def _producer(self, **extra: Any) -> Producer:
        return Producer({**self.config, "linger.ms": 50, "acks": "all", **extra})

    def _consumer(self, **extra: Any) -> Consumer:
        return Consumer(
            {
                **self.config,
                "group.id": f"kstate-doctor-reader-{self.nonce}",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "enable.partition.eof": True,
                **extra,
            }
        )

    def _produce(self, producer: Producer, values: list[bytes], **kwargs: Any) -> list[Any]:
        delivered: list[Any] = []
        for value in values:
            producer.produce(
                self.topic, value=value, on_delivery=lambda err, msg: delivered.append((err, msg)), **kwargs
            )
        producer.flush(self.timeout)
        errors = [str(err) for err, _msg in delivered if err is not None]
        if errors or len(delivered) != len(values):
            raise KafkaException(f"probe produce failed: {errors or 'not all delivered'}")
        return [msg for _err, msg in delivered]

    def _read_all(
        self, consumer: Consumer, start: int = OFFSET_BEGINNING, until: int | None = None
    ) -> list[Any]:
        """Read partition 0 from ``start`` to the end a fetch reports (partition EOF), or until ``until`` is
        reached; bounded by the timeout and by 3 s without anything arriving."""
        consumer.assign([TopicPartition(self.topic, 0, start)])
        out: list[Any] = []
        deadline = time.monotonic() + self.timeout
        quiet_since = time.monotonic()
        while time.monotonic() < deadline and time.monotonic() - quiet_since < 3.0:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            error = msg.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    break
                continue
            out.append(msg)
            quiet_since = time.monotonic()
            if until is not None and (msg.offset() or 0) + 1 >= until:
                break
        return out

    def _list_offset(self, isolation: Any = None) -> int:
        kwargs = {"isolation_level": isolation} if isolation is not None else {}
        futures = self.admin.list_offsets(
            {TopicPartition(self.topic, 0): OffsetSpec.latest()}, request_timeout=self.timeout, **kwargs
        )
        return int(next(iter(futures.values())).result(timeout=self.timeout).offset)

    # -- the checks ---------------------------------------------------------------------------------

    def check_latest_offset(self) -> CheckResult:
        """Produce one batch of 10 records; ListOffsets latest must equal the end a fetch reaches."""
        producer = self._producer()
        self._produce(producer, [f"batch-{i}".encode() for i in range(BATCH)])
        latest = self._list_offset()
        consumer = self._consumer()
        try:
            records = self._read_all(consumer)
        finally:
            consumer.close()
        reached = records[-1].offset() + 1 if records else 0
        if latest == reached and reached >= BATCH:
            return CheckResult(True, f"latest {latest}, a fetch reached {reached}")
        return CheckResult(
            False,
            f"ListOffsets latest said {latest} after one batch of {BATCH}, but a fetch reached {reached}",
        )

    def check_log_append_time(self) -> CheckResult:
        """Produce with a timestamp a day old to a LogAppendTime topic: the broker must stamp it now."""
        old = int(time.time() * 1000) - 86_400_000
        before = int(time.time() * 1000)
        msg = self._produce(self._producer(), [b"log-append-time"], timestamp=old)[0]
        consumer = self._consumer()
        try:
            records = [
                m
                for m in self._read_all(consumer, msg.offset(), msg.offset() + 1)
                if m.offset() == msg.offset()
            ]
        finally:
            consumer.close()
        if not records:
            return CheckResult(None, "the probe record could not be read back")
        ts_type, ts = records[0].timestamp()
        if ts_type == TIMESTAMP_LOG_APPEND_TIME and ts >= before - 60_000:
            return CheckResult(True, "")
        return CheckResult(
            False,
            f"the record kept the producer's timestamp ({ts}, type {ts_type}): the lease's expiry would be wrong",
        )

    def check_read_committed(self) -> CheckResult:
        """Abort a transaction of 5 records, commit one of 1: read_committed must return only the latter."""
        producer = self._producer(**{"transactional.id": f"kstate-doctor-{self.nonce}"})
        producer.init_transactions(self.timeout)
        producer.begin_transaction()
        first = self._produce(producer, [b"aborted"] * 5)[0].offset()
        producer.abort_transaction(self.timeout)
        producer.begin_transaction()
        self._produce(producer, [b"committed"])
        producer.commit_transaction(self.timeout)
        consumer = self._consumer(**{"isolation.level": "read_committed"})
        try:
            values = [m.value() for m in self._read_all(consumer, first)]
        finally:
            consumer.close()
        aborted = values.count(b"aborted")
        if aborted == 0 and b"committed" in values:
            return CheckResult(True, "")
        if aborted:
            return CheckResult(
                False, f"a read_committed fetch returned {aborted} records of an aborted transaction"
            )
        return CheckResult(False, "a read_committed fetch did not return the committed record")

    def check_last_stable_offset(self) -> CheckResult:
        """Leave a transaction open: ListOffsets latest under read_committed must stop at its first record."""
        producer = self._producer(**{"transactional.id": f"kstate-doctor-lso-{self.nonce}"})
        producer.init_transactions(self.timeout)
        self._produce(self._producer(), [b"before-open"])
        producer.begin_transaction()
        open_at = self._produce(producer, [b"open"])[0].offset()
        try:
            stable = self._list_offset(IsolationLevel.READ_COMMITTED)
        finally:
            producer.abort_transaction(self.timeout)
        if stable == open_at:
            return CheckResult(True, f"LSO {stable} at the open transaction")
        return CheckResult(False, f"with a transaction open at offset {open_at}, the LSO was {stable}")

    def check_unknown_group(self) -> CheckResult:
        """A group id never used must not be listed, nor described as EMPTY or STABLE."""
        group = f"kstate-doctor-never-{self.nonce}"
        listed = self.admin.list_consumer_groups(request_timeout=self.timeout).result(timeout=self.timeout)
        if group in {g.group_id for g in listed.valid}:
            return CheckResult(False, f"the never-used group {group} is listed")
        try:
            desc = self.admin.describe_consumer_groups([group], request_timeout=self.timeout)[group].result(
                timeout=self.timeout
            )
        except KafkaException as exc:
            return CheckResult(True, f"described as an error: {exc.args[0].name()}")
        state = desc.state.name
        if state in ("DEAD", "UNKNOWN"):
            return CheckResult(True, f"described {state}")
        return CheckResult(
            False, f"the never-used group {group} is described as {state}: a typo would pass as a known group"
        )

    def check_group_members(self) -> CheckResult:
        """A live subscribed member must be described with its assignment of the probe topic."""
        group = f"kstate-doctor-live-{self.nonce}"
        consumer = self._consumer(**{"group.id": group})
        try:
            consumer.subscribe([self.topic])
            if not _wait_assigned(consumer, max(self.timeout, JOIN_WAIT)):
                return CheckResult(
                    None, f"the probe consumer got no assignment in {max(self.timeout, JOIN_WAIT)} s"
                )
            desc = self.admin.describe_consumer_groups([group], request_timeout=self.timeout)[group].result(
                timeout=self.timeout
            )
        finally:
            consumer.close()
        held = [
            tp.partition
            for m in desc.members
            for tp in m.assignment.topic_partitions
            if tp.topic == self.topic
        ]
        if desc.members and held == [0]:
            return CheckResult(True, f"{desc.state.name}, 1 member holding partition 0")
        return CheckResult(
            False,
            f"a live member holds partition 0 but the group is described {desc.state.name} with "
            f"{len(desc.members)} members holding {held}",
        )

    def check_offset_readback(self) -> CheckResult:
        """Commit offset 3 for a group with no members, then read it back."""
        group = f"kstate-doctor-seed-{self.nonce}"
        # committed and read back as the provider seeds and reads offsets: a consumer of the group that never
        # joins (an OffsetCommit with generation -1; the AdminClient's offset calls abort or crash librdkafka
        # 2.16 when a moving coordinator answers them: librdkafka issues 4605 and 5040)
        reader = Consumer({**self.config, "group.id": group, "enable.auto.commit": False})
        try:
            reader.commit(offsets=[TopicPartition(self.topic, 0, 3)], asynchronous=False)
            listed = reader.committed([TopicPartition(self.topic, 0)], timeout=self.timeout)
        finally:
            reader.close()
        got = [tp.offset for tp in listed if tp.partition == 0]
        if got == [3]:
            return CheckResult(True, "")
        return CheckResult(False, f"committed offset 3 on an EMPTY group, read back {got}")

    def check_config_defaults(self) -> CheckResult:
        """DescribeConfigs of the probe topic must include a default it never set (cleanup.policy)."""
        resource = ConfigResource(ConfigResource.Type.TOPIC, self.topic)
        entries = next(
            iter(self.admin.describe_configs([resource], request_timeout=self.timeout).values())
        ).result(timeout=self.timeout)
        if "cleanup.policy" in entries:
            return CheckResult(True, "")
        return CheckResult(False, "DescribeConfigs omits default settings (no cleanup.policy)")

    def check_share_new_partitions(self) -> CheckResult:
        """A share group reading the topic must get the records written to a partition added meanwhile
        (:mod:`~airflow_provider_kstate.doctor.share`); not applicable where the broker has no share groups."""
        try:
            versions = wire.api_versions(self.config, min(self.timeout, 10.0))
        except wire.WireUnavailable as exc:
            return CheckResult(None, f"not probed: ApiVersions not read ({exc})")
        absent = share.applicability(versions)
        if absent is not None:
            return absent
        group = f"kstate-doctor-share-{self.nonce}"
        return share.ShareProbe(self.config, f"{self.topic}-share", group, self.timeout, JOIN_WAIT).run()


def cluster_id(config: dict[str, Any], timeout: float = 20.0) -> str:
    """Return the cluster's id, or its bootstrap servers when it reports none.

    The admin client is held until the answer arrives: a client collected while its request is in flight is
    destroyed and fails it with ``_DESTROY`` (Apache Kafka's verdicts were keyed by bootstrap that way).
    """
    admin = AdminClient(config)
    try:
        described = admin.describe_cluster(request_timeout=timeout).result(timeout=timeout)
        if described.cluster_id:
            return str(described.cluster_id)
    except (KafkaException, TimeoutError):
        pass
    return str(config.get("bootstrap.servers", ""))


def _guarded(check: Callable[[], CheckResult]) -> CheckResult:
    """Run one check; a Kafka error during it is a broken promise when the broker refused, else unknown."""
    try:
        return check()
    except KafkaException as exc:
        err = exc.args[0] if exc.args else exc
        name = getattr(err, "name", lambda: "")()
        text = err.str() if hasattr(err, "str") else str(err)
        if name in ("_TRANSPORT", "_TIMED_OUT", "_ALL_BROKERS_DOWN"):
            return CheckResult(None, f"the cluster did not answer: {text}")
        if name.endswith("_AUTHORIZATION_FAILED"):  # an ACL of the principal, not a promise of the broker
            return CheckResult(
                None,
                f"not probed: the connection's principal lacks an ACL the probe needs ({name}; see the README)",
            )
        return CheckResult(False, f"the broker failed the probe: {name or text}")
    except TimeoutError:
        return CheckResult(None, "the cluster did not answer in time")


def _wait_for_topic(admin: AdminClient, topic: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        meta = admin.list_topics(topic, timeout=timeout).topics.get(topic)
        if meta is not None and meta.error is None and meta.partitions:
            return
        time.sleep(0.2)


def _wait_assigned(consumer: Consumer, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        consumer.poll(0.2)
        if consumer.assignment():
            return True
    return False


def check_cluster(config: dict[str, Any], timeout: float = 20.0) -> Verdict:
    """Return the full verdict: the cheap API checks and the behavioural checks."""
    probe = Probe(config, timeout)
    behaviour = probe.run()
    return Verdict(behaviour.cluster, behaviour.checked_at, {**cheap_checks(config), **behaviour.results})
