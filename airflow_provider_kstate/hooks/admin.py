"""A thin hook over confluent-kafka's AdminClient, on the ``kafka`` connection type of the Kafka provider."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from functools import cached_property
from typing import Any

from airflow.providers.apache.kafka.hooks.base import KafkaBaseHook

from airflow_provider_kstate.admin_client import AdminClient
from airflow_provider_kstate.cluster.admin import MAX_IN_FLIGHT, ClusterAdmin, admin_settings
from airflow_provider_kstate.hooks.kafka_config import connection_config
from airflow_provider_kstate.increase.model import DEAD, EMPTY, STABLE, GroupInfo, Member, TopicReplicas

__all__ = ["DEAD", "EMPTY", "STABLE", "GroupInfo", "KStateAdminHook", "Member"]


class KStateAdminHook(KafkaBaseHook):
    """Admin verbs for the safe partition increase and the state checks.

    Reuses the ``kafka`` connection type of ``apache-airflow-providers-apache-kafka``: the connection's
    extras are the librdkafka config (``bootstrap.servers``, ``security.protocol``, ``sasl.*``, ``ssl.*``).
    The verbs are :class:`~airflow_provider_kstate.cluster.admin.ClusterAdmin`'s (no Airflow), made on
    the connection's AdminClient; they raise the provider's errors (:mod:`airflow_provider_kstate.errors`).

    :param kafka_config_id: the Airflow connection id.
    :param request_timeout: seconds to wait for each admin request.
    :param max_in_flight: requests in flight at once (the per-group calls of large runs).
    """

    hook_name = "Kafka State (kstate)"

    def __init__(
        self,
        kafka_config_id: str = KafkaBaseHook.default_conn_name,
        request_timeout: float = 30.0,
        max_in_flight: int = MAX_IN_FLIGHT,
    ) -> None:
        super().__init__(kafka_config_id=kafka_config_id)
        self.request_timeout = request_timeout
        self.max_in_flight = max_in_flight

    def client_config(self) -> dict[str, Any]:
        """Return the librdkafka config of the connection (holds secrets: never log it).

        Built by :func:`~airflow_provider_kstate.hooks.kafka_config.connection_config` with the Kafka
        provider's rules (callback allowlist, managed-cloud token callbacks).
        """
        return connection_config(self.kafka_config_id)

    # a cached property like the Kafka provider's own ``get_conn``, which already differs from BaseHook's
    @cached_property
    def get_conn(self) -> AdminClient:  # type: ignore[override]
        """The AdminClient of the connection, created once per hook (the Kafka provider's ``get_conn``
        property, built from :meth:`client_config`)."""
        return self._get_client(self._config)

    @cached_property
    def _config(self) -> dict[str, Any]:
        """The connection's config, looked up once per hook (the client and the cluster verbs share it)."""
        return self.client_config()

    def _get_client(self, config: dict[str, Any]) -> AdminClient:
        """Create the client (the seam the Kafka provider's hooks override; tests swap it)."""
        return AdminClient(admin_settings(config))  # a dead "controller" is left within seconds

    @cached_property
    def cluster(self) -> ClusterAdmin:
        """The admin verbs on this connection's client (no Airflow: raises the domain's errors)."""
        return ClusterAdmin(
            self._config,
            self.request_timeout,
            self.max_in_flight,
            client=self.get_conn,
            name=f"connection {self.kafka_config_id!r}",
        )

    def check_connection(self) -> None:
        """Connect first: raise :class:`~airflow_provider_kstate.errors.KafkaAuthenticationError` naming the
        listener and the cause when the cluster refuses the connection's SASL credentials or TLS."""
        self.cluster.check_connection()

    def test_connection(self) -> tuple[bool, str]:
        """Test the connection from the UI with the config the hook uses (its extra is never shown)."""
        try:
            self.cluster.metadata()
        except Exception as exc:  # noqa: BLE001 - the UI shows the reason
            return False, str(exc)
        return True, "Connection successful."

    # -- the verbs: ClusterAdmin's, raising its errors ---------------------------------------------------

    def metadata(self, topic: str | None = None) -> Any:
        """The cluster's metadata (of ``topic``, or of every topic)."""
        return self.cluster.metadata(topic)

    def ensure_internal_topic(self, topic: str, config: dict[str, str]) -> None:
        """Create one of the provider's own one-partition topics (lease, control) unless it exists."""
        self.cluster.ensure_internal_topic(topic, config)

    def list_topics(self) -> list[str]:
        """Return the names of all topics."""
        return self.cluster.list_topics()

    def partition_count(self, topic: str) -> int:
        """Return the partition count of ``topic``; raise TopicNotFoundError when it does not exist."""
        return self.cluster.partition_count(topic)

    def topic_ids(self, topics: Iterable[str]) -> dict[str, str]:
        """Return ``{topic: KIP-516 topic id}``, ``""`` where it cannot be read."""
        return self.cluster.topic_ids(topics)

    def topic_config(self, topic: str) -> dict[str, str]:
        """Return the topic's effective configuration."""
        return self.cluster.topic_config(topic)

    def topic_replicas(self, topic: str, leaders_only: bool = False) -> TopicReplicas:
        """Return each partition's leader, replicas and ISR, the topic's ``min.insync.replicas`` and the
        brokers that do not answer (``leaders_only``: the metadata alone)."""
        return self.cluster.topic_replicas(topic, leaders_only)

    def authorized_operations(
        self, topics: Iterable[str] = (), groups: Iterable[str] = ()
    ) -> dict[tuple[str, str], frozenset[str] | None]:
        """Return what the connection's principal may do on each topic and group (Kafka's authorizer)."""
        return self.cluster.authorized_operations(topics, groups)

    def increase_partitions(self, topic: str, total: int, validate_only: bool = False) -> None:
        """Grow ``topic`` to ``total`` partitions (``validate_only``: ask the broker without changing)."""
        self.cluster.increase_partitions(topic, total, validate_only)

    def watermarks(self, topic: str, partitions: Iterable[int]) -> dict[int, tuple[int, int]]:
        """Return ``{partition: (log_start, high_watermark)}``."""
        return self.cluster.watermarks(topic, partitions)

    def loaded_ends(self, topic: str, partitions: Iterable[int]) -> dict[int, int]:
        """Return ``{partition: high_watermark}``, 0 where the leader has not loaded the partition yet."""
        return self.cluster.loaded_ends(topic, partitions)

    def unloaded(self, topic: str, partitions: Iterable[int]) -> list[int]:
        """Return the partitions their leader does not serve yet."""
        return self.cluster.unloaded(topic, partitions)

    def log_starts(self, topic: str, partitions: Iterable[int]) -> dict[int, int]:
        """Return ``{partition: log_start}``."""
        return self.cluster.log_starts(topic, partitions)

    def list_groups(self) -> list[str]:
        """Return the ids of all consumer groups the cluster knows."""
        return self.cluster.list_groups()

    def group_types(self) -> dict[str, str]:
        """Return ``{group: TYPE}`` of every group the cluster lists."""
        return self.cluster.group_types()

    def committed_offsets(self, group: str, topic: str, partitions: int | None = None) -> dict[int, int]:
        """Return the group's committed offsets on ``topic`` (partitions without one are absent)."""
        return self.cluster.committed_offsets(group, topic, partitions)

    def committed_offsets_many(
        self, groups: Iterable[str], topic: str, partitions: int | None = None
    ) -> Iterator[tuple[str, dict[int, int]]]:
        """Yield ``(group, {partition: offset})`` for each group's committed offsets on ``topic``."""
        yield from self.cluster.committed_offsets_many(groups, topic, partitions)

    def groups_on_topic(self, topic: str, partitions: int | None = None) -> list[str]:
        """Return the groups at risk on ``topic`` (committed offsets on it, or live members assigned it)."""
        return self.cluster.groups_on_topic(topic, partitions)

    def share_groups_on_topic(self, topic: str, types: Mapping[str, str]) -> dict[str, str] | None:
        """Return ``{share group: share.auto.offset.reset}`` of the share groups reading ``topic`` (None:
        unknown)."""
        return self.cluster.share_groups_on_topic(topic, types)

    def describe_groups(self, groups: list[str], topic: str) -> dict[str, GroupInfo]:
        """Describe ``groups``, keeping of each member only its partitions of ``topic``."""
        return self.cluster.describe_groups(groups, topic)

    def leave_members(self, group: str, member_ids: list[str], reason: str) -> dict[str, int]:
        """Remove members from a classic group, or a KIP-848 consumer group on Kafka 4.0+ (their LeaveGroup):
        ``{member id: error code}``."""
        return self.cluster.leave_members(group, member_ids, reason)

    def seed_offsets(self, group: str, topic: str, offsets: dict[int, int]) -> None:
        """Commit ``offsets`` for ``group`` on ``topic`` (only while the group is EMPTY)."""
        self.cluster.seed_offsets(group, topic, offsets)

    def seed_offsets_many(self, topic: str, offsets: Mapping[str, Mapping[int, int]]) -> None:
        """Commit ``{group: {partition: offset}}`` on ``topic``."""
        self.cluster.seed_offsets_many(topic, offsets)
