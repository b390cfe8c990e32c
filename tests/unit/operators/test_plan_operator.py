"""Unit tests of ``KStatePlanOperator`` (operators/plan.py) on fakes: the shell over the one planner and
``increase.plan_step``. A dry run returns the plan and takes no lease; a run stores the plan with the
topic's lease and starts the run's progress document; a rerun of the same DAG run continues that plan
without planning again, and refuses another target."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kstate_support.fakes import FakeHook, group_info

from airflow_provider_kstate.compat import AirflowFailException
from airflow_provider_kstate.errors import KStateConfigError
from airflow_provider_kstate.operators.plan import KStatePlanOperator
from tests.unit.test_lease_keeper import MemoryLeaseLog

OWNER = "kstate_partition_increase/manual__1"


class FakeAdmin(FakeHook):
    """KStateAdminHook as the plan reads it: the connection check, the cluster's config, no authorizer."""

    def __init__(self) -> None:
        super().__init__(4, {"idle": group_info("idle", "EMPTY")})
        self.cluster = SimpleNamespace(config={"bootstrap.servers": "fake:9092"})
        self.planned = 0

    def check_connection(self) -> None:
        pass

    def authorized_operations(self, topics: Any = (), groups: Any = ()) -> dict[Any, Any]:
        self.planned += 1  # asked by every plan (the ACLs), never by a continued one
        return {}


@pytest.fixture
def hooks(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """The hooks the operator makes, replaced: one lease log and one admin hook for every task."""
    shared = SimpleNamespace(lease=MemoryLeaseLog(), admin=FakeAdmin())

    class LeaseHook:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.admin = shared.admin

        def __getattr__(self, name: str) -> Any:
            return getattr(shared.lease, name)

    verdict = SimpleNamespace(kept=lambda promise: False)
    monkeypatch.setattr("airflow_provider_kstate.hooks.lease.KStateLeaseHook", LeaseHook)
    monkeypatch.setattr(
        "airflow_provider_kstate.hooks.control.KStateControlHook",
        lambda *a, **k: SimpleNamespace(
            get_conn=SimpleNamespace(client_piece_clients=dict, close=lambda: None)
        ),
    )
    monkeypatch.setattr(
        "airflow_provider_kstate.hooks.doctor.KStateDoctorHook",
        lambda *a, **k: SimpleNamespace(require=lambda needs, allow, subject: verdict),
    )
    return shared


def _context() -> dict[str, Any]:
    ti = SimpleNamespace(dag_id="kstate_partition_increase", run_id="manual__1", try_number=1)
    ti.get_dagrun_state = lambda dag_id, run_id: "running"
    return {"ti": ti, "task_instance": ti}


def _plan_task(tmp_path: Path, **kwargs: Any) -> KStatePlanOperator:
    return KStatePlanOperator(task_id="plan", topic="orders", report_uri=str(tmp_path), **kwargs)


def test_a_dry_run_returns_the_plan_and_takes_no_lease(hooks: SimpleNamespace, tmp_path: Path) -> None:
    plan = _plan_task(tmp_path, partitions=8, dry_run="true").execute(_context())  # type: ignore[arg-type]
    assert (plan["dry_run"], plan["target_partitions"], plan["owner"]) == (True, 8, OWNER)
    assert plan["request"]["topics"] == ["orders"] and "idle" in plan["groups"]
    assert hooks.lease.current("orders") is None
    assert list(tmp_path.iterdir()) == [], "a dry run starts no progress document"


def test_a_run_stores_its_plan_with_the_lease_and_a_rerun_continues_it(
    hooks: SimpleNamespace, tmp_path: Path
) -> None:
    plan = _plan_task(tmp_path, partitions=8).execute(_context())  # type: ignore[arg-type]
    lease = hooks.lease.current("orders")
    assert lease is not None and lease.owner == OWNER and lease.plan == plan
    doc = tmp_path / "orders" / "kstate_partition_increase_manual__1" / "progress.json"
    assert json.loads(doc.read_text())["step"] == "planned"
    asked = hooks.admin.planned
    assert asked > 0

    again = _plan_task(tmp_path, partitions=8).execute(_context())  # type: ignore[arg-type]
    assert again == plan and hooks.admin.planned == asked, "a rerun continues the stored plan"
    with pytest.raises(AirflowFailException, match="it cannot switch to 6") as info:
        _plan_task(tmp_path, partitions=6).execute(_context())  # type: ignore[arg-type]
    assert isinstance(info.value.__cause__, KStateConfigError)
