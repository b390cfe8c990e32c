"""Step 1 of the safe partition increase: validate, discover and classify groups, take the topic's lease."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_provider_kstate.compat import AirflowSkipException
from airflow_provider_kstate.defaults import DEFAULT_SPARK_PREFIXES, PRESERVE
from airflow_provider_kstate.operators.base import KStateIncreaseOperator, run_events
from airflow_provider_kstate.operators.doctor import allowed_deviations
from airflow_provider_kstate.params import as_bool, as_int, as_mapping, as_str_list, as_topic
from airflow_provider_kstate.task_edge import TranslatesDomainErrors

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_kstate.hooks.admin import KStateAdminHook
    from airflow_provider_kstate.increase.fleet import DriverChoice
    from airflow_provider_kstate.increase.plan import Plan
    from airflow_provider_kstate.increase.request import PlanRequest
    from airflow_provider_kstate.lease_rules import LeaseSet


class KStatePlanOperator(KStateIncreaseOperator):
    """Plan a partition increase (or a repair) and push the plan to XCom; with ``dry_run`` nothing else happens.

    The topic must exist and must not be internal; ``partitions`` must not be below its current count. A
    target equal to the current count is a **repair**: the run seeds every gap (a protected group without
    an offset on a partition) and creates nothing, so it finishes a crashed run or a topic grown outside
    the tool. Discovery always runs: groups with committed offsets on the topic or live members assigned
    its partitions. With ``consumer_groups`` named, a discovered group that is not named fails the plan
    unless it is in ``exclude_groups`` (a risk accepted, logged), and a named group unknown to the cluster
    fails it as a likely typo unless ``allow_unknown_groups``.

    Unless ``dry_run``, the run takes the topic's lease (stored in Kafka, so it holds across DAGs); a
    second run on the same topic fails with :class:`LeaseHeldError`, unless the holder's Airflow run has
    ended (then it takes the lease over, with a log line). A rerun of this task in the same DAG run finds
    its lease and continues the plan it stored there.

    **Several co-partitioned topics** (``topics``, with or without ``topic``: a join's inputs) grow to the
    one target in one run (:mod:`airflow_provider_kstate.increase.topic_set`): their counts must be equal
    now (or, those that differ, at the target already: a repair), each is planned as a topic alone would
    be, the plan names every topic and every group once with the topics it reads, and the run takes every
    topic's lease, in name order (:class:`~airflow_provider_kstate.lease_rules.LeaseSet`): another run on
    any of them fails at once. An empty set, a duplicate, an internal or unknown topic and unequal counts
    are refused, named, before anything changes.

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
    :param key_order: ``preserve``, ``drain`` or ``relax``: the plan marks each protected group ``barrier``
        (every live member runs the client piece), ``drained`` (it cannot hold, but its producers can be
        stopped: ``producer_drivers``), ``relaxed`` (with the reason; logged) or ``offline`` (templated).
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
        self.own_tasks = own_tasks
        # BaseOperator already has a dry_run() method: keep the flag under another attribute name.
        self.plan_only = dry_run
        self.report_uri = report_uri
        self.spark_group_prefixes = spark_group_prefixes

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_provider_kstate.hooks.control import KStateControlHook
        from airflow_provider_kstate.hooks.lease import KStateLeaseHook
        from airflow_provider_kstate.increase.fleet import check_drivable
        from airflow_provider_kstate.increase.plan import describe
        from airflow_provider_kstate.increase.planner import AccessScope, plan_increase
        from airflow_provider_kstate.lease_rules import LeaseSet

        request = self.plan_request()
        names = list(request.topics)
        dry_run = as_bool("dry_run", self.plan_only)
        hook = KStateLeaseHook(
            self.kafka_config_id, lease_topic=self.lease_topic, request_timeout=self.request_timeout
        )
        admin = hook.admin  # the lease hook has the connection's admin hook: the plan is built with it
        # A wrong password, an unknown CA or an expired certificate fails here, named, before anything else.
        admin.check_connection()
        keeper = LeaseSet.for_topics(hook, names, context, self.lease_ttl, self.log)  # a topic: a set of one
        plan = None if dry_run else self._continued_plan(keeper, request.partitions or 0)
        if plan is None:
            control = KStateControlHook(
                self.kafka_config_id, control_topic=self.control_topic, request_timeout=self.request_timeout
            )
            plan = plan_increase(
                admin,
                request,
                control.client_piece_clients,
                access=AccessScope(
                    (self.lease_topic, self.control_topic),
                    admin.cluster.config,
                    f"connection {self.kafka_config_id!r}:",
                ),
                trust=lambda: self._trust_broker(", ".join(names)),
                warn=lambda line: self.log.warning("PLAN %s", line),
            ).with_run(
                owner=keeper.owner,
                dry_run=dry_run,
                control_topic=self.control_topic,
                lease_topic=self.lease_topic,
                report_uri=str(self.report_uri or ""),
            )
        for line in describe(plan):
            self.log.info("PLAN %s", line)
        check_drivable(plan)
        if dry_run:
            self.log.info("PLAN dry run: stopping after the plan; nothing was changed and no lease was taken")
            return plan.to_dict()
        self._take_lease(admin, keeper, plan)
        self._planned(plan, keeper.owner)
        return plan.to_dict()

    def plan_request(self) -> PlanRequest:
        """The request of this run from the operator's (rendered) arguments: every value checked, the
        drivers resolved against the registry (:class:`InvalidDriverError` names a bad one)."""
        from airflow_provider_kstate.increase.key_order import check_key_order
        from airflow_provider_kstate.increase.request import PlanRequest

        choice = self._driver_choice()
        return PlanRequest(
            topics=tuple(self._topic_names()),
            partitions=as_int("partitions", self.partitions),
            consumer_groups=tuple(as_str_list("consumer_groups", self.consumer_groups)),
            exclude_groups=tuple(as_str_list("exclude_groups", self.exclude_groups)),
            allow_unknown_groups=as_bool("allow_unknown_groups", self.allow_unknown_groups),
            acknowledge_streams_groups=tuple(
                as_str_list("acknowledge_streams_groups", self.acknowledge_streams_groups)
            ),
            spark_group_prefixes=tuple(self.spark_group_prefixes),
            key_order=check_key_order(self.key_order),
            group_drivers=dict(choice.groups),
            producer_drivers=dict(choice.producers),
            own_tasks=choice.own_tasks,
        )

    def _planned(self, plan: Plan, owner: str) -> None:
        """Start the run's progress document (the kstate page shows the run from here on)."""
        from airflow_provider_kstate.hooks.reports import ObjectStorageReports

        run_events(ObjectStorageReports(self.storage_conn_id), plan, owner, self.log).step("planned")

    def _topic_names(self) -> list[str]:
        """The topics of the request, ``topic`` first (each a legal name; the set refused when empty, with a
        duplicate or an internal topic)."""
        from airflow_provider_kstate.increase.topic_set import topic_set

        more = as_str_list("topics", self.topics)
        first = str(self.topic or "").strip()
        names = topic_set(as_topic("topic", first) if first else None, more)
        return [as_topic("topics", n) for n in names]

    def _driver_choice(self) -> DriverChoice:
        from airflow_provider_kstate.increase.fleet import DriverChoice

        producers = self.producer_drivers
        if isinstance(producers, str) and not producers.strip().startswith("{"):
            producers = as_str_list("producer_drivers", producers)
        elif not isinstance(producers, (list, tuple)):
            producers = as_mapping("producer_drivers", producers)
        return DriverChoice.build(
            as_mapping("group_drivers", self.group_drivers),
            producers,
            as_mapping("drivers", self.drivers),
            own_tasks=bool(self.own_tasks),
        )

    def _trust_broker(self, topics: str) -> bool:
        """Refuse, before anything changes, a broker that breaks a promise the increase relies on; return
        whether it keeps ``share_new_partitions`` (the plan leaves such share groups alone)."""
        from airflow_provider_kstate.doctor.promises import INCREASE_NEEDS, SHARE_NEW_PARTITIONS
        from airflow_provider_kstate.hooks.doctor import KStateDoctorHook

        allow = allowed_deviations(self.allow_broker_deviation)
        verdict = KStateDoctorHook(self.kafka_config_id, request_timeout=self.request_timeout).require(
            INCREASE_NEEDS, allow, f"the increase of {topics!r}"
        )
        return verdict.kept(SHARE_NEW_PARTITIONS)

    def _continued_plan(self, keeper: LeaseSet, target: int) -> Plan | None:
        """Return the plan this DAG run stored with its lease, when this is a rerun of the same run."""
        from airflow_provider_kstate.increase.planner import continued_plan

        lease = keeper.held()
        plan = None if lease is None else continued_plan(lease.plan, keeper.key, target)
        if lease is not None and plan is not None:
            self.log.info("PLAN continuing the plan this run stored with its lease (%s)", lease.describe())
        return plan

    def _take_lease(self, hook: KStateAdminHook, keeper: LeaseSet, plan: Plan) -> None:
        """Take the topic's lease (every topic's, for several; or take it over from a run that has ended),
        storing the plan with it."""
        from airflow_provider_kstate.increase.planner import count_changed

        keeper.acquire(plan.to_dict())
        changed = count_changed(plan, hook.partition_count)
        if changed is not None:
            keeper.release()
            raise changed

    def get_openlineage_facets_on_start(self) -> Any:
        """The topic this plan reads, for OpenLineage (:mod:`airflow_provider_kstate.lineage`)."""
        from airflow_provider_kstate.lineage import increase_lineage

        return increase_lineage(self)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The topic with the plan (partitions, groups and their class), for OpenLineage."""
        from airflow_provider_kstate.lineage import increase_lineage

        return increase_lineage(self, task_instance, complete=True)


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
