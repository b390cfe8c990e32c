"""Unit tests of the approval step's decisions (increase/approval_step.py): the timeout and the deadline, the
earlier runs read from a local folder or an object store (never failing the step), the answer read from
the human-in-the-loop event with the step's XCom, and what the step records: the run ended, or going on only
while the cluster matches the approved plan; the broker check read without failing (increase/approval.py)."""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from kstate_support.fakes import FakeHook, group_info

from airflow_provider_kstate.errors import ApprovalTimeoutError, KStateConfigError, PlanChangedError
from airflow_provider_kstate.increase.approval import BrokerCheck, DowntimeHistory
from airflow_provider_kstate.increase.approval_step import (
    NOT_REQUIRED,
    Answer,
    ApprovalRecord,
    approval_timeout,
    deadline_text,
    progress_texts,
    topic_history,
)
from airflow_provider_kstate.increase.events import GroupProgress, RunProgress
from airflow_provider_kstate.increase.plan import Plan
from airflow_provider_kstate.increase.planner import plan_again, plan_increase
from airflow_provider_kstate.increase.request import PlanRequest

PRESENT = {"live": {"c0", "c1"}}


def _cluster(**extra: Any) -> FakeHook:
    groups = {"live": group_info("live", "STABLE", 2, (0, 1, 2, 3)), "idle": group_info("idle", "EMPTY")}
    return FakeHook(partitions=4, groups={**groups, **extra})


def _plan(report_uri: str = "") -> Plan:
    request = PlanRequest(topics=("orders",), partitions=8)
    return plan_increase(_cluster(), request, lambda: PRESENT).with_run(
        owner="dag/run", report_uri=report_uri
    )


class _Log:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []

    def info(self, msg: str, *args: Any) -> None:
        self.lines.append(("info", msg % args))

    def warning(self, msg: str, *args: Any) -> None:
        self.lines.append(("warning", msg % args))

    def error(self, msg: str, *args: Any) -> None:
        self.lines.append(("error", msg % args))


def test_the_timeout_is_a_positive_number_of_seconds_and_the_deadline_is_utc() -> None:
    assert approval_timeout("90") == approval_timeout(90) == timedelta(seconds=90)
    assert approval_timeout(timedelta(minutes=2)) == timedelta(seconds=120)
    for bad in ("soon", 0, "-5", timedelta(0)):
        with pytest.raises(KStateConfigError, match="approval_timeout must be a positive number of seconds"):
            approval_timeout(bad)
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    assert deadline_text(timedelta(hours=1), now) == "2026-01-02 04:04:05 UTC"
    assert deadline_text(timedelta(hours=1)).endswith(" UTC")


def _progress(run: str, outcome: str = "success", downtime_ms: int = 300) -> bytes:
    doc = RunProgress(
        run=run,
        topic="orders",
        original_partitions=4,
        target_partitions=8,
        outcome=outcome,
        started_at=1,
        updated_at=1,
        producers_since=1,
    )
    doc.groups["live"] = GroupProgress(out_since=1000, back_at=1000 + downtime_ms)
    return doc.to_json().encode()


def test_the_earlier_runs_are_the_newest_progress_documents_but_this_runs_own(tmp_path: Path) -> None:
    topic = tmp_path / "orders"
    for i, name in enumerate(("dag_run_a", "dag_run_b", "dag_run_c", "dag_run")):
        (topic / name).mkdir(parents=True)
        doc = topic / name / "progress.json"
        doc.write_bytes(_progress(name))
        os.utime(doc, (1000 + i, 1000 + i))
    (topic / "dag_run_empty").mkdir()  # a run folder without its progress document
    texts = progress_texts(
        str(topic), "dag_run", lambda uri: pytest.fail("a local folder is read from disk"), 2
    )
    assert texts == [_progress("dag_run_c"), _progress("dag_run_b")]
    assert progress_texts(str(tmp_path / "nowhere"), "dag_run", lambda uri: pytest.fail(), 2) == []
    history = topic_history(_plan(str(tmp_path)), "dag/run", lambda uri: pytest.fail(), 20, _Log())
    assert history.runs == 3 and history.groups["live"].describe() == "median 0.30 s, last 0.30 s (3 runs)"


class _Remote:
    """An object-store path: no time on a folder, so the runs are the last by name."""

    def __init__(self, name: str, children: dict[str, Any] | bytes | None = None) -> None:
        self.name, self.children = name, children

    def iterdir(self) -> list[_Remote]:
        assert isinstance(self.children, dict)
        return [_Remote(n, c) for n, c in self.children.items()]

    def __truediv__(self, name: str) -> _Remote:
        assert isinstance(self.children, dict)
        return _Remote(name, self.children.get(name))

    def exists(self) -> bool:
        return self.children is not None

    def read_bytes(self) -> bytes:
        assert isinstance(self.children, bytes)
        return self.children


def test_an_object_store_is_read_by_run_name_and_a_failure_never_fails_the_step() -> None:
    runs = {n: {"progress.json": _progress(n)} for n in ("dag_run_1", "dag_run_3", "dag_run")}
    runs["dag_run_2"] = {}
    asked: list[str] = []

    def remote(uri: str) -> _Remote:
        asked.append(uri)
        return _Remote("orders", runs)

    texts = progress_texts("s3://bucket/kstate/orders", "dag_run", remote, 5)
    assert texts == [_progress("dag_run_3"), _progress("dag_run_1")] and asked == [
        "s3://bucket/kstate/orders"
    ]
    assert progress_texts("s3://bucket/kstate/orders", "dag_run", remote, 1) == [_progress("dag_run_3")]

    def broken(uri: str) -> _Remote:
        raise OSError("access denied")

    log = _Log()
    assert topic_history(_plan("s3://bucket/kstate"), "dag/run", broken, 20, log) == DowntimeHistory()
    assert log.lines == [
        (
            "warning",
            "APPROVE the topic's earlier runs could not be read under s3://bucket/kstate/orders: access denied",
        )
    ]


def test_the_answer_says_expired_rejected_or_approved_and_by_whom() -> None:
    expired = Answer({"error": "timed out", "error_type": "timeout"}, "Approve")
    assert expired.expired and not expired.approved and not expired.rejected
    error = expired.expired_error(_plan())
    assert isinstance(error, ApprovalTimeoutError)
    assert str(error).startswith("nobody answered the approval of 'orders' before its deadline")
    rejected = Answer(
        {"chosen_options": ["Reject"], "responded_by_user": {"id": "1", "name": "alice"}}, "Approve"
    )
    assert rejected.rejected and not rejected.expired
    assert rejected.result() == {"required": True, "approved": False, "responded_by": "alice"}
    approved = Answer({"chosen_options": ["Approve"], "responded_by_user": {"id": "7"}}, "Approve")
    assert approved.approved and not approved.rejected and approved.by == "7"
    assert Answer({"chosen_options": ["Approve"]}, "Approve").by == "nobody (the default)"
    failed = Answer({"error": "bad", "chosen_options": ["Reject"]}, "Approve")
    assert not (failed.rejected or failed.approved or failed.expired), "an error: the HITL operator raises it"
    assert NOT_REQUIRED == {"required": False, "approved": True}


class _Leases:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def renew(self, plan: dict[str, Any] | None = None) -> None:
        self.calls.append("renew")

    def release(self) -> None:
        self.calls.append("release")


class _Events:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def step(self, name: str) -> None:
        self.calls.append(("step", name))

    def finish(self, outcome: str) -> None:
        self.calls.append(("finish", outcome))


def _record() -> tuple[ApprovalRecord, _Leases, _Events, _Log]:
    leases, events, log = _Leases(), _Events(), _Log()
    return ApprovalRecord(leases, events, log), leases, events, log  # type: ignore[arg-type]


def test_the_run_ends_with_its_leases_released_and_its_outcome_recorded() -> None:
    record, leases, events, _ = _record()
    record.end("expired", "expired")
    assert leases.calls == ["release"] and events.calls == [("step", "expired"), ("finish", "expired")]


def test_an_approved_run_goes_on_only_while_the_cluster_matches() -> None:
    approved = _plan()
    record, leases, events, log = _record()
    record.go_on(approved, lambda plan: plan_again(_cluster(), plan, lambda: PRESENT))
    assert leases.calls == ["renew"] and events.calls == [("step", "approved")]
    assert log.lines == [("info", "APPROVE the cluster matches the approved plan: going on")]

    record, leases, events, log = _record()
    changed = _cluster(audit=group_info("audit", "EMPTY"))
    with pytest.raises(PlanChangedError, match="new group at risk: audit"):
        record.go_on(approved, lambda plan: plan_again(changed, plan, lambda: PRESENT))
    assert leases.calls == ["renew", "release"]
    assert events.calls == [("step", "plan_changed"), ("finish", "failed")]
    assert log.lines == [
        ("error", "APPROVE orders changed since the plan: new group at risk: audit (empty, 0 members)")
    ]


def test_the_broker_check_is_read_without_failing_the_prompt() -> None:
    class Verdict:
        cluster, checked_at = "c1", 1_700_000_000.0

        def broken(self) -> list[str]:
            return ["share_new_partitions", "unrelated"]

    log = _Log()
    assert BrokerCheck.read(Verdict, ["share_new_partitions"], log) == BrokerCheck(
        "c1", 1_700_000_000.0, ("share_new_partitions",)
    )
    assert BrokerCheck.read(lambda: None, ["share_new_partitions"], log) is None and log.lines == []

    def unreadable() -> None:
        raise OSError("no cache")

    assert BrokerCheck.read(unreadable, ["share_new_partitions"], log) is None
    assert log.lines == [("warning", "APPROVE the broker doctor's verdict could not be read: no cache")]


def test_the_wait_holds_the_leases_and_each_answer_is_recorded_as_it_comes() -> None:
    plan = _plan()
    record, leases, events, log = _record()
    record.wait(plan, timedelta(seconds=90), "awaiting_input")
    assert leases.calls == ["renew"] and events.calls == [("step", "awaiting_approval")]
    assert log.lines == [
        (
            "info",
            "APPROVE waiting up to 90 s for an answer (awaiting_input); the lease on orders is held until then",
        )
    ]

    record, leases, events, log = _record()
    with pytest.raises(ApprovalTimeoutError):
        record.answered(Answer({"error": "timed out", "error_type": "timeout"}, "Approve"), plan)
    assert leases.calls == ["release"] and events.calls == [("step", "expired"), ("finish", "expired")]

    record, leases, events, log = _record()
    rejected = Answer({"chosen_options": ["Reject"], "responded_by_user": {"name": "alice"}}, "Approve")
    record.answered(rejected, plan)
    assert leases.calls == ["release"] and events.calls == [("step", "rejected"), ("finish", "rejected")]
    assert log.lines[0][0] == "warning" and "rejected by alice" in log.lines[0][1]
    assert record.decided(rejected, plan, lambda p: (p, "")) == rejected.result(), "a reject checks nothing"
    assert leases.calls == ["release"]

    record, leases, events, log = _record()
    approved = Answer({"chosen_options": ["Approve"], "responded_by_user": {"name": "bob"}}, "Approve")
    record.answered(approved, plan)
    assert leases.calls == [] and events.calls == [], "an approval is recorded once the cluster is checked"
    assert record.decided(approved, plan, lambda p: plan_again(_cluster(), p, lambda: PRESENT))["approved"]
    assert leases.calls == ["renew"] and events.calls == [("step", "approved")]
