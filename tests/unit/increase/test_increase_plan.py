"""Unit tests of increase/plan.py: topic names, group classes, the plan built from a fake cluster."""

from __future__ import annotations

import json

import pytest
from kstate_support.fakes import PLAN, FakeHook, plan_request
from kstate_support.fakes import group_info as _info

from airflow_provider_kstate import errors
from airflow_provider_kstate.errors import (
    InternalTopicError,
    InvalidPartitionCountError,
    UnknownGroupError,
    UnprotectedGroupError,
)
from airflow_provider_kstate.increase.plan import Plan, build_plan, check_topic_name, classify


def test_internal_topics_are_refused() -> None:
    for topic in ("__consumer_offsets", "__transaction_state", "_kstate_control"):
        with pytest.raises(InternalTopicError):
            check_topic_name(topic)
    check_topic_name("orders")


def test_classify_each_kind_of_group() -> None:
    prefixes = ("spark-kafka-source-",)
    assert classify(_info("a", "STABLE", 2), prefixes).cls == "active"
    assert classify(_info("a", "PREPARING_REBALANCE", 1), prefixes).wait is True
    empty = classify(_info("b", "EMPTY"), prefixes)
    assert (empty.cls, empty.seed, empty.wait) == ("empty", True, False)
    spark = classify(_info("spark-kafka-source-x", "STABLE", 1), prefixes)
    assert (spark.cls, spark.seed, spark.pause) == ("spark", False, False)
    assert classify(_info("c", "DEAD"), prefixes).cls == "absent"


def test_build_plan_validates_and_discovers() -> None:
    hook = FakeHook(2, {"g1": _info("g1", "EMPTY"), "g2": _info("g2", "STABLE", 1, (0, 1))})
    plan = build_plan(hook, "orders", plan_request("orders", 5))  # type: ignore[arg-type]
    assert (
        list(plan.new_partitions) == [2, 3, 4] and plan.groups_discovered is True and plan.mode == "increase"
    )
    assert plan.where("wait") == ["g2"] and plan.where("seed") == ["g1", "g2"]
    explicit = build_plan(hook, "orders", plan_request("orders", 3, ["g2", "g2", "g1"]))  # type: ignore[arg-type]
    assert list(explicit.groups) == ["g2", "g1"] and explicit.groups_discovered is False
    with pytest.raises(InvalidPartitionCountError, match="below"):
        build_plan(hook, "orders", plan_request("orders", 1))  # type: ignore[arg-type]
    repair = build_plan(hook, "orders", plan_request("orders", 2))  # type: ignore[arg-type]
    assert repair.mode == "repair" and list(repair.new_partitions) == [] and len(repair.groups) == 2


def test_plan_protects_every_group_at_risk() -> None:
    """KAFKA-12261 made by the tool itself: a named subset, or a typo, must not leave a group at risk."""
    hook = FakeHook(1, {"billing": _info("billing", "EMPTY"), "audit": _info("audit", "EMPTY")})
    with pytest.raises(UnprotectedGroupError, match=r"\['audit'\]"):
        build_plan(hook, "orders", plan_request("orders", 4, ["billing"]))  # type: ignore[arg-type]
    with pytest.raises(UnknownGroupError, match="ghost-group.*typo"):
        build_plan(hook, "orders", plan_request("orders", 4, ["ghost-group", "billing", "audit"]))  # type: ignore[arg-type]
    accepted = build_plan(hook, "orders", plan_request("orders", 4, ["billing"], exclude_groups=["audit"]))  # type: ignore[arg-type]
    assert accepted.groups["audit"].cls == "excluded" and accepted.where("seed") == ["billing"]
    request = plan_request("orders", 4, ["ghost-group", "billing", "audit"], allow_unknown_groups=True)
    allowed = build_plan(hook, "orders", request)  # type: ignore[arg-type]
    assert allowed.groups["ghost-group"].cls == "absent" and allowed.where("seed") == ["billing", "audit"]
    # Errors a retry cannot fix are not retried: they say so.
    assert not errors.UnprotectedGroupError.retryable and not errors.UnknownGroupError.retryable


def test_plan_round_trips_and_stays_small() -> None:
    # The size: 4,096 partitions and 100 groups, each with 40 live members -> at most 64 KB.
    hook = FakeHook(64, {f"g{i}": _info(f"g{i}", "STABLE", 40, (0, 1)) for i in range(100)})
    plan = build_plan(hook, "orders", plan_request("orders", 4096))  # type: ignore[arg-type]
    data = plan.to_dict()
    assert Plan.from_dict(data) == plan and Plan.from_dict(json.loads(json.dumps(data))) == plan
    assert len(json.dumps(data)) < 64 * 1024, len(json.dumps(data))
    assert data["groups"]["g1"]["member_count"] == 40 and len(data["groups"]["g1"]["members"]) == 3
    assert Plan.from_dict(PLAN).where("seed") == ["live", "idle"]  # a plan written by an earlier version
