"""The domain's errors: plain Python exceptions, importable without Airflow.

``increase/`` raises these (``store/`` and ``client/`` raise their own plain errors). Each has an Airflow
face of the same name in :mod:`airflow_provider_kstate.exceptions`, an ``AirflowException`` subclass
(``KStateFatalError`` where a retry cannot fix it) that also subclasses the domain error. The operators and
sensors translate on the way out (:func:`airflow_provider_kstate.exceptions.airflow_errors`), so a task
fails with the named Airflow error; code that catches the domain error here catches its face too.
"""

from __future__ import annotations


class KStateError(Exception):
    """Base class of the domain's errors."""


class InternalTopicError(KStateError):
    """The topic is internal to Kafka (``__consumer_offsets`` and the like) and must not be changed."""


class InvalidPartitionCountError(KStateError):
    """The target partition count is not an increase over the current one."""


class GroupNotEmptyError(KStateError):
    """A consumer group still has live members where the step needs it EMPTY."""


class UnsafeResumeError(KStateError):
    """Resuming consumers now would make them skip data on new partitions; they stay paused."""


class UnprotectedGroupError(KStateError):
    """A consumer group at risk on the topic is neither named nor excluded: the run would not protect it."""


class UnknownGroupError(KStateError):
    """A named consumer group is unknown to the cluster: likely a typo."""


class ReportError(KStateError):
    """A report file could not be written or read at its location."""


class TopicChangedError(KStateError):
    """The topic's partition count changed under the run (another tool or run grew it)."""


class UnsupportedGroupTypeError(KStateError):
    """A group on the topic is of a type the run cannot pause and seed (a share group, a Kafka Streams
    application not acknowledged, a group whose type the client cannot tell)."""


class InvalidArgumentError(KStateError, ValueError):
    """An argument is malformed or out of its range; the message names it."""


class InvalidChoiceError(InvalidArgumentError):
    """A value is not one of its choices (a mode, a key order, a group role ...); the message names them."""


class InvalidDriverError(KStateError):
    """A driver (a group's or a producer service's) is malformed or names nothing the run knows."""


class UndrivableGroupError(KStateError):
    """A live group at risk does not run the client piece and has no driver: the run cannot make it leave."""


class GroupNeverLeftError(GroupNotEmptyError):
    """A paused or stopped group still had members when its wait ran out: a retry would wait again for a
    member that does not leave, with every other group out of its group meanwhile."""


class DriverCommandError(KStateError):
    """A command of a group's or a producer's driver failed (non-zero exit, or killed at its timeout)."""


class DrainTimeoutError(KStateError):
    """A drained group did not commit past the old partitions' end offsets before the drain's deadline."""


class SnapshotError(KStateError):
    """A snapshot, its manifest or its pointer is missing, unreadable or malformed (``store/``)."""


class SparkAppInputError(KStateError):
    """A Spark application refused its input (config, snapshot, topic): a retry cannot change it."""


class ChangelogReadError(KStateError):
    """A changelog could not be read to its bound: broker unreachable, topic missing, a read timed out."""


class NotCompactedChangelogError(ChangelogReadError):
    """The changelog is not compacted and retention moved its log start: a snapshot from it lacks state."""


class BrokerUnavailableError(KStateError):
    """The cluster, or one of its listeners, did not answer (the broker doctor's probes)."""


class BrokerDeviationError(KStateError):
    """The broker breaks a Kafka promise the run relies on (the doctor's verdict, or a read that disagrees
    with the broker's own offsets)."""


class KafkaRequestError(KStateError):
    """A Kafka request failed with an error the step does not handle itself (a raw ``KafkaException``,
    translated where a task ends): retryable when Kafka says the error is."""


class KafkaRequestRefusedError(KafkaRequestError):
    """A Kafka request failed with an error Kafka says is not retriable (authorization, an invalid
    request ...): a retry cannot fix it."""


class TopicNotFoundError(KStateError):
    """The topic does not exist on the cluster."""


class SeedError(KStateError):
    """Committing the seed offsets failed for one or more partitions."""


class BrokerUnsupportedError(BrokerDeviationError):
    """The broker cannot perform an operation the run needs (for example it does not serve CreatePartitions)."""


class LeaseHeldError(KStateError):
    """Another run holds the lease on the topic (or the snapshot)."""


class PlanChangedError(KStateError):
    """The cluster changed between the plan and its approval (another partition count, a new group at risk, a
    group handled differently): the approved plan no longer says what the run would do."""


class ControlRecordError(KStateError):
    """A control record does not validate against its kind's schema (a reader ignores it)."""


class LeaseRecordError(KStateError):
    """A record of the lease log cannot be read (malformed, or of a newer version): the lease cannot be
    decided, so nothing is changed."""


class VerdictError(KStateError):
    """A doctor's verdict cannot be read (malformed, or of a newer version): the cache treats it as absent."""
