"""The production-shaped deployment end to end (issue 18): PostgreSQL, Redis, CeleryExecutor, two workers.

``kstate_support.prod_deploy.ProdStack`` runs a private PostgreSQL cluster (the metadata database and the
Celery result backend), Redis (the Celery broker), and Airflow's api-server, scheduler, dag-processor,
triggerer and two Celery workers (``kstate-worker-1`` / ``-2``: each reports its name as the task
instances' ``hostname``), against the session's broker. Everything is driven through the REST API.

* a safe increase (``kstate_partition_increase_per_step``, one task per step) under live traffic (an
  uncontrolled keyed producer, a live group of ControlledConsumers in their own process, an offline
  group): 0 lost, never a member while an offset was missing, the run's tasks ran on both workers, and
  the deferrable sensors were deferred to the triggerer and resumed;
* a maintenance run that builds the missing snapshot with ``spark-submit`` on a worker;
* a worker SIGKILLed (its whole process group: pool, task supervisor and task) while it runs
  ``seed_offsets``, inside the danger window (partitions created, the groups not yet seeded, consumers
  out of their groups): nothing in the test touches the task afterwards. The scheduler's own detection
  of task instances without a heartbeat fails the try (its heartbeat timeout is shortened to 30 s by
  configuration), the task's retry runs on the surviving worker, and the increase finishes with 0 lost.

Marked ``prod`` (``make e2e-prod``); deselected in ``make test``.
"""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka.admin import AdminClient
from kstate_support.prod_deploy import WORKERS, ProdStack, ensure_venv
from kstate_support.traffic import SeqProducer, wait_until

from tests.e2e.deployment import AirflowDeployment
from tests.e2e.test_crash import ORIGINAL, TARGET, ConsumerService, SafetyWatcher
from tests.e2e.test_deployment import commit_offsets, create_topic, delete_topics, produce

pytestmark = [pytest.mark.deployment, pytest.mark.prod, pytest.mark.timeout(900)]

PER_STEP = "kstate_partition_increase_per_step"
MAINTENANCE = "kstate_state_maintenance"
GROUP = "safe_partition_increase"
SENSORS = (f"{GROUP}.wait_groups_empty", f"{GROUP}.wait_groups_stable")
SEED = f"{GROUP}.seed_offsets"
RUN_TIMEOUT = 420.0
#: Airflow's own settings, shortened: a task instance without a heartbeat for 30 s (default 300) is failed
#: by the scheduler, which looks every 5 s (default 10).
HEARTBEAT_ENV = {
    "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "30",
    "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "5",
}


class ProdAirflow(AirflowDeployment):
    """The REST helpers of :class:`AirflowDeployment` bound to a running :class:`ProdStack`."""

    def __init__(self, stack: ProdStack) -> None:
        super().__init__(stack.dags_folder, home=stack.home, keep_home=True)
        self.stack = stack
        self.port, self.base_url = stack.api_port, stack.base_url
        self.username, self.password, self.env = stack.username, stack.password, stack.env
        self._api = self._client()

    def stop(self) -> None:
        if self._api is not None:
            self._api.close()
            self._api = None


@pytest.fixture(scope="module")
def prod(kafka_config: dict[str, Any], artifacts_dir: Path) -> Iterator[ProdAirflow]:
    ensure_venv()
    stack = ProdStack(kafka_config, env=HEARTBEAT_ENV, keep=True)
    stack.start()
    print(
        f"\nPROD stack up in {stack.started_in:.0f} s: {', '.join(f'{n} {p.pid}' for n, p in stack.procs.items())}"
    )
    dep = ProdAirflow(stack)
    try:
        dep.wait_for_dags((PER_STEP, MAINTENANCE), timeout=180)
        for dag_id in (PER_STEP, MAINTENANCE):
            dep.unpause(dag_id)
        yield dep
    finally:
        dep.stop()
        shutil.rmtree(artifacts_dir / "prod-deploy", ignore_errors=True)
        shutil.copytree(stack.logs, artifacts_dir / "prod-deploy", dirs_exist_ok=True)
        t0 = time.monotonic()
        stack.keep = False
        stack.stop()
        print(f"PROD stack stopped in {time.monotonic() - t0:.1f} s, nothing left running")


@pytest.fixture
def traffic(
    prod: ProdAirflow, admin: AdminClient, kafka_config: dict[str, Any], bootstrap: str, tmp_path: Path
) -> Iterator[dict[str, Any]]:
    """A topic with ORIGINAL partitions under live traffic: a live group in its own process, an offline group."""
    tag = uuid.uuid4().hex[:8]
    topic, live, offline = f"kstate-prod-{tag}", f"kstate-prod-{tag}-live", f"kstate-prod-{tag}-offline"
    create_topic(admin, topic, ORIGINAL)
    commit_offsets(kafka_config, offline, {(topic, p): 0 for p in range(ORIGINAL)})
    service = ConsumerService(bootstrap, topic, live, tmp_path / "received")
    producer = SeqProducer(kafka_config, topic, rate=100.0)
    producer.start()
    watcher = SafetyWatcher(kafka_config, topic, live)
    state: dict[str, Any] = {"topic": topic, "live": live, "service": service, "producer": producer}
    try:
        assert wait_until(lambda: len(service.received) >= 20, 90), "the live group received nothing"
        time.sleep(1.0)  # auto-commit records positions
        state.update({"since": max(service.received) + 1, "watcher": watcher})
        watcher.start()
        yield state
    finally:
        producer.stop()
        watcher.stop()
        service.stop()
        delete_topics(admin, [topic])


def _trigger(prod: ProdAirflow, dag_id: str, conf: dict[str, Any]) -> str:
    r = prod.trigger(dag_id, conf)
    assert r.status_code == 200, r.text
    return str(r.json()["dag_run_id"])


def _lost(traffic: dict[str, Any]) -> tuple[list[int], int]:
    """After the run: traffic on every partition, drained; return (lost sequence numbers, produced)."""
    time.sleep(3.0)
    producer, service = traffic["producer"], traffic["service"]
    produced = {seq for seq in producer.produced if seq >= traffic["since"]}
    wait_until(lambda: produced <= service.received, 60)
    return sorted(produced - service.received), len(produced)


def _hosts(prod: ProdAirflow, dag_id: str, run_id: str) -> dict[str, str]:
    return {
        t["task_id"]: t["hostname"]
        for t in prod.task_instances(dag_id, run_id)
        if t["state"] == "success" and t.get("hostname")
    }


def test_safe_increase_under_live_traffic_on_celery(
    prod: ProdAirflow, traffic: dict[str, Any], admin: AdminClient
) -> None:
    topic = traffic["topic"]
    run_id = _trigger(prod, PER_STEP, {"topic": topic, "partitions": TARGET, "consumer_groups": []})
    t0 = time.monotonic()
    run, history = prod.watch_run(PER_STEP, run_id, timeout=RUN_TIMEOUT, interval=0.5)
    took = time.monotonic() - t0
    assert run["state"] == "success", prod.failure_report(PER_STEP, run_id)
    lost, produced = _lost(traffic)
    hosts = _hosts(prod, PER_STEP, run_id)
    print(
        f"\nPROD increase {ORIGINAL}->{TARGET} in {took:.1f} s; lost {len(lost)} of {produced}; hosts {hosts}"
    )
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == TARGET
    assert not traffic["watcher"].violations, traffic["watcher"].violations[:5]
    assert produced and not lost, f"lost {len(lost)} of {produced}: {lost[:20]}"
    # the run's tasks were spread over both Celery workers
    assert set(hosts.values()) == set(WORKERS), hosts
    # each deferrable sensor was deferred to the triggerer and resumed on a worker, in one try
    for sensor in SENSORS:
        events = [e["event"] for e in prod.event_log(PER_STEP, run_id, sensor)]
        assert "deferred" in events and events[-1] == "success", (sensor, events)
        log = prod.task_log(PER_STEP, run_id, sensor)
        assert "deferring to the triggerer" in log and "resumed from the triggerer with status success" in log
        assert [t["try_number"] for t in prod.ti_tries(PER_STEP, run_id, sensor)] == [1]
    # while deferred, the API named the triggerer job holding the trigger (when the poller caught it)
    for sensor in SENSORS:
        for obs in history.get(sensor, []):
            if obs["state"] == "deferred" and obs["trigger"]:
                assert obs["trigger"]["classpath"].startswith("airflow_provider_kstate.triggers."), obs


@pytest.mark.spark
def test_maintenance_rebuilds_on_a_celery_worker(
    prod: ProdAirflow, admin: AdminClient, kafka_config: dict[str, Any], tmp_path: Path
) -> None:
    """A missing snapshot is a failed check: ``rebuild=auto`` builds it with spark-submit on a worker."""
    topic = f"kstate-prod-log-{uuid.uuid4().hex[:8]}"
    create_topic(admin, topic, 2, {"cleanup.policy": "compact"})
    try:
        produce(kafka_config, topic, [(None, f"acct-{i % 7}".encode(), str(i).encode()) for i in range(40)])
        snapshot = tmp_path / "snapshot"
        conf = {"changelog_topic": topic, "snapshot_uri": str(snapshot), "deep": False, "rebuild": "auto"}
        run_id = _trigger(prod, MAINTENANCE, conf)
        run = prod.wait_for_run(MAINTENANCE, run_id, timeout=RUN_TIMEOUT)
        assert run["state"] == "success", prod.failure_report(MAINTENANCE, run_id)
        states = {t["task_id"]: t["state"] for t in prod.task_instances(MAINTENANCE, run_id)}
        for task in ("rebuild", "recheck_fast", "recheck_deep"):
            assert states[task] == "success", states
        assert any(snapshot.rglob("*.parquet")), f"no snapshot written under {snapshot}"
        print(f"\nPROD maintenance: hosts {_hosts(prod, MAINTENANCE, run_id)}")
    finally:
        delete_topics(admin, [topic])


def _seed_running_on(prod: ProdAirflow, run_id: str) -> str | None:
    for ti in prod.task_instances(PER_STEP, run_id):
        if ti["task_id"] == SEED and ti["state"] == "running" and ti.get("hostname") in WORKERS:
            return str(ti["hostname"])
    return None


def _missing_offsets(admin: AdminClient, topic: str, group: str) -> tuple[int, list[int]]:
    """The topic's partition count and the partitions on which ``group`` has no committed offset."""
    n = len(admin.list_topics(topic, timeout=10).topics[topic].partitions)
    request = [ConsumerGroupTopicPartitions(group)]
    result = admin.list_consumer_group_offsets(request)[group].result(timeout=10)
    have = {tp.partition for tp in result.topic_partitions if tp.topic == topic and tp.offset >= 0}
    return n, sorted(set(range(n)) - have)


def test_a_worker_killed_mid_window_is_recovered_by_airflow(
    prod: ProdAirflow, traffic: dict[str, Any], admin: AdminClient
) -> None:
    topic, live = traffic["topic"], traffic["live"]
    run_id = _trigger(prod, PER_STEP, {"topic": topic, "partitions": TARGET, "consumer_groups": []})
    deadline = time.monotonic() + RUN_TIMEOUT
    victim = None
    while victim is None and time.monotonic() < deadline:
        victim = _seed_running_on(prod, run_id)
        if victim is None:
            time.sleep(0.1)
    assert victim, prod.failure_report(PER_STEP, run_id)
    pid = prod.stack.kill_worker(victim)
    killed = time.monotonic()
    partitions, missing = _missing_offsets(admin, topic, live)
    # the scenario: killed inside the danger window (created, the live group not seeded everywhere)
    assert partitions == TARGET and missing, (
        f"the kill missed the window: {partitions} partitions, missing {missing}"
    )
    print(
        f"\nPROD killed {victim} (pid {pid}) running seed_offsets; the live group lacked offsets on {missing}"
    )

    run = prod.wait_for_run(PER_STEP, run_id, timeout=RUN_TIMEOUT)
    recovered = time.monotonic() - killed
    assert run["state"] == "success", prod.failure_report(PER_STEP, run_id)
    tries = prod.ti_tries(PER_STEP, run_id, SEED)
    survivor = next(w for w in WORKERS if w != victim)
    assert [t["try_number"] for t in tries] == [1, 2], tries
    assert tries[0]["state"] == "failed" and tries[0]["hostname"] == victim, tries[0]
    assert tries[1]["state"] == "success" and tries[1]["hostname"] == survivor, tries[1]
    assert "Detected a task instance without a heartbeat" in prod.stack.worker_log("scheduler")
    lost, produced = _lost(traffic)
    print(f"PROD recovered {recovered:.1f} s after the kill; lost {len(lost)} of {produced}")
    assert not traffic["watcher"].violations, traffic["watcher"].violations[:5]
    assert produced and not lost, f"lost {len(lost)} of {produced}: {lost[:20]}"
    assert _missing_offsets(admin, topic, live) == (TARGET, [])
