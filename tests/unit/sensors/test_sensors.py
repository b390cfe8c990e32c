"""Unit tests of the sensors: their check arguments and the errors a timeout or the triggerer ends them with."""

from __future__ import annotations

import pytest
from kstate_support.fakes import PLAN

from airflow_provider_kstate.compat import AirflowFailException
from airflow_provider_kstate.errors import GroupNotEmptyError, GroupNotStableError, KStateError


def test_sensor_timeouts_name_what_is_left() -> None:
    from airflow_provider_kstate.sensors.groups import KStateGroupsEmptySensor, KStateGroupsStableSensor

    empty = KStateGroupsEmptySensor(task_id="e", plan=PLAN, timeout=5)
    with pytest.raises(AirflowFailException, match="c1@host") as never_left:  # not retried
        empty.execute_complete({}, {"status": "timeout", "detail": {"live": {"members": ["c1@host"]}}})
    assert isinstance(never_left.value.__cause__, GroupNotEmptyError)
    assert empty.check_arguments() == {"topic": "orders", "groups": ["live", "idle"]}
    stable = KStateGroupsStableSensor(task_id="s", plan=PLAN, timeout=5)
    assert stable.check_arguments() == {"topics": {"orders": ["live"]}, "partitions": 4}
    with pytest.raises(GroupNotStableError, match="unassigned"):
        stable.execute_complete({}, {"status": "timeout", "detail": {"live": {"unassigned": [3]}}})
    with pytest.raises(KStateError, match="triggerer"):
        stable.execute_complete({}, {"status": "error", "message": "x"})
    assert stable.execute_complete({}, {"status": "success", "detail": {}}) == {}


def test_sensors_follow_airflows_default_deferrable() -> None:
    """``[operators] default_deferrable`` decides a sensor's default, as in the Airflow providers."""
    import os
    import subprocess
    import sys

    from airflow_provider_kstate.compat import conf
    from airflow_provider_kstate.sensors.groups import KStateGroupsEmptySensor

    default = conf.getboolean("operators", "default_deferrable", fallback=False)
    assert KStateGroupsEmptySensor(task_id="e", plan=PLAN).deferrable is default
    assert KStateGroupsEmptySensor(task_id="p", plan=PLAN, deferrable=not default).deferrable is (not default)
    script = (
        "from airflow_provider_kstate.sensors.partitions import KStateNewPartitionsWrittenSensor as S\n"
        "print(S(task_id='w', plan={}, baseline={}).deferrable)"
    )
    for value in ("true", "false"):
        env = {**os.environ, "AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE": value}
        out = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
        )
        assert out.stdout.strip().splitlines()[-1] == value.title(), out


def test_the_factory_defers_its_sensors_by_default() -> None:
    """The factory's documented default: its sensors defer whatever ``default_deferrable`` says."""
    from airflow.sdk import DAG

    from airflow_provider_kstate.task_groups.partition_increase import (
        StepsConfig,
        WaitConfig,
        safe_partition_increase,
    )

    per_step = StepsConfig(single_window=False)
    with DAG("unit_deferrable", schedule=None):
        group = safe_partition_increase(topic="t", partitions=3, steps=per_step)
        poking = safe_partition_increase(
            topic="t", partitions=3, steps=per_step, waits=WaitConfig(deferrable=False), group_id="p"
        )
    sensors = [t for t in group.children.values() if t.task_id.endswith(("_empty", "_stable"))]
    assert len(sensors) == 2 and all(s.deferrable for s in sensors)
    assert not any(
        t.deferrable for t in poking.children.values() if t.task_id.endswith(("_empty", "_stable"))
    )
