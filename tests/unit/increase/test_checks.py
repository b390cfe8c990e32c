"""Unit tests of increase/checks.py: the group-state checks the sensors and the trigger share."""

from __future__ import annotations

from kstate_support.fakes import FakeHook
from kstate_support.fakes import group_info as _info

from airflow_provider_kstate.increase import checks


def test_groups_empty_names_members_and_stable_needs_all_partitions() -> None:
    hook = FakeHook(4, {"live": _info("live", "STABLE", 1, (0, 1)), "idle": _info("idle", "EMPTY")})
    empty = checks.groups_empty(hook, "orders", ["live", "idle"])  # type: ignore[arg-type]
    assert (
        not empty.ok
        and list(empty.detail) == ["live"]
        and "c0@/127.0.0.1" in empty.detail["live"]["members"][0]
    )
    stable = checks.groups_stable(hook, {"orders": ["live"]}, 4)  # type: ignore[arg-type]
    assert not stable.ok and stable.detail["live"]["unassigned"] == "2-3"  # ranges: small at 4,096 partitions
    hook.groups["live"] = _info("live", "STABLE", 2, (0, 1, 2, 3))
    assert checks.groups_stable(hook, {"orders": ["live"]}, 4).ok  # type: ignore[arg-type]


def test_groups_stable_of_several_topics_checks_each_group_on_each_topic_it_reads() -> None:
    from kstate_support.fakes import FakeHook
    from kstate_support.fakes import group_info as info

    from airflow_provider_kstate.increase.checks import groups_stable

    hook = FakeHook(2, {"join": info("join", "STABLE", 1, (0, 1)), "audit": info("audit", "EMPTY")})
    both = groups_stable(hook, {"orders": ["join", "audit"], "payments": ["join"]}, 2)  # type: ignore[arg-type]
    assert not both.ok and list(both.detail) == ["audit on orders"]
    assert groups_stable(hook, {"orders": ["join"], "payments": ["join"]}, 2).ok  # type: ignore[arg-type]
