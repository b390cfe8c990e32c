"""Unit tests of operators/window.py: the pause window in one task."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from kstate_support.fakes import PLAN

from airflow_provider_kstate.increase.plan import Plan


def test_pause_window_stops_at_a_failed_seed_and_never_resumes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """In one window, a seed failure ends the task before scale and resume (the guard decides next)."""
    from airflow_provider_kstate.errors import SeedError
    from airflow_provider_kstate.operators.window import KStatePauseWindowOperator

    calls: list[str] = []

    class Steps:
        plan = Plan.from_dict(PLAN)

        def __getattr__(self, name: str) -> Any:
            def step(*_args: Any) -> Any:
                calls.append(name)
                if name == "seed":
                    raise SeedError("broker went away while seeding")
                return {}

            return step

    closed: list[bool] = []
    window = KStatePauseWindowOperator(task_id="w", plan=PLAN)
    monkeypatch.setattr(KStatePauseWindowOperator, "steps", lambda self, context, **options: Steps())
    report = tmp_path / "seed.jsonl.gz"
    monkeypatch.setattr(KStatePauseWindowOperator, "report_uri", lambda self, context, step: str(report))
    window.__dict__["control"] = SimpleNamespace(close=lambda: closed.append(True))
    with pytest.raises(SeedError):
        window.execute({})
    assert calls == ["pause", "wait_empty", "increase", "seed"], calls
    assert closed == [True]
    assert list(tmp_path.iterdir()) == [], "a failed window leaves no report (nor a partial one) behind"


def test_the_plan_step_reads_the_set_and_refuses_bad_input_before_any_lookup() -> None:
    """topic and topics name the set once each; an empty set, a duplicate, an internal or illegal name is
    refused, named, before the plan asks the cluster anything."""
    from airflow_provider_kstate.errors import InternalTopicError, InvalidArgumentError, KStateConfigError
    from airflow_provider_kstate.operators.plan import KStatePlanOperator

    def names(topic: str, topics: Any) -> list[str]:
        return KStatePlanOperator(task_id="p", topic=topic, topics=topics, partitions=4)._topic_names()

    assert names("orders", ["payments"]) == ["orders", "payments"]
    assert names("", ["orders", "payments"]) == ["orders", "payments"]
    assert names("orders", "[]") == ["orders"] and names("orders", None) == ["orders"]
    with pytest.raises(InvalidArgumentError, match="no topic"):
        names("", [])
    with pytest.raises(InvalidArgumentError, match="named twice"):
        names("orders", ["orders"])
    with pytest.raises(InternalTopicError):
        names("orders", ["__consumer_offsets"])
    with pytest.raises(KStateConfigError, match="not a legal Kafka topic name"):
        names("orders", ["pay ments"])


def test_the_per_step_layout_refuses_a_plan_of_several_topics_before_pausing() -> None:
    from airflow_provider_kstate.compat import AirflowFailException
    from airflow_provider_kstate.operators.consumers import KStatePauseConsumersOperator

    plan = {**PLAN, "topics": {PLAN["topic"]: 4, "payments": 4}}
    step = KStatePauseConsumersOperator(task_id="pause_consumers", plan=plan)
    with pytest.raises(AirflowFailException, match="one pause window"):  # not retried: the task edge says so
        step.execute({})
