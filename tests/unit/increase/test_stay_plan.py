"""Unit tests of the plan's choice of which groups stay in their groups while the topic grows
(increase/stay.py, through the one planner on a fake cluster): evidence per group, the reasons, the
refusals of ``always``, and the plan's wire form."""

from __future__ import annotations

import pytest
from kstate_support.fakes import FakeHook, group_info

from airflow_provider_kstate.errors import StayRefusedError
from airflow_provider_kstate.increase.drivers import CONTROL, CommandDriver
from airflow_provider_kstate.increase.plan import Plan
from airflow_provider_kstate.increase.planner import plan_increase
from airflow_provider_kstate.increase.request import PlanRequest

JAVA = CommandDriver(name="java", stop="systemctl stop java-svc", start="systemctl start java-svc")


def cluster() -> FakeHook:
    """4 partitions read by a client-piece group (members c0, c1), a plain group, and an offline group."""
    return FakeHook(
        4,
        {
            "piece": group_info("piece", "STABLE", 2, (0, 1, 2, 3)),
            "plain": group_info("plain", "STABLE", 1, (0, 1, 2, 3)),
            "idle": group_info("idle", "EMPTY"),
        },
    )


def present() -> dict[str, set[str]]:
    """The client ids that acknowledged on the control topic: the client piece runs in ``piece`` only."""
    return {"piece": {"c0", "c1"}}


def plan_of(**choices: object) -> Plan:
    request = PlanRequest(
        topics=("orders",),
        partitions=8,
        producer_drivers={"orders-writers": CONTROL},
        group_drivers={"plain": JAVA},
        **choices,  # type: ignore[arg-type]
    )
    return plan_increase(cluster(), request, present)


def test_never_is_the_default_and_plans_as_before() -> None:
    plan = plan_of()
    assert plan.staying() == [] and set(plan.where("pause")) == {"piece", "plain", "idle"}
    assert all(not e.stay_reason for e in plan.groups.values())


def test_auto_keeps_groups_with_evidence_in_their_groups_and_pauses_the_others_saying_why() -> None:
    plan = plan_of(consumers_stay="auto")
    piece = plan.groups["piece"]
    assert piece.stay == "client-piece" and "client piece" in piece.stay_reason
    assert not piece.pause and not piece.wait and piece.seed, "protected, but neither paused nor waited for"
    plain = plan.groups["plain"]
    assert not plain.stay and plain.pause and plain.stay_reason.startswith("paused: no evidence")
    assert plan.staying() == ["piece"] and set(plan.seeded_by_run()) == {"plain", "idle"}
    assert set(plan.where("pause")) == {"plain", "idle"}, "offline groups are still kept out while seeded"
    wire = Plan.from_dict(plan.to_dict())
    assert wire.groups == plan.groups and wire.request == plan.request, "the marks travel (XCom, the lease)"


def test_a_group_named_in_committing_groups_stays_on_its_commits() -> None:
    plan = plan_of(consumers_stay="auto", committing_groups=["plain"])
    assert plan.staying() == ["piece", "plain"]
    assert plan.groups["plain"].stay == "commits" and "committing_groups" in plan.groups["plain"].stay_reason


def test_a_committing_group_without_a_driver_stays_and_says_it_has_no_fallback() -> None:
    request = PlanRequest(
        topics=("orders",),
        partitions=8,
        producer_drivers={"w": CONTROL},
        consumers_stay="always",
        committing_groups=["plain"],
    )
    plan = plan_increase(cluster(), request, present)
    plain = plan.groups["plain"]
    assert plain.stay == "commits" and "no fallback" in plain.stay_reason and not plan.undrivable()


def test_always_refuses_a_group_without_evidence_naming_it_and_the_ways_out() -> None:
    with pytest.raises(StayRefusedError, match="group 'plain': no evidence") as caught:
        plan_of(consumers_stay="always")
    assert "committing_groups" in str(caught.value) and "Nothing was paused or changed" in str(caught.value)


def test_without_named_producers_auto_pauses_everyone_and_always_refuses() -> None:
    request = PlanRequest(
        topics=("orders",), partitions=8, consumers_stay="auto", group_drivers={"plain": JAVA}
    )
    plan = plan_increase(cluster(), request, present)
    assert plan.staying() == [] and "producer_drivers" in plan.groups["piece"].stay_reason
    with pytest.raises(StayRefusedError, match="producer_drivers"):
        plan_increase(cluster(), request.model_copy(update={"consumers_stay": "always"}), present)


def test_a_bad_choice_is_refused_by_the_request() -> None:
    with pytest.raises(ValueError, match="consumers_stay"):
        PlanRequest(topics=("orders",), consumers_stay="sometimes")  # type: ignore[arg-type]
