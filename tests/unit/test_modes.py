"""Unit tests of the modes as string enums: they equal their strings (params, XCom and templates keep working)
and a wrong value is refused at the edge with an error naming the choices."""

from __future__ import annotations

import json

import pytest
from kstate_support.fakes import PLAN

from airflow_provider_kstate.client.protocol import PRESERVE, KeyOrder
from airflow_provider_kstate.exceptions import KStateConfigError
from airflow_provider_kstate.increase.key_order import check_key_order
from airflow_provider_kstate.increase.plan import GroupClass, InvalidPlanError, Plan, PlanMode
from airflow_provider_kstate.operators.maintenance import RebuildMode, verdict
from airflow_provider_kstate.store.results import CheckReport


def test_modes_equal_their_strings_and_serialize_as_them() -> None:
    assert (
        KeyOrder.PRESERVE == "preserve" and PRESERVE is KeyOrder.PRESERVE and f"{KeyOrder.RELAX}" == "relax"
    )
    assert [str(c) for c in GroupClass][:3] == ["active", "empty", "spark"]
    assert [str(m) for m in RebuildMode] == ["auto", "never", "force"]
    plan = Plan.from_dict(PLAN)
    assert plan.groups["live"].cls is GroupClass.ACTIVE and plan.groups["live"].cls == "active"
    assert plan.mode is PlanMode.INCREASE and plan.mode == "increase"
    data = plan.to_dict()
    assert type(data["mode"]) is str and type(data["groups"]["idle"]["class"]) is str
    assert json.loads(json.dumps(data))["groups"]["spark-kafka-source-1"]["class"] == "spark"
    assert Plan.from_dict(json.loads(json.dumps(data))) == plan


def test_a_wrong_mode_is_refused_naming_the_choices() -> None:
    assert check_key_order("relax") is KeyOrder.RELAX
    with pytest.raises(ValueError, match="preserve, relax.*'keep'"):
        check_key_order("keep")
    bad = {**PLAN, "groups": {"g": {"class": "lively", "state": "STABLE"}}}
    with pytest.raises(InvalidPlanError, match="active, empty, spark.*'lively'"):
        Plan.from_dict(bad)
    fast = CheckReport(check="fast", topic="t", snapshot_uri="/s", ok=True)
    assert (
        verdict(fast, None, "force") == ("rebuild", [])
        and verdict(fast, None, RebuildMode.NEVER)[0] == "store_ok"
    )
    with pytest.raises(KStateConfigError, match="rebuild must be one of auto, never, force, got 'sometimes'"):
        verdict(fast, None, "sometimes")
