"""Unit tests of the state-maintenance decisions: they take the checks' reports as XComArgs (``.output``),
like the increase steps take ``plan``, and the maintenance DAG wires them so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_provider_kstate.errors import StateCheckFailed
from airflow_provider_kstate.operators.maintenance import (
    KStateChooseDeepCheckOperator,
    KStateStoreBadOperator,
    KStateStoreVerdictOperator,
)
from airflow_provider_kstate.store.results import CHECK_FORMAT

DAGS = Path(__file__).resolve().parents[3] / "dags"


def _report(check: str, ok: bool, failed: tuple[int, ...] = (), snapshot_ok: bool = True) -> dict[str, Any]:
    """A check's XCom as the fast and deep check operators push it."""
    return {
        "format": CHECK_FORMAT,
        "check": check,
        "topic": "t",
        "snapshot_uri": "/s",
        "ok": ok,
        "snapshot_ok": snapshot_ok,
        "problems": [] if ok else ["bad"],
        "failed_partitions": list(failed),
    }


class FakeTI:
    """The task instance a decision pushes ``only_partitions`` to."""

    def __init__(self) -> None:
        self.pushed: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.pushed[key] = value

    def xcom_pull(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a decision reads its rendered arguments, not XCom")


def _context(**params: Any) -> Any:
    return {"ti": FakeTI(), "params": params}


def test_the_deep_check_branch_reads_the_fast_report_it_is_given() -> None:
    good = _report("fast", True)
    branch = KStateChooseDeepCheckOperator(
        task_id="choose", fast_report=good, deep_task_id="deep", otherwise_task_id="decide"
    )
    assert branch.template_fields == ("fast_report",)
    assert branch.choose_branch(_context(deep=True)) == "deep"
    assert branch.choose_branch(_context(deep=False)) == "decide"
    branch.fast_report = _report("fast", False, snapshot_ok=False)  # no snapshot: nothing to compare
    assert branch.choose_branch(_context(deep=True)) == "decide"
    branch.fast_report = None  # the fast check pushed nothing
    assert branch.choose_branch(_context(deep=True)) == "decide"


def test_the_verdict_reads_both_reports_and_pushes_the_partial_scope() -> None:
    verdict = KStateStoreVerdictOperator(
        task_id="decide", fast_report=_report("fast", True), deep_report=None
    )
    assert verdict.template_fields == ("fast_report", "deep_report")
    assert verdict.trigger_rule == "none_failed_min_one_success"
    context = _context(rebuild="auto")
    assert verdict.choose_branch(context) == "store_ok"
    assert context["ti"].pushed == {"only_partitions": ""}

    verdict.deep_report = _report("deep", False, (2, 0))  # the deep check ran and found two partitions
    context = _context(rebuild="auto")
    assert verdict.choose_branch(context) == "rebuild"
    assert context["ti"].pushed == {"only_partitions": "0,2"}
    assert verdict.choose_branch(_context(rebuild="never")) == "store_bad"

    verdict.fast_report = None
    with pytest.raises(StateCheckFailed, match="no fast check report"):
        verdict.choose_branch(_context(rebuild="auto"))


def test_store_bad_quotes_the_reports_it_is_given_and_skips_a_skipped_check() -> None:
    bad = KStateStoreBadOperator(task_id="bad", reports=[_report("fast", False, (3,)), None])
    assert bad.template_fields == ("reports",)
    assert bad.trigger_rule == "none_failed_min_one_success"
    with pytest.raises(StateCheckFailed, match=r"fast check: problems \['bad'\], failed partitions \[3\]"):
        bad.execute(_context())


def test_the_maintenance_dag_passes_the_checks_reports_as_xcomargs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The decisions take ``<check>.output``: the dependency comes with the argument, and a skipped deep
    check's report renders as None (its store_bad still runs when the verdict picks it)."""
    from airflow.sdk import BaseHook
    from airflow.sdk.definitions.xcom_arg import PlainXComArg
    from kstate_support.airflow_compat import dag_bag  # DagBag moved in Airflow 3.2

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a connection was looked up at parse time")

    monkeypatch.setattr(BaseHook, "get_connection", classmethod(boom))
    bag = dag_bag(str(DAGS))
    assert not bag.import_errors, bag.import_errors
    dag = bag.get_dag("kstate_state_maintenance")

    def source(arg: Any) -> tuple[str, str]:
        assert isinstance(arg, PlainXComArg), arg
        return arg.operator.task_id, arg.key

    choose, decide, bad, rebuild = (
        dag.get_task(t) for t in ("choose_deep", "decide", "store_bad", "rebuild")
    )
    assert source(choose.fast_report) == ("fast_check", "return_value")
    assert (source(decide.fast_report), source(decide.deep_report)) == (
        ("fast_check", "return_value"),
        ("deep_check", "return_value"),
    )
    assert [source(r) for r in bad.reports] == [
        ("fast_check", "return_value"),
        ("deep_check", "return_value"),
    ]
    assert source(rebuild.only_partitions) == ("decide", "only_partitions")
    assert bad.upstream_task_ids == {"fast_check", "deep_check", "decide"}
    assert bad.trigger_rule == "none_failed_min_one_success"
    assert choose.downstream_task_ids == {"deep_check", "decide"}  # the branch's two ways, unchanged
    assert decide.downstream_task_ids == {"store_ok", "store_bad", "rebuild"}
    assert dag.get_task("check_broker").refresh_broker_check == "{{ params.refresh_broker_check }}"
