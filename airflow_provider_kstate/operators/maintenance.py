"""The decisions of the state-maintenance flow: whether to run the deep check, and what to do with the verdict.

Plain operators (not TaskFlow callables in the DAG file), so the DAG parses without the standard provider's
Python operators.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.providers.standard.operators.branch import BaseBranchOperator
from airflow.sdk import BaseOperator

from airflow_provider_kstate.enums import StrEnum
from airflow_provider_kstate.errors import StateCheckFailed
from airflow_provider_kstate.params import as_choice
from airflow_provider_kstate.task_edge import TranslatesDomainErrors

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_kstate.store.results import CheckReport


class RebuildMode(StrEnum):
    """The ``rebuild`` param: rebuild a bad store (``auto``), fail the run instead (``never``), or always
    rebuild (``force``)."""

    AUTO = "auto"
    NEVER = "never"
    FORCE = "force"


def rebuild_scope(fast: CheckReport, deep: CheckReport | None, target: int | None = None) -> list[int]:
    """Return the partitions a partial rebuild covers, [] for a full rebuild.

    The deep check's failed partitions, plus the fast check's when all it found is damage to those
    partitions' data files (:func:`~airflow_provider_kstate.store.fast_check.partial_scope`). Any other
    fast-check failure, or a re-key to another partition count (``target``), needs a full rebuild.
    """
    from airflow_provider_kstate.store.fast_check import partial_scope

    if target and target != fast.topic_partitions:
        return []
    scope = [] if fast.ok else partial_scope(fast)
    if scope is None:
        return []
    return sorted(set(scope) | set(deep.failed_partitions if deep is not None else []))


def verdict(
    fast: CheckReport, deep: CheckReport | None, mode: str, target: int | None = None
) -> tuple[str, list[int]]:
    """Return the branch (``store_ok``, ``store_bad`` or ``rebuild``) and the partitions a partial rebuild covers.

    ``auto`` rebuilds only the failing partitions when :func:`rebuild_scope` allows it; ``force`` always
    rebuilds everything.

    :param target: the partition count to key the rebuild for (the ``partitions`` param), None: unchanged.
    """
    rebuild = as_choice("rebuild", mode, RebuildMode)
    bad = not fast.ok or (deep is not None and not deep.ok)
    only = rebuild_scope(fast, deep, target) if rebuild == RebuildMode.AUTO and bad else []
    if rebuild == RebuildMode.FORCE:
        return "rebuild", only
    if not bad:
        return "store_ok", only
    return ("rebuild" if rebuild == RebuildMode.AUTO else "store_bad"), only


def read_report(xcom: Any, check: str = "deep") -> CheckReport | None:
    """Parse a check task's report (its XCom, rendered) into a :class:`CheckReport`, None when the task
    pushed none (skipped).

    :param check: ``fast`` or ``deep``, when the report does not say.
    """
    from airflow_provider_kstate.store.results import CheckReport

    return CheckReport.read(xcom, check=check) if xcom else None


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
        fast = read_report(self.fast_report, "fast")
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
        fast = read_report(self.fast_report, "fast")
        if fast is None:
            raise StateCheckFailed(
                "no fast check report (fast_report is empty): the verdict needs the fast check's"
            )
        deep = read_report(self.deep_report, "deep")
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
        pulled = (read_report(report) for report in self.reports)
        details = "; ".join(
            f"{r.check} check: problems {r.problems}, failed partitions {r.failed_partitions}"
            for r in pulled
            if r is not None and not r.ok
        )
        raise StateCheckFailed(f"the state store is bad and rebuild=never: {details}")
