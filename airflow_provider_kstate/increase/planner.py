"""The one planner of the increase: a request and the cluster in, the plan out (nothing is changed).

Every caller that plans builds a :class:`~airflow_provider_kstate.increase.request.PlanRequest` and calls
:func:`plan_increase`: the plan step (:class:`~airflow_provider_kstate.operators.plan.KStatePlanOperator`),
the approval's re-plan, ``kstate plan``, the kstate page's preview and the Kafka Streams resize. So they
decide the same way, and a plan made again from the request stored in a plan is the same plan on an
unchanged cluster.

In order, before anything is paused (each refusal names what is wrong and changes nothing):

1. the topics: legal names, each once, counts equal now (a topic is a set of one), the target not below;
2. the principal's ACLs on the topics, the lease and control topics and the named groups (``access``),
   then the broker's trust (``trust``: the doctor's verdict, asked by the caller that can probe);
3. each topic's replication (partitions offline or below ``min.insync.replicas`` refused);
4. the broker validates each creation (``validate_only``: a quota, a policy or a missing CreatePartitions
   refuses here);
5. each topic's groups discovered and classified (:func:`~airflow_provider_kstate.increase.plan.build_plan`),
   merged into one plan where a group reading several topics appears once;
6. the discovered groups' ACLs (``access``);
7. each seeded group's driver and key-order mark (:func:`~airflow_provider_kstate.increase.fleet.drive`),
   and whether it stays in its group (:func:`~airflow_provider_kstate.increase.stay.mark_stay`);
8. each topic's id (KIP-516), so nothing stored against the plan is trusted against a topic created again.

The broker doctor's verdict is part of the request (``share_new_partitions_kept``), asked once by the
caller that can probe the broker (``trust``) and stored with the plan: a re-plan reuses it
(:func:`plan_again`, the approval's). A rerun of the plan step continues the plan its run stored with its
lease (:func:`continued_plan`), and a topic whose count moved while planning is named (:func:`count_changed`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.defaults import KeyOrder
from airflow_provider_kstate.errors import (
    InvalidArgumentError,
    KStateConfigError,
    KStateError,
    TopicChangedError,
    TopicNotFoundError,
)
from airflow_provider_kstate.increase.access import check_access
from airflow_provider_kstate.increase.fleet import DriverChoice, drive
from airflow_provider_kstate.increase.plan import KeyOrderMark, Plan, build_plan
from airflow_provider_kstate.increase.replicas import ReplicationState, check_replication
from airflow_provider_kstate.increase.stay import mark_stay
from airflow_provider_kstate.increase.topic_set import check_counts, merge_plans, topic_set

if TYPE_CHECKING:
    from airflow_provider_kstate.increase.ports import AdminPort
    from airflow_provider_kstate.increase.request import PlanRequest


@dataclass(frozen=True)
class AccessScope:
    """Where the run's ACLs are checked (:func:`~airflow_provider_kstate.increase.access.check_access`).

    :param internal_topics: the lease and control topics the run writes.
    :param config: the connection's librdkafka settings (for the principal; never logged).
    :param name: how a refusal names the connection (``connection 'kafka_default':``).
    """

    internal_topics: tuple[str, ...] = ()
    config: Mapping[str, Any] = field(default_factory=dict)
    name: str = ""

    def check(self, cluster: AdminPort, topics: list[str], target: int | None, groups: list[str]) -> None:
        """Refuse a principal that lacks an ACL the run needs on ``topics``, the internal topics or
        ``groups`` (:class:`~airflow_provider_kstate.errors.KafkaAuthorizationError`, each named)."""
        for topic in topics:
            try:
                increase = target is not None and target > cluster.partition_count(topic)
            except TopicNotFoundError:  # or not describable: the check names the missing Describe
                increase = True
            check_access(
                cluster,  # type: ignore[arg-type]  # the admin hooks are access ports too
                topic,
                self.internal_topics,
                groups,
                increase=increase,
                config=self.config,
                name=self.name,
            )


def plan_increase(
    cluster: AdminPort,
    request: PlanRequest,
    present: Callable[[], Mapping[str, set[str]]],
    *,
    access: AccessScope | None = None,
    trust: Callable[[], bool] | None = None,
    warn: Callable[[str], None] | None = None,
) -> Plan:
    """Return the plan of ``request`` on ``cluster`` as it stands now (the module's docstring gives the order).

    :param present: reads ``{group: client ids}`` of the consumers that acknowledged on the control topic
        (called once the ACLs are checked: a principal without Read there is named first).
    :param access: check the principal's ACLs there (None: not checked).
    :param trust: asks the broker doctor, once the ACLs are checked, whether the broker keeps the promises
        the increase needs (it raises when not) and returns whether it keeps ``share_new_partitions``: the
        request stored in the plan records that answer. None: the request's answer stands (a re-plan).
    :param warn: called with each warning the plan gives (under-replicated partitions, risks accepted).
    :raises KStateError: a refusal, named (the module's docstring lists them); nothing was changed.
    """
    names = check_request(request)
    named = list(request.consumer_groups)
    if access is not None:  # before any other read: a principal without Describe is named, not "missing"
        access.check(cluster, names, request.partitions, named)
    if trust is not None:
        request = request.model_copy(update={"share_new_partitions_kept": trust()})
    target, replication = _check_topics(cluster, names, request.partitions)
    plans = [build_plan(cluster, topic, request, target, replication[topic]) for topic in names]
    plan = merge_plans(plans, named)
    discovered = [g for g in plan.where("seed") if g not in named]
    if access is not None and discovered:  # the discovered groups the run seeds: Describe and Read on each
        access.check(cluster, names, target, discovered)
    choice = DriverChoice(
        groups=request.group_drivers, producers=request.producer_drivers, own_tasks=request.own_tasks
    )
    plan = drive(plan, cluster, present(), choice, request.key_order)
    plan = mark_stay(plan, request)
    plan = plan.replace(request=request, topic_ids=cluster.topic_ids(names))
    if warn is not None:
        for line in warnings(plan, replication, request.key_order):
            warn(line)
    return plan


def plan_again(
    cluster: AdminPort, approved: Plan, present: Callable[[], Mapping[str, set[str]]]
) -> tuple[Plan, str]:
    """Return the plan of ``approved``'s request now (:func:`plan_increase`: no ACL check, the request's
    broker verdict reused; nothing changed) and ""; or, when the planner refuses the topics as they stand
    (a share group appeared, ...), ``approved`` at the counts now and why.

    :raises InvalidArgumentError: ``approved`` carries no request (it was not made by the plan step).
    """
    if approved.request is None:
        raise InvalidArgumentError(
            f"the plan of {approved.topic_names} carries no request (it was not made by the plan step), so "
            "it cannot be made again to check the cluster: approve a plan of KStatePlanOperator. Nothing "
            "was changed."
        )
    try:
        return plan_increase(cluster, approved.request, present), ""
    except KStateError as exc:  # the topics are refused as they stand: the comparison names why
        counts = {t: cluster.partition_count(t) for t in approved.topic_names}
        now = approved.replace(
            original_partitions=counts[approved.topic], topics=counts if approved.topics else {}
        )
        return now, str(exc)


def continued_plan(stored: Mapping[str, Any], key: str, target: int) -> Plan | None:
    """Return the plan a run stored with its lease (``stored``; None when it stored none), for a rerun of the
    same run; refuse a rerun that asks another target (:class:`KStateConfigError`).

    :param key: the lease's key (its topics), as the refusal names it.
    """
    if not stored:
        return None
    plan = Plan.from_dict(dict(stored))
    if plan.target_partitions != target:
        raise KStateConfigError(
            f"this run already planned {key!r} -> {plan.target_partitions} partitions; "
            f"it cannot switch to {target}. Finish or fail this run first."
        )
    return plan


def count_changed(plan: Plan, partition_count: Callable[[str], int]) -> TopicChangedError | None:
    """The error naming the first topic of ``plan`` whose count now (``partition_count``) is neither the
    plan's original count nor its target (another tool or run changed it while planning); None when none is."""
    for view in plan.views():
        current = partition_count(view.topic)
        if current not in (view.original_partitions, view.target_partitions):
            return TopicChangedError(
                f"topic {view.topic!r} changed to {current} partitions while planning; released the lease, "
                "changed nothing. Run again."
            )
    return None


def check_request(request: PlanRequest) -> list[str]:
    """Refuse a request that contradicts itself; return its topics (legal names, each once)."""
    both = request.both_named()
    if both:
        raise KStateConfigError(f"groups {both} are both in consumer_groups and exclude_groups: pick one")
    if request.key_order == KeyOrder.DRAIN and not request.producer_drivers:
        raise KStateConfigError(
            "key_order=drain stops the producers before the create: name them with producer_drivers (a "
            "command pair per producer service, or 'control' for ControlledProducers). Nothing was changed."
        )
    return topic_set(None, request.topics)


def _check_topics(
    cluster: AdminPort, names: list[str], partitions: int | None
) -> tuple[int, dict[str, ReplicationState]]:
    """Return the target (``partitions``, else the count now) and each topic's replication; refuse unequal
    counts, partitions offline or below min ISR, and a creation the broker would not accept."""
    counts = {t: cluster.partition_count(t) for t in names}
    target = partitions or max(counts.values())
    check_counts(counts, target)
    replication = {t: check_replication(cluster, t) for t in names}
    for topic, count in counts.items():
        if target > count:
            cluster.increase_partitions(topic, target, validate_only=True)
    return target, replication


def warnings(plan: Plan, replication: Mapping[str, Any], key_order: KeyOrder) -> list[str]:
    """The plan's warnings: each topic's under-replicated partitions, each group relaxed for key order
    when the run asked to preserve it, each group excluded (a risk accepted)."""
    lines = [f"WARNING {state.warning}" for state in replication.values() if state.warning]
    unread = [t for t in plan.topic_names if not plan.topic_ids.get(t)]
    if unread:
        lines.append(
            f"WARNING the topic ids of {unread} could not be read (a broker without topic ids, or no Describe "
            "permission): a topic deleted and created again under the same name is told apart by offsets only"
        )
    for group in plan.marked(KeyOrderMark.RELAXED) if key_order == KeyOrder.PRESERVE else []:
        lines.append(
            f"group {group} is RELAXED for key order: {plan.groups[group].key_order_reason}. Its keys that "
            "move may be processed out of order; to keep them in order, name its producers "
            "(producer_drivers) so the run drains it."
        )
    for group in plan.of_class("excluded"):
        reads = ", ".join(plan.groups[group].topics or plan.topic_names)
        lines.append(f"RISK ACCEPTED: group {group} reads {reads} but is excluded: not paused, not seeded")
    return lines
