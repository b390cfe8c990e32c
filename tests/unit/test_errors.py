"""The domain's plain errors (errors.py) and their Airflow faces (exceptions.py): one place translates."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from airflow_provider_kstate import errors, exceptions
from airflow_provider_kstate.compat import AirflowFailException
from airflow_provider_kstate.increase.plan import InvalidPlanError
from airflow_provider_kstate.operators.base import KStateStepOperator


def test_every_domain_error_has_an_airflow_face_of_its_name() -> None:
    domain = [c for _, c in inspect.getmembers(errors, inspect.isclass) if c.__module__ == errors.__name__]
    assert len(domain) >= 10 and set(exceptions.FACES) == set(domain)
    for error, face in exceptions.FACES.items():
        assert face is getattr(exceptions, error.__name__)
        assert issubclass(face, error) and issubclass(face, exceptions.KStateError)
    # the fatal and retryable ones stay as users catch them
    assert issubclass(exceptions.UnsafeResumeError, AirflowFailException)
    assert issubclass(exceptions.ReportError, exceptions.KStateFatalError)
    assert not issubclass(exceptions.GroupNotEmptyError, exceptions.KStateFatalError)


def test_a_domain_error_leaves_as_its_face_with_its_message_traceback_and_cause() -> None:
    def domain() -> None:
        try:
            raise FileNotFoundError("seed.evidence.json")
        except OSError as exc:
            raise errors.ReportError("report x: seed.evidence.json") from exc

    with pytest.raises(exceptions.ReportError, match="report x") as info:
        with exceptions.airflow_errors():
            domain()
    assert isinstance(info.value, exceptions.KStateFatalError)
    assert isinstance(info.value.__cause__, FileNotFoundError)
    assert info.traceback[-1].name == "domain"  # the line that raised it
    # a face passes unchanged; a subclass the domain defines leaves as its nearest face
    face = exceptions.GroupNotEmptyError("members left")
    assert exceptions.airflow_error(face) is face
    plan_error = exceptions.airflow_error(InvalidPlanError("not a kstate plan"))
    assert (
        type(plan_error) is exceptions.InvalidPartitionCountError and str(plan_error) == "not a kstate plan"
    )


def test_a_step_operator_fails_with_the_face_of_what_the_domain_raised() -> None:
    class Step(KStateStepOperator):
        def execute(self, context: Any) -> None:
            raise errors.UnsafeResumeError("UNSAFE TO RESUME")

        def execute_complete(self, context: Any, event: Any) -> None:
            raise errors.GroupNotEmptyError("c1@host")

    step = Step(task_id="s", plan={})
    with pytest.raises(exceptions.UnsafeResumeError, match="UNSAFE TO RESUME"):
        step.execute({})
    with pytest.raises(exceptions.GroupNotEmptyError, match="c1@host"):
        step.execute_complete({}, {})


def test_a_raw_kafka_exception_leaves_a_task_as_a_named_error_retried_only_when_kafka_says_so() -> None:
    from confluent_kafka import KafkaError, KafkaException

    with pytest.raises(exceptions.KafkaRequestError, match="a Kafka request failed: _TIMED_OUT") as retried:
        with exceptions.airflow_errors():
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "timed out", retriable=True))
    assert not isinstance(retried.value, exceptions.KStateFatalError)
    with pytest.raises(exceptions.KafkaRequestRefusedError, match="TOPIC_AUTHORIZATION_FAILED") as refused:
        with exceptions.airflow_errors():
            raise KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "not allowed"))
    assert isinstance(refused.value, exceptions.KStateFatalError)
    assert isinstance(refused.value.__cause__, KafkaException)


def test_the_store_the_spark_apps_and_the_doctor_raise_domain_errors_with_faces() -> None:
    from airflow_provider_kstate.doctor.doctor import ClusterUnreachable
    from airflow_provider_kstate.doctor.verdict import BrokerDeviation
    from airflow_provider_kstate.doctor.wire import WireUnavailable
    from airflow_provider_kstate.store.contract import AppError
    from airflow_provider_kstate.store.layout import PointerError, SnapshotAbsent, pointer_bytes
    from airflow_provider_kstate.store.manifest import ManifestError

    faces = {
        PointerError("garbled"): exceptions.SnapshotError,
        SnapshotAbsent("none"): exceptions.SnapshotError,
        ManifestError("not JSON"): exceptions.SnapshotError,
        AppError("bad config"): exceptions.SparkAppInputError,
        ClusterUnreachable("down"): exceptions.BrokerUnavailableError,
        WireUnavailable("SASL"): exceptions.BrokerUnavailableError,
        BrokerDeviation("ListOffsets lies", ("list_offsets",)): exceptions.BrokerDeviationError,
    }
    for error, face in faces.items():
        assert isinstance(exceptions.airflow_error(error), face), error
    with pytest.raises(exceptions.SnapshotError, match="is not a version name"):
        with exceptions.airflow_errors():
            pointer_bytes("latest")
