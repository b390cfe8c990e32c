"""Named errors of the provider. Each message names the problem and what to do next."""

from __future__ import annotations

from airflow.exceptions import AirflowException


class KStateError(AirflowException):
    """Base class of every error raised by airflow-provider-kstate."""


class KStateConfigError(KStateError):
    """A connection or argument is missing or malformed."""


class TopicNotFoundError(KStateError):
    """The topic does not exist on the cluster."""


class InternalTopicError(KStateError):
    """The topic is internal to Kafka (``__consumer_offsets`` and the like) and must not be changed."""


class InvalidPartitionCountError(KStateError):
    """The target partition count is not an increase over the current one."""


class BrokerUnavailableError(KStateError):
    """The cluster could not be reached within the timeout."""


class GroupNotEmptyError(KStateError):
    """A consumer group still has live members where the step needs it EMPTY."""


class GroupNotStableError(KStateError):
    """A consumer group did not come back STABLE with every partition assigned in time."""


class SeedError(KStateError):
    """Committing the seed offsets failed for one or more partitions."""


class UnsafeResumeError(KStateError):
    """Resuming consumers now would make them skip data on new partitions; they stay paused."""


class VerificationError(KStateError):
    """The post-increase verification found a partition whose messages a group would skip."""


class LeaseHeldError(KStateError):
    """Another run holds the lease on the topic."""


class ControlAckTimeout(KStateError):
    """Clients did not acknowledge a control command in time."""


class StateCheckFailed(KStateError):
    """A state store disagrees with its changelog."""


class SnapshotError(KStateError):
    """A snapshot or its manifest is missing, unreadable or malformed."""


class SnapshotMissingError(SnapshotError):
    """No snapshot at the URI (never built, or a build that did not finish)."""


class SparkApplicationError(KStateError):
    """A kstate Spark application failed; the message is its own error line."""
