"""Step 1 of the safe partition increase: validate, discover and classify groups, take the topic's lease."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowSkipException

from airflow_provider_kstate.client.protocol import DEFAULT_CONTROL_TOPIC
from airflow_provider_kstate.exceptions import KStateError
from airflow_provider_kstate.operators.base import run_owner
from airflow_provider_kstate.utils.coerce import as_bool, as_int, as_str_list, as_topic
from airflow_provider_kstate.utils.model import DEFAULT_CONN_ID, DEFAULT_LEASE_TOPIC

if TYPE_CHECKING:
    from airflow_provider_kstate.hooks.lease import KStateLeaseHook

from airflow_provider_kstate.utils.plan import DEFAULT_SPARK_PREFIXES, build_plan, check_topic_name, describe


class KStatePlanOperator(BaseOperator):
    """Plan a partition increase and push the plan to XCom; with ``dry_run`` nothing else happens.

    The topic must exist, must not be internal, and ``partitions`` must exceed its current count. The
    consumer groups to protect are ``consumer_groups``, or, when that is empty, every group with
    committed offsets on the topic. Unless ``dry_run``, the run takes the topic's lease (stored in Kafka,
    so it holds across DAGs); a second run on the same topic fails with :class:`LeaseHeldError`. A rerun
    of this task in the same DAG run finds its lease and continues the plan it stored there, even when
    partitions were already created.

    :param topic: the topic to grow.
    :param partitions: the target partition count.
    :param consumer_groups: groups to protect; empty or None means discover them.
    :param dry_run: plan only: take no lease and change nothing.
    :param kafka_config_id: the Airflow connection id (``kafka`` type).
    :param control_topic: the control topic services with the client piece watch.
    :param lease_topic: the topic that holds per-topic leases.
    :param lease_ttl: seconds the lease lives without renewal (a crashed run frees the topic after it).
    :param spark_group_prefixes: group-id prefixes of Spark Structured Streaming sources (left alone).
    :param request_timeout: seconds to wait for each request to the cluster.
    """

    template_fields: tuple[str, ...] = ("topic", "partitions", "consumer_groups", "plan_only")
    ui_color = "#e3f2fd"

    def __init__(
        self,
        *,
        topic: str,
        partitions: int | str,
        consumer_groups: list[str] | str | None = None,
        dry_run: bool | str = False,
        kafka_config_id: str = DEFAULT_CONN_ID,
        control_topic: str = DEFAULT_CONTROL_TOPIC,
        lease_topic: str = DEFAULT_LEASE_TOPIC,
        lease_ttl: float = 4 * 3600.0,
        spark_group_prefixes: tuple[str, ...] = DEFAULT_SPARK_PREFIXES,
        request_timeout: float = 30.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.topic = topic
        self.partitions = partitions
        self.consumer_groups = consumer_groups
        # BaseOperator already has a dry_run() method: keep the flag under another attribute name.
        self.plan_only = dry_run
        self.kafka_config_id = kafka_config_id
        self.control_topic = control_topic
        self.lease_topic = lease_topic
        self.lease_ttl = lease_ttl
        self.spark_group_prefixes = spark_group_prefixes
        self.request_timeout = request_timeout

    def execute(self, context: Any) -> dict[str, Any]:
        topic = as_topic("topic", self.topic)
        target = as_int("partitions", self.partitions)
        groups = as_str_list("consumer_groups", self.consumer_groups)
        dry_run = as_bool("dry_run", self.plan_only)
        check_topic_name(topic)
        owner = run_owner(context)
        from airflow_provider_kstate.hooks.lease import KStateLeaseHook

        hook = KStateLeaseHook(
            self.kafka_config_id, lease_topic=self.lease_topic, timeout=self.request_timeout
        )
        plan = None if dry_run else self._continued_plan(hook, topic, target, owner)
        if plan is None:
            plan = build_plan(hook, topic, target, groups, tuple(self.spark_group_prefixes))
            plan.update(
                owner=owner, dry_run=dry_run, control_topic=self.control_topic, lease_topic=self.lease_topic
            )
        for line in describe(plan):
            self.log.info("PLAN %s", line)
        if dry_run:
            self.log.info("PLAN dry run: stopping after the plan; nothing was changed and no lease was taken")
            return plan
        self._take_lease(hook, plan, owner)
        return plan

    def _continued_plan(
        self, hook: KStateLeaseHook, topic: str, target: int, owner: str
    ) -> dict[str, Any] | None:
        """Return the plan this DAG run stored with its lease, when this is a rerun of the same run."""
        lease = hook.current(topic)
        if lease is None or lease.owner != owner or not lease.plan:
            return None
        if int(lease.plan["target_partitions"]) != target:
            raise KStateError(
                f"this run already planned {topic!r} -> {lease.plan['target_partitions']} partitions; "
                f"it cannot switch to {target}. Finish or fail this run first."
            )
        self.log.info("PLAN continuing the plan this run stored with its lease (%s)", lease.describe())
        return lease.plan

    def _take_lease(self, hook: KStateLeaseHook, plan: dict[str, Any], owner: str) -> None:
        lease = hook.acquire(plan["topic"], owner, self.lease_ttl, plan)
        self.log.info("LEASE topic %s %s", plan["topic"], lease.describe())
        current = hook.partition_count(plan["topic"])
        if current not in (plan["original_partitions"], plan["target_partitions"]):
            hook.release(plan["topic"], owner)
            raise KStateError(
                f"topic {plan['topic']!r} changed to {current} partitions while planning; released the lease, "
                "changed nothing. Run again."
            )


class KStateDryRunGateOperator(BaseOperator):
    """Stop the run after the plan when it was a dry run: this task is skipped, and so is everything after it.

    :param plan: the plan (XCom of :class:`KStatePlanOperator`).
    """

    template_fields: tuple[str, ...] = ("plan",)
    ui_color = "#e3f2fd"

    def __init__(self, *, plan: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.plan = plan

    def execute(self, context: Any) -> None:
        if self.plan.get("dry_run"):
            raise AirflowSkipException("dry run: the plan is in XCom; nothing was changed")
        self.log.info("PLAN not a dry run: proceeding with %s", self.plan["topic"])
