"""Unit tests of the approval's decisions in the domain (increase/approval.py): the request's subject and
body for any number of topics, the broker check of a verdict, the history read from progress documents, and
the plan changes per topic with the error each raises."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from kstate_support.fakes import FakeHook, group_info

from airflow_provider_kstate.errors import PlanChangedError
from airflow_provider_kstate.increase.approval import (
    WAIT_LEASE_MARGIN,
    ApprovalText,
    BrokerCheck,
    DowntimeHistory,
    SetChanges,
    approval_prompt,
    approval_subject,
    approval_text,
    history_of,
    set_changes,
    wait_lease_ttl,
)
from airflow_provider_kstate.increase.events import GroupProgress, RunProgress
from airflow_provider_kstate.increase.plan import Plan
from airflow_provider_kstate.increase.planner import plan_increase
from airflow_provider_kstate.increase.request import PlanRequest

PRESENT = {"live": {"c0", "c1"}}


def _cluster(**extra: Any) -> FakeHook:
    groups = {"live": group_info("live", "STABLE", 2, (0, 1, 2, 3)), "idle": group_info("idle", "EMPTY")}
    return FakeHook(partitions=4, groups={**groups, **extra})


def _plan(hook: FakeHook, *topics: str) -> Plan:
    request = PlanRequest(topics=topics or ("orders",), partitions=8)
    return plan_increase(hook, request, lambda: PRESENT).with_run(owner="dag/run")


def test_the_request_text_of_one_topic_is_its_subject_and_prompt() -> None:
    plan = _plan(_cluster())
    text = approval_text(plan, deadline="in 1 h")
    assert text == ApprovalText(
        "Approve orders: 4 -> 8 partitions?", approval_prompt(plan, deadline="in 1 h")
    )
    repair = plan.replace(target_partitions=4)
    assert approval_text(repair).subject == "Approve the repair of orders (4 partitions)?"


def test_the_request_text_of_a_set_names_every_topic_with_its_count() -> None:
    several = _plan(_cluster(), "orders", "payments")
    text = approval_text(several)
    assert text.subject == "Approve 2 co-partitioned topics (orders, payments): 4 -> 8 partitions in one run?"
    heading, prompt = text.body.split("resumed once.\n\n", 1)
    assert heading.startswith("**Co-partitioned topics grown together**")
    assert "| `orders` | 4 | 8 |" in heading and "| `payments` | 4 | 8 |" in heading
    assert prompt == approval_prompt(several)
    # a topic at the target already (a repair of it): both counts in the headline
    uneven = several.replace(topics={"orders": 4, "payments": 8})
    assert approval_subject(uneven) == (
        "Approve 2 co-partitioned topics (orders, payments): 4/8 -> 8 partitions in one run?"
    )
    assert "| `payments` | 8 | 8 |" in approval_text(uneven).body


def test_the_broker_check_keeps_the_broken_promises_the_increase_needs() -> None:
    needed = ("latest_offset", "unknown_group")
    assert BrokerCheck.of(None, needed) is None
    verdict = SimpleNamespace(
        cluster="c1", checked_at=12.0, broken=lambda: ["latest_offset", "share_new_partitions"]
    )
    assert BrokerCheck.of(verdict, needed) == BrokerCheck("c1", 12.0, ("latest_offset",))
    kept = SimpleNamespace(cluster="c1", checked_at=12.0, broken=lambda: [])
    assert BrokerCheck.of(kept, needed) == BrokerCheck("c1", 12.0)


def _progress(run: str, started: int, outcome: str = "success") -> bytes:
    progress = RunProgress(
        topic="orders",
        run=run,
        original_partitions=4,
        target_partitions=8,
        started_at=started,
        outcome=outcome,
    )
    progress.groups = {"live": GroupProgress(state="passed", out_since=started, back_at=started + 250)}
    return progress.to_json().encode()


def test_the_history_counts_the_progress_documents_and_skips_anything_else() -> None:
    texts = [_progress("b", 2_000), b"not json", b'{"kind": "other"}', _progress("a", 1_000)]
    history = history_of(texts)
    assert (history.runs, history.last_run) == (2, "b")
    assert history.groups["live"].describe() == "median 0.25 s, last 0.25 s (2 runs)"
    assert history_of([]) == DowntimeHistory()
    assert history_of([_progress("c", 1, outcome="failed")]) == DowntimeHistory()


def test_an_unchanged_set_is_no_change() -> None:
    approved = _plan(_cluster())
    found = set_changes(approved, _plan(_cluster(live=group_info("live", "STABLE", 1, (0, 1)))))
    assert not found and found == SetChanges() and found.lines() == []
    found.refuse(approved.topic_names)  # nothing changed: no error


def test_one_topic_changed_raises_its_own_error() -> None:
    approved = _plan(_cluster())
    found = set_changes(approved, _plan(_cluster(audit=group_info("audit", "EMPTY"))))
    assert found.lines() == [("orders", "new group at risk: audit (empty, 0 members)")]
    with pytest.raises(PlanChangedError, match=r"the plan of 'orders' was made") as info:
        found.refuse(approved.topic_names)
    assert "the lease is released" in str(info.value)
    refused = set_changes(approved, approved, refused="share group 'x'")
    assert refused.lines() == [("orders", "the plan made again refuses the topic: share group 'x'")]


def test_a_set_changed_names_each_topic_in_one_error() -> None:
    approved = _plan(_cluster(), "orders", "payments")
    found = set_changes(approved, _plan(_cluster(audit=group_info("audit", "EMPTY")), "orders", "payments"))
    assert [topic for topic, _ in found.lines()] == ["orders", "payments"]
    with pytest.raises(PlanChangedError) as info:
        found.refuse(approved.topic_names)
    text = str(info.value)
    assert text.startswith("the cluster changed since the plan of ['orders', 'payments'] was made")
    assert "orders: new group at risk: audit (empty, 0 members); payments: new group at risk: audit" in text
    assert "every topic's lease is released" in text
    # only the second topic changed: still named with the set, on its own
    one = SetChanges({"payments": found.topics["payments"]})
    with pytest.raises(PlanChangedError, match=r"the plan of 'payments' was made"):
        one.refuse(approved.topic_names)


def test_the_leases_are_held_past_the_deadline_while_the_run_waits() -> None:
    assert wait_lease_ttl(900.0, 3600.0) == 3600.0 + WAIT_LEASE_MARGIN
    assert wait_lease_ttl(900.0, 60.0) == 900.0, "never shorter than the steps' TTL"
