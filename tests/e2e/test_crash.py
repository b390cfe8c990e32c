"""Crash tests (issue 10, item 5): SIGKILL the task at every step boundary of a real deployment's run.

``airflow standalone`` runs the shipped DAG ``kstate_partition_increase`` against the session's broker under
live traffic: a keyed producer (``murmur2_random``, not controlled: it writes to new partitions as soon as
they exist, the KAFKA-12261 way) and a live group of :class:`ControlledConsumer` members with
``auto.offset.reset=latest`` in their own process (``tests/e2e/crash_traffic.py``), plus an offline group
(committed offsets, no members). A failpoint (``KSTATE_FAILPOINT_FILE``) SIGKILLs the task's process at one
boundary; the operator then follows the runbook: Airflow's supervisor reports the dead task, the step's
retry re-runs the idempotent steps; if the run still fails, a new run with the same target (a repair).

Asserted: (a) from outside, a watcher samples the topic's partition count, the live group's members and its
committed offsets (in that order, so a sample is sound): never a member while the group lacks an offset on
an existing partition; (b) after recovery every produced message was consumed. The time from the kill to
recovery is printed.

One boundary (``mid_seed``) runs in ``make test``; all eight are ``chaos`` (``make chaos``). Also chaos: a kill
at ``after_live_resume`` under a ControlledProducer's traffic (issue 21): the producers switch only after the
recovery seeded the offline group, so nothing reaches the new partitions before (first records' CreateTime
against the last time the offline group was seen without an offset there).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient
from kstate_support import broker as broker_helper
from kstate_support.broker_faults import offsets_gap
from kstate_support.traffic import SeqProducer, wait_until

from tests.e2e.deployment import AirflowDeployment
from tests.e2e.test_deployment import commit_offsets, create_topic, delete_topics

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.deployment, pytest.mark.timeout(600)]

INCREASE = "kstate_partition_increase"
ORIGINAL, TARGET = 2, 4
RUN_TIMEOUT = 240.0
FAST = ("mid_seed",)  # inside the danger window: created, live groups seeded, offline ones not yet
BOUNDARIES = (
    "after_pause",
    "after_empty",
    "after_create",
    "mid_seed",
    "after_seed",
    "after_scale",
    "after_resume",
    "mid_verify",
)


class SafetyWatcher(threading.Thread):
    """Sample, in order, the partition count, the group's members, its committed offsets.

    Offsets are only ever added during a run and partitions never go away, so a sample that shows members
    and then a partition without an offset proves the members ran while that offset was missing.
    """

    def __init__(self, config: dict[str, Any], topic: str, group: str) -> None:
        super().__init__(daemon=True)
        self.admin: Any = AdminClient(config)
        self.topic, self.group = topic, group
        self.violations: list[tuple[float, int, list[int]]] = []
        self.stable_full: list[float] = []  # times the group was STABLE with an offset on every partition
        self.samples = 0
        self._halt = threading.Event()

    def _sample(self) -> None:
        n, desc, missing = offsets_gap(self.admin, self.topic, self.group)
        now = time.monotonic()
        self.samples += 1
        if desc.members and missing:
            self.violations.append((now, len(desc.members), missing))
        if desc.state.name == "STABLE" and not missing and n == TARGET:
            self.stable_full.append(now)

    def run(self) -> None:
        while not self._halt.is_set():
            try:
                self._sample()
            except Exception:  # noqa: BLE001 - a missed sample (broker busy) is fine
                pass
            time.sleep(0.1)

    def stop(self) -> None:
        self._halt.set()
        self.join(15)
        self.admin = None


class ConsumerService:
    """The live group's consumers in their own process; what they received is read from its output file."""

    def __init__(self, bootstrap: str, topic: str, group: str, out: Path) -> None:
        self.out = out
        started = self._starts()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.e2e.crash_traffic", bootstrap, topic, group, str(out)],
            cwd=str(ROOT),
        )
        if not wait_until(lambda: self._starts() > started, 60):
            self.stop()
            raise RuntimeError("consumer service did not start")

    def _starts(self) -> int:
        """How many services have written ``ready`` to the output file (a restart appends to it)."""
        return self.out.read_text().split("\n").count("ready") if self.out.exists() else 0

    @property
    def received(self) -> set[int]:
        lines = self.out.read_text().split("\n")
        return {int(line) for line in lines[:-1] if line.isdigit()}  # the last line may be partial

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


@contextlib.contextmanager
def _scenario(
    admin: AdminClient, kafka_config: dict[str, Any], bootstrap: str, tmp_path: Path, controlled: bool
) -> Iterator[dict[str, Any]]:
    """A topic under live traffic with one live and one offline group; torn down afterwards.

    :param controlled: the producer is a ControlledProducer (it follows the layout signals) instead of a
        plain one that writes to new partitions as soon as it sees them.
    """
    tag = uuid.uuid4().hex[:8]
    topic, live, offline = f"kstate-crash-{tag}", f"kstate-crash-{tag}-live", f"kstate-crash-{tag}-offline"
    create_topic(admin, topic, ORIGINAL)
    commit_offsets(kafka_config, offline, {(topic, p): 0 for p in range(ORIGINAL)})
    service = ConsumerService(bootstrap, topic, live, tmp_path / "received")
    producer = SeqProducer(kafka_config, topic, rate=100.0, controlled=controlled)
    producer.start()
    watcher = SafetyWatcher(kafka_config, topic, live)
    state = {"topic": topic, "live": live, "offline": offline, "service": service, "producer": producer}
    state.update({"watcher": watcher, "since": 0, "bootstrap": bootstrap})
    try:
        if not wait_until(lambda: len(service.received) >= 20, 90):
            raise RuntimeError("the live group received nothing")
        time.sleep(1.0)  # auto-commit records positions
        state["since"] = max(service.received) + 1
        watcher.start()
        yield state
    finally:
        producer.stop()
        watcher.stop()
        state["service"].stop()
        delete_topics(admin, [topic])


@pytest.fixture
def scenario(
    deployment: AirflowDeployment,
    admin: AdminClient,
    kafka_config: dict[str, Any],
    bootstrap: str,
    tmp_path: Path,
) -> Iterator[dict[str, Any]]:
    """The scenario with a plain producer (the KAFKA-12261 way)."""
    with _scenario(admin, kafka_config, bootstrap, tmp_path, controlled=False) as state:
        yield state


@pytest.fixture
def controlled_scenario(
    deployment: AirflowDeployment,
    admin: AdminClient,
    kafka_config: dict[str, Any],
    bootstrap: str,
    tmp_path: Path,
) -> Iterator[dict[str, Any]]:
    """The scenario with a ControlledProducer: it writes to new partitions only once the run switches it."""
    with _scenario(admin, kafka_config, bootstrap, tmp_path, controlled=True) as state:
        yield state


def _killed_at(failpoint_file: Path, name: str, timeout: float) -> float | None:
    """Return when the armed failpoint fired (its name left the file), or None within ``timeout``."""
    fired = wait_until(lambda: name not in failpoint_file.read_text().split(), timeout, interval=0.05)
    return time.monotonic() if fired else None


def _recover(deployment: AirflowDeployment, run_id: str, topic: str) -> tuple[dict[str, Any], str]:
    """The runbook: wait for Airflow's retries; if the run still failed, run again with the target (repair)."""
    run = deployment.wait_for_run(INCREASE, run_id, timeout=RUN_TIMEOUT)
    if run["state"] == "success":
        return run, "retry"
    print(deployment.failure_report(INCREASE, run_id))
    r = deployment.trigger(INCREASE, {"topic": topic, "partitions": TARGET, "consumer_groups": []})
    assert r.status_code == 200, r.text
    repair_id = r.json()["dag_run_id"]
    return deployment.wait_for_run(INCREASE, repair_id, timeout=RUN_TIMEOUT), f"repair run {repair_id}"


def _trigger_armed(
    deployment: AirflowDeployment, failpoint_file: Path, topic: str, boundary: str
) -> tuple[str, float]:
    """Arm ``boundary``, trigger the increase; return the run id and when the failpoint killed the task."""
    failpoint_file.write_text(f"{boundary}\n")
    r = deployment.trigger(INCREASE, {"topic": topic, "partitions": TARGET, "consumer_groups": []})
    assert r.status_code == 200, r.text
    run_id = r.json()["dag_run_id"]
    killed = _killed_at(failpoint_file, boundary, RUN_TIMEOUT)
    assert killed is not None, (
        f"failpoint {boundary} never fired:\n{deployment.failure_report(INCREASE, run_id)}"
    )
    return run_id, killed


def _check_recovery(
    label: str,
    deployment: AirflowDeployment,
    scenario: dict[str, Any],
    run_id: str,
    killed: float,
    admin: AdminClient,
) -> None:
    """Recover by the runbook, then assert the safety rule held throughout and nothing was lost."""
    try:
        run, how = _recover(deployment, run_id, scenario["topic"])
    finally:
        scenario["failpoint_file"].unlink(missing_ok=True)
    recovered = time.monotonic()
    assert run["state"] == "success", deployment.failure_report(INCREASE, run["dag_run_id"])
    watcher, service, producer = scenario["watcher"], scenario["service"], scenario["producer"]
    back = next((t for t in watcher.stable_full if t > killed), None)
    time.sleep(3.0)  # traffic on every partition after the recovery
    produced = {seq for seq in producer.produced if seq >= scenario["since"]}
    wait_until(lambda: produced <= service.received, 60)
    lost = sorted(produced - service.received)
    tries = {
        t["task_id"].rsplit(".", 1)[-1]: t["try_number"] for t in deployment.task_instances(INCREASE, run_id)
    }
    back_s = f"{back - killed:.1f}" if back else "n/a"
    print(
        f"\nCRASH {label}: recovered by {how}; kill -> consumers back {back_s} s, kill -> run success "
        f"{recovered - killed:.1f} s; tries {tries}; watcher samples {watcher.samples}, "
        f"violations {len(watcher.violations)}; lost {len(lost)} of {len(produced)}"
    )
    assert produced
    assert not watcher.violations, (
        f"members in the group while offsets were missing: {watcher.violations[:5]}"
    )
    assert not lost, f"lost {len(lost)} of {len(produced)}: {lost[:20]}"
    assert (
        len(admin.list_topics(scenario["topic"], timeout=10).topics[scenario["topic"]].partitions) == TARGET
    )


@pytest.mark.parametrize(
    "boundary", [b if b in FAST else pytest.param(b, marks=pytest.mark.chaos) for b in BOUNDARIES]
)
def test_kill_at_boundary(
    boundary: str,
    deployment: AirflowDeployment,
    scenario: dict[str, Any],
    failpoint_file: Path,
    admin: AdminClient,
) -> None:
    scenario["failpoint_file"] = failpoint_file
    try:
        run_id, killed = _trigger_armed(deployment, failpoint_file, scenario["topic"], boundary)
    finally:
        failpoint_file.unlink(missing_ok=True)
    _check_recovery(boundary, deployment, scenario, run_id, killed, admin)


def _window_try(deployment: AirflowDeployment, run_id: str) -> tuple[str | None, int]:
    for ti in deployment.task_instances(INCREASE, run_id):
        if ti["task_id"].endswith(".pause_window"):
            return ti["state"], int(ti["try_number"])
    return None, 0


def _retry_started(deployment: AirflowDeployment, run_id: str) -> bool:
    state, try_number = _window_try(deployment, run_id)
    return try_number >= 2 and state in ("running", "success", "failed")


def _broker_data_dir(bootstrap: str) -> Path | None:
    """The data dir of the embedded broker at ``bootstrap`` (kstate_support.broker writes it there)."""
    for path in sorted((ROOT / ".kstate").glob("broker*/bootstrap")):
        with contextlib.suppress(OSError):
            if path.read_text().strip() == bootstrap:
                return path.parent
    return None


@pytest.mark.chaos
def test_broker_restart_mid_window(
    deployment: AirflowDeployment, scenario: dict[str, Any], failpoint_file: Path, admin: AdminClient
) -> None:
    """The broker goes down inside the window (created, not seeded) and stays down while the retry starts;
    it comes back on the same port with the same data: the run completes or fails safely, then 0 loss."""
    data_dir = _broker_data_dir(scenario["bootstrap"])
    if data_dir is None:
        pytest.skip("not the embedded broker: it cannot be restarted from here")
    port = int(scenario["bootstrap"].rsplit(":", 1)[1])
    scenario["failpoint_file"] = failpoint_file
    run_id, killed = _trigger_armed(deployment, failpoint_file, scenario["topic"], "after_create")
    broker_helper.down(data_dir)
    down_at = time.monotonic()
    wait_until(lambda: _retry_started(deployment, run_id), 90, interval=0.2)
    time.sleep(3.0)  # the retry meets a broker that is down
    broker_helper.up(data_dir, port=port)
    print(f"\nbroker down for {time.monotonic() - down_at:.1f} s")
    _check_recovery("broker restart", deployment, scenario, run_id, killed, admin)


@pytest.mark.chaos
def test_paused_consumer_restarted_in_window_stays_out(
    deployment: AirflowDeployment, scenario: dict[str, Any], failpoint_file: Path, admin: AdminClient
) -> None:
    """A paused consumer process SIGKILLed and started again inside the window (created, not seeded) starts
    paused: no member in its group until the retry has seeded it and resumed it."""
    scenario["failpoint_file"] = failpoint_file
    run_id, killed = _trigger_armed(deployment, failpoint_file, scenario["topic"], "after_create")
    service = scenario["service"]
    time.sleep(1.0)  # the service writes what it received every 0.2 s: let the last lines reach its file
    service.proc.kill()
    service.proc.wait(30)
    scenario["service"] = ConsumerService(
        scenario["bootstrap"], scenario["topic"], scenario["live"], service.out
    )
    members = []
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _window_try(deployment, run_id)[1] < 2:
        desc = admin.describe_consumer_groups([scenario["live"]])[scenario["live"]].result(timeout=10)
        members.append(len(desc.members))
        time.sleep(0.2)
    assert members and not any(members), f"the restarted consumer joined its paused group: {members}"
    _check_recovery("paused consumer restart", deployment, scenario, run_id, killed, admin)


class SeedWatcher(threading.Thread):
    """Sample, on the wall clock, whether ``group`` holds a committed offset on each of ``partitions``:
    ``lacking`` is the time a sample last started and found one missing (the seed came after it)."""

    def __init__(self, config: dict[str, Any], topic: str, group: str, partitions: range) -> None:
        super().__init__(daemon=True)
        self.admin: Any = AdminClient(config)
        self.topic, self.group, self.partitions = topic, group, set(partitions)
        self.lacking = 0.0
        self.seeded = 0.0
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set() and not self.seeded:
            started = time.time()
            try:
                request = [ConsumerGroupTopicPartitions(self.group)]
                result = self.admin.list_consumer_group_offsets(request)[self.group].result(timeout=5)
            except Exception:  # noqa: BLE001 - a missed sample (broker busy) is fine
                continue
            have = {
                tp.partition for tp in result.topic_partitions if tp.topic == self.topic and tp.offset >= 0
            }
            if self.partitions <= have:
                self.seeded = time.time()
            else:
                self.lacking = started
            time.sleep(0.05)

    def stop(self) -> None:
        self._halt.set()
        self.join(15)
        self.admin = None


def first_timestamps(config: dict[str, Any], topic: str, partitions: range) -> dict[int, tuple[int, int]]:
    """``{partition: (records, CreateTime ms of its first record)}`` of ``partitions`` (empty ones: (0, 0))."""
    consumer = Consumer({**config, "group.id": f"kstate-crash-probe-{uuid.uuid4().hex[:6]}"})
    out: dict[int, tuple[int, int]] = {}
    try:
        for p in partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            if high <= low:
                out[p] = (0, 0)
                continue
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING)])
            msg = None
            deadline = time.monotonic() + 15
            while (msg is None or msg.error()) and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
            assert msg is not None and not msg.error(), f"could not read partition {p} of {topic}"
            out[p] = (high - low, msg.timestamp()[1])
    finally:
        consumer.close()
    return out


@pytest.mark.chaos
def test_kill_after_live_resume_producers_wait_for_the_offline_seed(
    deployment: AirflowDeployment,
    controlled_scenario: dict[str, Any],
    failpoint_file: Path,
    admin: AdminClient,
    kafka_config: dict[str, Any],
) -> None:
    """Issue 21, item 2: SIGKILL the window at ``after_live_resume`` (live group seeded and resumed, the
    offline group not seeded yet, producers still on the old layout) under a ControlledProducer's traffic:
    nothing is written to the new partitions before the recovery has seeded the offline group, 0 lost, the
    recovery finishes."""
    scenario = controlled_scenario
    scenario["failpoint_file"] = failpoint_file
    new = range(ORIGINAL, TARGET)
    seeds = SeedWatcher(kafka_config, scenario["topic"], scenario["offline"], new)
    seeds.start()
    try:
        run_id, killed = _trigger_armed(deployment, failpoint_file, scenario["topic"], "after_live_resume")
        time.sleep(3.0)  # the gap the kill left: traffic goes on, the retry has not started yet
        gap = first_timestamps(kafka_config, scenario["topic"], new)
        _check_recovery(
            "after_live_resume (controlled producer)", deployment, scenario, run_id, killed, admin
        )
    finally:
        seeds.stop()
    firsts = first_timestamps(kafka_config, scenario["topic"], new)
    print(
        f"offline group lacked an offset on {list(new)} at {seeds.lacking:.3f}, seeded by {seeds.seeded:.3f} "
        f"({seeds.seeded - killed_wall(killed):.1f} s after the kill); in the gap the new partitions held "
        f"{gap}; after the recovery {firsts}"
    )
    assert seeds.lacking and seeds.seeded, (
        "the watcher never saw the offline group without, then with, offsets"
    )
    assert all(n == 0 for n, _ts in gap.values()), f"records on the new partitions in the gap: {gap}"
    assert all(n > 0 for n, _ts in firsts.values()), f"the producers never switched: {firsts}"
    early = {p: ts for p, (_n, ts) in firsts.items() if ts < seeds.lacking * 1000}
    assert not early, f"written to new partitions before the offline group was seeded: {early}"


def killed_wall(killed_monotonic: float) -> float:
    """The wall-clock time of a ``time.monotonic()`` instant."""
    return time.time() - (time.monotonic() - killed_monotonic)
