"""Unit tests of the one planner (increase/planner.py) on a fake cluster: the request is stored in the plan and
a plan made again from it is the same plan; the broker's verdict is asked once, after the ACLs; a request that
contradicts itself is refused before the cluster is read; the warnings."""

from __future__ import annotations

from typing import Any

import pytest
from kstate_support.fakes import FakeHook, group_info

from airflow_provider_kstate.errors import (
    InvalidArgumentError,
    KStateConfigError,
    TopicChangedError,
    UnsupportedGroupTypeError,
)
from airflow_provider_kstate.increase.drivers import CommandDriver
from airflow_provider_kstate.increase.model import GroupInfo
from airflow_provider_kstate.increase.plan import Plan
from airflow_provider_kstate.increase.planner import (
    AccessScope,
    continued_plan,
    count_changed,
    plan_again,
    plan_increase,
    warnings,
)
from airflow_provider_kstate.increase.request import PlanRequest

K8S = CommandDriver(name="k8s", stop="kubectl scale --replicas=0", start="kubectl scale --replicas=2")


class ShareCluster(FakeHook):
    """4 partitions read by a live group, an offline group and a share group at latest."""

    def __init__(self) -> None:
        share = GroupInfo("readers", "STABLE", "SHARE", "share")
        super().__init__(
            4, {"live": group_info("live", "STABLE", 1, (0, 1, 2, 3)), "idle": group_info("idle", "EMPTY")}
        )
        self.shares = {"readers": share}
        self.asked: list[str] = []

    def group_types(self) -> dict[str, str]:
        return {**super().group_types(), "readers": "SHARE"}

    def share_groups_on_topic(self, topic: str, types: dict[str, str]) -> dict[str, str] | None:
        return {"readers": "latest"}

    def describe_groups(self, groups: list[str], topic: str) -> dict[str, GroupInfo]:
        described = super().describe_groups(groups, topic)
        return {g: self.shares.get(g) or described[g] for g in groups}

    def authorized_operations(self, topics: Any = (), groups: Any = ()) -> dict[Any, Any]:
        self.asked.append("acls")
        return {}  # no authorizer: every operation allowed


def test_the_plan_keeps_its_request_and_a_plan_made_again_from_it_is_the_same() -> None:
    cluster = ShareCluster()
    request = PlanRequest(topics=("orders",), partitions=8, group_drivers={"live": K8S})
    asked: list[str] = []

    def trust() -> bool:
        asked.append("trust")
        return True  # the broker starts share groups on added partitions at their first record

    plan = plan_increase(cluster, request, lambda: {}, trust=trust)
    assert asked == ["trust"] and plan.request is not None and plan.request.share_new_partitions_kept
    assert plan.groups["readers"].cls == "share-safe" and plan.groups["live"].driver == K8S
    assert plan.topic_ids == {"orders": "id-orders"} and cluster.validated == [("orders", 8)]
    wire = Plan.from_dict(plan.to_dict())
    assert wire == plan, "the request and the ids travel with the plan (XCom, the lease)"
    again = plan_increase(cluster, wire.request, lambda: {})  # type: ignore[arg-type]
    assert again.replace(planned_at="") == plan.replace(planned_at="")
    # Without the verdict (what the approval's re-plan once asked) the same topic is refused.
    with pytest.raises(UnsupportedGroupTypeError, match="readers"):
        plan_increase(cluster, PlanRequest(topics=("orders",), partitions=8), lambda: {})


def test_the_verdict_is_asked_after_the_acls_and_the_present_consumers_after_both() -> None:
    cluster = ShareCluster()
    order: list[str] = []

    def present() -> dict[str, set[str]]:
        order.append("present")
        return {}

    def trust() -> bool:
        order.append("trust")
        return True

    plan_increase(
        cluster, PlanRequest(topics=("orders",), partitions=8), present, access=AccessScope(), trust=trust
    )
    assert cluster.asked[:1] == ["acls"] and order == ["trust", "present"]


def test_a_request_that_contradicts_itself_is_refused_before_the_cluster_is_read() -> None:
    class Untouchable:
        def __getattr__(self, name: str) -> Any:
            raise AssertionError(f"the cluster was read: {name}")

    with pytest.raises(KStateConfigError, match=r"\['idle'\] are both"):
        plan_increase(
            Untouchable(),  # type: ignore[arg-type]
            PlanRequest(topics=("orders",), partitions=8, consumer_groups=["idle"], exclude_groups=["idle"]),
            dict,
        )
    with pytest.raises(KStateConfigError, match="key_order=drain stops the producers"):
        plan_increase(Untouchable(), PlanRequest(topics=("orders",), key_order="drain"), dict)  # type: ignore[arg-type]


def test_the_warnings_name_unread_ids_relaxed_and_excluded_groups() -> None:
    cluster = FakeHook(
        4, {"live": group_info("live", "STABLE", 1, (0,)), "idle": group_info("idle", "EMPTY")}
    )
    seen: list[str] = []
    request = PlanRequest(topics=("orders",), partitions=8, exclude_groups=["idle"])
    plan = plan_increase(cluster, request, dict, warn=seen.append)
    assert plan.groups["live"].key_order == "relaxed"  # a live member without the client piece
    assert any("group live is RELAXED for key order" in line for line in seen), seen
    assert any("RISK ACCEPTED: group idle reads orders" in line for line in seen), seen
    unread = warnings(plan.replace(topic_ids={"orders": ""}), {}, request.key_order)
    assert any("topic ids of ['orders'] could not be read" in line for line in unread), unread


def test_a_plan_made_again_reuses_the_request_or_says_why_it_is_refused() -> None:
    cluster = ShareCluster()
    request = PlanRequest(topics=("orders",), partitions=8, share_new_partitions_kept=True)
    approved = plan_increase(cluster, request, dict)
    again, refused = plan_again(cluster, approved, dict)
    assert refused == "" and again.replace(planned_at="") == approved.replace(planned_at="")
    # the verdict stored in the request says otherwise: the planner refuses the share group as it stands
    bare = approved.replace(request=request.model_copy(update={"share_new_partitions_kept": False}))
    cluster.partitions = 5
    now, refused = plan_again(cluster, bare, dict)
    assert "readers" in refused and now.original_partitions == 5 and now.topics == {}
    assert now.groups == bare.groups, "the approved plan at the counts now"
    with pytest.raises(InvalidArgumentError, match=r"the plan of \['orders'\] carries no request"):
        plan_again(cluster, approved.replace(request=None), dict)


def test_a_rerun_continues_the_plan_its_run_stored_with_the_same_target_only() -> None:
    cluster = FakeHook(4, {"idle": group_info("idle", "EMPTY")})
    plan = plan_increase(cluster, PlanRequest(topics=("orders",), partitions=8), dict)
    assert continued_plan({}, "orders", 8) is None, "the lease stored no plan"
    assert continued_plan(plan.to_dict(), "orders", 8) == plan
    with pytest.raises(
        KStateConfigError, match=r"already planned 'orders' -> 8 partitions; it cannot switch to 6"
    ):
        continued_plan(plan.to_dict(), "orders", 6)


def test_a_count_changed_while_planning_is_named() -> None:
    cluster = FakeHook(4, {"idle": group_info("idle", "EMPTY")})
    plan = plan_increase(cluster, PlanRequest(topics=("orders", "payments"), partitions=8), dict)
    counts = {"orders": 4, "payments": 8}
    assert count_changed(plan, counts.__getitem__) is None, "the original count or the target: unchanged"
    counts["payments"] = 6
    error = count_changed(plan, counts.__getitem__)
    assert isinstance(error, TopicChangedError)
    assert str(error) == (
        "topic 'payments' changed to 6 partitions while planning; released the lease, changed nothing. Run again."
    )
