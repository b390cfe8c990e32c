"""One planner (issue 40, item 1): every caller that plans makes the same plan of the same request.

On the session's broker (Apache Kafka 4.4 unless ``KSTATE_BROKER`` names another), a topic of 2 partitions
read by a share group at its default ``share.auto.offset.reset=latest`` (two confluent-kafka
``ShareConsumer`` polling), a live group of one ControlledConsumer and an offline group with committed
offsets. The plan step (through ``dag.test()``, a dry run), the approval's re-plan, ``kstate plan`` and the
kstate page's preview each plan the topic to 4 partitions: the plans are equal (run fields and the time
aside). The scenario first proves why it matters: the planner called without the broker's verdict (as the
approval's re-plan did before) refuses the share group that the verdict leaves alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kstate_support.kafka import commit
from kstate_support.traffic import ConsumerFleet, wait_until

from airflow_provider_kstate.errors import UnsupportedGroupTypeError
from airflow_provider_kstate.increase.plan import Plan
from tests.integration.test_share_groups import ShareReaders

pytestmark = pytest.mark.integration

DAG_ID = "kstate_partition_increase"
PLAN_TASK = "safe_partition_increase.plan"


@pytest.fixture
def readers(kafka_config: dict[str, Any], admin: Any, make_topic: Any) -> Iterator[dict[str, Any]]:
    """The topic and its three readers: a share group at latest, a live group, an offline group."""
    from airflow_provider_kstate.hooks.admin import KStateAdminHook

    topic = make_topic("planner", partitions=2)
    share, live, offline = f"{topic}-share", f"{topic}-live", f"{topic}-offline"
    commit(admin, offline, topic, {0: 0, 1: 0})
    shares = ShareReaders(kafka_config, topic, share)
    fleet = ConsumerFleet(kafka_config, topic, live, n=1, controlled=True)
    hook = KStateAdminHook()
    try:
        assert wait_until(
            lambda: share in (hook.share_groups_on_topic(topic, hook.group_types()) or {}), 60
        ), "the share group never showed as reading the topic"
        info = lambda: hook.describe_groups([live], topic)[live]  # noqa: E731
        assert wait_until(lambda: info().state == "STABLE" and info().members, 60), (
            "the live group never joined"
        )
        yield {"topic": topic, "share": share, "live": live, "offline": offline}
    finally:
        fleet.stop()
        shares.stop()


def _same(plan: Plan) -> dict[str, Any]:
    """What every caller must agree on: the plan without its run fields and its time."""
    run = {
        "planned_at": "",
        "owner": "",
        "dry_run": False,
        "control_topic": "",
        "lease_topic": "",
        "report_uri": "",
    }
    return plan.replace(**run).to_dict()


def test_every_caller_makes_the_same_plan_of_the_same_request(
    readers: dict[str, Any], kafka_config: dict[str, Any], run_dag: Any
) -> None:
    from airflow_provider_kstate import cli
    from airflow_provider_kstate.hooks.admin import KStateAdminHook
    from airflow_provider_kstate.increase.planner import plan_increase
    from airflow_provider_kstate.increase.request import PlanRequest
    from airflow_provider_kstate.operators.approval import KStateApprovalOperator
    from airflow_provider_kstate.plugins.views import topic_plan

    topic = readers["topic"]
    # The plan step, in a real Airflow (a dry run: no lease): the doctor's verdict is probed there.
    dr = run_dag(DAG_ID, {"topic": topic, "partitions": 4, "dry_run": True})
    assert dr.state == "success", dr.state
    stepped = Plan.from_dict(dr.get_task_instance(PLAN_TASK).xcom_pull(task_ids=PLAN_TASK))
    assert stepped.request is not None and stepped.request.share_new_partitions_kept, (
        "Apache Kafka 4.4 keeps share_new_partitions: the verdict is in the request"
    )
    assert stepped.groups[readers["share"]].cls == "share-safe"
    assert set(stepped.where("seed")) == {readers["live"], readers["offline"]}

    # The scenario: the same topic planned without the verdict (what the approval's re-plan asked before
    # the one planner) refuses the share group the verdict leaves alone.
    admin = KStateAdminHook()
    bare = PlanRequest(topics=(topic,), partitions=4)
    with pytest.raises(UnsupportedGroupTypeError, match=readers["share"]):
        plan_increase(admin, bare, dict)

    # The approval's re-plan, from the request stored in the plan.
    approval = KStateApprovalOperator(task_id="approve_plan", plan=stepped.to_dict())
    replanned, refused = approval._replan(stepped)
    assert refused == ""
    # kstate plan (the command's request: the topic and the target; the verdict read from the cache).
    args = cli._plan_parser().parse_args([topic, "--partitions", "4"])  # the command's own defaults
    commanded, _ = cli.plan_of(admin.cluster, args, dict(kafka_config))
    # The kstate page's preview.
    paged, _ = topic_plan(admin, "kafka_default", [topic], 4)

    expected = _same(stepped)
    for name, plan in (("approval", replanned), ("kstate plan", commanded), ("page", paged)):
        assert _same(plan) == expected, f"{name} made another plan"
