"""The approval step's decisions (issue 40 item 2: the decisions of
:class:`~airflow_provider_kstate.operators.approval.KStateApprovalOperator`, without Airflow); the prompt and
the comparison of the approved plan with the cluster are :mod:`~airflow_provider_kstate.increase.approval`'s.

* :func:`approval_timeout` and :func:`deadline_text` - how long the request waits, and its deadline as the
  prompt shows it;
* :func:`topic_history` - the downtime of the topic's earlier runs, read from their progress documents
  (never fails the step);
* :class:`Answer` - what the human-in-the-loop event says: no answer in time, a reject or an approval, who
  answered, and the step's XCom;
* :class:`ApprovalRecord` - what the step records while it waits (the topics' leases held until the
  deadline, ``awaiting_approval``) and once answered: the run ends (the topics' leases released, the step
  and outcome in ``progress.json``), or it goes on only while the cluster matches the approved plan.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Protocol

from airflow_provider_kstate.errors import ApprovalTimeoutError, KStateConfigError
from airflow_provider_kstate.increase.approval import (
    APPROVED,
    AWAITING_APPROVAL,
    EXPIRED,
    PLAN_CHANGED,
    REJECTED,
    DowntimeHistory,
    history_of,
    set_changes,
)
from airflow_provider_kstate.increase.events import Events
from airflow_provider_kstate.increase.plan import Plan
from airflow_provider_kstate.increase.report import (
    PROGRESS_NAME,
    is_local,
    local_report_path,
    run_folder_name,
    topic_folder,
)

#: The step's XCom when no approval is required: the run goes on with the plan.
NOT_REQUIRED: dict[str, Any] = {"required": False, "approved": True}


def approval_timeout(value: Any) -> timedelta:
    """Return ``approval_timeout`` (seconds, or a ``timedelta``) as a ``timedelta``.

    :raises KStateConfigError: it is not a positive number of seconds.
    """
    try:
        seconds = value.total_seconds() if isinstance(value, timedelta) else float(str(value).strip())
    except ValueError:
        seconds = 0.0
    if seconds <= 0:
        raise KStateConfigError(f"approval_timeout must be a positive number of seconds, got {value!r}")
    return timedelta(seconds=seconds)


def deadline_text(timeout: timedelta, now: datetime | None = None) -> str:
    """When a request made ``now`` (default: now) and waiting ``timeout`` expires, as the prompt shows it."""
    return ((now or datetime.now(timezone.utc)) + timeout).strftime("%Y-%m-%d %H:%M:%S UTC")


# ------------------------------------------------------------------------------- the earlier runs


class StoredFolder(Protocol):
    """A folder or file of the report store (an ``ObjectStoragePath``) as the history reads it."""

    @property
    def name(self) -> str: ...

    def iterdir(self) -> Iterable[StoredFolder]: ...

    def exists(self) -> bool: ...

    def read_bytes(self) -> bytes: ...

    def __truediv__(self, name: str) -> StoredFolder: ...


def topic_history(
    plan: Plan, owner: str, remote: Callable[[str], StoredFolder], limit: int, log: Any
) -> DowntimeHistory:
    """The downtime of the earlier runs of ``plan``'s topic, from their progress documents (at most
    ``limit``, the newest; ``owner``'s own run left out); none, logged, when they cannot be read.

    :param remote: the object-store path of a URI (a local folder is read from the disk).
    """
    folder = topic_folder(plan.report_uri, plan.topic)
    try:
        texts = progress_texts(folder, run_folder_name(owner), remote, limit)
    except (OSError, ValueError) as exc:
        log.warning("APPROVE the topic's earlier runs could not be read under %s: %s", folder, exc)
        return DowntimeHistory()
    return history_of(texts)


def progress_texts(folder: str, own: str, remote: Callable[[str], StoredFolder], limit: int) -> list[bytes]:
    """The newest ``limit`` progress documents of the run folders under ``folder`` but ``own`` (on a local
    disk the newest written; in an object store, where a folder has no time, the last by name)."""
    if is_local(folder):
        root = local_report_path(folder)
        found = [d / PROGRESS_NAME for d in root.iterdir() if d.name != own] if root.is_dir() else []
        files = sorted((f for f in found if f.is_file()), key=lambda f: f.stat().st_mtime, reverse=True)
        return [f.read_bytes() for f in files[:limit]]
    texts: list[bytes] = []
    runs = sorted((d for d in remote(folder).iterdir() if d.name != own), key=lambda d: d.name, reverse=True)
    for run in runs:
        doc = run / PROGRESS_NAME
        if doc.exists():
            texts.append(doc.read_bytes())
        if len(texts) >= limit:
            break
    return texts


# ------------------------------------------------------------------------------------- the answer


@dataclass(frozen=True)
class Answer:
    """An answer to the approval request, as the human-in-the-loop event gives it.

    :param event: the event (``chosen_options``, ``responded_by_user``; ``error`` and ``error_type``).
    :param approve: the option that approves.
    """

    event: Mapping[str, Any]
    approve: str

    @property
    def expired(self) -> bool:
        """Nobody answered before the deadline."""
        return bool(self.event.get("error_type") == "timeout")

    @property
    def approved(self) -> bool:
        return list(self.event.get("chosen_options") or []) == [self.approve]

    @property
    def rejected(self) -> bool:
        """Answered, and not approved (an event with an error is neither: the HITL operator raises it)."""
        return "error" not in self.event and not self.approved

    @property
    def by(self) -> str:
        """Who answered (``nobody (the default)`` when nobody is named)."""
        user = self.event.get("responded_by_user") or {}
        return str(user.get("name") or user.get("id") or "nobody (the default)")

    def result(self) -> dict[str, Any]:
        """The step's XCom once answered."""
        return {"required": True, "approved": self.approved, "responded_by": self.by}

    @staticmethod
    def expired_error(plan: Plan) -> ApprovalTimeoutError:
        """The error of a request nobody answered in time (not retried: a retry would ask again)."""
        return ApprovalTimeoutError(
            f"nobody answered the approval of {', '.join(plan.topic_names)!r} before its deadline: nothing was "
            "changed and the lease is released. Trigger the run again to ask again."
        )


# ------------------------------------------------------------------------------------ the record


class ApprovalLeases(Protocol):
    """The leases of the plan's topics for this DAG run (:class:`~airflow_provider_kstate.lease_rules.LeaseSet`)."""

    def renew(self, plan: dict[str, Any] | None = None) -> None: ...

    def release(self) -> None: ...


@dataclass(frozen=True)
class ApprovalRecord:
    """What the step records while it waits and once answered.

    :param leases: the leases of the plan's topics, at the steps' TTL (while it waits: until the deadline,
        :func:`~airflow_provider_kstate.increase.approval.wait_lease_ttl`).
    :param events: the run's events (its progress document).
    :param log: the task's logger.
    """

    leases: ApprovalLeases
    events: Events
    log: Any

    def wait(self, plan: Plan, timeout: timedelta, parked: str) -> None:
        """The request is made: hold the topics' leases until its deadline and record ``awaiting_approval``.

        :param parked: how the task waits (``awaiting_input``, or deferred to the triggerer), as logged.
        """
        self.leases.renew(plan.to_dict())
        self.events.step(AWAITING_APPROVAL)
        self.log.info(
            "APPROVE waiting up to %s s for an answer (%s); the lease on %s is held until then",
            f"{timeout.total_seconds():.0f}",
            parked,
            ", ".join(plan.topic_names),
        )

    def answered(self, answer: Answer, plan: Plan) -> None:
        """Record an answer before the human-in-the-loop operator takes it: nobody answered in time (the run
        ends, :class:`~airflow_provider_kstate.errors.ApprovalTimeoutError` raised), or a reject (the run ends,
        nothing changed: the operator then skips every later task)."""
        if answer.expired:
            self.end(EXPIRED, EXPIRED)
            raise answer.expired_error(plan)
        if answer.rejected:
            self.end(REJECTED, REJECTED)
            self.log.warning(
                "APPROVE rejected by %s: nothing was changed, the lease is released, the run's later tasks "
                "are skipped",
                answer.by,
            )

    def decided(
        self, answer: Answer, plan: Plan, replan: Callable[[Plan], tuple[Plan, str]]
    ) -> dict[str, Any]:
        """Return the step's XCom once the answer is taken; an approval goes on only while the cluster
        matches ``plan`` (:meth:`go_on`)."""
        if answer.approved:
            self.log.info("APPROVE approved by %s: checking the cluster still matches the plan", answer.by)
            self.go_on(plan, replan)
        return answer.result()

    def end(self, step: str, outcome: str) -> None:
        """The run stops here: release the topics' leases, record the step and the outcome."""
        self.leases.release()
        self.events.step(step)
        self.events.finish(outcome)

    def go_on(self, approved: Plan, replan: Callable[[Plan], tuple[Plan, str]]) -> None:
        """Go on with the ``approved`` plan (the step ``approved``) while the cluster matches it; else, before
        anyone is paused, end the run and raise :class:`~airflow_provider_kstate.errors.PlanChangedError`.

        :param replan: the approved plan made again now and "", or at the counts now and why the planner
            refuses it (:func:`~airflow_provider_kstate.increase.planner.plan_again`).
        """
        self.leases.renew(approved.to_dict())  # back to the steps' TTL; fails if another run took it
        found = set_changes(approved, *replan(approved))  # each topic compared, named in the error
        if not found:
            self.log.info("APPROVE the cluster matches the approved plan: going on")
            self.events.step(APPROVED)
            return
        for topic, line in found.lines():
            self.log.error("APPROVE %s changed since the plan: %s", topic, line)
        self.end(PLAN_CHANGED, "failed")
        found.refuse(approved.topic_names)
