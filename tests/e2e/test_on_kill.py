"""``on_kill`` of the Spark operators in a real deployment: a killed maintenance task leaves no Spark behind.

Its own ``airflow standalone`` (the session's deployment keeps its PySpark Python): ``PYSPARK_PYTHON`` is
a wrapper that runs the PySpark driver as usual but holds each Python worker (``pyspark.daemon``) asleep,
so the rebuild's Spark job stays in its first stage for as long as the test needs. The test waits until
the task's ``spark-submit`` JVM, its PySpark driver (``rebuild.py``) and a held worker are all running,
kills the task, and then requires every one of those processes to be gone within :data:`BOUND` seconds;
it prints the time that took. Two kills: "mark failed" through the REST API, as an operator would (Airflow
then signals the task's whole process group), and the task's execution timeout (Airflow calls
``on_kill`` in the task's process and signals nothing else).

Without the operator's own ``on_kill`` the Spark provider SIGKILLs the JVM alone, and its children (the
PySpark driver and the workers) are orphaned: with only the provider's ``on_kill``, the timeout test failed
with the held Python worker still running 30 s after the task failed. Slow (its own deployment, 2 tests
~175 s): ``chaos`` marker.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from tests.e2e.deployment import AirflowDeployment, airflow_deployment
from tests.e2e.test_deployment import MAINTENANCE, create_topic, delete_topics, produce

pytestmark = [pytest.mark.deployment, pytest.mark.spark, pytest.mark.chaos, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
BOUND = 30.0  # seconds from "mark failed" (or the timeout) to no Spark process of the task
TIMEOUT = 75  # the deployment's default task execution timeout, seconds
WRAPPER = """#!/bin/bash
case "$*" in
  *pyspark.daemon*|*pyspark.worker*) exec {py} -c 'import time; time.sleep(600)' pyspark-held-worker ;;
esac
exec {py} "$@"
"""


@pytest.fixture(scope="module")
def held_deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AirflowDeployment]:
    wrapper = tmp_path_factory.mktemp("pyspark") / "python-held-workers"
    wrapper.write_text(WRAPPER.format(py=sys.executable))
    wrapper.chmod(0o755)
    env = {
        "AIRFLOW_CONN_KAFKA_DEFAULT": os.environ["AIRFLOW_CONN_KAFKA_DEFAULT"],
        "AIRFLOW_CONN_SPARK_DEFAULT": os.environ["AIRFLOW_CONN_SPARK_DEFAULT"],
        "KSTATE_MAINTENANCE_SCHEDULE": "",
        "PYSPARK_PYTHON": str(wrapper),
        # Tasks without their own execution_timeout get this one: the second test's rebuild runs into it.
        "AIRFLOW__CORE__DEFAULT_TASK_EXECUTION_TIMEOUT": str(TIMEOUT),
    }
    with airflow_deployment(ROOT / "dags", env=env) as dep:
        dep.wait_for_dags([MAINTENANCE], timeout=120)
        dep.unpause(MAINTENANCE)
        yield dep


def wait_for(what: str, check: Any, timeout: float, dep: AirflowDeployment) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := check():
            return found
        time.sleep(0.5)
    raise AssertionError(f"{what} within {timeout}s: {dep.spark_processes()}\n{dep.log_tail()}")


def roles(procs: list[tuple[int, str]]) -> set[str]:
    out = set()
    for _, cmd in procs:
        if "org.apache.spark.deploy.SparkSubmit" in cmd and "java" in cmd.split()[0]:
            out.add("jvm")
        elif "spark_apps/rebuild.py" in cmd and "SparkSubmit" not in cmd:
            out.add("driver")
        elif "pyspark-held-worker" in cmd:
            out.add("worker")
    return out


def start_rebuild(
    dep: AirflowDeployment, admin: AdminClient, kafka_config: dict[str, Any], tmp: Path
) -> tuple[str, str, list[tuple[int, str]]]:
    """Trigger a forced rebuild; wait until its JVM, driver and a held worker run; return topic, run, procs."""
    topic = f"kstate-e2e-kill-{uuid.uuid4().hex[:8]}"
    create_topic(admin, topic, 2, {"cleanup.policy": "compact"})
    produce(kafka_config, topic, [(None, f"k{i % 5}".encode(), str(i).encode()) for i in range(20)])
    conf = {"changelog_topic": topic, "snapshot_uri": str(tmp / "snap"), "rebuild": "force"}
    r = dep.trigger(MAINTENANCE, conf)
    assert r.status_code == 200, r.text
    run_id = r.json()["dag_run_id"]
    # The scenario: spark-submit's JVM, the PySpark driver and a (held) Python worker all run.
    wait_for(
        "the rebuild's JVM, driver and a worker running",
        lambda: roles(dep.spark_processes()) >= {"jvm", "driver", "worker"},
        240,
        dep,
    )
    return topic, run_id, dep.spark_processes()


def assert_all_gone(dep: AirflowDeployment, run_id: str, before: list[tuple[int, str]], how: str) -> None:
    t0 = time.monotonic()
    deadline = t0 + BOUND
    while (left := dep.spark_processes()) and time.monotonic() < deadline:
        time.sleep(0.2)
    took = time.monotonic() - t0
    assert not left, f"left {took:.1f}s after {how}: {left}\nbefore the kill: {before}"
    print(f"\n{how}: {len(before)} Spark processes of the task gone {took:.1f}s after the kill")


def test_rebuild_marked_failed_leaves_no_spark_submit_and_no_spark_jvm(
    held_deployment: AirflowDeployment, admin: AdminClient, kafka_config: dict[str, Any], tmp_path: Path
) -> None:
    dep = held_deployment
    topic, run_id, before = start_rebuild(dep, admin, kafka_config, tmp_path)
    try:
        r = dep.api.patch(
            f"/api/v2/dags/{MAINTENANCE}/dagRuns/{run_id}/taskInstances/rebuild", json={"new_state": "failed"}
        )
        assert r.status_code == 200, r.text
        assert_all_gone(dep, run_id, before, "mark failed")
        ti = dep.get_json(f"/api/v2/dags/{MAINTENANCE}/dagRuns/{run_id}/taskInstances/rebuild")
        assert ti["state"] == "failed", ti
    finally:
        delete_topics(admin, [topic])


def test_rebuild_timed_out_leaves_no_spark_submit_and_no_spark_jvm(
    held_deployment: AirflowDeployment, admin: AdminClient, kafka_config: dict[str, Any], tmp_path: Path
) -> None:
    dep = held_deployment
    topic, run_id, before = start_rebuild(dep, admin, kafka_config, tmp_path)
    try:
        path = f"/api/v2/dags/{MAINTENANCE}/dagRuns/{run_id}/taskInstances/rebuild"
        wait_for("the rebuild's timeout", lambda: dep.get_json(path)["state"] == "failed", TIMEOUT + 120, dep)
        assert_all_gone(dep, run_id, before, f"execution timeout ({TIMEOUT}s)")
        log = dep.task_log(MAINTENANCE, run_id, "rebuild")
        assert "AirflowTaskTimeout" in log, log[-3000:]
        assert "KILL spark-submit's processes" in log, log[-3000:]  # on_kill ran, in the task's process
    finally:
        delete_topics(admin, [topic])
