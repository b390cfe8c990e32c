"""Where a task ends: the one place the provider's errors (:mod:`airflow_provider_kstate.errors`) meet Airflow.

An error whose ``retryable`` is False fails the task at once: :func:`task_edge` raises
``AirflowFailException(str(err)) from err`` (the error stays the exception's ``__cause__``, so the log shows
it, named, with its traceback). A retryable one leaves as itself and Airflow's retries apply. A raw
``confluent_kafka.KafkaException`` (a hook lets it through) is first named as a
:class:`~airflow_provider_kstate.errors.KafkaRequestError` (retryable when Kafka says it is).

Every operator and sensor of the provider gets it the same way: its base class is :class:`TranslatesDomainErrors`,
which applies :func:`task_edge` to the task methods (:data:`TASK_METHODS`) each subclass defines. Hooks,
triggers and the domain never translate.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from airflow_provider_kstate import errors
from airflow_provider_kstate.compat import AirflowFailException

F = TypeVar("F", bound=Callable[..., Any])

#: The methods Airflow calls on a task: each one a :class:`TranslatesDomainErrors` class defines runs inside :func:`task_edge`.
TASK_METHODS = ("execute", "execute_complete", "choose_branch", "poke")


def kafka_error(exc: BaseException) -> errors.KafkaRequestError | None:
    """Return a raw ``confluent_kafka.KafkaException`` as the error naming the Kafka error (None for anything
    else); Kafka's own ``retriable()`` decides whether a retry may help. confluent-kafka is not imported here
    (this module loads at DAG parse): an exception of it exists only once it was imported."""
    kafka = sys.modules.get("confluent_kafka")
    if kafka is None or not isinstance(exc, kafka.KafkaException):
        return None
    err: Any = exc.args[0] if exc.args else None
    name = err.name() if hasattr(err, "name") else type(exc).__name__
    text = err.str() if hasattr(err, "str") else str(exc)
    retriable = bool(err.retriable()) if hasattr(err, "retriable") else True
    cls = errors.KafkaRequestError if retriable else errors.KafkaRequestRefusedError
    return cls(f"a Kafka request failed: {name}: {text}")


def task_edge(method: F) -> F:
    """Run ``method`` (a task's ``execute``, ``poke`` ...) so its errors leave as Airflow reads them: a
    non-retryable :class:`~airflow_provider_kstate.errors.KStateError` as ``AirflowFailException`` from it,
    a retryable one as itself; anything else unchanged."""
    if getattr(method, "__task_edge__", False):
        return method

    @functools.wraps(method)
    def edged(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except errors.KStateError as err:
            if err.retryable:
                raise
            raise AirflowFailException(str(err)) from err
        except Exception as exc:
            named = kafka_error(exc)
            if named is None:
                raise
            if named.retryable:
                raise named.with_traceback(exc.__traceback__) from exc
            named.__cause__ = exc
            raise AirflowFailException(str(named)) from named

    edged.__task_edge__ = True  # type: ignore[attr-defined]
    return edged  # type: ignore[return-value]


class TranslatesDomainErrors:
    """Base of the provider's operators and sensors (mixed in before Airflow's): every method of
    :data:`TASK_METHODS` a subclass defines runs inside :func:`task_edge`, so no task of the provider
    fails with a retry its error says cannot help."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in TASK_METHODS:
            method = cls.__dict__.get(name)
            if callable(method):
                setattr(cls, name, task_edge(method))
