"""One error hierarchy (errors.py): each error says whether a retry can help; one edge (task_edge.py) turns
a non-retryable one into ``AirflowFailException`` where a task ends, and lets a retryable one through."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import pkgutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_kstate import errors
from airflow_provider_kstate.compat import AirflowFailException
from airflow_provider_kstate.increase.plan import InvalidPlanError
from airflow_provider_kstate.operators.step import KStateStepOperator
from airflow_provider_kstate.task_edge import TASK_METHODS, TranslatesDomainErrors, task_edge

PACKAGE = Path(errors.__file__).parent


def _domain() -> list[type[errors.KStateError]]:
    return [c for _, c in inspect.getmembers(errors, inspect.isclass) if c.__module__ == errors.__name__]


def test_every_error_says_whether_a_retry_can_help_by_its_attribute() -> None:
    domain = _domain()
    assert len(domain) >= 40 and all(issubclass(c, errors.KStateError) for c in domain)
    for error in domain:
        assert isinstance(error.__dict__.get("retryable"), bool), error.__name__
    # the fatal and retryable ones stay as users knew them
    assert not errors.UnsafeResumeError.retryable and not errors.ReportError.retryable
    assert errors.GroupNotEmptyError.retryable and not errors.GroupNeverLeftError.retryable
    assert errors.ChangelogReadError.retryable and not errors.NotCompactedChangelogError.retryable
    assert errors.KafkaRequestError.retryable and not errors.KafkaRequestRefusedError.retryable
    assert not InvalidPlanError("x").retryable  # a subclass the domain defines inherits its answer


def test_no_error_is_defined_twice_and_the_old_module_name_is_gone() -> None:
    # errors.py is the one module of the errors: the re-exporting airflow_provider_kstate.exceptions, kept
    # for a 0.x release that was never published, is gone
    assert importlib.util.find_spec("airflow_provider_kstate.exceptions") is None
    defined: Counter[str] = Counter()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.name.endswith(("Error", "Exception")):
                defined[node.name] += 1
    assert [name for name, n in defined.items() if n > 1] == []


def test_no_error_of_the_package_has_two_bases_from_the_hierarchy() -> None:
    modules = [errors.__name__]
    for sub in ("store", "spark_apps", "doctor", "client_piece", "cluster", "increase"):
        package = importlib.import_module(f"airflow_provider_kstate.{sub}")
        modules += [f"{package.__name__}.{m.name}" for m in pkgutil.iter_modules(package.__path__)]
    seen = 0
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ImportError:  # a Spark application without pyspark here
            continue
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if (
                cls.__module__ == name
                and issubclass(cls, errors.KStateError)
                and cls is not errors.KStateError
            ):
                seen += 1
                ours = [b for b in cls.__bases__ if issubclass(b, errors.KStateError)]
                assert len(ours) == 1, f"{name}.{cls.__name__}: {ours}"
    assert seen > len(_domain())


def _fatal() -> None:
    try:
        raise FileNotFoundError("seed.evidence.json")
    except OSError as exc:
        raise errors.ReportError("report x: seed.evidence.json") from exc


def test_a_fatal_error_fails_the_task_with_the_error_as_its_cause() -> None:
    with pytest.raises(AirflowFailException, match="report x") as info:
        task_edge(_fatal)()
    cause = info.value.__cause__
    assert type(cause) is errors.ReportError and str(info.value) == str(cause)
    assert isinstance(cause.__cause__, FileNotFoundError)  # the error's own cause is kept
    assert cause.__traceback__ is not None and cause.__traceback__.tb_next is not None  # where it was raised


def test_a_retryable_error_leaves_as_itself_so_airflow_retries_it() -> None:
    error = errors.GroupNotEmptyError("c1@host")

    def retryable() -> None:
        raise error

    with pytest.raises(errors.GroupNotEmptyError) as info:
        task_edge(retryable)()
    assert info.value is error and not isinstance(info.value, AirflowFailException)
    with pytest.raises(ZeroDivisionError):  # anything else passes unchanged
        task_edge(lambda: 1 / 0)()


def test_a_step_operator_fails_or_is_retried_as_its_error_says() -> None:
    class Step(KStateStepOperator):
        def execute(self, context: Any) -> None:
            raise errors.UnsafeResumeError("UNSAFE TO RESUME")

        def execute_complete(self, context: Any, event: Any) -> None:
            raise errors.GroupNotEmptyError("c1@host")

    step = Step(task_id="s", plan={})
    with pytest.raises(AirflowFailException, match="UNSAFE TO RESUME") as fatal:
        step.execute({})
    assert isinstance(fatal.value.__cause__, errors.UnsafeResumeError)
    with pytest.raises(errors.GroupNotEmptyError, match="c1@host"):
        step.execute_complete({}, {})


def test_a_raw_kafka_exception_leaves_a_task_as_a_named_error_retried_only_when_kafka_says_so() -> None:
    from confluent_kafka import KafkaError, KafkaException

    def timed_out() -> None:
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "timed out", retriable=True))

    def refused() -> None:
        raise KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "not allowed"))

    with pytest.raises(errors.KafkaRequestError, match="a Kafka request failed: _TIMED_OUT") as retried:
        task_edge(timed_out)()
    assert retried.value.retryable and isinstance(retried.value.__cause__, KafkaException)
    with pytest.raises(AirflowFailException, match="TOPIC_AUTHORIZATION_FAILED") as failed:
        task_edge(refused)()
    assert type(failed.value.__cause__) is errors.KafkaRequestRefusedError
    assert isinstance(failed.value.__cause__.__cause__, KafkaException)


def test_every_operator_and_sensor_runs_its_task_methods_inside_the_edge() -> None:
    from airflow.sdk import BaseOperator

    classes = []
    for sub in ("operators", "sensors"):
        package = importlib.import_module(f"airflow_provider_kstate.{sub}")
        for info in pkgutil.iter_modules(package.__path__):
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            classes += [
                c
                for _, c in inspect.getmembers(module, inspect.isclass)
                if c.__module__ == module.__name__ and issubclass(c, BaseOperator)
            ]
    assert len(classes) >= 20
    for cls in classes:
        assert issubclass(cls, TranslatesDomainErrors), cls.__name__
        for name in TASK_METHODS:
            if name in cls.__dict__:
                assert getattr(cls.__dict__[name], "__task_edge__", False), f"{cls.__name__}.{name}"


def test_the_store_the_spark_apps_and_the_doctor_raise_errors_of_the_hierarchy() -> None:
    from airflow_provider_kstate.doctor.diagnosis import ClusterUnreachable
    from airflow_provider_kstate.doctor.verdict import BrokerDeviation
    from airflow_provider_kstate.doctor.wire import WireUnavailable
    from airflow_provider_kstate.spark_apps import kafka_io
    from airflow_provider_kstate.store.contract import AppError
    from airflow_provider_kstate.store.layout import PointerError, SnapshotAbsent, pointer_bytes
    from airflow_provider_kstate.store.manifest import ManifestError

    kinds = {
        PointerError("garbled"): errors.SnapshotError,
        SnapshotAbsent("none"): errors.SnapshotError,
        ManifestError("not JSON"): errors.SnapshotError,
        AppError("bad config"): errors.SparkAppInputError,
        ClusterUnreachable("down"): errors.BrokerUnavailableError,
        WireUnavailable("SASL"): errors.BrokerUnavailableError,
        BrokerDeviation("ListOffsets lies", ("list_offsets",)): errors.BrokerDeviationError,
        kafka_io.KafkaReadError("timed out"): errors.ChangelogReadError,
        kafka_io.OffsetBoundError("bounds"): errors.BrokerDeviationError,
        kafka_io.NotCompactedError("log start moved"): errors.NotCompactedChangelogError,
    }
    for error, kind in kinds.items():
        assert isinstance(error, kind) and error.retryable is kind.retryable, error
    with pytest.raises(AirflowFailException, match="bad config"):
        task_edge(lambda: (_ for _ in ()).throw(AppError("bad config")))()
    with pytest.raises(errors.SnapshotError, match="is not a version name"):
        task_edge(pointer_bytes)("latest")
