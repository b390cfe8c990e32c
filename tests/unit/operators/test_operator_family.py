"""One operator family (issue 31): every operator and sensor of the provider that talks to Kafka takes the
same connection and timeout parameters, from one base class, with the same defaults and default_args."""

from __future__ import annotations

import inspect
import warnings
from typing import Any

import pytest

from airflow_provider_kstate.increase.model import DEFAULT_CONN_ID
from airflow_provider_kstate.operators.consumers import (
    KStatePauseConsumersOperator,
    KStateResumeConsumersOperator,
)
from airflow_provider_kstate.operators.deep_check import KStateDeepCheckOperator
from airflow_provider_kstate.operators.doctor import KStateBrokerDoctorOperator
from airflow_provider_kstate.operators.fast_check import KStateFastCheckOperator
from airflow_provider_kstate.operators.guard import KStateFailureGuardOperator
from airflow_provider_kstate.operators.kafka import DEFAULT_REQUEST_TIMEOUT, KStateKafkaOperator
from airflow_provider_kstate.operators.partitions import KStateIncreasePartitionsOperator
from airflow_provider_kstate.operators.plan import KStatePlanOperator
from airflow_provider_kstate.operators.producers import (
    KStateScaleProducersOperator,
    KStateStartProducersOperator,
)
from airflow_provider_kstate.operators.rebuild import KStateRebuildOperator
from airflow_provider_kstate.operators.seed import KStateSeedOffsetsOperator
from airflow_provider_kstate.operators.spark_app import KStateSparkApplicationOperator
from airflow_provider_kstate.operators.streams_resize import KStateStreamsResizeOperator
from airflow_provider_kstate.operators.verify import KStateVerifyOperator
from airflow_provider_kstate.operators.window import KStatePauseWindowOperator
from airflow_provider_kstate.sensors.groups import KStateGroupsEmptySensor, KStateGroupsStableSensor

#: Each class with the arguments it needs besides the task id, and its default per-request timeout.
FAMILY: list[tuple[type[Any], dict[str, Any], float]] = [
    (KStatePlanOperator, {"topic": "t", "partitions": 3}, DEFAULT_REQUEST_TIMEOUT),
    (KStatePauseWindowOperator, {"plan": {}}, DEFAULT_REQUEST_TIMEOUT),
    (KStatePauseConsumersOperator, {"plan": {}}, DEFAULT_REQUEST_TIMEOUT),
    (KStateResumeConsumersOperator, {"plan": {}}, DEFAULT_REQUEST_TIMEOUT),
    (KStateIncreasePartitionsOperator, {"plan": {}}, DEFAULT_REQUEST_TIMEOUT),
    (KStateSeedOffsetsOperator, {"plan": {}}, DEFAULT_REQUEST_TIMEOUT),
    (KStateScaleProducersOperator, {"plan": {}}, DEFAULT_REQUEST_TIMEOUT),
    (KStateStartProducersOperator, {"plan": {}}, DEFAULT_REQUEST_TIMEOUT),
    (KStateVerifyOperator, {"plan": {}}, DEFAULT_REQUEST_TIMEOUT),
    (KStateFailureGuardOperator, {"plan_task_id": "plan"}, DEFAULT_REQUEST_TIMEOUT),
    (KStateBrokerDoctorOperator, {}, 20.0),
    (KStateFastCheckOperator, {"topic": "t", "snapshot_uri": "/s"}, DEFAULT_REQUEST_TIMEOUT),
    (KStateDeepCheckOperator, {"topic": "t", "snapshot_uri": "/s"}, DEFAULT_REQUEST_TIMEOUT),
    (KStateRebuildOperator, {"topic": "t", "snapshot_uri": "/s"}, DEFAULT_REQUEST_TIMEOUT),
    (KStateSparkApplicationOperator, {"application": "app.py"}, DEFAULT_REQUEST_TIMEOUT),
    (KStateGroupsEmptySensor, {"plan": {}}, 10.0),
    (KStateGroupsStableSensor, {"plan": {}}, 10.0),
    (
        KStateStreamsResizeOperator,
        {"topic": "t", "partitions": 4, "application_id": "app", "app_driver": "app"},
        DEFAULT_REQUEST_TIMEOUT,
    ),
]
IDS = [cls.__name__ for cls, _, _ in FAMILY]


@pytest.mark.parametrize(("cls", "needed", "timeout"), FAMILY, ids=IDS)
def test_every_kafka_task_takes_the_same_connection_and_timeout(
    cls: type[Any], needed: dict[str, Any], timeout: float
) -> None:
    assert issubclass(cls, KStateKafkaOperator)
    default = cls(task_id="x", **needed)
    assert (default.kafka_config_id, default.request_timeout) == (DEFAULT_CONN_ID, timeout)
    given = cls(task_id="y", kafka_config_id="kafka_prod", request_timeout=7, **needed)
    assert (given.kafka_config_id, given.request_timeout) == ("kafka_prod", 7.0)
    assert inspect.signature(cls.execute).parameters["context"].annotation == "Context"


@pytest.mark.parametrize(("cls", "needed", "timeout"), FAMILY, ids=IDS)
def test_default_args_reach_the_shared_parameters(
    cls: type[Any], needed: dict[str, Any], timeout: float
) -> None:
    from airflow.sdk import DAG

    with DAG(
        "unit_family", schedule=None, default_args={"kafka_config_id": "kafka_dag", "request_timeout": 3}
    ):
        task = cls(task_id="x", **needed)
    assert (task.kafka_config_id, task.request_timeout) == ("kafka_dag", 3.0)


def test_the_fast_check_takes_request_timeout_and_refuses_timeout() -> None:
    """One name for the per-request timeout: ``timeout`` (a spelling of a 0.x release that was never
    published) is refused by Airflow's own argument check, not taken silently."""
    check = KStateFastCheckOperator(task_id="f", topic="t", snapshot_uri="/s", request_timeout=5)
    assert check.request_timeout == 5.0
    with pytest.raises(TypeError, match="timeout"):
        KStateFastCheckOperator(task_id="g", topic="t", snapshot_uri="/s", timeout=5)


def test_a_sensor_keeps_timeout_as_its_wait() -> None:
    """``timeout`` is a sensor's whole wait (Airflow's), not a renamed per-request timeout."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        sensor = KStateGroupsEmptySensor(task_id="s", plan={}, timeout=42)
    assert (sensor.timeout, sensor.request_timeout) == (42, 10.0)
