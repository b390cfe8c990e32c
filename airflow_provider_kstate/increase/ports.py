"""What the increase domain needs from a cluster and a file store: typed ports that the hooks implement.

The domain (plan, steps, safety, checks, reports) depends on these protocols, never on the hooks, so
``increase/`` imports neither Airflow nor ``hooks/``; :class:`~airflow_provider_kstate.hooks.admin.KStateAdminHook`,
:class:`~airflow_provider_kstate.hooks.control.KStateControlHook` and
:class:`~airflow_provider_kstate.hooks.reports.ObjectStorageReports` satisfy them structurally.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager
from typing import IO, TYPE_CHECKING, Protocol

from airflow_provider_kstate.increase.model import GroupInfo, TopicReplicas

if TYPE_CHECKING:
    from airflow_provider_kstate.client_piece.protocol import Ack


class AdminPort(Protocol):
    """The Kafka admin verbs of the increase (partition counts, watermarks, groups, offsets)."""

    def partition_count(self, topic: str) -> int:
        """Return the topic's partition count."""
        ...

    def increase_partitions(self, topic: str, total: int, validate_only: bool = False) -> None:
        """Grow ``topic`` to ``total`` partitions."""
        ...

    def topic_ids(self, topics: Iterable[str]) -> dict[str, str]:
        """Return ``{topic: KIP-516 topic id}``, ``""`` where it cannot be read."""
        ...

    def topic_replicas(self, topic: str, leaders_only: bool = False) -> TopicReplicas:
        """Return each partition's leader, replicas and ISR, the topic's effective ``min.insync.replicas``
        and the brokers that do not answer (``leaders_only``: the metadata alone, one cheap request)."""
        ...

    def watermarks(self, topic: str, partitions: Iterable[int]) -> dict[int, tuple[int, int]]:
        """Return ``{partition: (log start, log end)}``."""
        ...

    def log_starts(self, topic: str, partitions: Iterable[int]) -> dict[int, int]:
        """Return ``{partition: log start}``."""
        ...

    def unloaded(self, topic: str, partitions: Iterable[int]) -> list[int]:
        """Return the partitions their leader does not serve yet (named in the metadata, not loaded)."""
        ...

    def loaded_ends(self, topic: str, partitions: Iterable[int]) -> dict[int, int]:
        """Return ``{partition: log end}`` in one pass, 0 where no leader has loaded the partition yet."""
        ...

    def committed_offsets_many(
        self, groups: Iterable[str], topic: str, partitions: int | None = None
    ) -> Iterator[tuple[str, dict[int, int]]]:
        """Yield ``(group, {partition: committed offset})`` per group."""
        ...

    def group_types(self) -> dict[str, str]:
        """Return ``{group: TYPE}`` of every listed group (CLASSIC, CONSUMER, SHARE, STREAMS, UNKNOWN)."""
        ...

    def groups_on_topic(self, topic: str, partitions: int | None = None) -> list[str]:
        """Return the groups with offsets on, or members assigned to, ``topic``."""
        ...

    def share_groups_on_topic(self, topic: str, types: Mapping[str, str]) -> dict[str, str] | None:
        """Return ``{share group: share.auto.offset.reset}`` of the share groups reading ``topic``; None
        when that cannot be read."""
        ...

    def describe_groups(self, groups: list[str], topic: str) -> dict[str, GroupInfo]:
        """Return each group's state and members on ``topic``."""
        ...

    def leave_members(self, group: str, member_ids: list[str], reason: str) -> dict[str, int]:
        """Remove members from a classic group, or a KIP-848 consumer group on Kafka 4.0+ (their LeaveGroup);
        return ``{member id: error code}``
        (``{}``: the cluster cannot be asked that way)."""
        ...

    def seed_offsets_many(self, topic: str, offsets: Mapping[str, Mapping[int, int]]) -> None:
        """Commit ``{group: {partition: offset}}``."""
        ...


class ControlPort(Protocol):
    """The control channel's verbs: pause and resume consumers, tell producers the layout."""

    def acks(self, epoch: int, group: str = "", topic: str = "", refresh: bool = True) -> list[Ack]:
        """Return the acknowledgements of ``epoch`` by consumers of ``group`` or producers of ``topic``
        (``refresh``: read what came since the last call first; else what that call read)."""
        ...

    def follow(self) -> None:
        """Start following the acknowledgements now (before a pause: the first read of the control topic
        while the consumers still run); nothing when already following."""
        ...

    def pause(self, groups: list[str], topic: str, issuer: str) -> int:
        """Ask the services of ``groups`` to leave their groups; return the epoch."""
        ...

    def resume(self, groups: list[str], topic: str, issuer: str) -> int:
        """Ask the services of ``groups`` to rejoin; return the epoch."""
        ...

    def set_layout(self, topic: str, partitions: int, issuer: str) -> int:
        """Tell producers of ``topic`` the partition count; return the epoch."""
        ...


class ReportStorage(Protocol):
    """Where report files live (:mod:`airflow_provider_kstate.increase.report` writes and reads them)."""

    def open(self, uri: str, mode: str) -> AbstractContextManager[IO[bytes]]:
        """Open ``uri`` in binary ``mode`` (``"r"`` or ``"w"``, creating its folder); a missing file is
        FileNotFoundError, any other failure an OSError."""
        ...

    def remove(self, uri: str) -> None:
        """Remove ``uri`` if it exists."""
        ...
