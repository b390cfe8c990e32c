"""Unit tests of the approval step: the prompt (increase/approval.py), the comparison of the approved plan with
the cluster now, and the operator (operators/approval.py) on fakes: off it returns at once; a reject, a
timeout and a changed cluster release the lease and say so in the run's progress document."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kstate_support.fakes import FakeHook, group_info

from airflow_provider_kstate.increase.approval import (
    BrokerCheck,
    DowntimeHistory,
    approval_prompt,
    approval_subject,
    downtime_history,
    plan_changes,
)
from airflow_provider_kstate.increase.drivers import CommandDriver
from airflow_provider_kstate.increase.events import GroupProgress, RunProgress
from airflow_provider_kstate.increase.plan import GroupClass, GroupPlan, Plan
from airflow_provider_kstate.increase.planner import plan_increase
from airflow_provider_kstate.increase.request import PlanRequest
from tests.unit.test_lease_keeper import MemoryLeaseLog

BILLING_K8S = CommandDriver(
    name="billing-k8s", stop="kubectl scale --replicas=0", start="kubectl scale --replicas=3"
)


def _cluster(**extra: Any) -> FakeHook:
    """4 partitions; ``live`` (2 members, client piece), ``k8s`` (1 member, driven by commands), ``idle``
    (offsets, no members) and a Spark source group."""
    groups = {
        "live": group_info("live", "STABLE", 2, (0, 1)),
        "k8s": group_info("k8s", "STABLE", 1, (2, 3)),
        "idle": group_info("idle", "EMPTY"),
        "spark-kafka-source-1": group_info("spark-kafka-source-1", "EMPTY"),
        **extra,
    }
    return FakeHook(partitions=4, groups=groups)


#: The client ids of the live members that acknowledged on the control topic (group_info names them c0..).
PRESENT = {"live": {"c0", "c1"}}


#: The request of every plan here: orders to 8 partitions, the k8s group driven by its command pair.
REQUEST = PlanRequest(topics=("orders",), partitions=8, group_drivers={"k8s": BILLING_K8S})


def _plan(hook: FakeHook) -> Plan:
    """The plan of :data:`REQUEST` on ``hook`` through the one planner, as the plan step makes it."""
    return plan_increase(hook, REQUEST, lambda: PRESENT).with_run(owner="kstate_partition_increase/manual__1")


def _replan(approved: Plan, hook: FakeHook) -> Plan:
    """The plan made again from the request stored in ``approved``, as the approval makes it."""
    assert approved.request is not None
    return plan_increase(hook, approved.request, lambda: PRESENT)


# ------------------------------------------------------------------------------------------- the prompt


def test_the_prompt_shows_the_plan_the_broker_check_and_the_expected_downtime() -> None:
    plan = _plan(_cluster())
    history = downtime_history(
        [
            _run("r1", 1_000, {"live": (0, 400), "idle": (100, 900)}),
            _run("r2", 2_000, {"live": (0, 300), "idle": (50, 700)}),
        ]
    )
    body = approval_prompt(
        plan, broker=BrokerCheck("cluster-1", 1_700_000_000.0), history=history, deadline="in 1 h"
    )
    assert approval_subject(plan) == "Approve orders: 4 -> 8 partitions?"
    assert "**4 -> 8 partitions**: creates partitions 4-7 (4)" in body
    rows = {line.split("|")[1].strip(): line for line in body.splitlines() if line.startswith("| `")}
    assert list(rows) == ["`k8s`", "`live`", "`idle`", "`spark-kafka-source-1`"], "live groups first"
    assert "active (2 members) | control | barrier" in rows["`live`"]
    assert "pause record, wait EMPTY, seed, resume, wait STABLE" in rows["`live`"]
    assert "median 0.35 s, last 0.30 s (2 runs)" in rows["`live`"]
    assert (
        "command billing-k8s" in rows["`k8s`"]
        and "stop command, wait EMPTY, seed, start command" in rows["`k8s`"]
    )
    assert "no earlier run" in rows["`k8s`"], "a live group without history says so"
    assert rows["`idle`"].endswith("| seed (no live members: nobody is stopped) | - |"), "nobody to keep out"
    assert "left alone: Spark reads new partitions from earliest" in rows["`spark-kafka-source-1`"]
    assert "cluster `cluster-1`" in body and "every promise the increase needs holds" in body
    assert "from 2 earlier successful runs of this topic, the last `r2`" in body
    assert "first group out to last group back, median 0.80 s, last 0.70 s (2 runs)" in body
    assert "**Reject**, or no answer by in 1 h: nothing is changed" in body


def test_the_prompt_without_history_or_verdict_and_with_risks_accepted() -> None:
    plan = _plan(_cluster())
    excluded = plan.groups["idle"].replace(cls=GroupClass.EXCLUDED, pause=False, seed=False, wait=False)
    plan = plan.replace(groups={**plan.groups, "idle": excluded})
    body = approval_prompt(plan, broker=BrokerCheck("c", 0.0, ("latest_offset",)))
    assert "**Expected downtime:** no earlier run of this topic." in body
    assert "breaks latest_offset, accepted by name" in body and "RISK ACCEPTED" in body
    assert "left alone: **RISK ACCEPTED** (excluded)" in body
    assert "no verdict cached" in approval_prompt(plan)
    repair = plan.replace(target_partitions=4)
    assert "**stays at 4 partitions**: a repair" in approval_prompt(repair)
    assert approval_subject(repair) == "Approve the repair of orders (4 partitions)?"


def test_the_prompt_stays_bounded_with_a_hundred_groups() -> None:
    groups = {f"g{i:03d}": group_info(f"g{i:03d}", "EMPTY") for i in range(96)}
    hook = _cluster(**groups)
    plan = _plan(hook)
    body = approval_prompt(plan, cap=25)
    rows = [line for line in body.splitlines() if line.startswith("| `")]
    assert len(rows) == 25 and rows[0].startswith("| `k8s`") and rows[1].startswith("| `live`")
    assert "... and 75 more groups (74 empty, 1 spark)" in body
    assert len(body) < 8_000, len(body)


def _run(
    name: str, started: int, groups: dict[str, tuple[int, int]], outcome: str = "success"
) -> RunProgress:
    progress = RunProgress(
        topic="orders",
        run=name,
        original_partitions=4,
        target_partitions=8,
        started_at=started,
        outcome=outcome,
    )
    progress.groups = {
        g: GroupProgress(state="passed", out_since=started + out, back_at=started + back)
        for g, (out, back) in groups.items()
    }
    return progress


def test_downtime_history_counts_the_successful_runs_only() -> None:
    history = downtime_history(
        [
            _run("new", 3_000, {"live": (0, 500)}),
            _run("old", 1_000, {"live": (0, 100)}),
            _run("failed", 4_000, {"live": (0, 9_000)}, outcome="failed"),
            _run("rejected", 5_000, {}, outcome="rejected"),
        ]
    )
    assert (history.runs, history.last_run) == (2, "new")
    assert history.groups["live"].describe() == "median 0.30 s, last 0.50 s (2 runs)"
    assert downtime_history([]) == DowntimeHistory()
    assert RunProgress.from_json(_run("x", 1, {"a": (0, 1)}).to_json()).groups["a"].back_at == 2


# ------------------------------------------------------------------------ the cluster since the approval


def test_an_unchanged_cluster_is_no_change_even_with_members_coming_and_going() -> None:
    approved = _plan(_cluster())
    assert approved.request == REQUEST and approved.groups["k8s"].driver == BILLING_K8S
    hook = _cluster(live=group_info("live", "STABLE", 1, (0, 1, 2, 3)))  # one member left: still live
    assert not plan_changes(approved, _replan(approved, hook))
    spark = _cluster(**{"spark-kafka-source-2": group_info("spark-kafka-source-2", "EMPTY")})
    assert not plan_changes(approved, _replan(approved, spark))


def test_each_change_that_matters_is_named() -> None:
    from airflow_provider_kstate.errors import PlanChangedError

    approved = _plan(_cluster())
    hook = _cluster(
        audit=group_info("audit", "EMPTY"),  # new group at risk
        idle=group_info("idle", "STABLE", 1, (0,)),  # had no members, has one (no client piece) now
        live=group_info("live", "STABLE", 3, (0, 1)),  # a member without the client piece joined
    )
    del hook.groups["k8s"]  # its offsets and members are gone
    hook.partitions = 5
    changes = plan_changes(approved, _replan(approved, hook))
    assert changes.partitions == (4, 5)
    assert changes.new_groups == {"audit": "empty, 0 members"}
    assert changes.changed["idle"] == "was empty, 0 members at the plan, is active, 1 member now"
    assert changes.changed["live"].startswith("can no longer be driven by control: 1 of 3 live members")
    assert changes.changed["k8s"] == "was active, 1 member at the plan, no longer reads the topic now"
    with pytest.raises(PlanChangedError) as info:
        changes.refuse("orders")
    text = str(info.value)
    assert "partition count: 4 at the plan, 5 now" in text and "new group at risk: audit" in text
    assert "Nobody was paused and nothing was changed" in text


def test_a_key_order_mark_that_changes_is_a_change() -> None:
    approved = _plan(_cluster())
    live = approved.groups["live"]
    relaxed = live.replace(key_order="relaxed", key_order_reason="a member without the client piece")
    now = approved.replace(groups={**approved.groups, "live": relaxed})
    assert plan_changes(approved, now).changed == {
        "live": "key order was barrier, would be relaxed now (a member without the client piece)"
    }
    assert plan_changes(approved, approved, refused="share group 'x'").lines() == [
        "the plan made again refuses the topic: share group 'x'"
    ]
    absent = {"ghost": GroupPlan(cls=GroupClass.ABSENT, state="DEAD")}
    named = approved.replace(groups={**approved.groups, **absent})
    appeared = named.replace(groups={**named.groups, "ghost": approved.groups["idle"]})
    assert plan_changes(named, appeared).new_groups == {"ghost": "empty, 0 members"}


# ------------------------------------------------------------------------------------------ the operator


def _operator(tmp_path: Path, **kwargs: Any) -> Any:
    from airflow_provider_kstate.operators.approval import KStateApprovalOperator

    plan = {**_plan(_cluster()).to_dict(), "report_uri": str(tmp_path)}
    return KStateApprovalOperator(task_id="approve_plan", plan=plan, **kwargs)


def _context() -> dict[str, Any]:
    ti = SimpleNamespace(dag_id="kstate_partition_increase", run_id="manual__1", try_number=1)
    ti.get_dagrun_state = lambda dag_id, run_id: "running"
    return {"ti": ti, "task_instance": ti}


def test_off_it_returns_at_once_without_touching_anything(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(
        socket.socket, "connect", lambda *a: (_ for _ in ()).throw(AssertionError("network while off"))
    )
    for off in (False, "False", "false", ""):
        op = _operator(tmp_path, require_approval=off)
        assert op.execute({}) == {"required": False, "approved": True}
    assert list(tmp_path.iterdir()) == [], "no progress written, nothing asked"
    assert _operator(tmp_path).serialized_params == {}, "the form asks for nothing but the choice"


def _wired(tmp_path: Path, hook: FakeHook) -> tuple[Any, MemoryLeaseLog]:
    """The operator with an in-memory lease this run holds, ``hook`` as the cluster, no control topic."""
    op = _operator(tmp_path, require_approval=True)
    lease_log = MemoryLeaseLog()
    lease_log.acquire("orders", "kstate_partition_increase/manual__1", 900)
    op.__dict__.update(
        lease=lease_log, admin=hook, control=SimpleNamespace(client_piece_clients=lambda: PRESENT)
    )
    return op, lease_log


def _progress(tmp_path: Path) -> dict[str, Any]:
    doc = tmp_path / "orders" / "kstate_partition_increase_manual__1" / "progress.json"
    return dict(json.loads(doc.read_text()))


def test_a_timeout_releases_the_lease_and_fails(tmp_path: Path) -> None:
    from airflow_provider_kstate.compat import AirflowFailException
    from airflow_provider_kstate.errors import ApprovalTimeoutError

    op, lease_log = _wired(tmp_path, _cluster())
    with pytest.raises(AirflowFailException, match="nobody answered the approval of 'orders'") as info:
        op.execute_complete(_context(), {"error": "timed out", "error_type": "timeout"})
    assert isinstance(info.value.__cause__, ApprovalTimeoutError), "not retried: a retry would ask again"
    assert lease_log.current("orders") is None
    assert (_progress(tmp_path)["step"], _progress(tmp_path)["outcome"]) == ("expired", "expired")


def test_a_reject_releases_the_lease_and_changes_nothing(tmp_path: Path) -> None:
    op, lease_log = _wired(tmp_path, _cluster())
    event = {
        "chosen_options": ["Reject"],
        "params_input": {},
        "responded_at": _now(),
        "responded_by_user": None,
    }
    event["responded_by_user"] = {"id": "1", "name": "alice"}
    assert op.execute_complete(_context(), event) == {
        "required": True,
        "approved": False,
        "responded_by": "alice",
    }
    assert lease_log.current("orders") is None
    assert (_progress(tmp_path)["step"], _progress(tmp_path)["outcome"]) == ("rejected", "rejected")


def test_an_approve_goes_on_only_while_the_cluster_matches(tmp_path: Path) -> None:
    from airflow_provider_kstate.compat import AirflowFailException
    from airflow_provider_kstate.errors import PlanChangedError

    event = {"chosen_options": ["Approve"], "params_input": {}, "responded_at": _now()}
    event["responded_by_user"] = {"id": "1", "name": "bob"}
    op, lease_log = _wired(tmp_path, _cluster())
    assert op.execute_complete(_context(), event)["approved"] is True
    assert lease_log.current("orders") is not None, "approved: the run keeps its lease"
    assert _progress(tmp_path)["step"] == "approved" and _progress(tmp_path)["outcome"] == ""

    changed = _cluster(audit=group_info("audit", "EMPTY"))
    op, lease_log = _wired(tmp_path, changed)
    with pytest.raises(AirflowFailException, match="new group at risk: audit") as info:
        op.execute_complete(_context(), event)
    assert isinstance(info.value.__cause__, PlanChangedError)
    assert lease_log.current("orders") is None
    assert (_progress(tmp_path)["step"], _progress(tmp_path)["outcome"]) == ("plan_changed", "failed")


def _now() -> Any:
    from datetime import datetime, timezone

    return datetime.now(timezone.utc)


def test_the_guard_of_a_run_that_was_not_approved_changes_nothing(tmp_path: Path) -> None:
    """The approval expired, or the cluster changed since the plan: the guard resumes nobody (nobody was
    paused), starts no command, and only lets the lease go."""
    from airflow_provider_kstate.compat import AirflowSkipException
    from airflow_provider_kstate.operators.guard import KStateFailureGuardOperator

    plan = {**_plan(_cluster()).to_dict(), "report_uri": str(tmp_path)}
    xcoms: dict[str, Any] = {"g.plan": plan, "g.approve_plan": None}
    context = _context()
    context["ti"].xcom_pull = lambda task_ids: xcoms[task_ids]
    guard = KStateFailureGuardOperator(
        task_id="failure_guard", plan_task_id="g.plan", approval_task_id="g.approve_plan"
    )
    lease_log = MemoryLeaseLog()
    lease_log.acquire("orders", "kstate_partition_increase/manual__1", 900)
    untouchable = SimpleNamespace()  # any call on the cluster or the control topic fails the test
    guard.__dict__.update(lease=lease_log, admin=untouchable, control=untouchable)
    with pytest.raises(AirflowSkipException, match="not approved"):
        guard.execute(context)
    assert lease_log.current("orders") is None
    assert list(tmp_path.iterdir()) == [], "the approval step wrote the outcome; the guard writes nothing"
    xcoms["g.approve_plan"] = {
        "required": True,
        "approved": False,
    }  # a reject that could not skip (no later task)
    with pytest.raises(AirflowSkipException, match="not approved"):
        guard.execute(context)
    xcoms["g.approve_plan"] = {
        "required": False,
        "approved": True,
    }  # approval off: the guard decides as before
    with pytest.raises(AttributeError):  # it goes on to the cluster (here a namespace without verbs)
        guard.execute(context)


def test_a_set_of_topics_is_approved_as_one_and_a_change_names_each_topic(tmp_path: Path) -> None:
    """A plan of several topics: the prompt's headline and table name every topic; on Approve each topic is
    planned again and compared: unchanged goes on, a new group at risk fails naming it on each topic, and
    every topic's lease is released."""
    from airflow_provider_kstate.compat import AirflowFailException
    from airflow_provider_kstate.errors import PlanChangedError
    from airflow_provider_kstate.increase.approval import approval_text
    from airflow_provider_kstate.operators.approval import KStateApprovalOperator

    owner = "kstate_partition_increase/manual__1"
    request = REQUEST.model_copy(update={"topics": ("orders", "payments")})
    several = plan_increase(_cluster(), request, lambda: PRESENT).with_run(
        owner=owner, report_uri=str(tmp_path)
    )
    assert several.topics == {"orders": 4, "payments": 4}
    text = approval_text(several)
    assert (
        text.subject
        == approval_subject(several)
        == ("Approve 2 co-partitioned topics (orders, payments): 4 -> 8 partitions in one run?")
    )
    assert text.body.startswith("**Co-partitioned topics grown together**")
    assert "| `orders` | 4 | 8 |" in text.body and "| `payments` | 4 | 8 |" in text.body
    one = _plan(_cluster())
    assert approval_text(one).body == approval_prompt(one), "a set of one: no heading"
    event = {"chosen_options": ["Approve"], "params_input": {}, "responded_at": _now()}
    event["responded_by_user"] = {"id": "1", "name": "bob"}
    for hook, approved in ((_cluster(), True), (_cluster(audit=group_info("audit", "EMPTY")), False)):
        op = KStateApprovalOperator(task_id="approve_plan", plan=several.to_dict(), require_approval=True)
        lease_log = MemoryLeaseLog()
        for topic in ("orders", "payments"):
            lease_log.acquire(topic, owner, 900)
        op.__dict__.update(
            lease=lease_log, admin=hook, control=SimpleNamespace(client_piece_clients=lambda: PRESENT)
        )
        if approved:
            assert op.execute_complete(_context(), event)["approved"] is True
            assert lease_log.current("payments") is not None
            continue
        with pytest.raises(AirflowFailException) as info:
            op.execute_complete(_context(), event)
        assert isinstance(info.value.__cause__, PlanChangedError)
        text = str(info.value)
        assert "orders: new group at risk: audit" in text and "payments: new group at risk: audit" in text
        assert lease_log.current("orders") is None and lease_log.current("payments") is None
