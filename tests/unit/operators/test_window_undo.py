"""The window's undo after a failure before its create step finished (issue 33): it resumes the groups only
while the topic still has its original count as the run's steps see it, never fewer partitions than the run
has seen (a lagging broker may answer the old count after the create: 3-node Apache Kafka 4.4.0), and not
while a create that got no answer may still be applied."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest
from kstate_support.fakes import PLAN

from airflow_provider_kstate.errors import BrokerUnavailableError
from airflow_provider_kstate.increase.plan import Plan


def _window(monkeypatch: pytest.MonkeyPatch, tmp_path: Any, seen: int, unknown: bool = False) -> list[str]:
    from airflow_provider_kstate.operators.window import KStatePauseWindowOperator

    plan = Plan.from_dict(PLAN)
    calls: list[str] = []

    class Steps:
        log = logging.getLogger("test")

        def __init__(self) -> None:
            self.plan = plan
            self.create_unknown = unknown

        def again(self, step: str, call: Any) -> Any:  # tried once here (the retry has its own tests)
            return call()

        def created_nothing(self) -> bool:
            return seen == plan.original_partitions  # the run's count (the most it saw of each topic)

        def increase(self, _timeout: float) -> Any:
            calls.append("increase")
            raise BrokerUnavailableError("the create's answer was lost")

        def undo_before_create(self) -> None:
            calls.append("undo")

        def __getattr__(self, name: str) -> Any:
            return lambda *_a, **_k: calls.append(name) or {}

    window = KStatePauseWindowOperator(task_id="w", plan=PLAN)
    monkeypatch.setattr(KStatePauseWindowOperator, "run", lambda self, context, **options: Steps())
    monkeypatch.setattr(KStatePauseWindowOperator, "report_uri", lambda self, c, s, t: str(tmp_path / "r.gz"))
    window.__dict__["control"] = SimpleNamespace(close=lambda: None)
    window.__dict__["admin"] = SimpleNamespace(partition_count=lambda _t: plan.original_partitions)
    with pytest.raises(BrokerUnavailableError):
        window.execute({})
    return calls


def test_no_undo_once_the_run_saw_the_new_partitions(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    plan = Plan.from_dict(PLAN)
    calls = _window(monkeypatch, tmp_path, plan.target_partitions)
    assert "increase" in calls and "undo" not in calls  # the admin's (lagging) original count is not asked


def test_undo_while_nothing_was_created(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    plan = Plan.from_dict(PLAN)
    assert _window(monkeypatch, tmp_path, plan.original_partitions)[-1] == "undo"


def test_no_undo_while_the_create_may_still_be_applied(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    plan = Plan.from_dict(PLAN)
    calls = _window(monkeypatch, tmp_path, plan.original_partitions, unknown=True)
    assert "increase" in calls and "undo" not in calls
