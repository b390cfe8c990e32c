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


class PlanChangedError(KStateError):
    """The cluster changed between the plan and its approval (another partition count, a new group at risk, a
    group handled differently): the approved plan no longer says what the run would do."""
