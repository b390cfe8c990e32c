"""The provider's errors: plain Python exceptions, importable without Airflow (the client piece and the Spark
applications use them too). They are THE public errors: hooks, the domain, the store and the doctor raise
them, and users catch them by these names.

Each says whether a retry can help by its class attribute :attr:`KStateError.retryable`, never by a base
class. Where a task ends (:mod:`airflow_provider_kstate.task_edge`, the operators' and sensors' one edge), a
non-retryable error fails the task at once (``AirflowFailException`` from it); a retryable one leaves as
itself, so Airflow's retries apply.
"""

from __future__ import annotations


class KStateError(Exception):
    """Base class of every error the provider raises. One raised as itself (no more specific name) is
    retryable."""

    #: Whether running the task again may succeed: False fails the task at once, without its retries.
    retryable: bool = True


class KStateConfigError(KStateError):
    """A connection or argument is missing or malformed."""

    retryable = False


class InvalidArgumentError(KStateConfigError, ValueError):
    """An argument is malformed or out of its range; the message names it. It is a ``ValueError`` too, so
    a pydantic validator that raises it reports a validation error."""

    retryable = False


class InvalidChoiceError(InvalidArgumentError):
    """A value is not one of its choices (a mode, a key order, a group role ...); the message names them."""

    retryable = False


class TopicNotFoundError(KStateError):
    """The topic does not exist on the cluster."""

    retryable = False


class InternalTopicError(KStateError):
    """The topic is internal to Kafka (``__consumer_offsets`` and the like) and must not be changed."""

    retryable = False


class InvalidPartitionCountError(KStateError):
    """The target partition count is not an increase over the current one."""

    retryable = False


class UnequalPartitionCountsError(InvalidPartitionCountError):
    """Co-partitioned topics to grow together have different partition counts now (and those that differ
    are not already at the target): growing them to one count would not keep them co-partitioned."""

    retryable = False


class PartitionsUnavailableError(KStateError):
    """Partitions of the topic are offline (no leader, or a leader that does not answer) or have fewer
    in-sync replicas than its ``min.insync.replicas``: acks=all writes to them fail. The plan refuses before
    anyone is paused; a broker that comes back and replicas that catch up heal it, so a retry can help."""

    retryable = True


class BrokerUnavailableError(KStateError):
    """The cluster, or one of its listeners, did not answer within the timeout."""

    retryable = True


class GroupNotEmptyError(KStateError):
    """A consumer group still has live members where the step needs it EMPTY."""

    retryable = True


class GroupNeverLeftError(GroupNotEmptyError):
    """A paused or stopped group still had members when its wait ran out: a retry would wait again for a
    member that does not leave, with every other group out of its group meanwhile."""

    retryable = False


class GroupNotStableError(KStateError):
    """A consumer group did not come back STABLE with every partition assigned in time."""

    retryable = True


class SeedError(KStateError):
    """Committing the seed offsets failed for one or more partitions."""

    retryable = True


class UnsafeResumeError(KStateError):
    """Resuming consumers now would make them skip data on new partitions; they stay paused."""

    retryable = False


class VerificationError(KStateError):
    """The post-increase verification found a partition whose messages a group would skip."""

    retryable = False


class UnprotectedGroupError(KStateError):
    """A consumer group at risk on the topic is neither named nor excluded: the run would not protect it."""

    retryable = False


class UnknownGroupError(KStateError):
    """A named consumer group is unknown to the cluster: likely a typo."""

    retryable = False


class UnsupportedGroupTypeError(KStateError):
    """A group on the topic is of a type the run cannot pause and seed (a share group, a Kafka Streams
    application not acknowledged, a group whose type the client cannot tell)."""

    retryable = False


class UnsupportedStreamsTopologyError(UnsupportedGroupTypeError):
    """A Kafka Streams application reads the topic with a topology the run cannot resize (sources not
    co-partitioned, a store whose changelog it cannot re-place ...): refused at plan time, naming why and
    what to do (:mod:`airflow_provider_kstate.increase.streams_apps`)."""

    retryable = False


class StreamsResizeError(KStateError):
    """Resizing a Kafka Streams application stopped: it did not drain, its changelog re-placement or its
    check failed (:mod:`airflow_provider_kstate.cluster.streams_resize`); the message says what state it
    left and what to do."""

    retryable = False


class InvalidDriverError(KStateError):
    """A driver (a group's or a producer service's) is malformed or names nothing the run knows."""

    retryable = False


class UndrivableGroupError(KStateError):
    """A live group at risk does not run the client piece and has no driver: the run cannot make it leave."""

    retryable = False


class StayRefusedError(KStateError):
    """Consumers were asked to stay in their groups (``consumers_stay``), but a group gives no evidence of
    its position and may not be paused, a reader needs the resize, or the topic's producers are not named."""

    retryable = False


class PositionsTimeoutError(KStateError):
    """A group that stays gave no evidence of its position on every partition in time, and cannot be paused
    instead: the producers stay on the old layout (nothing lost); the run fails."""

    retryable = False


class DriverCommandError(KStateError):
    """A command of a group's or a producer's driver failed (non-zero exit, or killed at its timeout)."""

    retryable = False


class DrainTimeoutError(KStateError):
    """A drained group did not commit past the old partitions' end offsets before the drain's deadline."""

    retryable = False


class ReportError(KStateError):
    """A report file could not be written or read at its location."""

    retryable = False


class TopicChangedError(KStateError):
    """The topic's partition count changed under the run (another tool or run grew it)."""

    retryable = False


class PlanChangedError(KStateError):
    """The cluster changed between the plan and its approval (another partition count, a new group at risk, a
    group handled differently): the approved plan no longer says what the run would do; the run stops
    before anyone is paused."""

    retryable = False


class ApprovalTimeoutError(KStateError):
    """Nobody answered the approval request before its deadline: nothing was changed, the lease released."""

    retryable = False


class LeaseHeldError(KStateError):
    """Another run holds the lease on the topic."""

    retryable = False


class SnapshotLeaseHeldError(LeaseHeldError):
    """Another maintenance run holds the lease on the snapshot (it is writing a version of it)."""

    retryable = False


class LeaseRecordError(KStateError):
    """A record of the lease log cannot be read (malformed, or of a newer version): the lease cannot be
    decided, so nothing is changed."""

    retryable = False


class ControlAckTimeout(KStateError):
    """Clients did not acknowledge a control command in time."""

    retryable = True


class ControlRecordError(KStateError):
    """A control record does not validate against its kind's schema (a reader ignores it)."""

    retryable = False


class StateCheckFailed(KStateError):
    """A state store disagrees with its changelog."""

    retryable = True


class SnapshotError(KStateError):
    """A snapshot, its manifest or its pointer is missing, unreadable or malformed (``store/``)."""

    retryable = True


class SnapshotMissingError(SnapshotError):
    """No snapshot at the URI (never built, or a build that did not finish)."""

    retryable = True


class StoredOffsetsError(KStateError):
    """Offsets stored against a topic (a snapshot's manifest, a streaming query's checkpoint) do not belong to
    the topic's log now: they lie beyond its end (the topic was truncated, or deleted and created again). The
    message names the topic, the offsets and the ways out; nothing was read or written."""

    retryable = False


class TopicRecreatedError(StoredOffsetsError):
    """The topic was deleted and created again under the same name since the offsets were stored: its topic
    id (KIP-516) differs from the one recorded with them, so they point into a different log. The message
    names the topic, both ids and the ways out; nothing was read or written."""

    retryable = False


class SparkApplicationError(KStateError):
    """A kstate Spark application failed; the message is its own error line."""

    retryable = True


class SparkAppInputError(KStateError):
    """A Spark application refused its input (config, snapshot, topic): a retry cannot change it."""

    retryable = False


class ChangelogReadError(KStateError):
    """A changelog could not be read to its bound: broker unreachable, topic missing, a read timed out."""

    retryable = True


class NotCompactedChangelogError(ChangelogReadError):
    """The changelog is not compacted and retention moved its log start: a snapshot from it lacks state
    (acknowledge with ``allow_non_compacted_changelog=True`` to accept the risk)."""

    retryable = False


class BrokerDeviationError(KStateError):
    """The broker breaks a Kafka promise the run relies on (the doctor's verdict names which, or a read
    disagrees with the broker's own offsets); nothing was changed. Accept a named deviation with
    ``allow_broker_deviation`` (logged as RISK ACCEPTED)."""

    retryable = False


class BrokerUnsupportedError(BrokerDeviationError):
    """The broker cannot perform an operation the run needs (for example it does not serve CreatePartitions)."""

    retryable = False


class VerdictError(KStateError):
    """A doctor's verdict cannot be read (malformed, or of a newer version): the cache treats it as absent."""

    retryable = False


class KafkaRequestError(KStateError):
    """A Kafka request failed with an error the step does not handle itself (a raw ``KafkaException``,
    translated where a task ends) and Kafka says it is retriable: the task is retried."""

    retryable = True


class KafkaRequestRefusedError(KafkaRequestError):
    """A Kafka request failed with an error Kafka says is not retriable (authorization, an invalid
    request ...): a retry cannot fix it."""

    retryable = False


class KafkaAuthenticationError(KStateError):
    """The cluster refused the connection itself: SASL authentication failed (a wrong user name or password),
    or TLS did (the broker's certificate is not signed by the CA of ``ssl.ca.location``, has expired, or the
    broker refused the client's certificate). The message names the listener (bootstrap address and
    ``security.protocol``) and the cause; nothing was changed. A retry sends the same credentials."""

    retryable = False


class KafkaAuthorizationError(KafkaRequestRefusedError):
    """The connection's principal lacks an ACL the run needs: the message names each missing operation and
    resource, with the ``kafka-acls`` command that grants it; refused at plan time, nothing was changed."""

    retryable = False
