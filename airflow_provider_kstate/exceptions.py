"""Named errors of the provider. Each message names the problem and what to do next.

Errors a retry cannot fix (bad input or config, a held lease, an unsafe resume, a failed verification)
also subclass :class:`KStateFatalError`, an ``AirflowFailException``: Airflow fails the task at once
instead of retrying it. Transient ones (an unreachable cluster, groups not EMPTY or not STABLE yet) stay
retryable.
"""

from __future__ import annotations

from airflow.exceptions import AirflowException

from airflow_provider_kstate.utils.compat import AirflowFailException


class KStateError(AirflowException):
    """Base class of every error raised by airflow-provider-kstate."""


class KStateFatalError(KStateError, AirflowFailException):
    """An error a retry cannot fix: the task fails without retrying."""


class KStateConfigError(KStateFatalError):
    """A connection or argument is missing or malformed."""


class TopicNotFoundError(KStateFatalError):
    """The topic does not exist on the cluster."""


class InternalTopicError(KStateFatalError):
    """The topic is internal to Kafka (``__consumer_offsets`` and the like) and must not be changed."""


class InvalidPartitionCountError(KStateFatalError):
    """The target partition count is not an increase over the current one."""


class BrokerUnavailableError(KStateError):
    """The cluster could not be reached within the timeout."""


class GroupNotEmptyError(KStateError):
    """A consumer group still has live members where the step needs it EMPTY."""


class GroupNotStableError(KStateError):
    """A consumer group did not come back STABLE with every partition assigned in time."""


class SeedError(KStateError):
    """Committing the seed offsets failed for one or more partitions."""


class UnsafeResumeError(KStateFatalError):
    """Resuming consumers now would make them skip data on new partitions; they stay paused."""


class VerificationError(KStateFatalError):
    """The post-increase verification found a partition whose messages a group would skip."""


class LeaseHeldError(KStateFatalError):
    """Another run holds the lease on the topic."""


class SnapshotLeaseHeldError(LeaseHeldError):
    """Another maintenance run holds the lease on the snapshot (it is writing a version of it)."""


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


class NotCompactedChangelogError(KStateFatalError):
    """The changelog is not compacted and retention moved its log start: a snapshot from it lacks state
    (acknowledge with ``allow_non_compacted_changelog=True`` to accept the risk)."""


class UnprotectedGroupError(KStateFatalError):
    """A consumer group at risk on the topic is neither named nor excluded: the run would not protect it."""


class UnknownGroupError(KStateFatalError):
    """A named consumer group is unknown to the cluster: likely a typo."""


class ReportError(KStateFatalError):
    """A report file could not be written or read at its location."""


class TopicChangedError(KStateFatalError):
    """The topic's partition count changed under the run (another tool or run grew it)."""


class BrokerDeviationError(KStateFatalError):
    """The broker breaks a Kafka promise the run relies on (the doctor's verdict names which); nothing was
    changed. Accept a named deviation with ``allow_broker_deviation`` (logged as RISK ACCEPTED)."""


class BrokerUnsupportedError(BrokerDeviationError):
    """The broker cannot perform an operation the run needs (for example it does not serve CreatePartitions)."""


class UnsupportedGroupTypeError(KStateFatalError):
    """A group on the topic is of a type the run cannot pause and seed (a share group, a Kafka Streams
    application not acknowledged, a group whose type the client cannot tell)."""
