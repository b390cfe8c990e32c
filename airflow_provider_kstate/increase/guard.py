"""What runs when a step of the increase fails, decided from the cluster, not from task states (issue 40
item 2: the decisions of :class:`~airflow_provider_kstate.operators.guard.KStateFailureGuardOperator`,
without Airflow).

:class:`FailureGuard` decides for every topic of the plan (a topic is a set of one):

* another run holds a topic's lease: change nothing (:meth:`FailureGuard.check_lease`);
* nothing created on any topic: resume everyone, restore each topic's producer layout, start the producer
  services a drain stopped, release the leases;
* otherwise a group is resumed when it holds an offset on every partition of every topic it reads; the
  others stay out, and the guard fails with :class:`~airflow_provider_kstate.errors.UnsafeResumeError` and
  the runbook naming each topic's gaps (:func:`~airflow_provider_kstate.increase.safety.partial_increase_runbook`).
  The drained topics' producers go to a layout every group is seeded on, and their services are started.

Each group is resumed by its driver: the resume record, and the start commands of the command-driven
groups that were live at plan time (start commands are idempotent). The guard always raises: something
upstream failed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from airflow_provider_kstate.errors import KStateError, LeaseHeldError, UnsafeResumeError
from airflow_provider_kstate.increase.drivers import CommandPairs
from airflow_provider_kstate.increase.fleet import commanded_live, commands_of, producer_commands
from airflow_provider_kstate.increase.key_order import ORDER_DRAINED
from airflow_provider_kstate.increase.plan import Plan, PlanMode
from airflow_provider_kstate.increase.safety import partial_increase_runbook, unseeded
from airflow_provider_kstate.increase.steps import names

if TYPE_CHECKING:
    from airflow_provider_kstate.increase.ports import AdminPort


class GuardLeases(Protocol):
    """The leases of the plan's topics for this DAG run (:class:`~airflow_provider_kstate.lease_rules.LeaseSet`)."""

    @property
    def owner(self) -> str: ...

    def current(self) -> Any: ...

    def release(self) -> None: ...


class GuardControl(Protocol):
    """The control channel as the guard uses it: resume, the producers' layout, and closing it."""

    def resume(self, groups: list[str], topic: str, issuer: str) -> int: ...

    def set_layout(self, topic: str, partitions: int, issuer: str) -> int: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class FailureGuard:
    """What the guard does after a failed step of ``plan``'s run.

    :param plan: the run's plan.
    :param cluster: the cluster (partition counts, committed offsets).
    :param control: the control channel.
    :param leases: the leases of the plan's topics for this DAG run.
    :param log: the task's logger.
    """

    plan: Plan
    cluster: AdminPort
    control: GuardControl
    leases: GuardLeases
    log: Any

    def check_lease(self) -> None:
        """Refuse to act when another run holds the lease (its consumers are its business).

        :raises LeaseHeldError: another run holds it; nothing was changed.
        """
        holder = self.leases.current()
        if holder is not None and holder.owner != self.leases.owner:
            raise LeaseHeldError(
                f"GUARD: another run holds the lease on {self.plan.topic!r} ({holder.describe()}): this guard "
                "changes nothing, so it cannot undo that run's pause."
            )

    def run(self) -> NoReturn:
        """Decide from the cluster, for every topic of the plan; always raises: something upstream failed.

        :raises UnsafeResumeError: a group lacks an offset on a partition of a topic it reads (it stays out).
        :raises KStateError: otherwise, saying what was resumed and what to do next.
        """
        plan, owner = self.plan, self.leases.owner
        views = plan.views()
        counts = {v.topic: self.cluster.partition_count(v.topic) for v in views}
        grown = [
            v.topic for v in views if v.mode == PlanMode.INCREASE and counts[v.topic] != v.original_partitions
        ]
        if plan.mode == PlanMode.INCREASE and not grown:
            self.resume(plan.where("pause"))
            for view in views:
                self.control.set_layout(view.topic, counts[view.topic], issuer=owner)
            self.start_producers()
            self.leases.release()
            raise KStateError(
                f"a step failed before partitions of {_named(plan)} were created: nothing changed; "
                "consumers resumed and the lease released. Fix the cause and run again."
            )
        missing = {v.topic: unseeded(self.cluster, v, partitions=counts[v.topic]) for v in views}
        unsafe = {g for gaps in missing.values() for g in gaps}
        safe = [g for g in plan.where("pause") if g not in unsafe]
        if safe:
            self.resume(safe)
        if plan.marked(ORDER_DRAINED):  # each drained topic's producers on a layout every group is seeded on
            for view in views:
                if view.marked(ORDER_DRAINED):
                    layout = view.original_partitions if missing[view.topic] else view.target_partitions
                    self.control.set_layout(view.topic, layout, issuer=owner)
            self.start_producers()
        if unsafe:
            runbook = " ".join(
                partial_increase_runbook(v, missing[v.topic]) for v in views if missing[v.topic]
            )
            self.log.error("GUARD %s", runbook)
            raise UnsafeResumeError(runbook)
        raise KStateError(
            f"a step failed after every group was seeded on every topic it reads ({_named(plan)}): consumers "
            "were resumed (safe). "
            "Producers may still be pinned to the old layout: clear the failed steps of this run, or run again "
            "with the same target, to finish."
        )

    def resume(self, groups: list[str]) -> None:
        """Resume ``groups``: the resume record, then the start commands of those driven by commands."""
        epoch = self.control.resume(groups, self.plan.topic, issuer=self.leases.owner)
        self.control.close()
        self.log.warning("GUARD resumed groups %s (epoch %s)", names(groups), epoch)
        started = commanded_live(self.plan, groups)
        CommandPairs(self.plan.topic, self.log).start(commands_of(self.plan, started), "group")

    def start_producers(self) -> None:
        """Start the producer services a drain stops (idempotent: they may not have been stopped yet)."""
        if self.plan.marked(ORDER_DRAINED):
            self.log.warning(
                "GUARD starting the producer services of the drain: %s", sorted(self.plan.producers)
            )
            CommandPairs(self.plan.topic, self.log).start(producer_commands(self.plan), "producer")


def answered_yes(answer: Any) -> bool:
    """Whether an approval step's XCom says the run was approved (``{"approved": true, ...}``)."""
    return isinstance(answer, dict) and bool(answer.get("approved"))


def _named(plan: Plan) -> str:
    """The plan's topics in a message: ``'orders'``, or ``'orders', 'payments'``."""
    return ", ".join(repr(t) for t in plan.topic_names)
