"""The base of the steps of the safe partition increase after the plan: the plan argument, the run's leases,
events and reports."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.operators.base import KStateIncreaseOperator

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_kstate.increase.events import Events
    from airflow_provider_kstate.increase.plan import Plan
    from airflow_provider_kstate.increase.report import ReportWriter
    from airflow_provider_kstate.increase.run import IncreaseRun
    from airflow_provider_kstate.lease_rules import LeaseSet


class KStateStepOperator(KStateIncreaseOperator):
    """Base of the steps after the plan: each takes the plan (an XCom) and is idempotent.

    A step's errors leave through the task edge (:mod:`airflow_provider_kstate.task_edge`): one a retry
    cannot fix fails the task at once. The connection, the topics and the timeouts are
    :class:`~airflow_provider_kstate.operators.base.KStateIncreaseOperator`'s.

    :param plan: the plan pushed by :class:`~airflow_provider_kstate.operators.plan.KStatePlanOperator`
        (pass its ``.output``).
    """

    template_fields: tuple[str, ...] = ("plan",)
    ui_color = "#fdf1e3"

    def __init__(self, *, plan: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.plan = plan

    @property
    def typed_plan(self) -> Plan:
        """The plan, parsed from its (rendered) XCom once per task: the one place a step parses it."""
        from airflow_provider_kstate.increase.plan import parsed_plan

        return parsed_plan(self)

    @property
    def topic(self) -> str:
        return self.typed_plan.topic

    def keeper(self, context: Context, ttl: float | None = None) -> LeaseSet:
        """Return the keeper of the leases of the plan's topics for this task's DAG run (a topic is a set of
        one); ``ttl``: seconds the lease lives without renewal (default ``lease_ttl``)."""
        from airflow_provider_kstate.lease_rules import LeaseSet

        ttl = self.lease_ttl if ttl is None else ttl
        return LeaseSet.for_topics(self.lease, self.typed_plan.topic_names, context, ttl, self.log)

    def run(self, context: Context, **options: Any) -> IncreaseRun:
        """Return the run of this operator's plan over its topics, as this task's DAG run; before each change
        it renews the topics' leases (:meth:`LeaseSet.renew`) and fails if another run took one.

        :param options: fields of :class:`~airflow_provider_kstate.increase.run.IncreaseRun` (``key_order``,
            ``empty_timeout``, ...).
        """
        from airflow_provider_kstate.increase.run import IncreaseRun

        keeper, plan = self.keeper(context), self.typed_plan.to_dict()
        return IncreaseRun(
            self.typed_plan,
            self.admin,
            self.control,
            self.log,
            keeper.owner,
            lease_check=lambda: keeper.renew(plan),
            events=self.events(context),
            **options,
        )

    def events(self, context: Context) -> Events:
        """Where this task reports the run's step and each group's state (:meth:`run_events`)."""
        from airflow_provider_kstate.lease_rules import run_owner

        return self.run_events(self.typed_plan, run_owner(context))

    def report_uri(self, context: Context, step: str, topic: str) -> str:
        """Return the URI of this run's report file for ``step`` (``seed``, ``verify``) of ``topic``."""
        from airflow_provider_kstate.increase.report import report_location
        from airflow_provider_kstate.lease_rules import run_owner

        return report_location(self.typed_plan.report_uri, topic, run_owner(context), step)

    def seed_reports(
        self, context: Context
    ) -> AbstractContextManager[tuple[dict[str, str], dict[str, ReportWriter]]]:
        """Open this run's seed report of every topic of the plan, each in its topic's run folder
        (:func:`~airflow_provider_kstate.increase.report.seed_reports`); yield ``({topic: uri}, {topic: writer})``."""
        from airflow_provider_kstate.increase.report import seed_reports

        plan = self.typed_plan
        uris = {topic: self.report_uri(context, "seed", topic) for topic in plan.topic_names}
        return seed_reports(uris, plan.ids_of, self.report_storage)
