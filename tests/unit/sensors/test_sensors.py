"""Unit tests of the sensors: their check arguments and the errors a timeout or the triggerer ends them with."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from kstate_support.fakes import PLAN, GhostHook, PauseAcks

from airflow_provider_kstate.compat import AirflowFailException
from airflow_provider_kstate.errors import GroupNotEmptyError, GroupNotStableError, KStateError
from airflow_provider_kstate.increase.ghosts import GHOST_REASON


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


def _ghost_channel(monkeypatch: pytest.MonkeyPatch, hook: Any, control: Any) -> list[str]:
    """Put the ghost cluster and the pause's acknowledgements behind ``KStateControlHook``, where every
    poke and every poll of the trigger gets them; return the control topics asked for."""
    asked: list[str] = []

    def channel(kafka_config_id: str, control_topic: str, request_timeout: float) -> Any:
        asked.append(control_topic)
        return SimpleNamespace(admin=hook, get_conn=control)

    monkeypatch.setattr("airflow_provider_kstate.triggers.groups.KStateControlHook", channel)
    return asked


def _empty_sensor(**kwargs: Any) -> Any:
    from airflow_provider_kstate.sensors.groups import KStateGroupsEmptySensor

    pause = {"epoch": PauseAcks.EPOCH, "groups": 2, "topics": {"orders": {"pinned_to": 2}}}
    return KStateGroupsEmptySensor(task_id="e", plan=PLAN, pause=pause, control_topic="_ctl", **kwargs)


def test_the_empty_sensor_s_poke_removes_the_ghosts_of_the_pause_it_follows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Per-step layout: the pause step's XCom gives the epoch; members whose clients all acknowledged that
    pause are removed, and the next poke finds the group EMPTY (not their session's end, 6 s to 45 s)."""
    hook, control = GhostHook(), PauseAcks()
    asked = _ghost_channel(monkeypatch, hook, control)
    sensor = _empty_sensor(timeout=5)
    assert sensor.check_arguments() == {
        "topic": "orders",
        "groups": ["live", "idle"],
        "pause_epoch": PauseAcks.EPOCH,
    }
    assert sensor.poke({}) is False and hook.removed == [("live", ["m0", "m1"], GHOST_REASON)]
    assert sensor._last.detail["live"]["ghosts_removed"] == ["m0", "m1"]
    assert sensor.poke({}) is True
    assert asked == ["_ctl", "_ctl"] and control.closed


def test_the_empty_sensor_leaves_a_group_with_an_unacknowledged_member_and_survives_a_failed_removal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stranger = GhostHook(others=("stranger",))
    _ghost_channel(monkeypatch, stranger, PauseAcks())
    sensor = _empty_sensor(timeout=5)
    assert sensor.poke({}) is False and sensor.poke({}) is False
    assert stranger.removed == [] and sorted(stranger.listed) == ["m0", "m1", "x0"]
    refused = GhostHook(fail=KStateError("the coordinator refused"))
    _ghost_channel(monkeypatch, refused, PauseAcks())
    assert sensor.poke({}) is False, "a failed removal is a poke that waits on, never a failed task"
    assert len(refused.removed) == 1 and sorted(refused.listed) == ["m0", "m1"]


def test_without_the_pause_s_epoch_the_empty_sensor_removes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Your own pause task (its XCom has no epoch): no acknowledgements to read, the group is waited for."""
    from airflow_provider_kstate.sensors.groups import KStateGroupsEmptySensor

    hook = GhostHook()
    _ghost_channel(monkeypatch, hook, PauseAcks())
    for pause in (None, "scaled to 0"):
        sensor = KStateGroupsEmptySensor(task_id="e", plan=PLAN, pause=pause, timeout=5)
        assert "pause_epoch" not in sensor.check_arguments()
        assert sensor.poke({}) is False
    assert hook.removed == []


def test_the_deferred_empty_sensor_s_trigger_removes_the_ghosts_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """Deferrable: the trigger carries the epoch (in the check's arguments) and the control topic, and its
    polls remove the ghosts as a poke does."""
    import asyncio

    from airflow_provider_kstate.triggers.groups import KStateConditionTrigger

    class Deferred(Exception):
        """What the stand-in of ``defer`` raises, as Airflow's TaskDeferred ends ``execute``."""

    def defer(**kwargs: Any) -> None:
        raise Deferred(kwargs["trigger"])

    sensor = _empty_sensor(timeout=5, deferrable=True)
    monkeypatch.setattr(sensor, "defer", defer)
    with pytest.raises(Deferred) as deferred:
        sensor.execute({})
    _path, kwargs = deferred.value.args[0].serialize()
    assert kwargs["control_topic"] == "_ctl" and kwargs["arguments"]["pause_epoch"] == PauseAcks.EPOCH
    hook, control = GhostHook(), PauseAcks()
    _ghost_channel(monkeypatch, hook, control)

    async def collect() -> list[dict[str, Any]]:
        return [event.payload async for event in KStateConditionTrigger(**kwargs).run()]

    [event] = asyncio.run(collect())
    assert event["status"] == "success" and event["polls"] == 2
    assert hook.removed == [("live", ["m0", "m1"], GHOST_REASON)]
