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
    """Parse a check task's XCom into a :class:`CheckReport`, None when the task pushed none (skipped).

    :param check: ``fast`` or ``deep``, when the report does not say.
    """
    from airflow_provider_kstate.store.results import CheckReport

    return CheckReport.read(xcom, check=check) if xcom else None


class KStateChooseDeepCheckOperator(TranslatesDomainErrors, BaseBranchOperator):
    """Branch to the deep check when the ``deep`` param is set and there is a snapshot to check.

    :param fast_check_task_id: the fast check's task id.
    :param deep_task_id: the deep check's task id.
    :param otherwise_task_id: where to go instead.
    """

    def __init__(
        self, *, fast_check_task_id: str, deep_task_id: str, otherwise_task_id: str, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.fast_check_task_id = fast_check_task_id
        self.deep_task_id = deep_task_id
        self.otherwise_task_id = otherwise_task_id

    def choose_branch(self, context: Context) -> str:
        fast = read_report(context["ti"].xcom_pull(task_ids=self.fast_check_task_id), "fast")
        deep = bool(context["params"].get("deep")) and bool(fast and fast.snapshot_ok)
        self.log.info("DECIDE deep check %s", "runs" if deep else "skipped")
        return self.deep_task_id if deep else self.otherwise_task_id


class KStateStoreVerdictOperator(TranslatesDomainErrors, BaseBranchOperator):
    """Branch on the checks and the ``rebuild`` param; push the partitions of a partial rebuild as XCom
    ``only_partitions`` (comma-separated, empty for a full rebuild).

    :param fast_check_task_id: the fast check's task id.
    :param deep_check_task_id: the deep check's task id (its XCom may be absent).
    """

    def __init__(self, *, fast_check_task_id: str, deep_check_task_id: str, **kwargs: Any) -> None:
        kwargs.setdefault("trigger_rule", "none_failed_min_one_success")
        super().__init__(**kwargs)
        self.fast_check_task_id = fast_check_task_id
        self.deep_check_task_id = deep_check_task_id

    def choose_branch(self, context: Context) -> str:
        ti = context["ti"]
        fast = read_report(ti.xcom_pull(task_ids=self.fast_check_task_id), "fast")
        if fast is None:
            raise StateCheckFailed(
                f"no report of {self.fast_check_task_id!r} in XCom: the verdict needs the fast check's"
            )
        deep = read_report(ti.xcom_pull(task_ids=self.deep_check_task_id), "deep")
        params = context["params"]
        branch, only = verdict(fast, deep, params.get("rebuild", RebuildMode.AUTO), params.get("partitions"))
        ti.xcom_push(key="only_partitions", value=",".join(str(p) for p in only))
        self.log.info(
            "DECIDE store %s -> %s (partitions %s)",
            "ok" if branch == "store_ok" else "bad",
            branch,
            only or "all",
        )
        return branch


class KStateStoreBadOperator(TranslatesDomainErrors, BaseOperator):
    """Fail the run: the store is bad and the ``rebuild`` param is ``never``. The error names what failed.

    :param report_task_ids: the check tasks whose reports to quote.
    """

    def __init__(self, *, report_task_ids: list[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.report_task_ids = report_task_ids

    def execute(self, context: Context) -> None:
        pulled = (read_report(context["ti"].xcom_pull(task_ids=t)) for t in self.report_task_ids)
        details = "; ".join(
            f"{r.check} check: problems {r.problems}, failed partitions {r.failed_partitions}"
            for r in pulled
            if r is not None and not r.ok
        )
        raise StateCheckFailed(f"the state store is bad and rebuild=never: {details}")
