"""The decisions of the state-maintenance flow as tasks: whether to run the deep check, and what to do with the
verdict (the decisions themselves: :mod:`airflow_provider_kstate.store.tasks`, whose ``RebuildMode`` and
``verdict`` this module re-exports).

Plain operators (not TaskFlow callables in the DAG file), so the DAG parses without the standard provider's
Python operators.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.providers.standard.operators.branch import BaseBranchOperator
from airflow.sdk import BaseOperator

from airflow_provider_kstate.errors import StateCheckFailed
from airflow_provider_kstate.store.tasks import RebuildMode, check_report, store_bad, verdict
from airflow_provider_kstate.task_edge import TranslatesDomainErrors

if TYPE_CHECKING:
    from airflow.sdk import Context

__all__ = [
    "KStateChooseDeepCheckOperator",
    "KStateStoreBadOperator",
    "KStateStoreVerdictOperator",
    "RebuildMode",
    "verdict",
]


class KStateChooseDeepCheckOperator(TranslatesDomainErrors, BaseBranchOperator):
    """Branch to the deep check when the ``deep`` param is set and there is a snapshot to check.

    :param fast_report: the fast check's report (pass its ``.output``). (templated)
    :param deep_task_id: the deep check's task id (the branch taken to run it).
    :param otherwise_task_id: where to go instead (the branch taken to skip it).
    """

    template_fields: tuple[str, ...] = ("fast_report",)

    def __init__(self, *, fast_report: Any, deep_task_id: str, otherwise_task_id: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.fast_report = fast_report
        self.deep_task_id = deep_task_id
        self.otherwise_task_id = otherwise_task_id

    def choose_branch(self, context: Context) -> str:
        fast = check_report(self.fast_report, "fast")
        deep = bool(context["params"].get("deep")) and bool(fast and fast.snapshot_ok)
        self.log.info("DECIDE deep check %s", "runs" if deep else "skipped")
        return self.deep_task_id if deep else self.otherwise_task_id


class KStateStoreVerdictOperator(TranslatesDomainErrors, BaseBranchOperator):
    """Branch on the checks and the ``rebuild`` param; push the partitions of a partial rebuild as XCom
    ``only_partitions`` (comma-separated, empty for a full rebuild; pass ``.output["only_partitions"]``
    to the rebuild).

    :param fast_report: the fast check's report (pass its ``.output``). (templated)
    :param deep_report: the deep check's report (pass its ``.output``; None when it was skipped). (templated)
    """

    template_fields: tuple[str, ...] = ("fast_report", "deep_report")

    def __init__(self, *, fast_report: Any, deep_report: Any = None, **kwargs: Any) -> None:
        kwargs.setdefault("trigger_rule", "none_failed_min_one_success")
        super().__init__(**kwargs)
        self.fast_report = fast_report
        self.deep_report = deep_report

    def choose_branch(self, context: Context) -> str:
        fast = check_report(self.fast_report, "fast")
        if fast is None:
            raise StateCheckFailed(
                "no fast check report (fast_report is empty): the verdict needs the fast check's"
            )
        deep = check_report(self.deep_report, "deep")
        params = context["params"]
        branch, only = verdict(fast, deep, params.get("rebuild", RebuildMode.AUTO), params.get("partitions"))
        context["ti"].xcom_push(key="only_partitions", value=",".join(str(p) for p in only))
        self.log.info(
            "DECIDE store %s -> %s (partitions %s)",
            "ok" if branch == "store_ok" else "bad",
            branch,
            only or "all",
        )
        return branch


class KStateStoreBadOperator(TranslatesDomainErrors, BaseOperator):
    """Fail the run: the store is bad and the ``rebuild`` param is ``never``. The error names what failed.

    Runs when the verdict branches to it, whether the deep check ran or was skipped (its trigger rule is
    ``none_failed_min_one_success``: the checks whose reports it quotes are its upstream tasks too).

    :param reports: the reports of the checks to quote (pass their ``.output``; a skipped check's is None).
        (templated)
    """

    template_fields: tuple[str, ...] = ("reports",)

    def __init__(self, *, reports: list[Any], **kwargs: Any) -> None:
        kwargs.setdefault("trigger_rule", "none_failed_min_one_success")
        super().__init__(**kwargs)
        self.reports = reports

    def execute(self, context: Context) -> None:
        raise store_bad(self.reports)
