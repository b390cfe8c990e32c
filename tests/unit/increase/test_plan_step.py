"""Unit tests of the plan step's decisions (increase/plan_step.py): the request from the step's rendered
arguments, and what the step does with the plan on fake leases and a fake cluster: a dry run takes nothing,
a rerun continues the plan its run stored, a plan is stored with the leases, and a count moved while
planning gives the leases back."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from kstate_support.fakes import FakeHook, group_info

from airflow_provider_kstate.defaults import DEFAULT_SPARK_PREFIXES, KeyOrder
from airflow_provider_kstate.errors import (
    InvalidDriverError,
    KStateConfigError,
    TopicChangedError,
)
from airflow_provider_kstate.increase.drivers import CommandDriver
from airflow_provider_kstate.increase.plan import Plan
from airflow_provider_kstate.increase.plan_step import PlanStep, driver_choice, plan_request, topic_names
from airflow_provider_kstate.increase.planner import plan_increase
from airflow_provider_kstate.increase.request import PlanRequest

K8S = {"name": "k8s", "stop": "kubectl scale --replicas=0", "start": "kubectl scale --replicas=2"}


def _args(**given: Any) -> SimpleNamespace:
    """The plan step's arguments as the operator holds them (its defaults), with ``given``."""
    defaults: dict[str, Any] = {
        "topic": "orders",
        "topics": None,
        "partitions": 8,
        "consumer_groups": None,
        "exclude_groups": None,
        "allow_unknown_groups": False,
        "acknowledge_streams_groups": None,
        "spark_group_prefixes": DEFAULT_SPARK_PREFIXES,
        "key_order": "preserve",
        "group_drivers": None,
        "producer_drivers": None,
        "drivers": None,
        "own_tasks": False,
        "consumers_stay": "never",
        "committing_groups": None,
    }
    return SimpleNamespace(**{**defaults, **given})


def test_the_request_is_read_from_the_rendered_arguments() -> None:
    assert plan_request(_args()) == PlanRequest(topics=("orders",), partitions=8)  # type: ignore[arg-type]
    rendered = _args(
        topics='["payments"]',
        partitions="12",
        consumer_groups="billing, audit",
        exclude_groups='["late"]',
        allow_unknown_groups="true",
        acknowledge_streams_groups="enricher",
        key_order="drain",
        group_drivers='{"billing": "k8s"}',
        producer_drivers="control",
        drivers={"k8s": K8S},
        own_tasks=True,
        consumers_stay="auto",
        committing_groups="java-billing",
    )
    request = plan_request(rendered)  # type: ignore[arg-type]
    assert request.consumers_stay == "auto" and request.committing_groups == ("java-billing",)
    assert request.topics == ("orders", "payments") and request.partitions == 12
    assert (request.consumer_groups, request.exclude_groups) == (("billing", "audit"), ("late",))
    assert request.allow_unknown_groups and request.acknowledge_streams_groups == ("enricher",)
    assert request.key_order == KeyOrder.DRAIN and request.own_tasks
    assert request.group_drivers["billing"] == CommandDriver(**K8S)
    assert list(request.producer_drivers) == ["control"]
    with pytest.raises(KStateConfigError, match="partitions must be an integer"):
        plan_request(_args(partitions="eight"))  # type: ignore[arg-type]
    with pytest.raises(KStateConfigError, match="key_order"):
        plan_request(_args(key_order="sorted"))  # type: ignore[arg-type]
    with pytest.raises(KStateConfigError, match="consumers_stay"):
        plan_request(_args(consumers_stay="sometimes"))  # type: ignore[arg-type]


def test_the_topics_are_one_set_with_topic_first() -> None:
    assert topic_names("orders", ["payments"]) == ["orders", "payments"]
    assert topic_names("", "orders, payments") == ["orders", "payments"]
    assert topic_names(" orders ", None) == ["orders"]


def test_producer_drivers_are_a_mapping_its_json_or_driver_names() -> None:
    registry = {"k8s": K8S}
    as_names = driver_choice(None, "k8s", registry, own_tasks=False)
    assert as_names == driver_choice(None, ["k8s"], registry, own_tasks=False)
    assert as_names.producers == {"k8s": CommandDriver(**K8S)}
    as_json = driver_choice(None, '{"billing-svc": "k8s"}', registry, own_tasks=True)
    assert as_json.producers == {"billing-svc": CommandDriver(**K8S)} and as_json.own_tasks
    with pytest.raises(InvalidDriverError, match="driver .k9s. is neither"):
        driver_choice({"billing": "k9s"}, None, registry, own_tasks=False)


class _Leases:
    """The leases of a set, in memory: what the step stored with them and whether they were given back."""

    def __init__(self, stored: dict[str, Any] | None = None) -> None:
        self.key = "orders"
        self.stored = stored
        self.calls: list[str] = []

    def held(self) -> Any:
        if self.stored is None:
            return None
        return SimpleNamespace(plan=self.stored, describe=lambda: "held by dag/run")

    def acquire(self, plan: dict[str, Any] | None = None) -> None:
        self.calls.append("acquire")
        self.stored = plan

    def release(self) -> None:
        self.calls.append("release")


class _Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, msg: str, *args: Any) -> None:
        self.lines.append(msg % args)

    warning = info


def _plan() -> Plan:
    cluster = FakeHook(4, {"idle": group_info("idle", "EMPTY")})
    return plan_increase(cluster, PlanRequest(topics=("orders",), partitions=8), dict)


def test_a_dry_run_plans_and_takes_nothing() -> None:
    leases, log, plan = _Leases(_plan().to_dict()), _Log(), _plan()
    made = PlanStep(leases, {"orders": 4}.__getitem__, log).run(8, True, lambda: plan)
    assert made is plan, "a dry run never continues a stored plan"
    assert leases.calls == []
    assert log.lines[-1] == (
        "PLAN dry run: stopping after the plan; nothing was changed and no lease was taken"
    )
    assert all(line.startswith("PLAN ") for line in log.lines)


def test_the_plan_is_stored_with_the_leases_and_a_rerun_continues_it() -> None:
    leases, log, plan = _Leases(), _Log(), _plan()
    step = PlanStep(leases, {"orders": 4}.__getitem__, log)
    assert step.run(8, False, lambda: plan) is plan
    assert leases.calls == ["acquire"] and leases.stored == plan.to_dict()

    def never() -> Plan:
        raise AssertionError("a rerun plans nothing")

    assert step.run(8, False, never) == plan
    assert "PLAN continuing the plan this run stored with its lease (held by dag/run)" in log.lines
    with pytest.raises(KStateConfigError, match="it cannot switch to 6"):
        step.run(6, False, never)


def test_a_count_moved_while_planning_gives_the_leases_back() -> None:
    leases, plan = _Leases(), _plan()
    with pytest.raises(TopicChangedError, match="changed to 5 partitions while planning"):
        PlanStep(leases, {"orders": 5}.__getitem__, _Log()).run(8, False, lambda: plan)
    assert leases.calls == ["acquire", "release"]


def test_a_plan_a_task_cannot_drive_is_refused_before_any_lease() -> None:
    driven = _plan().replace(
        request=PlanRequest(topics=("orders",), group_drivers={"typo": CommandDriver(**K8S)})
    )
    leases = _Leases()
    with pytest.raises(InvalidDriverError, match="typo"):
        PlanStep(leases, {"orders": 4}.__getitem__, _Log()).run(8, False, lambda: driven)
    assert leases.calls == []


class _AclCluster(FakeHook):
    """The cluster as the step plans on it: no authorizer (every ACL check passes)."""

    def authorized_operations(self, topics: Any = (), groups: Any = ()) -> dict[Any, Any]:
        return {}


def test_the_step_plans_with_the_one_planner_where_the_run_writes_and_asks_the_broker_once() -> None:
    from airflow_provider_kstate.increase.plan_step import RunPlace

    leases, log, asked = _Leases(), _Log(), []
    leases.owner = "dag/run"  # type: ignore[attr-defined]
    place = RunPlace("kafka_default", {"bootstrap.servers": "b:9092"}, "_ctl", "_leases", "/reports")
    assert place.access().internal_topics == ("_leases", "_ctl")
    assert place.access().name == "connection 'kafka_default':"

    def trust(what: str) -> bool:
        asked.append(what)
        return True

    cluster = _AclCluster(4, {"idle": group_info("idle", "EMPTY")})
    request = PlanRequest(topics=("orders",), partitions=8)
    plan = PlanStep(leases, cluster.partition_count, log).plan(cluster, request, dict, place, trust, False)
    assert asked == ["the increase of 'orders'"]
    assert log.lines[0] == "PLAN topic orders: 4 -> 8 partitions, new partitions 4-7 (4)"
    assert plan.request is not None and plan.request.share_new_partitions_kept, "the verdict is stored"
    assert (plan.owner, plan.control_topic, plan.lease_topic, plan.report_uri) == (
        "dag/run",
        "_ctl",
        "_leases",
        "/reports",
    )
    assert leases.calls == ["acquire"] and leases.stored == plan.to_dict()
    assert (
        PlanStep(leases, cluster.partition_count, log).plan(cluster, request, dict, place, trust, False)
        == plan
    )
    assert asked == ["the increase of 'orders'"], "a rerun continues the stored plan: the broker is not asked"
