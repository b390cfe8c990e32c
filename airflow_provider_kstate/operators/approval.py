"""The approval step of the safe partition increase, like a production change: plan, approve, apply.

Built on the standard provider's human-in-the-loop :class:`~airflow.providers.standard.operators.hitl.ApprovalOperator`
(Airflow 3.1+): the request appears under the run's *Required actions* in the UI, and in the REST API
(``/api/v2/dags/{dag_id}/dagRuns/{run_id}/hitlDetails``; answered by ``PATCH
.../taskInstances/{task_id}/-1/hitlDetails`` with ``{"chosen_options": ["Approve"]}``).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from airflow.providers.standard.operators.hitl import ApprovalOperator

from airflow_provider_kstate.compat import HITL_AWAITS_INPUT
from airflow_provider_kstate.defaults import DEFAULT_APPROVAL_TIMEOUT
from airflow_provider_kstate.errors import ApprovalTimeoutError, KStateConfigError
from airflow_provider_kstate.operators.base import KStateStepOperator
from airflow_provider_kstate.params import as_bool

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_kstate.hooks.reports import ObjectStorageReports
    from airflow_provider_kstate.increase.approval import BrokerCheck, DowntimeHistory
    from airflow_provider_kstate.increase.plan import Plan

#: Earlier runs of the topic whose progress documents the prompt reads, at most (the newest).
HISTORY_RUNS = 20


class KStateApprovalOperator(KStateStepOperator, ApprovalOperator):
    """Ask a human to approve the plan before anyone is paused; with ``require_approval`` off, go on at once.

    The prompt (Markdown, from the typed plan) shows the partitions now and after, each group with its
    class, driver, key-order mark and what the run will do to it, the broker doctor's last verdict and the
    downtime this topic's earlier runs measured (their ``progress.json``). While it waits, the run's
    progress document says ``awaiting_approval`` and the topic's lease is held until the deadline.

    * **Approve**: the plan is made again from the request stored in it (the one planner,
      :func:`~airflow_provider_kstate.increase.planner.plan_increase`: the same groups, exclusions,
      acknowledgements, drivers, key order and broker verdict; no lease) and compared with the approved
      one. A different partition count, a new group at risk, or a group gone or handled differently fails
      the task with :class:`~airflow_provider_kstate.errors.PlanChangedError`
      naming each change, before anyone is paused (the lease released).
    * **Reject**: nothing is changed, the lease is released and every later task of the run is skipped
      (this task succeeds: the decision was made; the run ends like a dry run).
    * **No answer before** ``approval_timeout``: the same, but the task fails with
      :class:`~airflow_provider_kstate.errors.ApprovalTimeoutError` (nobody decided: alerts fire).

    A plan of several co-partitioned topics is approved as one: the prompt names every topic with its count
    now and after, every topic's lease is held while it waits, and on Approve each topic's plan is made again
    and compared (a change on any topic fails the task naming the topic, and releases every lease).

    On Airflow 3.3 the task waits in the ``awaiting_input`` state (no triggerer; the scheduler's timeout
    sweep, every ``[scheduler] trigger_timeout_check_interval``, ends an unanswered request); on 3.1 and 3.2
    it is deferred to the triggerer. Either way it holds no worker slot while it waits.

    :param plan: the plan (XCom of :class:`~airflow_provider_kstate.operators.plan.KStatePlanOperator`).
    :param require_approval: ask for an approval; off, the task returns at once (templated).
    :param approval_timeout: seconds (or a ``timedelta``) to wait for an answer (templated).
    :param history_runs: earlier runs of the topic whose downtime the prompt shows, at most.
    """

    template_fields: tuple[str, ...] = (
        "plan",
        "require_approval",
        "approval_timeout",
    )
    ui_color = "#fff8e1"

    def __init__(
        self,
        *,
        plan: Any,
        require_approval: bool | str = False,
        approval_timeout: float | str | timedelta = DEFAULT_APPROVAL_TIMEOUT,
        history_runs: int = HISTORY_RUNS,
        **kwargs: Any,
    ) -> None:
        # The wait's deadline is approval_timeout: a step-wide execution_timeout (default_args) would race it
        # (the HITL operator would even take it for the response timeout).
        kwargs.pop("execution_timeout", None)
        super().__init__(
            plan=plan,
            subject="Approve the partition increase",
            ignore_downstream_trigger_rules=True,
            **kwargs,
        )
        self.require_approval = require_approval
        self.approval_timeout = approval_timeout
        self.history_runs = history_runs

    @property
    def serialized_params(self) -> dict[str, dict[str, Any]]:
        """The request asks for no input but the choice. (On Airflow 3.1 a Param does not record whether it
        is the DAG's or the task's, so the HITL form would show every DAG param: apache/airflow#57498.)"""
        return {}

    def execute(self, context: Context) -> Any:
        from airflow_provider_kstate.increase.approval import AWAITING_APPROVAL, approval_text, wait_lease_ttl
        from airflow_provider_kstate.lease_rules import run_owner

        if not as_bool("require_approval", self.require_approval):
            self.log.info("APPROVE not required (require_approval is off): the run goes on with the plan")
            return {"required": False, "approved": True}
        plan, timeout = self.typed_plan, self._timeout()
        self.response_timeout = timeout
        text = approval_text(
            plan,
            broker=self._broker_check(),
            history=self._history(plan, run_owner(context)),
            deadline=(datetime.now(timezone.utc) + timeout).strftime("%Y-%m-%d %H:%M:%S UTC"),
        )
        self.subject, self.body = text.subject, text.body
        self.keeper(context, wait_lease_ttl(self.lease_ttl, timeout.total_seconds())).renew(plan.to_dict())
        self.events(context).step(AWAITING_APPROVAL)
        self.log.info(
            "APPROVE waiting up to %s s for an answer (%s); the lease on %s is held until then",
            f"{timeout.total_seconds():.0f}",
            "awaiting_input" if HITL_AWAITS_INPUT else "deferred to the triggerer",
            ", ".join(plan.topic_names),
        )
        return super().execute(context)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        from airflow_provider_kstate.increase.approval import APPROVED, EXPIRED, REJECTED

        plan = self.typed_plan
        if event.get("error_type") == "timeout":
            self._end(context, EXPIRED, EXPIRED)
            raise ApprovalTimeoutError(
                f"nobody answered the approval of {', '.join(plan.topic_names)!r} before its deadline: nothing was changed and "
                "the lease is released. Trigger the run again to ask again."
            )
        chosen, by = list(event.get("chosen_options") or []), _responder(event)
        if "error" not in event and chosen != [self.APPROVE]:
            self._end(context, REJECTED, REJECTED)
            self.log.warning(
                "APPROVE rejected by %s: nothing was changed, the lease is released, the run's later tasks "
                "are skipped",
                by,
            )
        super().execute_complete(context, event)  # validates; a Reject skips every later task from here
        if chosen != [self.APPROVE]:  # rejected, with no later task to skip
            return {"required": True, "approved": False, "responded_by": by}
        self.log.info("APPROVE approved by %s: checking the cluster still matches the plan", by)
        self._check_unchanged(context, plan)
        self.events(context).step(APPROVED)
        return {"required": True, "approved": True, "responded_by": by}

    # ------------------------------------------------------------------------------------------ helpers

    def _timeout(self) -> timedelta:
        value = self.approval_timeout
        try:
            seconds = value.total_seconds() if isinstance(value, timedelta) else float(str(value).strip())
        except ValueError:
            seconds = 0.0
        if seconds <= 0:
            raise KStateConfigError(f"approval_timeout must be a positive number of seconds, got {value!r}")
        return timedelta(seconds=seconds)

    def _end(self, context: Context, step: str, outcome: str) -> None:
        """The run stops here: release the topic's lease, record the outcome in the progress document."""
        self.keeper(context).release()
        events = self.events(context)
        events.step(step)
        events.finish(outcome)

    def _check_unchanged(self, context: Context, approved: Plan) -> None:
        """Fail, before anyone is paused, when the cluster no longer matches the approved plan."""
        from airflow_provider_kstate.increase.approval import PLAN_CHANGED, set_changes

        self.keeper(context).renew(approved.to_dict())  # back to the steps' TTL; fails if another run took it
        found = set_changes(approved, *self._replan(approved))  # each topic compared, named in the error
        if not found:
            self.log.info("APPROVE the cluster matches the approved plan: going on")
            return
        for topic, line in found.lines():
            self.log.error("APPROVE %s changed since the plan: %s", topic, line)
        self._end(context, PLAN_CHANGED, "failed")
        found.refuse(approved.topic_names)

    def _replan(self, approved: Plan) -> tuple[Plan, str]:
        """The approved plan made again now and "", or at the counts now and why the planner refuses it
        (:func:`~airflow_provider_kstate.increase.planner.plan_again`)."""
        from airflow_provider_kstate.increase.planner import plan_again

        return plan_again(self.admin, approved, self.control.client_piece_clients)

    def _broker_check(self) -> BrokerCheck | None:
        """The broker doctor's cached verdict (never probes); None when there is none or it cannot be read."""
        from airflow_provider_kstate.doctor.promises import INCREASE_NEEDS
        from airflow_provider_kstate.hooks.doctor import KStateDoctorHook
        from airflow_provider_kstate.increase.approval import BrokerCheck

        try:
            verdict = KStateDoctorHook(
                self.kafka_config_id, request_timeout=self.request_timeout
            ).last_verdict()
        except Exception as exc:  # noqa: BLE001 - the prompt goes out without it
            self.log.warning("APPROVE the broker doctor's verdict could not be read: %s", exc)
            return None
        return BrokerCheck.of(verdict, INCREASE_NEEDS)

    def _history(self, plan: Plan, owner: str) -> DowntimeHistory:
        """The downtime of the topic's earlier runs, from their progress documents (never fails the step)."""
        from airflow_provider_kstate.increase.approval import DowntimeHistory, history_of
        from airflow_provider_kstate.increase.report import run_folder_name, topic_folder

        folder = topic_folder(plan.report_uri, plan.topic)
        try:
            texts = _progress_texts(folder, run_folder_name(owner), self.report_storage, self.history_runs)
        except (OSError, ValueError) as exc:
            self.log.warning("APPROVE the topic's earlier runs could not be read under %s: %s", folder, exc)
            return DowntimeHistory()
        return history_of(texts)


def _responder(event: dict[str, Any]) -> str:
    user = event.get("responded_by_user") or {}
    return str(user.get("name") or user.get("id") or "nobody (the default)")


def _progress_texts(folder: str, own: str, storage: ObjectStorageReports, limit: int) -> list[bytes]:
    """The newest ``limit`` progress documents of the run folders under ``folder`` but ``own``."""
    from airflow_provider_kstate.increase.report import PROGRESS_NAME, is_local, local_report_path

    if is_local(folder):
        root = local_report_path(folder)
        found = [d / PROGRESS_NAME for d in root.iterdir() if d.name != own] if root.is_dir() else []
        files = sorted((f for f in found if f.is_file()), key=lambda f: f.stat().st_mtime, reverse=True)
        return [f.read_bytes() for f in files[:limit]]
    remote = storage.path(folder)
    texts: list[bytes] = []
    for run in sorted((d for d in remote.iterdir() if d.name != own), key=lambda d: d.name, reverse=True):
        doc = run / PROGRESS_NAME
        if doc.exists():
            texts.append(doc.read_bytes())
        if len(texts) >= limit:
            break
    return texts


__all__ = ["KStateApprovalOperator"]
