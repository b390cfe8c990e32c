"""Unit tests of increase/verification.py: how a seeded offset is judged."""

from __future__ import annotations

from airflow_provider_kstate.increase.verification import judge


def test_judge_flags_every_way_to_skip() -> None:
    ok = {"committed": 10, "log_start": 0, "seeded_offset": 0, "seed_log_start": 0}
    assert judge(ok) == ""
    assert "no committed offset" in judge({**ok, "committed": None})
    assert "past the log start" in judge({**ok, "seeded_offset": 5})
    assert "deleted unread" in judge({**ok, "committed": 3, "log_start": 7})
    # An offset the group already had is safe whatever its value (a re-run after a crash past the resume).
    kept = {"committed": 892, "log_start": 0, "new": True, "seeded": False, "seeded_offset": None}
    assert judge(kept) == ""


def test_a_group_s_partitions_are_judged_at_once_with_problems_cautions_and_lag() -> None:
    from airflow_provider_kstate.increase.verification import Marks, SeedEvidence, judge_group, report_rows

    marks = Marks(starts=[0, 5, 0, 0], ends=[10, 10, 10, 10], new_from=2)
    evidence = SeedEvidence(4)
    evidence.read([{"group": "g", "partition": 2, "seeded": True, "committed": 4, "log_start_at_seed": 0}])
    verdict = judge_group("g", {0: 3, 1: 2, 2: 4}, marks, evidence)
    assert verdict.bad == [2, 3] and not verdict.ok and verdict.seeded == 1
    assert "past the log start 0" in verdict.problems[2] and "no committed offset" in verdict.problems[3]
    assert list(verdict.cautions) == [1] and "retention overtook" in verdict.cautions[1]
    assert verdict.lags == [7, 8, 6, 0] and verdict.lag == 21 and verdict.worst == (8, 1)
    rows = report_rows("g", verdict.offsets, marks, verdict.lags, evidence.flags("g"), verdict.problems)
    assert len(rows) == 4 and '"committed":null' in rows[3] and '"seeded":true' in rows[2]
