"""Unit tests of the operators and sensors as classes: template fields and keyword-only constructors."""

from __future__ import annotations

import pytest


def _all_operator_classes() -> list[type]:
    from airflow_provider_kstate.operators import (
        approval,
        consumers,
        guard,
        partitions,
        plan,
        producers,
        seed,
        verify,
    )
    from airflow_provider_kstate.sensors import groups
    from airflow_provider_kstate.sensors import partitions as psensors

    mods = [approval, consumers, guard, partitions, plan, producers, seed, verify, groups, psensors]
    return [
        obj
        for m in mods
        for name, obj in vars(m).items()
        if name.startswith("KState") and isinstance(obj, type)
    ]


def test_template_fields_are_tuples_and_constructors_are_keyword_only() -> None:
    classes = [c for c in _all_operator_classes() if hasattr(c, "template_fields")]
    assert len(classes) >= 10
    for cls in classes:
        assert isinstance(cls.template_fields, tuple), cls
        with pytest.raises(TypeError):
            cls("positional")  # type: ignore[call-arg]


def test_the_dry_run_gate_reads_the_plan_from_its_xcom() -> None:
    from kstate_support.fakes import PLAN

    from airflow_provider_kstate.compat import AirflowSkipException
    from airflow_provider_kstate.operators.dry_run_gate import KStateDryRunGateOperator

    assert KStateDryRunGateOperator(task_id="g", plan=PLAN).execute({}) is None
    with pytest.raises(AirflowSkipException, match="dry run"):
        KStateDryRunGateOperator(task_id="d", plan={**PLAN, "dry_run": True}).execute({})


def test_a_step_parses_its_plan_once_per_task(monkeypatch: pytest.MonkeyPatch) -> None:
    """``typed_plan`` is read many times a step (three times per ``steps()``): it parses the XCom once,
    and again only when the plan attribute holds another object (a re-render)."""
    from kstate_support.fakes import PLAN

    from airflow_provider_kstate.increase import plan as plans
    from airflow_provider_kstate.operators.seed import KStateSeedOffsetsOperator

    calls: list[object] = []
    parse = plans.Plan.from_dict.__func__  # type: ignore[attr-defined]
    monkeypatch.setattr(plans.Plan, "from_dict", classmethod(lambda cls, d: calls.append(d) or parse(cls, d)))
    step = KStateSeedOffsetsOperator(task_id="seed", plan=dict(PLAN))
    assert step.typed_plan is step.typed_plan and step.topic == "orders" and len(calls) == 1
    step.plan = dict(PLAN)  # rendered again
    assert step.typed_plan.topic == "orders" and len(calls) == 2
