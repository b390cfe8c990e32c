"""Unit tests of the modes as string enums: they equal their strings (params, XCom and templates keep working)
and a wrong value is refused at the edge with an error naming the choices."""

from __future__ import annotations

import json

import pytest
from kstate_support.fakes import PLAN

from airflow_provider_kstate.client_piece.protocol import PRESERVE, KeyOrder
from airflow_provider_kstate.errors import KStateConfigError
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


def test_the_doctor_needs_the_key_order_marks_and_the_group_roles_are_string_enums() -> None:
    """``needs``, ``GroupPlan.key_order`` and ``GroupPlan.role`` are members equal to their strings; the
    plan's XCom keeps plain strings; a wrong value is refused naming the choices."""
    from airflow_provider_kstate.doctor.promises import NEEDS, STATE_NEEDS, Needs
    from airflow_provider_kstate.increase.key_order import ORDER_OFFLINE, ORDER_RELAXED, group_order
    from airflow_provider_kstate.increase.plan import GroupPlan, GroupRole, KeyOrderMark
    from airflow_provider_kstate.operators.doctor import needed_promises

    assert [str(n) for n in Needs] == ["increase", "state", "all"] and set(NEEDS) == set(Needs)
    assert needed_promises("state") == needed_promises(Needs.STATE) == STATE_NEEDS
    with pytest.raises(KStateConfigError, match="one of increase, state, all. Nothing was changed"):
        needed_promises("everything")
    assert ORDER_RELAXED is KeyOrderMark.RELAXED and ORDER_RELAXED == "relaxed"
    assert group_order("preserve", [], set()) == (ORDER_OFFLINE, group_order("preserve", [], set())[1])
    assert group_order("preserve", ["c1"], {"c1"})[0] is KeyOrderMark.BARRIER
    marked = {"class": "active", "state": "STABLE", "role": "streams", "key_order": "relaxed"}
    marked["key_order_reason"] = "1 of 1 live members never acknowledged"
    entry = GroupPlan.from_dict(marked)
    assert entry.role is GroupRole.STREAMS and entry.key_order is KeyOrderMark.RELAXED
    out = entry.to_dict()
    assert type(out["role"]) is str and type(out["key_order"]) is str
    assert json.loads(json.dumps(out))["key_order"] == "relaxed" and GroupPlan.from_dict(out) == entry
    plain = GroupPlan.from_dict({"class": "empty", "state": "EMPTY"})
    assert plain.role is GroupRole.PLAIN and plain.key_order is KeyOrderMark.NONE
    assert "role" not in plain.to_dict() and "key_order" not in plain.to_dict()  # empty: not written
    hand_built = GroupPlan(cls=GroupClass.ACTIVE, state="STABLE", role="connect-sink", key_order="barrier")  # type: ignore[arg-type]
    assert hand_built.role is GroupRole.CONNECT_SINK and hand_built.key_order is KeyOrderMark.BARRIER
    with pytest.raises(
        InvalidPlanError, match="group role must be one of streams, connect-sink or empty, got 'robot'"
    ):
        GroupPlan.from_dict({**marked, "role": "robot"})
    with pytest.raises(
        InvalidPlanError,
        match="key_order must be one of barrier, drained, relaxed, offline or empty.*'loose'",
    ):
        GroupPlan.from_dict({**marked, "key_order": "loose"})


def test_the_doctor_command_refuses_an_unknown_needs_naming_the_choices(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from airflow_provider_kstate.doctor.__main__ import main

    with pytest.raises(SystemExit) as exit_info:
        main(["--bootstrap-servers", "127.0.0.1:1", "--needs", "everything"])
    assert exit_info.value.code == 2
    assert "'everything'" in (err := capsys.readouterr().err) and "increase" in err and "state" in err
