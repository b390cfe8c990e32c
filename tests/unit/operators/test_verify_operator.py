"""Unit tests of operators/verify.py: the step gathers its inputs, judges each topic through the domain
(:class:`~airflow_provider_kstate.increase.verification.TopicVerification`) and gives one verdict: the XCom's
shape, the progress events, the lease, the error."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_provider_kstate.errors import VerificationError
from airflow_provider_kstate.increase.plan import GroupClass, GroupPlan, Plan
from airflow_provider_kstate.operators.verify import KStateVerifyOperator


class _Replicas:
    def leaderless(self, wanted: list[int]) -> list[int]:
        return []


class _Admin:
    """A topic grown 2 -> 4 (10 records on each partition); the group's offsets as given."""

    def __init__(self, offsets: dict[int, int]) -> None:
        self.offsets = offsets

    def topic_replicas(self, topic: str, leaders_only: bool = False) -> _Replicas:
        return _Replicas()

    def unloaded(self, topic: str, partitions: Any) -> list[int]:
        return []

    def partition_count(self, topic: str) -> int:
        return 4

    def watermarks(self, topic: str, partitions: Any) -> dict[int, tuple[int, int]]:
        return {p: (0, 10) for p in partitions}

    def committed_offsets_many(self, groups: list[str], topic: str, count: int) -> Any:
        return iter([(g, dict(self.offsets)) for g in groups])

    def client_config(self) -> dict[str, str]:
        return {"bootstrap.servers": "localhost:9092"}


class _Events:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def step(self, name: str) -> None:
        self.calls.append(("step", name))

    def groups(self, groups: list[str], state: Any) -> None:
        self.calls.append(("groups", list(groups)))

    def finish(self, outcome: str) -> None:
        self.calls.append(("finish", outcome))


class _Keeper:
    released = 0

    def release(self) -> None:
        self.released += 1


def _operator(tmp_path: Path, offsets: dict[int, int]) -> tuple[KStateVerifyOperator, _Events, _Keeper]:
    groups = {"billing": GroupPlan(cls=GroupClass.ACTIVE, state="STABLE", pause=True, seed=True, wait=True)}
    plan = Plan("orders", 2, 4, groups, owner="dag/run-1", report_uri=str(tmp_path))
    op = KStateVerifyOperator(task_id="verify", plan=plan.to_dict(), key_order="relax")
    events, keeper = _Events(), _Keeper()
    op.__dict__.update(admin=_Admin(offsets), report_storage=None)  # the cached ports: no connection
    op.events = lambda context: events  # type: ignore[method-assign,assignment,return-value]
    op.keeper = lambda context, ttl=None: keeper  # type: ignore[method-assign,assignment,return-value]
    return op, events, keeper


CONTEXT = {"ti": SimpleNamespace(dag_id="dag", run_id="run-1")}


def test_a_passing_topic_releases_the_lease_and_returns_the_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    op, events, keeper = _operator(tmp_path, {0: 10, 1: 10, 2: 0, 3: 0})
    out = op.execute(CONTEXT)  # type: ignore[arg-type]
    topic = out["topics"]["orders"]
    assert set(topic) == {
        "ok", "partitions", "groups", "problems", "cautions", "lag_total", "report_uri", "report_rows",
        "seed_report_uri", "key_order",
    }  # fmt: skip
    assert (topic["ok"], topic["report_rows"], topic["seed_report_uri"], topic["key_order"]) == (
        True,
        4,
        "",
        {},
    )
    assert topic["report_uri"].startswith(str(tmp_path)) and "verify" in topic["report_uri"]
    assert {k: v for k, v in out.items() if k != "topics"} == {
        "ok": True, "partitions": 4, "groups": 1, "problems": 0, "cautions": 0, "lag_total": 20,
    }  # fmt: skip
    assert keeper.released == 1
    assert events.calls == [("step", "verify"), ("groups", []), ("finish", "success")]
    logged = capsys.readouterr().out  # the task's log
    assert "VERIFY orders: no group skips a message on any partition (orders: 4)" in logged
    assert "VERIFY no seed report (" in logged


def test_a_topic_that_would_skip_messages_fails_and_keeps_the_lease(tmp_path: Path) -> None:
    op, events, keeper = _operator(tmp_path, {0: 10, 1: 10, 2: 0})
    with pytest.raises(Exception, match="would have messages skipped") as caught:  # fatal at the task's edge
        op.execute(CONTEXT)  # type: ignore[arg-type]
    assert isinstance(caught.value.__cause__, VerificationError)
    assert str(caught.value).startswith("1 partitions of 'orders' would have messages skipped (report ")
    assert str(caught.value).endswith(". See the lines above. The lease of every topic stays held.")
    assert keeper.released == 0
    assert events.calls[-1] == ("finish", "failed")
