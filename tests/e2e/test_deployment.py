"""The provider in a real Airflow deployment (``airflow standalone``), driven like an operator drives it.

No mocks: the session's broker, the project's ``dags/``, the REST API with a JWT, runs triggered with the
exact body the UI's trigger form posts. Checks: the provider is registered (CLI and API), both example DAGs
run to success from a trigger with conf, the partition increase really grew the topic and seeded the new
partitions for the group, its deferrable sensor went to the triggerer and came back, invalid conf is refused
at trigger time (400, no run created), and the task logs read as a runbook.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kstate_support.kafka import committed, log_starts

from tests.e2e.deployment import AirflowDeployment

pytestmark = [pytest.mark.deployment, pytest.mark.timeout(420)]

INCREASE = "kstate_partition_increase"
MAINTENANCE = "kstate_state_maintenance"
GROUP = "safe_partition_increase"  # the task group's id in the example DAG
SENSOR = f"{GROUP}.wait_groups_stable"  # deferrable: defers to the triggerer
ORIGINAL, TARGET = 2, 5
RUN_TIMEOUT = 240.0
SPARK_RUN_TIMEOUT = 600.0  # two spark-submit jobs (rebuild, deep re-check); ~1 min on an idle 2-CPU box


# -- Kafka helpers ---------------------------------------------------------------------------------------


def create_topic(
    admin: AdminClient, name: str, partitions: int, config: dict[str, str] | None = None
) -> None:
    for future in admin.create_topics([NewTopic(name, partitions, 1, config=config or {})]).values():
        future.result(timeout=30)
    deadline = time.monotonic() + 30
    while len(admin.list_topics(name, timeout=10).topics[name].partitions) != partitions:
        assert time.monotonic() < deadline, f"topic {name} not visible with {partitions} partitions"
        time.sleep(0.2)


def delete_topics(admin: AdminClient, names: list[str]) -> None:
    for future in admin.delete_topics(names).values():
        try:
            future.result(timeout=30)
        except Exception:  # noqa: BLE001 - best-effort clean-up
            pass


def produce(kafka_config: dict[str, Any], topic: str, records: list[tuple[int | None, bytes, bytes]]) -> None:
    producer = Producer(kafka_config)
    for partition, key, value in records:
        if partition is None:
            producer.produce(topic, key=key, value=value)
        else:
            producer.produce(topic, key=key, value=value, partition=partition)
    assert producer.flush(30) == 0


def commit_offsets(kafka_config: dict[str, Any], group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit offsets for a group and leave it: the group is EMPTY, with committed offsets on the topic."""
    consumer = Consumer({**kafka_config, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(
            offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False
        )
    finally:
        consumer.close()


def _ok(dep: AirflowDeployment, dag_id: str, run_id: str, run: dict[str, Any]) -> None:
    assert run["state"] == "success", dep.failure_report(dag_id, run_id)


# -- the partition increase, triggered once for the module ---------------------------------------------


@pytest.fixture(scope="module")
def increase(
    deployment: AirflowDeployment, admin: AdminClient, kafka_config: dict[str, Any]
) -> Iterator[dict[str, Any]]:
    """Trigger the partition increase on a real topic with an EMPTY group, as the UI does; wait for it."""
    tag = uuid.uuid4().hex[:8]
    topic, group = f"kstate-e2e-{tag}", f"kstate-e2e-{tag}-svc"
    create_topic(admin, topic, ORIGINAL)
    produce(kafka_config, topic, [(p, f"k{i}".encode(), b"v") for p in range(ORIGINAL) for i in range(5)])
    commit_offsets(kafka_config, group, {(topic, 0): 5, (topic, 1): 3})
    try:
        conf = {"topic": topic, "partitions": TARGET, "consumer_groups": [], "dry_run": False}
        r = deployment.trigger(INCREASE, conf)
        assert r.status_code == 200, r.text
        trigger_response = r.json()
        run_id = trigger_response["dag_run_id"]
        run, history = deployment.watch_run(INCREASE, run_id, timeout=RUN_TIMEOUT)
        yield {
            "topic": topic,
            "group": group,
            "conf": conf,
            "run_id": run_id,
            "trigger_response": trigger_response,
            "run": run,
            "history": history,
        }
    finally:
        delete_topics(admin, [topic])


# -- (a) the provider is registered ----------------------------------------------------------------------


def test_provider_is_registered_in_cli_and_api(deployment: AirflowDeployment) -> None:
    listed = deployment.cli("providers", "list", "-o", "json")
    assert listed.returncode == 0, listed.stderr
    cli_providers = {p["package_name"]: p for p in json.loads(listed.stdout[listed.stdout.index("[") :])}
    assert "airflow-provider-kstate" in cli_providers, sorted(cli_providers)

    api_providers = {
        p["package_name"]: p for p in deployment.get_json("/api/v2/providers", limit=100)["providers"]
    }
    assert "airflow-provider-kstate" in api_providers, sorted(api_providers)
    assert (
        api_providers["airflow-provider-kstate"]["version"]
        == cli_providers["airflow-provider-kstate"]["version"]
    )

    full = deployment.cli("providers", "get", "airflow-provider-kstate", "--full", "-o", "json")
    assert full.returncode == 0, full.stderr
    info = json.loads(full.stdout[full.stdout.index("[") :])[0]
    hook_modules = {m for h in info["hooks"] for m in h["python-modules"]}
    assert "airflow_provider_kstate.hooks.admin" in hook_modules, info["hooks"]

    # The connection form keeps the Kafka provider's `kafka` type, which the provider's hooks reuse.
    meta = {h["connection_type"]: h for h in deployment.get_json("/ui/connections/hook_meta")}
    assert meta["kafka"]["hook_class_name"] == "airflow.providers.apache.kafka.hooks.base.KafkaBaseHook", (
        meta.get("kafka")
    )

    # Its sensors, operators and triggers load in the deployment: no import error, and both DAGs parsed.
    assert deployment.import_errors() == []
    for dag_id in (INCREASE, MAINTENANCE):
        dag = deployment.get_json(f"/api/v2/dags/{dag_id}")
        assert dag["is_paused"] is False and dag["has_import_errors"] is False, dag


# -- (b) both example DAGs run from a UI-style trigger with conf ----------------------------------------


def test_partition_increase_grows_topic_and_seeds_offsets(
    deployment: AirflowDeployment, increase: dict[str, Any], admin: AdminClient
) -> None:
    _ok(deployment, INCREASE, increase["run_id"], increase["run"])
    assert increase["trigger_response"]["logical_date"] is None
    assert increase["run"]["conf"] == increase["conf"]
    assert increase["run"]["run_type"] == "manual"
    assert increase["run"]["triggered_by"] == "ui"  # the Referer the UI sends

    topic, group = increase["topic"], increase["group"]
    assert sorted(admin.list_topics(topic, timeout=10).topics[topic].partitions) == list(range(TARGET))
    new = list(range(ORIGINAL, TARGET))
    offsets = committed(admin, group, topic)
    starts = log_starts(admin, topic, new)
    assert {p: offsets.get(p) for p in new} == starts, f"new partitions not seeded to log start: {offsets}"
    assert offsets[0] == 5 and offsets[1] == 3, f"existing offsets changed: {offsets}"

    states = {t["task_id"]: t["state"] for t in deployment.task_instances(INCREASE, increase["run_id"])}
    for step in ("plan", "pause_window", "wait_groups_stable", "verify"):
        assert states[f"{GROUP}.{step}"] == "success", states


@pytest.mark.spark
@pytest.mark.timeout(SPARK_RUN_TIMEOUT + 120)
def test_state_maintenance_builds_first_snapshot(
    deployment: AirflowDeployment, admin: AdminClient, kafka_config: dict[str, Any], tmp_path: Path
) -> None:
    """A missing snapshot is a failed check: ``rebuild=auto`` builds it with Spark and the re-checks pass."""
    topic = f"kstate-e2e-log-{uuid.uuid4().hex[:8]}"
    create_topic(admin, topic, 2, {"cleanup.policy": "compact"})
    try:
        produce(kafka_config, topic, [(None, f"acct-{i % 7}".encode(), str(i).encode()) for i in range(40)])
        snapshot = tmp_path / "snapshot"
        conf = {"changelog_topic": topic, "snapshot_uri": str(snapshot), "deep": False, "rebuild": "auto"}
        r = deployment.trigger(MAINTENANCE, conf)
        assert r.status_code == 200, r.text
        run_id = r.json()["dag_run_id"]
        run = deployment.wait_for_run(MAINTENANCE, run_id, timeout=SPARK_RUN_TIMEOUT)
        _ok(deployment, MAINTENANCE, run_id, run)
        states = {t["task_id"]: t["state"] for t in deployment.task_instances(MAINTENANCE, run_id)}
        assert states["rebuild"] == "success" and states["recheck_fast"] == "success", states
        assert states["recheck_deep"] == "success", states
        assert any(snapshot.rglob("*.parquet")), f"no snapshot written under {snapshot}"
    finally:
        delete_topics(admin, [topic])


# -- (c) the deferrable sensor went to the triggerer and came back --------------------------------------


def test_deferrable_sensor_deferred_to_triggerer_and_resumed(
    deployment: AirflowDeployment, increase: dict[str, Any]
) -> None:
    run_id = increase["run_id"]
    _ok(deployment, INCREASE, run_id, increase["run"])

    # The audit log records every state the task instance reported: running -> deferred -> running -> success.
    events = [e["event"] for e in deployment.event_log(INCREASE, run_id, SENSOR)]
    assert "deferred" in events, events
    i = events.index("deferred")
    assert "running" in events[:i] and "running" in events[i + 1 :], f"not resumed after deferral: {events}"
    assert events[-1] == "success", events

    # Resumed, not retried: one try, finished successfully.
    tries = deployment.ti_tries(INCREASE, run_id, SENSOR)
    assert [(t["try_number"], t["state"]) for t in tries] == [(1, "success")], tries

    # The task log shows both halves: the worker deferring, then the resumption with the trigger's event.
    log = deployment.task_log(INCREASE, run_id, SENSOR)
    assert "deferring to the triggerer" in log, log[-3000:]
    assert "resumed from the triggerer with status success" in log, log[-3000:]

    # If the poller caught it while deferred, the API named the trigger and the triggerer job holding it.
    deferred = [o for o in increase["history"].get(SENSOR, []) if o["state"] == "deferred"]
    for obs in deferred:
        if obs["trigger"]:
            assert obs["trigger"]["classpath"].startswith("airflow_provider_kstate.triggers."), obs


# -- (d) invalid conf is refused at trigger time ----------------------------------------------------------


@pytest.mark.parametrize(
    ("dag_id", "conf", "param"),
    [
        (INCREASE, {"topic": "kstate-e2e-x", "partitions": "five"}, "partitions"),
        (INCREASE, {"topic": "kstate-e2e-x", "partitions": 2.5}, "partitions"),
        (INCREASE, {"topic": "kstate-e2e-x", "partitions": 0}, "partitions"),
        (INCREASE, {"topic": "kstate-e2e-x", "partitions": 3, "consumer_groups": "svc"}, "consumer_groups"),
        (MAINTENANCE, {"changelog_topic": "kstate-e2e-x", "rebuild": "sometimes"}, "rebuild"),
        (MAINTENANCE, {"changelog_topic": "kstate-e2e-x", "partitions": "4"}, "partitions"),
    ],
)
def test_invalid_conf_is_refused_at_trigger_time(
    deployment: AirflowDeployment, dag_id: str, conf: dict[str, Any], param: str
) -> None:
    before = deployment.get_json(f"/api/v2/dags/{dag_id}/dagRuns", limit=1)["total_entries"]
    r = deployment.trigger(dag_id, conf)
    assert 400 <= r.status_code < 500, (r.status_code, r.text)
    assert param in r.json()["detail"], r.text
    after = deployment.get_json(f"/api/v2/dags/{dag_id}/dagRuns", limit=1)["total_entries"]
    assert after == before, "a run was created for an invalid conf"


# -- (e) task logs read as a runbook ---------------------------------------------------------------------


def test_task_logs_read_as_a_runbook(deployment: AirflowDeployment, increase: dict[str, Any]) -> None:
    run_id, topic, group = increase["run_id"], increase["topic"], increase["group"]
    _ok(deployment, INCREASE, run_id, increase["run"])

    plan = deployment.task_log(INCREASE, run_id, f"{GROUP}.plan")
    new_range = f"{ORIGINAL}-{TARGET - 1} ({TARGET - ORIGINAL})"
    assert f"PLAN topic {topic}: {ORIGINAL} -> {TARGET} partitions, new partitions {new_range}" in plan, plan[
        -3000:
    ]
    assert f"group {group}: empty" in plan, plan[-3000:]

    window = deployment.task_log(INCREASE, run_id, f"{GROUP}.pause_window")  # pause .. resume
    assert f"INCREASE topic {topic}: the broker validated {ORIGINAL} -> {TARGET}" in window, window[-3000:]
    assert f"INCREASE topic {topic}: created partitions {new_range}" in window, window[-3000:]
    # One line per group, with partition ranges (not one line per partition).
    [seed] = [line for line in window.splitlines() if f"SEED group {group}: partitions" in line]
    assert (
        f"{TARGET - 1} (" in seed and "seeded to log start;" in seed and "kept an existing offset" in seed
    ), seed

    verify = deployment.task_log(INCREASE, run_id, f"{GROUP}.verify")
    assert f"VERIFY group {group}: {TARGET} partitions, every one holds an offset" in verify, verify[-3000:]
