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
