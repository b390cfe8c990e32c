"""The base of the plan and of every step of the safe partition increase: where the run talks to and writes
to, and the hooks there."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar

from airflow_provider_kstate.defaults import DEFAULT_CONTROL_TOPIC, DEFAULT_LEASE_TOPIC, DEFAULT_LEASE_TTL
from airflow_provider_kstate.operators.kafka import KStateKafkaOperator

# The domain and the hooks load when a task runs, not when a DAG is parsed (bench/bench_parse.py).
if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_kstate.cluster.control import Controller
    from airflow_provider_kstate.hooks.admin import KStateAdminHook
    from airflow_provider_kstate.hooks.lease import KStateLeaseHook
    from airflow_provider_kstate.hooks.reports import ObjectStorageReports
    from airflow_provider_kstate.increase.events import Events
    from airflow_provider_kstate.increase.plan import Plan


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

    def run_events(self, plan: Plan, owner: str) -> Events:
        """The run's events as this task reports them: its progress documents, then the metrics they give."""
        from airflow_provider_kstate.increase.events import Events, ProgressFile
        from airflow_provider_kstate.metrics import RunMetrics

        files = ProgressFile.of_run(self.report_storage, plan, owner)
        return Events([*files, RunMetrics(files[0], plan)], self.log)

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
