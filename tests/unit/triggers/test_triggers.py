"""Unit tests of triggers/groups.py: the condition trigger serializes and yields success, timeout and error."""

from __future__ import annotations

import asyncio
import importlib
import time
from typing import Any

import pytest

from airflow_provider_kstate.increase import checks
from airflow_provider_kstate.triggers.groups import KStateConditionTrigger


def _trigger(deadline: float) -> KStateConditionTrigger:
    return KStateConditionTrigger(
        check="groups_empty",
        kafka_config_id="kafka_default",
        arguments={"topic": "t", "groups": ["g"]},
        poke_interval=0.01,
        deadline=deadline,
    )


def test_trigger_serializes_to_its_own_arguments() -> None:
    trigger = _trigger(123.0)
    path, kwargs = trigger.serialize()
    module, name = path.rsplit(".", 1)
    assert getattr(importlib.import_module(module), name)(**kwargs).serialize() == (path, kwargs)
    with pytest.raises(ValueError, match="unknown check"):
        KStateConditionTrigger(check="nope", kafka_config_id="k", arguments={}, poke_interval=1, deadline=0)


def _events(trigger: KStateConditionTrigger) -> list[dict[str, Any]]:
    async def collect() -> list[dict[str, Any]]:
        return [event.payload async for event in trigger.run()]

    return asyncio.run(collect())


def test_trigger_yields_success_timeout_and_error(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = iter([checks.CheckResult(False, {"g": 1}), checks.CheckResult(True, {})])
    monkeypatch.setattr("airflow_provider_kstate.triggers.groups.run_check", lambda *a: next(answers))
    [event] = _events(_trigger(time.time() + 60))
    assert event["status"] == "success" and event["polls"] == 2
    monkeypatch.setattr(
        "airflow_provider_kstate.triggers.groups.run_check", lambda *a: checks.CheckResult(False, {"g": 1})
    )
    [event] = _events(_trigger(time.time() - 1))
    assert event["status"] == "timeout" and event["detail"] == {"g": 1}

    def boom(*_a: Any) -> None:
        raise RuntimeError("broker gone")

    monkeypatch.setattr("airflow_provider_kstate.triggers.groups.run_check", boom)
    [event] = _events(_trigger(time.time() + 60))
    assert event["status"] == "error" and "broker gone" in event["message"]
