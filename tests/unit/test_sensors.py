"""Unit tests of the sensors: their check arguments and the errors a timeout or the triggerer ends them with."""

from __future__ import annotations

import pytest
from kstate_support.fakes import PLAN

from airflow_provider_kstate.exceptions import GroupNotEmptyError, GroupNotStableError, KStateError


def test_sensor_timeouts_name_what_is_left() -> None:
    from airflow_provider_kstate.sensors.groups import KStateGroupsEmptySensor, KStateGroupsStableSensor

    empty = KStateGroupsEmptySensor(task_id="e", plan=PLAN, timeout=5)
    with pytest.raises(GroupNotEmptyError, match="c1@host"):
        empty.execute_complete({}, {"status": "timeout", "detail": {"live": {"members": ["c1@host"]}}})
    assert empty.check_arguments() == {"topic": "orders", "groups": ["live", "idle"]}
    stable = KStateGroupsStableSensor(task_id="s", plan=PLAN, timeout=5)
    assert stable.check_arguments() == {"topic": "orders", "groups": ["live"], "partitions": 4}
    with pytest.raises(GroupNotStableError, match="unassigned"):
        stable.execute_complete({}, {"status": "timeout", "detail": {"live": {"unassigned": [3]}}})
    with pytest.raises(KStateError, match="triggerer"):
        stable.execute_complete({}, {"status": "error", "message": "x"})
    assert stable.execute_complete({}, {"status": "success", "detail": {}}) == {}
