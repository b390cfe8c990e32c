"""Light shared names: group states and descriptions, a topic's replicas, default ids. Imports nothing heavy
(parse time)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from airflow_provider_kstate.defaults import (  # re-exported: the value lives there (parse time)
    DEFAULT_CONN_ID as DEFAULT_CONN_ID,
)
from airflow_provider_kstate.defaults import (
    DEFAULT_LEASE_TOPIC as DEFAULT_LEASE_TOPIC,
)
from airflow_provider_kstate.defaults import (
    DEFAULT_LEASE_TTL as DEFAULT_LEASE_TTL,
)

#: Group states as the broker names them (confluent-kafka's ``ConsumerGroupState`` names).
EMPTY = "EMPTY"
DEAD = "DEAD"
STABLE = "STABLE"
#: States of the group coordinator of Kafka 4 (KIP-848 consumer groups, KIP-1071 streams groups) between two
#: assignments, as ListGroups v5 names them (``Assigning``, ``Reconciling``, ``NotReady``) in this form.
ASSIGNING = "ASSIGNING"
RECONCILING = "RECONCILING"
NOT_READY = "NOT_READY"
#: What confluent-kafka (2.16) reports for a state it does not know (the three above among them).
UNKNOWN_STATE = "UNKNOWN"
#: The group config a share group (KIP-932) starts a partition it never read at (broker default latest).
SHARE_RESET = "share.auto.offset.reset"

#: Group types as ListGroups v5 names them (KIP-848, KIP-932, KIP-1071), upper-cased; UNKNOWN: the client
#: could not tell (confluent-kafka maps every type it does not know to UNKNOWN).
CLASSIC = "CLASSIC"
CONSUMER = "CONSUMER"
SHARE = "SHARE"
STREAMS = "STREAMS"
UNKNOWN_TYPE = "UNKNOWN"


def state_name(state: str) -> str:
    """Return a group state as this module names it: ``Reconciling`` -> ``RECONCILING``, ``NotReady`` ->
    ``NOT_READY``, ``PreparingRebalance`` -> ``PREPARING_REBALANCE``.

    :param state: a state as ListGroups or the Java tools name it.
    """
    out = "".join(f"_{c}" if c.isupper() and i else c for i, c in enumerate(state.strip()))
    return out.upper()


@dataclass(frozen=True)
class Member:
    """A live member of a consumer group and the partitions of the topic assigned to it."""

    member_id: str
    client_id: str
    host: str
    partitions: tuple[int, ...]


@dataclass(frozen=True)
class GroupInfo:
    """A consumer group as the broker describes it."""

    group: str
    state: str
    type: str
    protocol_type: str
    members: tuple[Member, ...] = field(default_factory=tuple)
    #: The partition assignor (the classic protocol's name): ``stream`` for a Kafka Streams application.
    assignor: str = ""

    def assigned(self) -> set[int]:
        """Return the partitions of the described topic held by some member."""
        return {p for m in self.members for p in m.partitions}


#: The metadata's leader id of a partition without a leader.
NO_LEADER = -1


@dataclass(frozen=True)
class PartitionReplicas:
    """One partition as the metadata describes it: its leader (:data:`NO_LEADER` when none), its replicas
    and its in-sync replicas (broker ids)."""

    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True)
class TopicReplicas:
    """The replication of a topic: its partitions, its effective ``min.insync.replicas`` and the brokers
    that did not answer (``down``: fenced, or listed but unreachable; empty when not asked)."""

    topic: str
    partitions: tuple[PartitionReplicas, ...]
    min_isr: int = 1
    down: frozenset[int] = frozenset()

    @property
    def replication_factor(self) -> int:
        """The replication factor CreatePartitions gives new partitions: that of the first partition."""
        return len(self.partitions[0].replicas) if self.partitions else 0

    def leaderless(self, partitions: Iterable[int]) -> list[int]:
        """Of ``partitions``, those the metadata does not show yet, or shows without a leader."""
        leaders = {p.partition: p.leader for p in self.partitions}
        return [p for p in partitions if leaders.get(p, NO_LEADER) < 0]
