"""Named errors of the provider. Each message names the problem and what to do next.

Errors a retry cannot fix (bad input or config, a held lease, an unsafe resume, a failed verification)
also subclass :class:`KStateFatalError`, an ``AirflowFailException``: Airflow fails the task at once
instead of retrying it. Transient ones (an unreachable cluster, groups not EMPTY or not STABLE yet) stay
retryable.

The domain (``increase/``) raises plain errors of the same names (:mod:`airflow_provider_kstate.errors`,
no Airflow); each error here that has one subclasses it, so it is that error's Airflow face. This module is
the one place that translates: :func:`airflow_errors` around an operator's or sensor's ``execute`` (every
operator and sensor that reaches the domain mixes in :class:`TranslatesDomainErrors`, which applies it).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from airflow.exceptions import AirflowException

from airflow_provider_kstate import errors
from airflow_provider_kstate.compat import AirflowFailException


class KStateError(AirflowException, errors.KStateError):
    """Base class of every error raised by airflow-provider-kstate."""


class KStateFatalError(KStateError, AirflowFailException):
    """An error a retry cannot fix: the task fails without retrying."""


class KStateConfigError(KStateFatalError):
    """A connection or argument is missing or malformed."""


class TopicNotFoundError(KStateFatalError, errors.TopicNotFoundError):
    """The topic does not exist on the cluster."""


class InternalTopicError(KStateFatalError, errors.InternalTopicError):
    """The topic is internal to Kafka (``__consumer_offsets`` and the like) and must not be changed."""


class InvalidPartitionCountError(KStateFatalError, errors.InvalidPartitionCountError):
    """The target partition count is not an increase over the current one."""


class BrokerUnavailableError(KStateError, errors.BrokerUnavailableError):
    """The cluster could not be reached within the timeout."""


class GroupNotEmptyError(KStateError, errors.GroupNotEmptyError):
    """A consumer group still has live members where the step needs it EMPTY."""


class GroupNotStableError(KStateError):
    """A consumer group did not come back STABLE with every partition assigned in time."""


class SeedError(KStateError, errors.SeedError):
    """Committing the seed offsets failed for one or more partitions."""


class UnsafeResumeError(KStateFatalError, errors.UnsafeResumeError):
    """Resuming consumers now would make them skip data on new partitions; they stay paused."""


class VerificationError(KStateFatalError):
    """The post-increase verification found a partition whose messages a group would skip."""


class LeaseHeldError(KStateFatalError, errors.LeaseHeldError):
    """Another run holds the lease on the topic."""


class SnapshotLeaseHeldError(LeaseHeldError):
    """Another maintenance run holds the lease on the snapshot (it is writing a version of it)."""


class ControlAckTimeout(KStateError):
    """Clients did not acknowledge a control command in time."""


class StateCheckFailed(KStateError):
    """A state store disagrees with its changelog."""


class SnapshotError(KStateError, errors.SnapshotError):
    """A snapshot or its manifest is missing, unreadable or malformed."""


class SnapshotMissingError(SnapshotError):
    """No snapshot at the URI (never built, or a build that did not finish)."""


class SparkApplicationError(KStateError):
    """A kstate Spark application failed; the message is its own error line."""


class NotCompactedChangelogError(KStateFatalError, errors.NotCompactedChangelogError):
    """The changelog is not compacted and retention moved its log start: a snapshot from it lacks state
    (acknowledge with ``allow_non_compacted_changelog=True`` to accept the risk)."""


class UnprotectedGroupError(KStateFatalError, errors.UnprotectedGroupError):
    """A consumer group at risk on the topic is neither named nor excluded: the run would not protect it."""


class UnknownGroupError(KStateFatalError, errors.UnknownGroupError):
    """A named consumer group is unknown to the cluster: likely a typo."""


class ReportError(KStateFatalError, errors.ReportError):
    """A report file could not be written or read at its location."""


class TopicChangedError(KStateFatalError, errors.TopicChangedError):
    """The topic's partition count changed under the run (another tool or run grew it)."""


class BrokerDeviationError(KStateFatalError, errors.BrokerDeviationError):
    """The broker breaks a Kafka promise the run relies on (the doctor's verdict names which); nothing was
    changed. Accept a named deviation with ``allow_broker_deviation`` (logged as RISK ACCEPTED)."""


class BrokerUnsupportedError(BrokerDeviationError, errors.BrokerUnsupportedError):
    """The broker cannot perform an operation the run needs (for example it does not serve CreatePartitions)."""


class UnsupportedGroupTypeError(KStateFatalError, errors.UnsupportedGroupTypeError):
    """A group on the topic is of a type the run cannot pause and seed (a share group, a Kafka Streams
    application not acknowledged, a group whose type the client cannot tell)."""


class InvalidArgumentError(KStateConfigError, errors.InvalidArgumentError):
    """An argument is malformed or out of its range; the message names it."""


class InvalidChoiceError(InvalidArgumentError, errors.InvalidChoiceError):
    """A value is not one of its choices (a mode, a key order, a group role ...); the message names them."""


class InvalidDriverError(KStateFatalError, errors.InvalidDriverError):
    """A driver (a group's or a producer service's) is malformed or names nothing the run knows."""


class UndrivableGroupError(KStateFatalError, errors.UndrivableGroupError):
    """A live group at risk does not run the client piece and has no driver: the run cannot make it leave."""


class GroupNeverLeftError(KStateFatalError, GroupNotEmptyError, errors.GroupNeverLeftError):
    """A paused or stopped group still had members when its wait ran out: not retried (a retry would wait
    again, with every other group out of its group meanwhile)."""


class DriverCommandError(KStateFatalError, errors.DriverCommandError):
    """A command of a group's or a producer's driver failed (non-zero exit, or killed at its timeout)."""


class DrainTimeoutError(KStateFatalError, errors.DrainTimeoutError):
    """A drained group did not commit past the old partitions' end offsets before the drain's deadline."""


class SparkAppInputError(KStateFatalError, errors.SparkAppInputError):
    """A Spark application refused its input (config, snapshot, topic): a retry cannot change it."""


class ChangelogReadError(KStateError, errors.ChangelogReadError):
    """A changelog could not be read to its bound (broker unreachable, topic missing, a read timed out)."""


class KafkaRequestError(KStateError, errors.KafkaRequestError):
    """A Kafka request failed with an error Kafka says is retriable: the task is retried."""


class KafkaRequestRefusedError(KStateFatalError, errors.KafkaRequestRefusedError):
    """A Kafka request failed with an error Kafka says is not retriable: the task fails at once."""


class PlanChangedError(KStateFatalError, errors.PlanChangedError):
    """The cluster changed between the plan and its approval: the run stops before anyone is paused."""


class ControlRecordError(KStateFatalError, errors.ControlRecordError):
    """A control record does not validate against its kind's schema (a reader ignores it)."""


class LeaseRecordError(KStateFatalError, errors.LeaseRecordError):
    """A record of the lease log cannot be read (malformed, or of a newer version): nothing was changed."""


class VerdictError(KStateFatalError, errors.VerdictError):
    """A doctor's verdict cannot be read (malformed, or of a newer version)."""


class ApprovalTimeoutError(KStateFatalError):
    """Nobody answered the approval request before its deadline: nothing was changed, the lease released."""


#: The Airflow face of each domain error: each face names its domain error among its bases.
FACES: dict[type, type[KStateError]] = {
    base: face
    for face in list(globals().values())
    if isinstance(face, type) and issubclass(face, KStateError)
    for base in face.__bases__
    if base.__module__ == errors.__name__
}


def airflow_error(exc: errors.KStateError) -> KStateError:
    """Return the Airflow face of a domain error (the error itself when it is one already).

    A subclass the domain defines for itself is translated as its nearest domain error with a face.
    """
    if isinstance(exc, KStateError):
        return exc
    face = next(FACES[cls] for cls in type(exc).__mro__ if cls in FACES)
    return face(*exc.args)


def kafka_error(exc: BaseException) -> errors.KafkaRequestError | None:
    """Return a raw ``confluent_kafka.KafkaException`` as a domain error naming the Kafka error (None for
    anything else); Kafka's own ``retriable()`` decides whether a retry may help. confluent-kafka is not
    imported here (this module loads at DAG parse): an exception of it exists only once it was imported."""
    kafka = sys.modules.get("confluent_kafka")
    if kafka is None or not isinstance(exc, kafka.KafkaException):
        return None
    err: Any = exc.args[0] if exc.args else None
    name = err.name() if hasattr(err, "name") else type(exc).__name__
    text = err.str() if hasattr(err, "str") else str(exc)
    retriable = bool(err.retriable()) if hasattr(err, "retriable") else True
    cls = errors.KafkaRequestError if retriable else errors.KafkaRequestRefusedError
    return cls(f"a Kafka request failed: {name}: {text}")


@contextmanager
def airflow_errors() -> Iterator[None]:
    """Let a domain error (or a raw ``KafkaException``) leave the block (or the decorated function) as its
    Airflow face.

    The face keeps the domain error's message, traceback and cause, so the task log reads as if the
    domain had raised it.
    """
    try:
        yield
    except errors.KStateError as exc:
        face = airflow_error(exc)
        if face is exc:
            raise
        raise face.with_traceback(exc.__traceback__) from exc.__cause__
    except Exception as exc:
        domain = kafka_error(exc)
        if domain is None:
            raise
        raise airflow_error(domain).with_traceback(exc.__traceback__) from exc


class TranslatesDomainErrors:
    """Mixin of the operators and sensors that reach the domain: the ``execute``, ``execute_complete``,
    ``choose_branch`` and ``poke`` each class defines run inside :func:`airflow_errors`, so the task fails
    with the named Airflow error (fatal or retryable as named), never with a plain domain error or a raw
    ``KafkaException``."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in ("execute", "execute_complete", "choose_branch", "poke"):
            method = cls.__dict__.get(name)
            if callable(method):
                setattr(cls, name, airflow_errors()(method))
