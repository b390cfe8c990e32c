"""Unit tests of task_groups/partition_increase.py: the factory builds its layouts without touching anything."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest


def test_constructors_touch_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Building every step against a connection that does not exist must not fail: nothing is looked up."""
    from airflow.sdk import DAG

    from airflow_provider_kstate.task_groups.partition_increase import (
        ConnectionConfig,
        StepsConfig,
        safe_partition_increase,
    )

    monkeypatch.setattr(
        "socket.socket.connect", lambda *a: (_ for _ in ()).throw(AssertionError("network at parse time"))
    )
    nowhere = ConnectionConfig(kafka_config_id="does_not_exist")
    with DAG("unit_parse", schedule=None):
        window = safe_partition_increase(topic="t", partitions=3, connection=nowhere)
        per_step = safe_partition_increase(
            topic="t",
            partitions=3,
            connection=nowhere,
            steps=StepsConfig(single_window=False),
            group_id="steps",
        )
    assert {t.split(".")[-1] for t in window.children} == {
        "check_broker",
        "plan",
        "stop_if_dry_run",
        "pause_window",
        "wait_groups_stable",
        "wait_groups_drained",
        "start_producers",
        "verify",
        "failure_guard",
    }
    assert len(per_step.children) == 14


def test_single_window_is_the_default_only_with_the_built_in_signals() -> None:
    from airflow.providers.standard.operators.empty import EmptyOperator
    from airflow.sdk import DAG

    from airflow_provider_kstate.task_groups.partition_increase import (
        StepsConfig,
        WaitConfig,
        safe_partition_increase,
    )

    with DAG("unit_layouts", schedule=None):
        custom = safe_partition_increase(
            topic="t",
            partitions=3,
            steps=StepsConfig(pause_consumers=EmptyOperator(task_id="scale_down")),
            group_id="custom",
        )
        assert "custom.pause_window" not in custom.children and "custom.seed_offsets" in custom.children
        with pytest.raises(ValueError, match="single_window=False"):
            safe_partition_increase(
                topic="t",
                partitions=3,
                waits=WaitConfig(wait_for_writes=True),
                steps=StepsConfig(single_window=True),
            )


def _shape(group: Any) -> dict[str, Any]:
    """Every task of ``group``: its class, its neighbours and every argument it stored (plain values)."""
    plain = (str, int, float, bool, type(None), list, tuple, dict, timedelta)

    def local(ids: set[str]) -> list[str]:
        return sorted(i.removeprefix(f"{group.group_id}.") for i in ids)

    def own(value: Any) -> Any:  # a task id of the group (the guard's plan_task_id) without the group's id
        return value.removeprefix(f"{group.group_id}.") if isinstance(value, str) else value

    return {
        task_id.split(".", 1)[1]: (
            type(task).__name__,
            local(task.upstream_task_ids),
            local(task.downstream_task_ids),
            {
                k: own(v)
                for k, v in vars(task).items()
                if k[0] != "_" and k != "task_id" and isinstance(v, plain)
            },
        )
        for task_id, task in group.children.items()
    }


def test_the_config_objects_reach_every_task_and_a_flat_argument_is_refused() -> None:
    """The config objects are the one way to give the options: each field reaches the tasks that use it; a
    field given as a flat keyword argument (a spelling of a 0.x release that was never published) is refused,
    named."""
    from airflow.providers.standard.operators.empty import EmptyOperator
    from airflow.sdk import DAG

    from airflow_provider_kstate.task_groups.partition_increase import (
        BrokerCheckConfig,
        ConnectionConfig,
        GroupsConfig,
        KeyOrderConfig,
        StepsConfig,
        WaitConfig,
        safe_partition_increase,
    )

    with DAG("unit_configs", schedule=None):
        resume = EmptyOperator(task_id="resume_by_hand")
        by_config = safe_partition_increase(
            topic="t",
            partitions=3,
            group_id="config",
            connection=ConnectionConfig("kafka_prod", "_ctl", "_leases", 99.0, "s3://bucket/kstate", "aws"),
            groups=GroupsConfig(["billing"], "audit", True, ["enricher"]),
            broker_check=BrokerCheckConfig(["read_committed"], True),
            waits=WaitConfig(False, 5.0, 60.0, 70.0, True, 80.0),
            ordering=KeyOrderConfig("relax", 30.0),
            steps=StepsConfig(False, 4, resume_consumers=resume),
        )
        default = safe_partition_increase(topic="t", partitions=3, group_id="default")
    shape = _shape(by_config)
    assert len(shape) == 14 and "wait_new_partitions_written" in shape
    assert shape["plan"][3]["kafka_config_id"] == "kafka_prod" and shape["verify"][3]["key_order"] == "relax"
    assert shape["wait_groups_stable"][3]["timeout"] == 70.0 and shape["plan"][3]["retries"] == 4
    assert (
        shape["plan"][3]["consumer_groups"] == ["billing"] and shape["plan"][3]["exclude_groups"] == "audit"
    )
    assert _shape(default)["plan"][3]["kafka_config_id"] == "kafka_default"
    for flat in (
        {"kafka_config_id": "kafka_prod"},
        {"kafka_conn_id": "kafka_prod"},
        {"require_approval": True},
    ):
        name = next(iter(flat))
        with DAG(f"unit_configs_{name}", schedule=None), pytest.raises(TypeError, match=repr(name)):
            safe_partition_increase(topic="t", partitions=3, **flat)


def test_the_approval_step_sits_between_the_gate_and_the_pause_only_when_asked_for() -> None:
    from airflow.sdk import DAG

    from airflow_provider_kstate.task_groups.partition_increase import (
        ApprovalConfig,
        StepsConfig,
        safe_partition_increase,
    )

    per_step_layout = StepsConfig(single_window=False)
    with DAG("unit_approval", schedule=None):
        off = safe_partition_increase(
            topic="t", partitions=3, group_id="off", approval=ApprovalConfig(require_approval=False)
        )
        window = safe_partition_increase(
            topic="t",
            partitions=3,
            group_id="window",
            approval=ApprovalConfig(require_approval="{{ params.require_approval }}"),
        )
        steps = safe_partition_increase(
            topic="t",
            partitions=3,
            group_id="steps",
            steps=per_step_layout,
            approval=ApprovalConfig(require_approval=True, approval_timeout=30),
        )
    assert "off.approve_plan" not in off.children and len(off.children) == 9, "off: no task, no cost"
    shape = _shape(window)
    assert len(shape) == 10
    kind, upstream, downstream, stored = shape["approve_plan"]
    assert (kind, upstream, downstream) == (
        "KStateApprovalOperator",
        ["plan", "stop_if_dry_run"],  # the plan's XCom, and after the dry-run gate
        ["pause_window"],
    )
    assert (
        stored["require_approval"] == "{{ params.require_approval }}" and stored["approval_timeout"] == 3600.0
    )
    assert stored["retries"] == 0 and stored["execution_timeout"] is None
    assert shape["failure_guard"][3]["approval_task_id"] == "approve_plan"
    assert shape["pause_window"][1] == ["approve_plan", "plan"]
    assert _shape(off)["failure_guard"][3]["approval_task_id"] is None
    per_step = _shape(steps)
    assert len(per_step) == 15 and per_step["approve_plan"][2] == ["pause_consumers"]
    assert per_step["approve_plan"][3]["approval_timeout"] == 30


def test_both_shipped_dags_ask_for_an_approval_when_the_param_says_so() -> None:
    from pathlib import Path

    from kstate_support.airflow_compat import dag_bag

    bag = dag_bag(str(Path(__file__).resolve().parents[3] / "dags"))
    assert not bag.import_errors, bag.import_errors
    for dag_id, then in (
        ("kstate_partition_increase", "pause_window"),
        ("kstate_partition_increase_per_step", "pause_consumers"),
    ):
        dag = bag.get_dag(dag_id)
        params = dag.params
        assert (
            params["require_approval"] is False
            and params.get_param("require_approval").schema["type"] == "boolean"
        )
        assert (
            params["approval_timeout"] == 3600 and params.get_param("approval_timeout").schema["minimum"] == 5
        )
        approve = dag.get_task("safe_partition_increase.approve_plan")
        assert approve.upstream_task_ids == {
            f"safe_partition_increase.{t}" for t in ("plan", "stop_if_dry_run")
        }
        assert approve.downstream_task_ids == {f"safe_partition_increase.{then}"}
        assert approve.require_approval == "{{ params.require_approval }}"


def test_several_topics_go_to_the_plan_in_either_layout_but_not_with_wait_for_writes() -> None:
    from airflow.sdk import DAG

    from airflow_provider_kstate.errors import KStateConfigError
    from airflow_provider_kstate.task_groups.partition_increase import (
        StepsConfig,
        WaitConfig,
        safe_partition_increase,
    )

    with DAG("unit_several", schedule=None):
        group = safe_partition_increase(topics=["orders", "payments"], partitions=8)
        plan = group.children["safe_partition_increase.plan"]
        assert (plan.topic, plan.topics) == ("", ["orders", "payments"])  # type: ignore[attr-defined]
        assert "topics" in plan.template_fields
        per_step = safe_partition_increase(
            topics=["orders", "payments"],
            partitions=8,
            steps=StepsConfig(single_window=False),
            group_id="s",
        )
        assert per_step.children["s.plan"].topics == ["orders", "payments"]  # type: ignore[attr-defined]
        assert {"s.pause_consumers", "s.seed_offsets", "s.resume_consumers"} <= set(per_step.children)
        with pytest.raises(KStateConfigError, match="wait_for_writes waits for the new partitions of one"):
            safe_partition_increase(
                topics=["orders", "payments"],
                partitions=8,
                steps=StepsConfig(single_window=False),
                waits=WaitConfig(wait_for_writes=True),
                group_id="w",
            )
        with pytest.raises(KStateConfigError, match="needs topic, or topics"):
            safe_partition_increase(partitions=8, group_id="none")


def test_the_per_step_empty_sensor_reads_the_pause_step_s_epoch_and_the_control_topic() -> None:
    """Its ghosts are told by the built-in pause step's acknowledgements (its XCom's ``epoch``, on the
    connection's control topic); after your own pause task it has no epoch and removes none."""
    from airflow.providers.standard.operators.empty import EmptyOperator
    from airflow.sdk import DAG

    from airflow_provider_kstate.task_groups.partition_increase import (
        ConnectionConfig,
        StepsConfig,
        safe_partition_increase,
    )

    with DAG("unit_ghosts", schedule=None):
        built_in = safe_partition_increase(
            topic="t",
            partitions=3,
            group_id="built_in",
            connection=ConnectionConfig(control_topic="_ctl"),
            steps=StepsConfig(single_window=False),
        )
        own = safe_partition_increase(
            topic="t",
            partitions=3,
            group_id="own",
            steps=StepsConfig(single_window=False, pause_consumers=EmptyOperator(task_id="scale_to_zero")),
        )
    sensor = built_in.children["built_in.wait_groups_empty"]
    assert sensor.pause.operator.task_id == "built_in.pause_consumers" and sensor.control_topic == "_ctl"
    assert own.children["own.wait_groups_empty"].pause is None
