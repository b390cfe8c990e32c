"""The plan step's decisions around the one planner (issue 40 item 2: the decisions of
:class:`~airflow_provider_kstate.operators.plan.KStatePlanOperator`, without Airflow).

:func:`plan_request` turns the operator's (rendered) arguments into the request of the run, each value
checked. The operator gathers the cluster, the topics' leases and where the run writes (:class:`RunPlace`);
:class:`PlanStep` decides what the step does with them: a rerun of the same DAG run continues the plan it
stored with its lease (:func:`~airflow_provider_kstate.increase.planner.continued_plan`), otherwise the one
planner's plan is made (:meth:`PlanStep.plan`: the ACLs checked where the run writes, the broker trusted);
the plan is logged and refused when a task cannot drive it; a dry run stops there; otherwise the run takes
every topic's lease with the plan, and gives it back when a topic's count moved while planning
(:func:`~airflow_provider_kstate.increase.planner.count_changed`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from airflow_provider_kstate.defaults import ConsumersStay
from airflow_provider_kstate.increase.fleet import DriverChoice, check_drivable
from airflow_provider_kstate.increase.key_order import check_key_order
from airflow_provider_kstate.increase.plan import Plan, describe
from airflow_provider_kstate.increase.planner import AccessScope, continued_plan, count_changed, plan_increase
from airflow_provider_kstate.increase.request import PlanRequest
from airflow_provider_kstate.increase.topic_set import topic_set
from airflow_provider_kstate.params import as_bool, as_choice, as_int, as_mapping, as_str_list, as_topic

if TYPE_CHECKING:
    from airflow_provider_kstate.increase.ports import AdminPort


class PlanArguments(Protocol):
    """The plan step's arguments as the operator holds them once rendered (templated strings, lists,
    mappings; :class:`~airflow_provider_kstate.operators.plan.KStatePlanOperator` documents each)."""

    topic: Any
    topics: Any
    partitions: Any
    consumer_groups: Any
    exclude_groups: Any
    allow_unknown_groups: Any
    acknowledge_streams_groups: Any
    spark_group_prefixes: Any
    key_order: Any
    group_drivers: Any
    producer_drivers: Any
    drivers: Any
    own_tasks: Any
    consumers_stay: Any
    committing_groups: Any


def plan_request(args: PlanArguments) -> PlanRequest:
    """The request of a run from the plan step's (rendered) arguments: every value checked, the drivers
    resolved against the registry (:class:`InvalidDriverError` names a bad one)."""
    choice = driver_choice(args.group_drivers, args.producer_drivers, args.drivers, bool(args.own_tasks))
    return PlanRequest(
        topics=tuple(topic_names(args.topic, args.topics)),
        partitions=as_int("partitions", args.partitions),
        consumer_groups=tuple(as_str_list("consumer_groups", args.consumer_groups)),
        exclude_groups=tuple(as_str_list("exclude_groups", args.exclude_groups)),
        allow_unknown_groups=as_bool("allow_unknown_groups", args.allow_unknown_groups),
        acknowledge_streams_groups=tuple(
            as_str_list("acknowledge_streams_groups", args.acknowledge_streams_groups)
        ),
        spark_group_prefixes=tuple(args.spark_group_prefixes),
        key_order=check_key_order(args.key_order),
        group_drivers=dict(choice.groups),
        producer_drivers=dict(choice.producers),
        own_tasks=choice.own_tasks,
        consumers_stay=as_choice("consumers_stay", args.consumers_stay, ConsumersStay),
        committing_groups=tuple(as_str_list("committing_groups", args.committing_groups)),
    )


def topic_names(topic: Any, topics: Any) -> list[str]:
    """The topics of the request, ``topic`` first (each a legal name; the set refused when empty, with a
    duplicate or an internal topic)."""
    more = as_str_list("topics", topics)
    first = str(topic or "").strip()
    names = topic_set(as_topic("topic", first) if first else None, more)
    return [as_topic("topics", n) for n in names]


def driver_choice(groups: Any, producers: Any, drivers: Any, own_tasks: bool) -> DriverChoice:
    """The drivers of ``group_drivers`` and ``producer_drivers`` (a mapping, its JSON, or a list of driver
    names) resolved against ``drivers``."""
    if isinstance(producers, str) and not producers.strip().startswith("{"):
        producers = as_str_list("producer_drivers", producers)
    elif not isinstance(producers, (list, tuple)):
        producers = as_mapping("producer_drivers", producers)
    return DriverChoice.build(
        as_mapping("group_drivers", groups),
        producers,
        as_mapping("drivers", drivers),
        own_tasks=own_tasks,
    )


@dataclass(frozen=True)
class RunPlace:
    """Where a run talks to and writes to: what its plan records and its ACL check covers.

    :param connection: the Airflow connection id (a refusal names it).
    :param config: the connection's librdkafka settings (for the principal; never logged).
    :param control_topic: the control topic the run writes.
    :param lease_topic: the topic of the leases.
    :param report_uri: where the run's reports go (empty: the default folder).
    """

    connection: str
    config: Mapping[str, Any]
    control_topic: str
    lease_topic: str
    report_uri: str = ""

    def access(self) -> AccessScope:
        """Where the ACLs are checked: the topics, and the lease and control topics the run writes."""
        internal = (self.lease_topic, self.control_topic)
        return AccessScope(internal, self.config, f"connection {self.connection!r}:")


class StoredLease(Protocol):
    """A lease this DAG run holds, as the step reads it (:class:`~airflow_provider_kstate.lease_rules.Lease`)."""

    @property
    def plan(self) -> Mapping[str, Any]: ...

    def describe(self) -> str: ...


class PlanLeases(Protocol):
    """The leases of the request's topics for this DAG run (a topic is a set of one), as the step uses
    them (:class:`~airflow_provider_kstate.lease_rules.LeaseSet`)."""

    @property
    def key(self) -> str: ...

    @property
    def owner(self) -> str: ...

    def held(self) -> StoredLease | None: ...

    def acquire(self, plan: dict[str, Any] | None = None) -> Any: ...

    def release(self) -> None: ...


@dataclass(frozen=True)
class PlanStep:
    """What the plan step does with a request, for one DAG run.

    :param leases: the leases of the request's topics for this DAG run.
    :param partition_count: reads a topic's partition count now.
    :param log: the task's logger.
    """

    leases: PlanLeases
    partition_count: Callable[[str], int]
    log: Any

    def plan(
        self,
        cluster: AdminPort,
        request: PlanRequest,
        present: Callable[[], Mapping[str, set[str]]],
        place: RunPlace,
        trust: Callable[[str], bool],
        dry_run: bool,
    ) -> Plan:
        """Return the plan of this run (:meth:`run`); when it is not continued, the one planner's plan of
        ``request`` on ``cluster``, its ACLs checked where the run writes (``place``) and the broker trusted
        (``trust``), with this run's fields.

        :param present: reads ``{group: client ids}`` of the consumers that acknowledged on the control topic.
        :param trust: asks the broker doctor whether the broker keeps the promises the increase needs, for the
            run it names (``the increase of 'orders'``; it raises when not); returns whether it keeps
            ``share_new_partitions`` (the plan then leaves share groups alone).
        """
        what = f"the increase of {', '.join(request.topics)!r}"

        def make() -> Plan:
            warn = partial(self.log.warning, "PLAN %s")
            planned = plan_increase(
                cluster, request, present, access=place.access(), trust=partial(trust, what), warn=warn
            )
            return planned.with_run(
                owner=self.leases.owner,
                dry_run=dry_run,
                control_topic=place.control_topic,
                lease_topic=place.lease_topic,
                report_uri=place.report_uri,
            )

        return self.run(request.partitions or 0, dry_run, make)

    def run(self, target: int, dry_run: bool, make: Callable[[], Plan]) -> Plan:
        """Return the plan of this run: the one it stored with its lease (a rerun, not a dry run), else
        ``make()``'s; each line logged, refused when a live group cannot be driven; unless ``dry_run``, every
        topic's lease taken with it.

        :param target: the request's target (0: the count now), which a continued plan must have.
        :raises TopicChangedError: a topic's count moved while planning (the leases given back).
        """
        plan = None if dry_run else self.continued(target)
        if plan is None:
            plan = make()
        for line in describe(plan):
            self.log.info("PLAN %s", line)
        check_drivable(plan)
        if dry_run:
            self.log.info("PLAN dry run: stopping after the plan; nothing was changed and no lease was taken")
            return plan
        self.take(plan)
        return plan

    def continued(self, target: int) -> Plan | None:
        """Return the plan this DAG run stored with its lease, when this is a rerun of the same run."""
        lease = self.leases.held()
        plan = None if lease is None else continued_plan(lease.plan, self.leases.key, target)
        if lease is not None and plan is not None:
            self.log.info("PLAN continuing the plan this run stored with its lease (%s)", lease.describe())
        return plan

    def take(self, plan: Plan) -> None:
        """Take the topic's lease (every topic's, for several; or take it over from a run that has ended),
        storing the plan with it; give it back when a topic's count moved meanwhile."""
        self.leases.acquire(plan.to_dict())
        changed = count_changed(plan, self.partition_count)
        if changed is not None:
            self.leases.release()
            raise changed
