"""Step 1 of the safe partition increase: validate, discover and classify groups, take the topic's lease."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_provider_kstate.compat import AirflowSkipException
from airflow_provider_kstate.defaults import DEFAULT_SPARK_PREFIXES, DRAIN, PRESERVE
from airflow_provider_kstate.errors import KStateConfigError, TopicChangedError, TopicNotFoundError
from airflow_provider_kstate.operators.base import KStateIncreaseOperator, run_events
from airflow_provider_kstate.operators.doctor import allowed_deviations
from airflow_provider_kstate.params import as_bool, as_int, as_mapping, as_str_list, as_topic
from airflow_provider_kstate.task_edge import TranslatesDomainErrors

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_kstate.doctor.verdict import Verdict
    from airflow_provider_kstate.hooks.admin import KStateAdminHook
    from airflow_provider_kstate.increase.fleet import DriverChoice
    from airflow_provider_kstate.increase.plan import Plan
    from airflow_provider_kstate.lease_rules import LeaseKeeper, LeaseSet


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
    :param kwargs: the connection, the topics, ``report_conn_id`` and the timeouts of
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
        from airflow_provider_kstate.increase.fleet import check_drivable
        from airflow_provider_kstate.increase.plan import check_topic_name, describe
        from airflow_provider_kstate.lease_rules import LeaseKeeper, LeaseSet

        names = self._topic_names()
        topic = names[0]
        target = as_int("partitions", self.partitions)
        dry_run = as_bool("dry_run", self.plan_only)
        check_topic_name(topic)
        from airflow_provider_kstate.hooks.lease import KStateLeaseHook

        hook = KStateLeaseHook(
            self.kafka_config_id, lease_topic=self.lease_topic, timeout=self.request_timeout
        )
        admin = hook.admin  # the lease hook has the connection's admin hook: the plan is built with it
        # A wrong password, an unknown CA or an expired certificate fails here, named, before anything else.
        admin.check_connection()
        keeper: LeaseKeeper | LeaseSet = (
            LeaseKeeper.for_topic(hook, topic, context, self.lease_ttl, self.log)
            if len(names) == 1
            else LeaseSet.for_topics(hook, names, context, self.lease_ttl, self.log)
        )
        plan = None if dry_run else self._continued_plan(keeper, target)
        if plan is None:
            built = (
                self._build(admin, topic, target)
                if len(names) == 1
                else self._build_set(admin, names, target)
            )
            plan = built.with_run(
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

    def _planned(self, plan: Plan, owner: str) -> None:
        """Start the run's progress document (the kstate page shows the run from here on)."""
        from airflow_provider_kstate.hooks.reports import ObjectStorageReports

        run_events(ObjectStorageReports(self.report_conn_id), plan, owner, self.log).step("planned")

    def _topic_names(self) -> list[str]:
        """The topics of the request, ``topic`` first (each a legal name; the set refused when empty, with a
        duplicate or an internal topic)."""
        from airflow_provider_kstate.increase.topic_set import topic_set

        more = as_str_list("topics", self.topics)
        first = str(self.topic or "").strip()
        names = topic_set(as_topic("topic", first) if first else None, more)
        return [as_topic("topics", n) for n in names]

    def _named_groups(self) -> tuple[list[str], list[str]]:
        groups = as_str_list("consumer_groups", self.consumer_groups)
        excluded = as_str_list("exclude_groups", self.exclude_groups)
        both = sorted(set(groups) & set(excluded))
        if both:
            raise KStateConfigError(f"groups {both} are both in consumer_groups and exclude_groups: pick one")
        return groups, excluded

    def _build_set(self, hook: KStateAdminHook, names: list[str], target: int) -> Plan:
        """The plan of several co-partitioned topics (:func:`build_topic_set_plan`): each topic's access and
        replication checked and its increase validated by the broker, the broker trusted once."""
        from airflow_provider_kstate.doctor.promises import SHARE_NEW_PARTITIONS
        from airflow_provider_kstate.increase.replicas import check_replication
        from airflow_provider_kstate.increase.topic_set import build_topic_set_plan

        groups, excluded = self._named_groups()
        for topic in names:
            self._check_access(hook, topic, target, groups)
        verdict = self._trust_broker(", ".join(names))
        replication = {t: check_replication(hook, t) for t in names}  # refuses partitions offline
        plan = build_topic_set_plan(
            hook,
            names,
            target,
            groups,
            spark_prefixes=tuple(self.spark_group_prefixes),
            exclude_groups=excluded,
            allow_unknown_groups=as_bool("allow_unknown_groups", self.allow_unknown_groups),
            acknowledge_streams_groups=as_str_list(
                "acknowledge_streams_groups", self.acknowledge_streams_groups
            ),
            share_new_partitions_kept=verdict.kept(SHARE_NEW_PARTITIONS),
            replication=replication[names[0]],
        )
        for topic, count in plan.topics.items():
            if target > count:
                hook.increase_partitions(topic, target, validate_only=True)
                self.log.info("PLAN the broker validated %s -> %s partitions (validate_only)", topic, target)
            if replication[topic].warning:
                self.log.warning("PLAN WARNING %s", replication[topic].warning)
        unchecked = [g for g in plan.where("seed") if g not in groups]
        for topic in names if unchecked else []:
            self._check_access(hook, topic, target, unchecked)
        for group in plan.of_class("excluded"):
            self.log.warning(
                "PLAN RISK ACCEPTED: group %s reads %s but is excluded: not paused, not seeded",
                group,
                ", ".join(plan.groups[group].topics or names),
            )
        return self._mark_key_order(hook, plan)

    def _build(self, hook: KStateAdminHook, topic: str, target: int) -> Plan:
        from airflow_provider_kstate.doctor.promises import SHARE_NEW_PARTITIONS
        from airflow_provider_kstate.increase.plan import build_plan
        from airflow_provider_kstate.increase.replicas import check_replication

        groups, excluded = self._named_groups()
        self._check_access(hook, topic, target, groups)  # refuses a principal without the ACLs the run needs
        verdict = self._trust_broker(topic)
        replication = check_replication(hook, topic)  # refuses partitions offline or below min ISR
        if target > hook.partition_count(topic):
            # Ask the broker to validate this very increase: a broker without CreatePartitions, a quota or a
            # policy refuses here, before any consumer is paused.
            hook.increase_partitions(topic, target, validate_only=True)
            self.log.info("PLAN the broker validated %s -> %s partitions (validate_only)", topic, target)
        plan = build_plan(
            hook,
            topic,
            target,
            groups,
            tuple(self.spark_group_prefixes),
            exclude_groups=excluded,
            allow_unknown_groups=as_bool("allow_unknown_groups", self.allow_unknown_groups),
            acknowledge_streams_groups=as_str_list(
                "acknowledge_streams_groups", self.acknowledge_streams_groups
            ),
            share_new_partitions_kept=verdict.kept(SHARE_NEW_PARTITIONS),
            replication=replication,
        )
        if replication.warning:
            self.log.warning("PLAN WARNING %s", replication.warning)
        unchecked = [g for g in plan.where("seed") if g not in groups]
        if unchecked:  # the discovered groups the run seeds: Describe and Read on each
            self._check_access(hook, topic, target, unchecked)

        for group in plan.of_class("excluded"):
            self.log.warning(
                "PLAN RISK ACCEPTED: group %s reads %s but is excluded: not paused, not seeded", group, topic
            )
        return self._mark_key_order(hook, plan)

    def _check_access(self, hook: KStateAdminHook, topic: str, target: int, groups: list[str]) -> None:
        """Refuse, before anyone is paused, a principal that lacks an ACL the run needs on the topic, the
        lease and control topics or ``groups`` (:mod:`airflow_provider_kstate.increase.access`)."""
        from airflow_provider_kstate.increase.access import check_access

        try:
            increase = target > hook.partition_count(topic)
        except TopicNotFoundError:  # or not describable: the check names the missing Describe
            increase = True
        check_access(
            hook,
            topic,
            [self.lease_topic, self.control_topic],
            groups,
            increase=increase,
            config=hook.cluster.config,
            name=f"connection {self.kafka_config_id!r}:",
        )

    def _mark_key_order(self, hook: KStateAdminHook, plan: Plan) -> Plan:
        """Give each protected group its driver and mark its key order (barrier / drained / relaxed /
        offline) from its live members and the client-piece consumers seen on the control topic; log each
        group that is drained or relaxed."""
        from airflow_provider_kstate.hooks.control import KStateControlHook
        from airflow_provider_kstate.increase.fleet import drive
        from airflow_provider_kstate.increase.key_order import ORDER_DRAINED, ORDER_RELAXED, check_key_order

        key_order = check_key_order(self.key_order)
        choice = self._driver_choice()
        if key_order == DRAIN and not choice.producers:
            raise KStateConfigError(
                "key_order=drain stops the producers before the create: name them with producer_drivers (a "
                "command pair per producer service, or 'control' for ControlledProducers). Nothing was changed."
            )
        control = KStateControlHook(
            self.kafka_config_id, control_topic=self.control_topic, timeout=self.request_timeout
        )
        plan = drive(plan, hook, control.client_piece_clients(), choice, key_order)
        for group in plan.where("seed"):
            entry = plan.groups[group]
            if entry.key_order == ORDER_RELAXED and key_order == PRESERVE:
                self.log.warning(
                    "PLAN group %s is RELAXED for key order: %s. Its keys that move may be processed out of "
                    "order; to keep them in order, name its producers (producer_drivers) so the run drains it.",
                    group,
                    entry.key_order_reason,
                )
            elif entry.key_order == ORDER_DRAINED:
                self.log.info("PLAN group %s is DRAINED for key order: %s", group, entry.key_order_reason)
        return plan

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

    def _trust_broker(self, topic: str) -> Verdict:
        """Refuse, before anything changes, a broker that breaks a promise the increase relies on; return
        the doctor's verdict (the plan reads the share groups' promise from it)."""
        from airflow_provider_kstate.doctor.promises import INCREASE_NEEDS
        from airflow_provider_kstate.hooks.doctor import KStateDoctorHook

        allow = allowed_deviations(self.allow_broker_deviation)
        return KStateDoctorHook(self.kafka_config_id, timeout=self.request_timeout).require(
            INCREASE_NEEDS, allow, f"the increase of {topic!r}"
        )

    def _continued_plan(self, keeper: LeaseKeeper | LeaseSet, target: int) -> Plan | None:
        """Return the plan this DAG run stored with its lease, when this is a rerun of the same run."""
        from airflow_provider_kstate.increase.plan import Plan

        lease = keeper.held()
        if lease is None or not lease.plan:
            return None
        plan = Plan.from_dict(lease.plan)
        if plan.target_partitions != target:
            raise KStateConfigError(
                f"this run already planned {keeper.key!r} -> {plan.target_partitions} partitions; "
                f"it cannot switch to {target}. Finish or fail this run first."
            )
        self.log.info("PLAN continuing the plan this run stored with its lease (%s)", lease.describe())
        return plan

    def _take_lease(self, hook: KStateAdminHook, keeper: LeaseKeeper | LeaseSet, plan: Plan) -> None:
        """Take the topic's lease (every topic's, for several; or take it over from a run that has ended),
        storing the plan with it."""
        keeper.acquire(plan.to_dict())
        for view in plan.views():
            current = hook.partition_count(view.topic)
            if current not in (view.original_partitions, view.target_partitions):
                keeper.release()
                raise TopicChangedError(
                    f"topic {view.topic!r} changed to {current} partitions while planning; released the lease, "
                    "changed nothing. Run again."
                )

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
