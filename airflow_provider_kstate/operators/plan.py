"""Step 1 of the safe partition increase: validate, discover and classify groups, take the topic's lease."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_provider_kstate.compat import AirflowSkipException
from airflow_provider_kstate.defaults import DEFAULT_SPARK_PREFIXES, PRESERVE
from airflow_provider_kstate.operators.base import KStateIncreaseOperator, run_events
from airflow_provider_kstate.operators.doctor import broker_verdict
from airflow_provider_kstate.params import as_bool
from airflow_provider_kstate.task_edge import TranslatesDomainErrors

if TYPE_CHECKING:
    from airflow.sdk import Context


class KStatePlanOperator(KStateIncreaseOperator):
    """Plan a partition increase (or a repair) and push the plan to XCom; with ``dry_run`` nothing else happens.

    The plan is the one planner's (:func:`~airflow_provider_kstate.increase.planner.plan_increase`), and what
    the step does with it is :class:`~airflow_provider_kstate.increase.plan_step.PlanStep`'s. A target equal
    to the current count is a **repair**: the run seeds every gap and creates nothing. Discovery always
    runs; with ``consumer_groups`` named, a discovered group that is not named fails the plan unless it is
    in ``exclude_groups``, and a named group unknown to the cluster fails it unless ``allow_unknown_groups``.
    Unless ``dry_run``, the run takes the topic's lease (:class:`LeaseHeldError` while another run holds
    it, unless that run has ended); a rerun of this task in the same DAG run continues the plan it stored
    there. **Several co-partitioned topics** (``topics``) grow to the one target in one run, under every
    topic's lease. The rules, step by step: ``docs/guides/partition-increase.md`` and
    ``docs/guides/topic-sets.md``; the shared parameters (``dry_run``, ``key_order``, the connection,
    ``storage_conn_id``, ``lease_ttl``): ``docs/reference/parameters.md``.

    :param topic: the topic to grow (or the first of the set; may be empty when ``topics`` is given).
    :param topics: more co-partitioned topics to grow with ``topic`` to the same count, in one run
        (templated).
    :param partitions: the target partition count (the current count: repair).
    :param consumer_groups: groups to protect; empty or None means every group at risk.
    :param exclude_groups: groups at risk to leave alone (a risk accepted explicitly).
    :param allow_unknown_groups: accept named groups the cluster does not know.
    :param acknowledge_streams_groups: Kafka Streams applications the run may pause and seed (otherwise a
        Streams group on the topic fails the plan, saying why).
    :param allow_broker_deviation: broken broker promises to accept by name (logged as RISK ACCEPTED); the
        plan refuses, before anything is paused, a broker that breaks a promise the increase needs.
    :param key_order: ``preserve``, ``drain`` or ``relax``: the plan marks each protected group ``barrier``,
        ``drained``, ``relaxed`` (with the reason; logged) or ``offline`` (templated).
    :param group_drivers: ``{group: driver}``: how each group is stopped and started when it is not by the
        control protocol: a :class:`~airflow_provider_kstate.increase.drivers.CommandDriver`, or the name
        of a driver in ``drivers`` (a DAG run's params name drivers; they never carry commands). A live
        group whose members do not run the client piece and that has no driver fails the plan, naming the
        ways out (templated).
    :param producer_drivers: ``{service: driver}`` (or a list of driver names): the producer services the
        run may stop for a drain; ``control`` stands for the ControlledProducers (templated).
    :param drivers: the named drivers (``{name: driver}``, a driver as a
        :class:`~airflow_provider_kstate.increase.drivers.Driver` or its dict form), e.g. an Airflow
        Variable rendered as JSON (templated).
    :param consumers_stay: ``never`` (default), ``auto`` or ``always``: whether live groups stay in their
        groups while the topics grow (``docs/guides/zero-downtime.md``; templated).
    :param committing_groups: groups whose consumers commit the position of every partition they are
        assigned (Java ``enable.auto.commit=true``): evidence that lets them stay (templated).
    :param own_tasks: your own pause and resume tasks drive every group without a driver (the per-step
        layout's ``pause_consumers=``; the factory sets it).
    :param dry_run: plan only: take no lease and change nothing.
    :param report_uri: where the per-group, per-partition reports go: a local folder or any URI Airflow's
        ``ObjectStoragePath`` reaches (``s3://bucket/kstate``); empty: ``$AIRFLOW_HOME/kstate-reports``.
    :param spark_group_prefixes: group-id prefixes of Spark Structured Streaming sources (left alone).
    :param kwargs: the connection, the topics, ``storage_conn_id`` and the timeouts of
        :class:`~airflow_provider_kstate.operators.base.KStateIncreaseOperator`.
    """

    template_fields: tuple[str, ...] = (
        "topic",
        "topics",
        "partitions",
        "consumer_groups",
        "exclude_groups",
        "allow_unknown_groups",
        "acknowledge_streams_groups",
        "allow_broker_deviation",
        "key_order",
        "group_drivers",
        "producer_drivers",
        "drivers",
        "consumers_stay",
        "committing_groups",
        "plan_only",
        "report_uri",
    )
    ui_color = "#e3f2fd"
    #: The plan reads the topic (:func:`airflow_provider_kstate.lineage.increase_lineage`).
    lineage_kind = "plan"

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
        # BaseOperator already has a dry_run() method: keep the flag under another attribute name.
        self.plan_only = dry_run
        self.report_uri = report_uri
        self.spark_group_prefixes = spark_group_prefixes

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_provider_kstate.doctor.promises import INCREASE_NEEDS, SHARE_NEW_PARTITIONS
        from airflow_provider_kstate.increase.plan_step import PlanStep, RunPlace, plan_request
        from airflow_provider_kstate.lease_rules import LeaseSet

        request, dry_run = plan_request(self), as_bool("dry_run", self.plan_only)
        admin = self.lease.admin  # the lease hook has the connection's admin hook: the plan is built with it
        # A wrong password, an unknown CA or an expired certificate fails here, named, before anything else.
        admin.check_connection()
        # The leases of the request's topics (a topic is a set of one), and where the run writes.
        keeper = LeaseSet.for_topics(self.lease, request.topics, context, self.lease_ttl, self.log)
        connection, report_uri = (self.kafka_config_id, admin.cluster.config), str(self.report_uri or "")
        place = RunPlace(*connection, self.control_topic, self.lease_topic, report_uri)

        def trust(what: str) -> bool:  # refuses a broker that breaks a promise the increase needs
            return broker_verdict(self, INCREASE_NEEDS, what).kept(SHARE_NEW_PARTITIONS)

        step = PlanStep(keeper, admin.partition_count, self.log)
        plan = step.plan(admin, request, self.control.client_piece_clients, place, trust, dry_run)
        if not dry_run:  # the run's progress document starts: the kstate page shows the run from here on
            run_events(self.report_storage, plan, keeper.owner, self.log).step("planned")
        return plan.to_dict()


class KStateDryRunGateOperator(TranslatesDomainErrors, BaseOperator):
    """Stop the run after the plan when it was a dry run: this task is skipped, and so is everything after it.

    :param plan: the plan (XCom of :class:`KStatePlanOperator`).
    """

    template_fields: tuple[str, ...] = ("plan",)
    ui_color = "#e3f2fd"

    def __init__(self, *, plan: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.plan = plan

    def execute(self, context: Context) -> None:
        from airflow_provider_kstate.increase.plan import Plan

        plan = Plan.from_dict(self.plan)
        if plan.dry_run:
            raise AirflowSkipException("dry run: the plan is in XCom; nothing was changed")
        self.log.info("PLAN not a dry run: proceeding with %s", plan.topic)
