"""Bad input and faults: each gives a clear error and changes nothing; never resume after a partial seed."""

from __future__ import annotations

import json
import os
import time
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import NewPartitions
from kstate_support.fakes import plan_request
from kstate_support.kafka import partition_count, task_states

from airflow_provider_kstate.client_piece.channel import ControlChannel
from airflow_provider_kstate.client_piece.protocol import PAUSE, RESUME, Ack, command_key
from airflow_provider_kstate.compat import AirflowFailException
from airflow_provider_kstate.errors import BrokerUnavailableError, GroupNotEmptyError, UnsafeResumeError
from airflow_provider_kstate.hooks.admin import KStateAdminHook
from airflow_provider_kstate.hooks.lease import KStateLeaseHook
from airflow_provider_kstate.increase.plan import build_plan
from airflow_provider_kstate.increase.report import read_report
from airflow_provider_kstate.operators.consumers import KStateResumeConsumersOperator
from airflow_provider_kstate.operators.guard import KStateFailureGuardOperator
from airflow_provider_kstate.operators.seed import KStateSeedOffsetsOperator

pytestmark = pytest.mark.integration

DAG_ID = "kstate_partition_increase"
PER_STEP = "kstate_partition_increase_per_step"  # one task per step
G = "safe_partition_increase"


def _group_with_offsets(
    config: dict[str, Any], topic: str, group: str, live: bool = False
) -> Consumer | None:
    """Write one message, commit it as ``group``; with ``live`` keep the consumer in the group (returned)."""
    producer = Producer(config)
    producer.produce(topic, value=b"x")
    producer.flush(30)
    consumer = Consumer(
        {
            **config,
            "group.id": group,
            "client.id": f"{group}-0",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            break
    consumer.commit(asynchronous=False)
    if live:
        return consumer
    consumer.close()
    return None


def _claims_the_client_piece(config: dict[str, Any], group: str) -> None:
    """Acknowledge on the control topic as ``_group_with_offsets``'s member would if it ran the client piece
    (its presence): the plan then drives the group by the control protocol, which this member ignores."""
    channel = ControlChannel(config)
    channel.ensure()
    channel.publish(Ack(client=f"{group}-0", epoch=0, state="running", group=group))
    channel.close()


def _latest_command(config: dict[str, Any], group: str) -> str | None:
    record = ControlChannel(config).snapshot(command_key(group)).get(command_key(group))
    return getattr(record, "command", None)


def _context(dag_id: str, run_id: str) -> dict[str, Any]:
    """The run identity an operator reads from its context (for steps run outside a DAG)."""
    return {"ti": SimpleNamespace(dag_id=dag_id, run_id=run_id)}


def test_target_below_current_is_refused(admin: Any, make_topic: Any, run_dag: Any) -> None:
    topic = make_topic("shrink", partitions=2)
    dr = run_dag(DAG_ID, {"topic": topic, "partitions": 1, "consumer_groups": [], "dry_run": False})
    assert dr.state == "failed"
    assert task_states(dr)["plan"] == "failed" and task_states(dr)["pause_window"] == "upstream_failed"
    assert partition_count(admin, topic) == 2
    assert KStateLeaseHook().current(topic) is None


def test_target_equal_to_current_is_a_repair_with_nothing_to_do(
    admin: Any, make_topic: Any, run_dag: Any, capfd: Any
) -> None:
    """A run whose target is the current count is not refused: it seeds every gap, here none."""
    topic = make_topic("same", partitions=2)
    dr = run_dag(DAG_ID, {"topic": topic, "partitions": 2, "consumer_groups": [], "dry_run": False})
    out, err = capfd.readouterr()
    assert dr.state == "success", task_states(dr)
    assert "repair (seed every gap, create nothing)" in out + err
    assert "nothing to do" in out + err
    assert partition_count(admin, topic) == 2
    assert KStateLeaseHook().current(topic) is None


def test_unknown_and_internal_topics(admin: Any, run_dag: Any, unique: Any) -> None:
    for topic in (unique("missing"), "__consumer_offsets"):
        dr = run_dag(DAG_ID, {"topic": topic, "partitions": 99, "consumer_groups": [], "dry_run": False})
        assert dr.state == "failed" and task_states(dr)["plan"] == "failed", topic
    assert unique("missing") not in admin.list_topics(timeout=10).topics
    assert partition_count(admin, "__consumer_offsets") < 99


def test_broker_unreachable(admin: Any, make_topic: Any, run_dag: Any, monkeypatch: Any) -> None:
    topic = make_topic("unreachable", partitions=1)
    monkeypatch.setenv(
        "AIRFLOW_CONN_KAFKA_UNREACHABLE",
        json.dumps(
            {"conn_type": "kafka", "extra": {"bootstrap.servers": "127.0.0.1:1", "socket.timeout.ms": 2000}}
        ),
    )
    started = time.monotonic()
    dr = run_dag(
        DAG_ID,
        {"topic": topic, "partitions": 2, "consumer_groups": [], "dry_run": False},
        overrides={
            f"{G}.plan": {"kafka_config_id": "kafka_unreachable", "request_timeout": 3.0, "retries": 0}
        },
    )
    assert dr.state == "failed" and task_states(dr)["plan"] == "failed"
    # timeout contract: the plan gives up after its request_timeout (3 s), not retried (retries 0); the run,
    # dag.test() included, well inside 60 s on a loaded machine
    assert time.monotonic() - started < 60
    assert partition_count(admin, topic) == 1
    with pytest.raises(BrokerUnavailableError, match="unreachable"):
        build_plan(KStateAdminHook("kafka_unreachable", request_timeout=2.0), topic, plan_request(topic, 2))


@pytest.mark.parametrize(
    ("dag_id", "waiter", "override"),
    [
        (DAG_ID, "pause_window", {"empty_timeout": 4.0, "retries": 0}),
        (PER_STEP, "wait_groups_empty", {"timeout": 4.0, "poke_interval": 1.0, "retries": 0}),
    ],
)
def test_live_group_never_empties(
    kafka_config: dict[str, Any],
    admin: Any,
    make_topic: Any,
    run_dag: Any,
    dag_id: str,
    waiter: str,
    override: dict[str, Any],
) -> None:
    """A consumer that ignores the pause keeps its group non-EMPTY: the wait fails, nothing changes.

    It claims the client piece (it acknowledged its presence once) but does not honour the pause, so the
    plan drives it by the control protocol (a member that never acknowledged would be refused at plan
    time: ``test_fleet_drivers.py``)."""
    topic = make_topic("stubborn", partitions=1)
    group = f"{topic}-g"
    consumer = _group_with_offsets(kafka_config, topic, group, live=True)
    assert consumer is not None
    _claims_the_client_piece(kafka_config, group)
    try:
        dr = run_dag(
            dag_id,
            {"topic": topic, "partitions": 2, "consumer_groups": [group], "dry_run": False},
            overrides={f"{G}.{waiter}": override},
        )
    finally:
        consumer.close()
    states = task_states(dr)
    assert dr.state == "failed" and states[waiter] == "failed" and states["failure_guard"] == "failed"
    assert partition_count(admin, topic) == 1
    assert _latest_command(kafka_config, group) == RESUME, (
        "the guard should resume consumers before the create step"
    )
    assert KStateLeaseHook().current(topic) is None, (
        "the guard should release the lease before the create step"
    )


def test_seed_refuses_group_that_is_not_empty(
    kafka_config: dict[str, Any], admin: Any, make_topic: Any
) -> None:
    """At seed time a group with a live member makes the seed step fail without writing anything."""
    topic = make_topic("seedlive", partitions=1)
    group = f"{topic}-g"
    consumer = _group_with_offsets(kafka_config, topic, group, live=True)
    assert consumer is not None
    try:
        plan = build_plan(KStateAdminHook(), topic, plan_request(topic, 3, [group]))
        assert plan.groups[group].cls == "active"
        for future in admin.create_partitions([NewPartitions(topic, 3)]).values():
            future.result(timeout=30)
        seed = KStateSeedOffsetsOperator(task_id="seed", plan=plan)
        with pytest.raises(GroupNotEmptyError, match="not EMPTY"):
            seed.execute(_context("faults", "seed-live"))
        committed = KStateAdminHook().committed_offsets(group, topic)
    finally:
        consumer.close()
    assert set(committed) <= {0}, f"seed wrote offsets for new partitions: {committed}"


def test_never_resume_after_partial_seed(
    kafka_config: dict[str, Any], admin: Any, make_topic: Any, run_dag: Any, monkeypatch: Any
) -> None:
    """The cluster becomes unreachable from the seed step after partitions were created: consumers stay paused.

    (The per-step layout makes the seed a task of its own, whose connection alone can be broken.)
    """
    topic = make_topic("partial", partitions=1)
    group = f"{topic}-g"
    _group_with_offsets(kafka_config, topic, group)
    monkeypatch.setenv(
        "AIRFLOW_CONN_KAFKA_UNREACHABLE",
        json.dumps(
            {"conn_type": "kafka", "extra": {"bootstrap.servers": "127.0.0.1:1", "socket.timeout.ms": 2000}}
        ),
    )
    dr = run_dag(
        PER_STEP,
        {"topic": topic, "partitions": 3, "consumer_groups": [group], "dry_run": False},
        overrides={
            f"{G}.seed_offsets": {
                "kafka_config_id": "kafka_unreachable",
                "request_timeout": 3.0,
                "retries": 0,
            }
        },
    )
    states = task_states(dr)
    assert dr.state == "failed"
    assert states["increase_partitions"] == "success" and states["seed_offsets"] == "failed"
    assert states["resume_consumers"] == "upstream_failed" and states["failure_guard"] == "failed"
    assert partition_count(admin, topic) == 3
    assert _latest_command(kafka_config, group) == PAUSE, "consumers were resumed after a partial seed"
    lease = KStateLeaseHook().current(topic)
    assert lease is not None and lease.owner == f"{PER_STEP}/{dr.run_id}", (
        "the lease must stay with the failed run"
    )

    plan = dr.get_task_instance(f"{G}.plan").xcom_pull(task_ids=f"{G}.plan")
    context = _context(PER_STEP, dr.run_id)
    with pytest.raises(AirflowFailException, match="UNSAFE TO RESUME") as failed:
        KStateResumeConsumersOperator(task_id="resume", plan=plan).execute(context)
    assert isinstance(failed.value.__cause__, UnsafeResumeError)
    with pytest.raises(AirflowFailException) as failed:
        guard = KStateFailureGuardOperator(task_id="guard", plan_task_id="plan")
        guard.plan = plan
        guard.execute(
            {"ti": SimpleNamespace(dag_id=PER_STEP, run_id=dr.run_id, xcom_pull=lambda task_ids: plan)}
        )
    assert isinstance(failed.value.__cause__, UnsafeResumeError)
    assert _latest_command(kafka_config, group) == PAUSE

    # The runbook's recovery: rerun the steps from seed on; they continue from where the cluster stands.
    report = KStateSeedOffsetsOperator(task_id="seed", plan=plan).execute(context)
    seeded = report["topics"][topic]["groups"][group]
    assert seeded["seeded"] == 2 and seeded["seeded_partitions"] == "1-2"
    rows = {
        r["partition"]: r for r in read_report(report["topics"][topic]["report_uri"]) if r["group"] == group
    }
    assert {p: (r["committed"], r["seeded"]) for p, r in rows.items() if p >= 1} == {
        1: (0, True),
        2: (0, True),
    }
    KStateResumeConsumersOperator(task_id="resume", plan=plan).execute(context)
    assert _latest_command(kafka_config, group) == RESUME
    KStateLeaseHook().release(topic, f"{PER_STEP}/{dr.run_id}")
    assert os.environ.get("AIRFLOW_CONN_KAFKA_UNREACHABLE")


def test_sasl_password_never_logged(make_topic: Any, run_dag: Any, monkeypatch: Any, capfd: Any) -> None:
    """A failing run over a SASL connection logs the failure but never the password from the extras."""
    topic = make_topic("secret", partitions=1)
    secret = "hunter2-kstate-secret-4711"
    monkeypatch.setenv(
        "AIRFLOW_CONN_KAFKA_SASL",
        json.dumps(
            {
                "conn_type": "kafka",
                "extra": {
                    "bootstrap.servers": "127.0.0.1:1",
                    "security.protocol": "SASL_PLAINTEXT",
                    "sasl.mechanism": "PLAIN",
                    "sasl.username": "airflow",
                    "sasl.password": secret,
                    "socket.timeout.ms": 2000,
                },
            }
        ),
    )
    dr = run_dag(
        DAG_ID,
        {"topic": topic, "partitions": 2, "consumer_groups": [], "dry_run": False},
        overrides={f"{G}.plan": {"kafka_config_id": "kafka_sasl", "request_timeout": 3.0, "retries": 0}},
    )
    out, err = capfd.readouterr()
    assert dr.state == "failed" and "unreachable" in out + err
    assert secret not in out + err
