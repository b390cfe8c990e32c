"""Step 1 of the safe partition increase: validate, discover and classify groups, take the topics' leases."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.defaults import DEFAULT_SPARK_PREFIXES, PRESERVE
from airflow_provider_kstate.operators.base import KStateIncreaseOperator
from airflow_provider_kstate.operators.doctor import broker_verdict
from airflow_provider_kstate.params import as_bool

if TYPE_CHECKING:
    from airflow.sdk import Context


class KStatePlanOperator(KStateIncreaseOperator):
    """Plan a partition increase (or a repair) and push the plan to XCom; with ``dry_run`` nothing else happens.

    The plan is the one planner's (:func:`~airflow_provider_kstate.increase.planner.plan_increase`), what
    the step does with it :class:`~airflow_provider_kstate.increase.plan_step.PlanStep`'s: a target equal to
    the current count is a repair; unless ``dry_run`` it takes the topics' leases, and a rerun in the same
    DAG run continues the plan it stored. The rules: ``docs/guides/partition-increase.md``,
    ``docs/guides/topic-sets.md``; the shared parameters: ``docs/reference/parameters.md``.

    :param topic: the topic to grow (or the first of the set; may be empty when ``topics`` is given).
    :param topics: more co-partitioned topics to grow with ``topic`` to the same count in one run. (templated)
    :param partitions: the target partition count (the current count: repair). (templated)
    :param consumer_groups: groups to protect; empty or None: every group at risk (a discovered group not
        named fails the plan unless excluded). (templated)
    :param exclude_groups: groups at risk to leave alone (a risk accepted explicitly). (templated)
    :param allow_unknown_groups: accept named groups the cluster does not know. (templated)
    :param acknowledge_streams_groups: Kafka Streams applications the run may pause and seed (otherwise a
        Streams group on the topic fails the plan). (templated)
    :param allow_broker_deviation: broken broker promises the increase needs to accept by name (logged as
        RISK ACCEPTED; ``docs/guides/broker-doctor.md``). (templated)
    :param key_order: ``preserve``, ``drain`` or ``relax`` (``docs/guides/key-order.md``). (templated)
    :param group_drivers: ``{group: driver}`` for groups not stopped and started by the control protocol: a
        :class:`~airflow_provider_kstate.increase.drivers.CommandDriver` or a name in ``drivers``
        (``docs/guides/drivers.md``). (templated)
    :param producer_drivers: ``{service: driver}`` (or a list of driver names): the producer services the
        run may stop for a drain; ``control``: the ControlledProducers. (templated)
    :param drivers: the named drivers (``{name: driver}``), e.g. an Airflow Variable rendered as JSON.
        (templated)
    :param consumers_stay: ``never`` (default), ``auto`` or ``always`` (``docs/guides/zero-downtime.md``).
        (templated)
    :param committing_groups: groups whose consumers commit every assigned partition's position (Java
        ``enable.auto.commit=true``): evidence that lets them stay. (templated)
    :param own_tasks: your own pause and resume tasks drive every group without a driver (factory-set).
    :param dry_run: plan only: take no lease and change nothing. (templated)
    :param report_uri: where the reports go: a local folder or an ``ObjectStoragePath`` URI; empty:
        ``$AIRFLOW_HOME/kstate-reports``. (templated)
    :param spark_group_prefixes: group-id prefixes of Spark Structured Streaming sources (left alone).
    :param kwargs: those of :class:`~airflow_provider_kstate.operators.base.KStateIncreaseOperator`.
    """

    template_fields: tuple[str, ...] = (
        *("topic", "topics", "partitions", "consumer_groups", "exclude_groups", "allow_unknown_groups"),
        *("acknowledge_streams_groups", "allow_broker_deviation", "key_order", "group_drivers"),
        *("producer_drivers", "drivers", "consumers_stay", "committing_groups", "plan_only", "report_uri"),
    )
    ui_color = "#e3f2fd"
    lineage_kind = "plan"  # the plan reads the topics (airflow_provider_kstate.lineage.increase_lineage)

    def __init__(
        self,
        *,
        topic: str = "",
        topics: list[str] | str | None = None,
        partitions: int | str,
        consumer_groups: list[str] | str | None = None,
        exclude_groups: list[str] | str | None = None,
        allow_unknown_groups: bool | str = False,
        acknowledge_streams_groups: list[str] | str | None = None,
        allow_broker_deviation: list[str] | str | None = None,
        key_order: str = PRESERVE,
        group_drivers: Any = None,
        producer_drivers: Any = None,
        drivers: Any = None,
        consumers_stay: str = "never",
        committing_groups: list[str] | str | None = None,
        own_tasks: bool = False,
        dry_run: bool | str = False,
        report_uri: str = "",
        spark_group_prefixes: tuple[str, ...] = DEFAULT_SPARK_PREFIXES,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.topic = topic
        self.topics = topics
        self.partitions = partitions
        self.consumer_groups = consumer_groups
        self.exclude_groups = exclude_groups
        self.allow_unknown_groups = allow_unknown_groups
        self.acknowledge_streams_groups = acknowledge_streams_groups
        self.allow_broker_deviation = allow_broker_deviation
        self.key_order = key_order
        self.group_drivers = group_drivers
        self.producer_drivers = producer_drivers
        self.drivers = drivers
        self.consumers_stay = consumers_stay
        self.committing_groups = committing_groups
        self.own_tasks = own_tasks
        self.plan_only = dry_run  # BaseOperator has a dry_run() method: the flag goes by another name
        self.report_uri = report_uri
        self.spark_group_prefixes = spark_group_prefixes

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_provider_kstate.doctor.promises import INCREASE_NEEDS, SHARE_NEW_PARTITIONS
        from airflow_provider_kstate.increase.plan_step import PlanStep, RunPlace, plan_request
        from airflow_provider_kstate.lease_rules import LeaseSet

        request, dry_run = plan_request(self), as_bool("dry_run", self.plan_only)
        admin = self.lease.admin  # the lease hook's admin hook: the plan is built with it
        admin.check_connection()  # a wrong password, CA or certificate fails here, named, before all else
        keeper = LeaseSet.for_topics(self.lease, request.topics, context, self.lease_ttl, self.log)
        connection, report_uri = (self.kafka_config_id, admin.cluster.config), str(self.report_uri or "")
        place = RunPlace(*connection, self.control_topic, self.lease_topic, report_uri)

        def trust(what: str) -> bool:  # refuses a broker that breaks a promise the increase needs
            return broker_verdict(self, INCREASE_NEEDS, what).kept(SHARE_NEW_PARTITIONS)

        step = PlanStep(keeper, admin.partition_count, self.log)
        plan = step.plan(admin, request, self.control.client_piece_clients, place, trust, dry_run)
        if not dry_run:  # the run's progress document starts: the kstate page shows the run from here on
            self.run_events(plan, keeper.owner).step("planned")
        return plan.to_dict()
