"""A thin hook over confluent-kafka's AdminClient, on the ``kafka`` connection type of the Kafka provider."""

from __future__ import annotations

from typing import Any

from airflow.providers.apache.kafka.hooks.base import KafkaBaseHook
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, OffsetSpec

from airflow_provider_kstate.client.channel import ensure_topic
from airflow_provider_kstate.utils.model import DEAD, EMPTY, STABLE, GroupInfo, Member

__all__ = ["DEAD", "EMPTY", "STABLE", "GroupInfo", "KStateAdminHook", "Member"]

from airflow_provider_kstate.exceptions import (
    BrokerUnavailableError,
    InvalidPartitionCountError,
    KStateConfigError,
    SeedError,
    TopicNotFoundError,
)


class KStateAdminHook(KafkaBaseHook):
    """Admin verbs for the safe partition increase and the state checks.

    Reuses the ``kafka`` connection type of ``apache-airflow-providers-apache-kafka``: the connection's
    extras are the librdkafka config (``bootstrap.servers``, ``security.protocol``, ``sasl.*``, ``ssl.*``).

    :param kafka_config_id: the Airflow connection id.
    :param timeout: seconds to wait for each admin request.
    """

    hook_name = "Kafka State (kstate)"

    def __init__(self, kafka_config_id: str = KafkaBaseHook.default_conn_name, timeout: float = 30.0) -> None:
        super().__init__(kafka_config_id=kafka_config_id)
        self.timeout = timeout
        self._client: AdminClient | None = None

    def client_config(self) -> dict[str, Any]:
        """Return the librdkafka config of the connection (holds secrets: never log it)."""
        try:
            return dict(self._build_config())
        except ValueError as exc:
            raise KStateConfigError(f"Kafka connection {self.kafka_config_id!r}: {exc}") from exc

    def _get_client(self, config: dict[str, Any]) -> AdminClient:
        return AdminClient(config)

    def get_conn(self) -> AdminClient:  # type: ignore[override]
        """Return the AdminClient of the connection, created once per hook."""
        if self._client is None:
            self._client = self._get_client(self.client_config())
        return self._client

    # -- topics -------------------------------------------------------------------------------------

    def _metadata(self, topic: str | None = None) -> Any:
        try:
            return self.get_conn().list_topics(topic=topic, timeout=self.timeout)
        except KafkaException as exc:
            raise BrokerUnavailableError(
                f"Kafka connection {self.kafka_config_id!r}: cluster unreachable within {self.timeout}s "
                f"({exc.args[0].str() if exc.args else exc})"
            ) from exc

    def ensure_internal_topic(self, topic: str, config: dict[str, str]) -> None:
        """Create one of the provider's own one-partition topics (lease, control) unless it exists."""
        if topic in self._metadata().topics:
            return
        try:
            ensure_topic(self.get_conn(), topic, config, self.timeout)
        except KafkaException as exc:
            raise BrokerUnavailableError(
                f"could not create {topic!r}: {exc.args[0].str() if exc.args else exc}"
            ) from exc

    def list_topics(self) -> list[str]:
        """Return the names of all topics."""
        return sorted(self._metadata().topics)

    def partition_count(self, topic: str) -> int:
        """Return the partition count of ``topic``; raise TopicNotFoundError when it does not exist."""
        meta = self._metadata().topics.get(topic)
        if meta is None or meta.error is not None or not meta.partitions:
            raise TopicNotFoundError(f"topic {topic!r} does not exist on the cluster")
        return len(meta.partitions)

    def topic_config(self, topic: str) -> dict[str, str]:
        """Return the topic's effective configuration."""
        futures = self.get_conn().describe_configs(
            [ConfigResource(ConfigResource.Type.TOPIC, topic)], request_timeout=self.timeout
        )
        entries = _result(next(iter(futures.values())), self.timeout, f"describe configs of {topic!r}")
        return {name: entry.value for name, entry in entries.items()}

    def increase_partitions(self, topic: str, total: int, validate_only: bool = False) -> None:
        """Grow ``topic`` to ``total`` partitions (``validate_only``: ask the broker without changing)."""
        futures = self.get_conn().create_partitions(
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
            raise

    def watermarks(self, topic: str, partitions: list[int]) -> dict[int, tuple[int, int]]:
        """Return ``{partition: (log_start, high_watermark)}`` with two batched ListOffsets requests."""
        if not partitions:
            return {}
        low = self._list_offsets(topic, partitions, OffsetSpec.earliest())
        high = self._list_offsets(topic, partitions, OffsetSpec.latest())
        return {p: (low[p], high[p]) for p in partitions}

    def _list_offsets(self, topic: str, partitions: list[int], spec: Any) -> dict[int, int]:
        request = {TopicPartition(topic, p): spec for p in partitions}
        futures = self.get_conn().list_offsets(request, request_timeout=self.timeout)
        return {
            tp.partition: _result(f, self.timeout, f"list offsets of {topic!r}").offset
            for tp, f in futures.items()
        }

    # -- consumer groups ----------------------------------------------------------------------------

    def list_groups(self) -> list[str]:
        """Return the ids of all consumer groups the cluster knows."""
        result = _result(
            self.get_conn().list_consumer_groups(request_timeout=self.timeout), self.timeout, "list groups"
        )
        return sorted(g.group_id for g in result.valid)

    def committed_offsets(self, group: str, topic: str) -> dict[int, int]:
        """Return the group's committed offsets on ``topic`` (partitions without one are absent)."""
        futures = self.get_conn().list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)], request_timeout=self.timeout
        )
        result = _result(futures[group], self.timeout, f"committed offsets of group {group!r}")
        return {
            tp.partition: tp.offset for tp in result.topic_partitions if tp.topic == topic and tp.offset >= 0
        }

    def groups_on_topic(self, topic: str) -> list[str]:
        """Return the groups that have committed offsets on ``topic``."""
        return [g for g in self.list_groups() if self.committed_offsets(g, topic)]

    def describe_groups(self, groups: list[str], topic: str) -> dict[str, GroupInfo]:
        """Describe ``groups``, keeping of each member only its partitions of ``topic``."""
        if not groups:
            return {}
        futures = self.get_conn().describe_consumer_groups(groups, request_timeout=self.timeout)
        return {
            g: _group_info(_result(f, self.timeout, f"describe group {g!r}"), topic)
            for g, f in futures.items()
        }

    def seed_offsets(self, group: str, topic: str, offsets: dict[int, int]) -> None:
        """Commit ``offsets`` for ``group`` on ``topic``; the broker accepts them only while the group is EMPTY.

        :raises SeedError: naming each partition the broker refused.
        """
        if not offsets:
            return
        request = ConsumerGroupTopicPartitions(
            group, [TopicPartition(topic, p, o) for p, o in sorted(offsets.items())]
        )
        futures = self.get_conn().alter_consumer_group_offsets([request], request_timeout=self.timeout)
        result = _result(futures[group], self.timeout, f"commit offsets of group {group!r}")
        refused = {tp.partition: tp.error.str() for tp in result.topic_partitions if tp.error is not None}
        if refused:
            raise SeedError(
                f"group {group!r} on {topic!r}: the broker refused offsets for partitions {refused}"
            )


def _result(future: Any, timeout: float, what: str) -> Any:
    try:
        return future.result(timeout=timeout)
    except KafkaException as exc:
        err: Any = exc.args[0] if exc.args else exc
        if getattr(err, "name", lambda: "")() in ("_TRANSPORT", "_TIMED_OUT", "_ALL_BROKERS_DOWN"):
            raise BrokerUnavailableError(f"{what}: cluster unreachable ({err.str()})") from exc
        raise
    except TimeoutError as exc:
        raise BrokerUnavailableError(f"{what}: no answer within {timeout}s") from exc


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
    )
