"""Unit tests of operators/verify.py: how a seeded offset is judged."""

from __future__ import annotations

from airflow_provider_kstate.operators.verify import judge


def test_judge_flags_every_way_to_skip() -> None:
    ok = {"committed": 10, "log_start": 0, "seeded_offset": 0, "seed_log_start": 0}
    assert judge(ok) == ""
    assert "no committed offset" in judge({**ok, "committed": None})
    assert "past the log start" in judge({**ok, "seeded_offset": 5})
    assert "deleted unread" in judge({**ok, "committed": 3, "log_start": 7})
    # An offset the group already had is safe whatever its value (a re-run after a crash past the resume).
    kept = {"committed": 892, "log_start": 0, "new": True, "seeded": False, "seeded_offset": None}
    assert judge(kept) == ""
