"""What the plan and every step of the safe partition increase share: where the run talks to and writes
to; the steps' plan argument and their hooks."""

from __future__ import annotations

from contextlib import AbstractContextManager
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar

from airflow_provider_kstate.defaults import DEFAULT_CONTROL_TOPIC, DEFAULT_LEASE_TOPIC, DEFAULT_LEASE_TTL
from airflow_provider_kstate.operators.kafka import KStateKafkaOperator

# The domain (its pydantic models) and the hooks (confluent-kafka) load when a task runs, not when a DAG file
# is parsed: the operators import them inside the methods that use them (bench/bench_parse.py).
if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_kstate.cluster.control import Controller
    from airflow_provider_kstate.hooks.admin import KStateAdminHook
    from airflow_provider_kstate.hooks.lease import KStateLeaseHook
    from airflow_provider_kstate.hooks.reports import ObjectStorageReports
    from airflow_provider_kstate.increase.events import Events
    from airflow_provider_kstate.increase.plan import Plan
    from airflow_provider_kstate.increase.report import ReportWriter
    from airflow_provider_kstate.increase.run import IncreaseRun
    from airflow_provider_kstate.lease_rules import LeaseSet


class KStateIncreaseOperator(KStateKafkaOperator):
    """Base of the plan and the steps of a safe partition increase: where the run talks to and writes to
    (the factory's :class:`~airflow_provider_kstate.task_groups.config.ConnectionConfig`), and the hooks
    there (each made once per task, its Kafka clients dropped when the task ends).

    :param kafka_config_id: the Airflow connection id (``kafka`` type of the Kafka provider).
    :param request_timeout: seconds to wait for each request to the cluster.
    :param control_topic: the control topic services with the client piece watch.
    :param lease_topic: the topic that holds per-topic leases.
    :param lease_ttl: seconds the topic's lease lives without renewal; a step renews it before it changes
        anything (when a third of it has passed) and fails if another run holds it.
    :param storage_conn_id: the Airflow connection whose credentials reach the report location (object
        storage); None: the location's default.
    """

    #: What the task is to lineage (:func:`airflow_provider_kstate.lineage.increase_lineage`): the topic it
    #: reads (``plan``, ``verify``) or changes (``increase``, ``seed``, ``window``); None: neither.
    lineage_kind: ClassVar[str | None] = None

    def __init__(
        self,
        *,
        control_topic: str = DEFAULT_CONTROL_TOPIC,
        lease_topic: str = DEFAULT_LEASE_TOPIC,
        lease_ttl: float = DEFAULT_LEASE_TTL,
        storage_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.control_topic = control_topic
        self.lease_topic = lease_topic
        self.lease_ttl = lease_ttl
        self.storage_conn_id = storage_conn_id

    @cached_property
    def admin(self) -> KStateAdminHook:
        from airflow_provider_kstate.hooks.admin import KStateAdminHook

        return KStateAdminHook(kafka_config_id=self.kafka_config_id, request_timeout=self.request_timeout)

    @cached_property
    def control(self) -> Controller:
        """The controller of the control channel on this task's connection (closed after the task)."""
        from airflow_provider_kstate.hooks.control import KStateControlHook

        return KStateControlHook(
            self.kafka_config_id, control_topic=self.control_topic, request_timeout=self.request_timeout
        ).get_conn

    @cached_property
    def lease(self) -> KStateLeaseHook:
        from airflow_provider_kstate.hooks.lease import KStateLeaseHook

        return KStateLeaseHook(
            self.kafka_config_id, lease_topic=self.lease_topic, request_timeout=self.request_timeout
        )

    @cached_property
    def report_storage(self) -> ObjectStorageReports:
        """Where this task's reports go: ``storage_conn_id``'s object store, or the worker's disk."""
        from airflow_provider_kstate.hooks.reports import ObjectStorageReports

        return ObjectStorageReports(self.storage_conn_id)

    def post_execute(self, context: Context, result: Any = None) -> None:
        """Drop this task's Kafka clients when it ends, so none outlives the task (and its broker)."""
        super().post_execute(context, result)
        control = self.__dict__.pop("control", None)
        if control is not None:
            control.close()
        for name in ("admin", "lease"):
            self.__dict__.pop(name, None)

    def get_openlineage_facets_on_start(self) -> Any:
        """The topic this task reads or changes, for OpenLineage (:mod:`airflow_provider_kstate.lineage`)."""
        from airflow_provider_kstate.lineage import increase_lineage

        return increase_lineage(self)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The topic with what this task found and did (partitions, groups, report), for OpenLineage."""
        from airflow_provider_kstate.lineage import increase_lineage

        return increase_lineage(self, task_instance, complete=True)


class KStateStepOperator(KStateIncreaseOperator):
    """Base of the steps after the plan: each takes the plan (an XCom) and is idempotent.

    A step's errors leave through the task edge (:mod:`airflow_provider_kstate.task_edge`): one a retry
    cannot fix fails the task at once. The connection, the topics and the timeouts are
    :class:`KStateIncreaseOperator`'s.

    :param plan: the plan pushed by :class:`KStatePlanOperator` (pass its ``.output``).
    """

    template_fields: tuple[str, ...] = ("plan",)
    ui_color = "#fdf1e3"

    def __init__(self, *, plan: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.plan = plan

    @property
    def typed_plan(self) -> Plan:
        """The plan, parsed from its (rendered) XCom once per task: the one place a step parses it."""
        return parsed_plan(self)

    @property
    def topic(self) -> str:
        return self.typed_plan.topic

    def keeper(self, context: Context, ttl: float | None = None) -> LeaseSet:
        """Return the keeper of the leases of the plan's topics for this task's DAG run, as one
        :class:`LeaseSet` (a topic is a set of one).

        :param ttl: seconds the lease lives without renewal (default ``lease_ttl``).
        """
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
        """Where this task reports the run's step and each group's state: the run's progress document
        (``progress.json`` in its report folder, which the kstate page watches), then the metrics read from
        it (each live group's downtime, :class:`~airflow_provider_kstate.metrics.RunMetrics`)."""
        from airflow_provider_kstate.lease_rules import run_owner

        return run_events(self.report_storage, self.typed_plan, run_owner(context), self.log)

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


def parsed_plan(task: Any) -> Plan:
    """Return ``task.plan`` parsed (:meth:`Plan.from_dict`), parsing it again only when the attribute now
    holds another object (a re-render): every later read in the task is a dictionary lookup."""
    from airflow_provider_kstate.increase.plan import Plan

    cached = task.__dict__.get("_parsed_plan")
    if cached is None or cached[0] is not task.plan:
        cached = (task.plan, Plan.from_dict(task.plan))
        task.__dict__["_parsed_plan"] = cached
    return cached[1]


def run_events(storage: ObjectStorageReports, plan: Plan, owner: str, log: Any) -> Events:
    """A run's events as a task of it reports them: its progress document (``progress.json`` in the run's
    report folder, which the kstate page watches; in each topic's for a run of several), then the metrics
    read from it."""
    from airflow_provider_kstate.increase.events import Events, ProgressFile
    from airflow_provider_kstate.increase.report import progress_location
    from airflow_provider_kstate.metrics import RunMetrics

    files = [
        ProgressFile(storage, progress_location(plan.report_uri, topic, owner), plan, owner)
        for topic in plan.topic_names  # several topics: the same document in each topic's run folder
    ]
    return Events([*files, RunMetrics(files[0], plan)], log)
