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
        paused_at = None

        def again(self, step: str, call: Any) -> Any:  # the window's steps, tried once here
            return call()

        def __getattr__(self, name: str) -> Any:
            def step(*_args: Any) -> Any:
                calls.append(name)
                if name == "seed":
                    raise SeedError("broker went away while seeding")
                return {}

            return step

    closed: list[bool] = []
    window = KStatePauseWindowOperator(task_id="w", plan=PLAN)
    monkeypatch.setattr(KStatePauseWindowOperator, "run", lambda self, context, **options: Steps())
    report = tmp_path / "seed.jsonl.gz"
    monkeypatch.setattr(
        KStatePauseWindowOperator, "report_uri", lambda self, context, step, topic: str(report)
    )
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
    from airflow_provider_kstate.increase.plan_step import plan_request
    from airflow_provider_kstate.operators.plan import KStatePlanOperator

    def names(topic: str, topics: Any) -> list[str]:
        return list(
            plan_request(KStatePlanOperator(task_id="p", topic=topic, topics=topics, partitions=4)).topics
        )

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


@pytest.mark.parametrize("topics", [None, {PLAN["topic"]: 4, "payments": 4}], ids=["one", "several"])
def test_the_per_step_steps_run_one_topic_and_several_through_the_one_run(
    monkeypatch: pytest.MonkeyPatch, topics: Any
) -> None:
    """pause, increase, scale and resume go through the run of the plan (a topic is a set of one): one
    pause of every group, every topic created, each topic switched, one resume, and one XCom shape."""
    from airflow_provider_kstate.operators.consumers import (
        KStatePauseConsumersOperator,
        KStateResumeConsumersOperator,
    )
    from airflow_provider_kstate.operators.partitions import KStateIncreasePartitionsOperator
    from airflow_provider_kstate.operators.producers import KStateScaleProducersOperator

    plan = {**PLAN, "topics": topics} if topics else dict(PLAN)
    names = list(topics or [PLAN["topic"]])
    calls: list[tuple[str, Any]] = []

    class Run:
        plan = SimpleNamespace(where=lambda _: [], groups={})  # nothing live to watch once resumed
        resumed_at = None

        def pause(self) -> dict[str, Any]:
            calls.append(("pause", None))
            return {"groups": 1}

        def increase(self, timeout: float) -> dict[str, Any]:
            calls.append(("increase", timeout))
            return {"created": True, "topics": {t: {"created": True, "partitions": 8} for t in names}}

        def scale(self, live: list[str] | None = None, baseline: bool = False) -> dict[str, Any]:
            calls.append(("scale", baseline))
            return {"topics": {t: {"switch": {"epoch": 1}} for t in names}}

        def resume(self, groups: list[str] | None = None) -> dict[str, Any]:
            calls.append(("resume", groups))
            return {"groups": 1}

    for cls in (
        KStatePauseConsumersOperator,
        KStateIncreasePartitionsOperator,
        KStateScaleProducersOperator,
        KStateResumeConsumersOperator,
    ):
        monkeypatch.setattr(cls, "run", lambda self, context, **options: Run())
    closed = SimpleNamespace(close=lambda: None)
    for cls, task_id in (
        (KStatePauseConsumersOperator, "pause_consumers"),
        (KStateIncreasePartitionsOperator, "increase_partitions"),
        (KStateScaleProducersOperator, "scale_producers"),
        (KStateResumeConsumersOperator, "resume_consumers"),
    ):
        step = cls(task_id=task_id, plan=plan)
        step.__dict__["control"] = closed
        out = step.execute({})
        if task_id in ("increase_partitions", "scale_producers"):
            assert list(out["topics"]) == names
    assert [c[0] for c in calls] == ["pause", "increase", "scale", "resume"], calls
    assert calls[2] == ("scale", True)  # the baseline of each topic's new partitions
