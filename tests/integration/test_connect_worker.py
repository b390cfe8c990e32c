"""Issue 30, deliverable 3 (the Connect part): a real Kafka Connect worker (``connect-runtime`` of the broker's
release, ``ConnectDistributed``) with a sink connector (``support/connect``: what FileStreamSink does, one
line per record value) reading the topic; its consumer group is ``connect-<name>``. The provider drives it
through ``dag.test()`` of ``kstate_partition_increase`` by the README's REST recipe (stop = ``PUT
/connectors/NAME/stop``, start = ``PUT .../resume``, ready = the connector and its tasks RUNNING), named in
``group_drivers`` from the ``kstate_drivers`` Variable, under live keyed traffic (murmur2, a key per record).

The scenario is proved first, without the provider: a naive increase (one CreatePartitions) under the same
traffic loses what was written to the new partitions before the sink's consumers saw them when the connector
reads at ``latest`` (``consumer.override.auto.offset.reset``, allowed by the worker's
``connector.client.config.override.policy=All``), and nothing with Connect's default (``earliest``).

The verdict comes from the sink's files: every record the producer had acknowledged must be a line there.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from kstate_support import ROOT
from kstate_support.connect import ConnectWorker, read_sink
from kstate_support.fleet import wait_group
from kstate_support.increase_runs import states, xcom
from kstate_support.traffic import GroupWatcher, SeqProducer, wait_until

pytestmark = pytest.mark.integration

DAG_ID = "kstate_partition_increase"
PREFIX = "safe_partition_increase."
RATE = 200.0


@pytest.fixture(scope="module")
def connect(kafka_config: dict[str, Any]) -> Iterator[ConnectWorker]:
    """One distributed Connect worker for the module, its configuration and sink files under ``.kstate/``."""
    extra = set(kafka_config) - {"bootstrap.servers"}
    if extra:
        pytest.skip(
            f"the Connect worker here takes a bootstrap address only, the cluster needs {sorted(extra)}"
        )
    run_dir = ROOT / ".kstate" / "connect" / f"test-{uuid.uuid4().hex[:8]}"
    worker = ConnectWorker(kafka_config["bootstrap.servers"], run_dir)
    worker.start()
    try:
        yield worker
    finally:
        worker.stop()
        shutil.rmtree(run_dir, ignore_errors=True)


def _sink(connect: ConnectWorker, admin: Any, name: str, topic: str, partitions: int, **config: Any) -> Path:
    """Create a sink connector of two tasks on ``topic``; wait until it runs and its group holds every
    partition; return the base path of its files."""
    file = connect.run_dir / f"{name}.out"
    connect.sink(name, topic, file, tasks=2, **config)
    connect.wait_running(name)
    wait_group(admin, f"connect-{name}", "STABLE", 2, timeout=60)
    return file


def _seqs(file: Path) -> set[int]:
    return {int(line) for line in read_sink(file) if line.strip()}


def _warm_up(producer: SeqProducer, files: list[Path], timeout: float = 60) -> int:
    """Wait until every sink wrote records of every partition; return the first seq loss is counted from
    (a latest-reset sink skips what was written before its consumers had positions: start-up)."""

    def _live() -> bool:
        placed = dict(producer.placed)
        return all(len({placed.get(s) for s in _seqs(f)} - {None}) >= 2 for f in files)

    assert wait_until(_live, timeout), f"the sinks wrote nothing of both partitions within {timeout}s"
    return max(producer.placed) + 1


def _lost(producer: SeqProducer, file: Path, since: int, timeout: float = 30) -> dict[int, int]:
    """``{seq: partition}`` of records ``>= since`` the producer delivered and the sink never wrote (after
    waiting, bounded, for the sink to catch up: a record is written at once, flushed within a second)."""
    produced = {s for s in producer.produced if s >= since}
    wait_until(lambda: produced <= _seqs(file), timeout, interval=0.5)
    return {s: producer.placed[s] for s in sorted(produced - _seqs(file))}


def _by_partition(lost: dict[int, int]) -> dict[int, int]:
    out: dict[int, int] = {}
    for p in lost.values():
        out[p] = out.get(p, 0) + 1
    return dict(sorted(out.items()))


@pytest.mark.chaos  # the scenario, measured (make chaos); make test keeps the provider's run
def test_naive_increase_at_a_connect_sink_loses_at_latest_and_not_at_the_default_earliest(
    connect: ConnectWorker, admin: Any, kafka_config: dict[str, Any], make_topic: Any
) -> None:
    """The scenario: 2 -> 4 by one CreatePartitions under 200 records/s, read by two sink connectors of the
    same worker, one at ``latest`` and one at Connect's default (``earliest``)."""
    from confluent_kafka.admin import NewPartitions

    topic = make_topic("connect-naive", partitions=2)
    tag = topic.rsplit("-", 1)[1]
    latest_name, earliest_name = f"naive-latest-{tag}", f"naive-earliest-{tag}"
    latest = _sink(connect, admin, latest_name, topic, 2, **{"consumer.override.auto.offset.reset": "latest"})
    earliest = _sink(connect, admin, earliest_name, topic, 2)
    producer = SeqProducer(kafka_config, topic, rate=RATE)
    producer.start()
    try:
        since = _warm_up(producer, [latest, earliest])
        time.sleep(1.0)
        for future in admin.create_partitions([NewPartitions(topic, 4)]).values():
            future.result(timeout=30)
        increased = max(producer.placed)
        # both groups take the new partitions on a metadata refresh (4 s) and a rebalance
        assert wait_until(lambda: _holds(admin, f"connect-{latest_name}", topic) == 4, 60)
        assert wait_until(lambda: _holds(admin, f"connect-{earliest_name}", topic) == 4, 60)
        time.sleep(2.0)
    finally:
        producer.stop()
    assert not producer.errors, producer.errors[:5]
    lost_latest, lost_earliest = _lost(producer, latest, since), _lost(producer, earliest, since)
    counted = len([s for s in producer.produced if s >= since])
    new = sum(1 for s, p in producer.placed.items() if s >= since and p >= 2)
    print(
        f"connect naive 2 -> 4: {counted} delivered ({new} to the new partitions, increase at seq {increased}); "
        f"latest lost {len(lost_latest)} {_by_partition(lost_latest)}, "
        f"earliest lost {len(lost_earliest)} {_by_partition(lost_earliest)}"
    )
    for name in (latest_name, earliest_name):
        connect.delete(name)
    assert new > 0, "nothing was written to the new partitions"
    assert lost_latest, "the naive increase lost nothing at the latest-reset sink: the scenario is not proved"
    assert set(lost_latest.values()) <= {2, 3}, f"lost on old partitions: {_by_partition(lost_latest)}"
    assert not lost_earliest, f"the earliest-reset sink lost {len(lost_earliest)}"


def _holds(admin: Any, group: str, topic: str) -> int:
    """Partitions of ``topic`` assigned to members of ``group`` while it is STABLE (0 otherwise)."""
    desc = admin.describe_consumer_groups([group])[group].result(timeout=10)
    if desc.state.name != "STABLE":
        return 0
    return sum(1 for m in desc.members for tp in m.assignment.topic_partitions if tp.topic == topic)


def _plain_stop_and_resume(
    connect: ConnectWorker, admin: Any, name: str, watcher: GroupWatcher, partitions: int
) -> float:
    """The same command pair run by hand as the run runs it (stop, wait until the broker reports the group
    EMPTY, start, ready polled), without the create and the seed: the group's time out of its group, seen by
    the broker as the increase's is (first sample not STABLE to STABLE with every partition).

    The wait matters: in distributed mode ``PUT stop`` answers once the new target state is written, before
    the tasks have left; a resume sent at once can find them still in the group (measured: the group never
    left)."""
    pair = connect.commands(name)
    began = time.monotonic()
    subprocess.run(pair.stop, shell=True, check=True, capture_output=True, executable="/bin/bash")
    wait_group(admin, f"connect-{name}", "EMPTY", 0, timeout=30)
    subprocess.run(pair.start, shell=True, check=True, capture_output=True, executable="/bin/bash")
    assert wait_until(
        lambda: (
            subprocess.run(pair.ready, shell=True, capture_output=True, executable="/bin/bash").returncode
            == 0
        ),
        60,
    ), connect.status(name)
    wait_group(admin, f"connect-{name}", "STABLE", 2, timeout=30)  # both tasks back: no rebalance left over
    # the watcher's own samples (every 0.05 s) catch up with what wait_group saw
    assert wait_until(lambda: _out(watcher, began, partitions) is not None, 10), (
        f"the group never left on the stop: {_timeline(watcher, began)}"
    )
    print("connect plain stop/resume:", _timeline(watcher, began))
    return float(_out(watcher, began, partitions) or 0.0)


def _out(watcher: GroupWatcher, after: float, partitions: int) -> float | None:
    """Seconds the group did not consume after ``after``, seen by the broker: from its first sample not
    STABLE to the first STABLE one (with ``partitions`` assigned) after its last sample not STABLE (a second
    rebalance, the other task joining late, counts: eager members consume nothing while it lasts). None while
    it has not left, or not come back."""
    samples = [s for s in watcher.samples if s[0] > after]
    away = [i for i, (_t, state, _n) in enumerate(samples) if state != "STABLE"]
    if not away:
        return None
    back = next((t for t, state, n in samples[away[-1] :] if state == "STABLE" and n >= partitions), None)
    return None if back is None else back - samples[away[0]][0]


def _timeline(watcher: GroupWatcher, after: float) -> list[tuple[float, str, int]]:
    """The group's state changes after ``after``: (seconds after it, state, partitions assigned)."""
    out: list[tuple[float, str, int]] = []
    for t, state, n in watcher.samples:
        if t > after and (not out or out[-1][1:] != (state, n)):
            out.append((round(t - after, 2), state, n))
    return out


@pytest.mark.parametrize("kind", ["command", "connect"])
def test_the_provider_drives_a_connect_sink_and_loses_nothing(
    connect: ConnectWorker,
    admin: Any,
    kafka_config: dict[str, Any],
    make_topic: Any,
    run_dag: Any,
    monkeypatch: pytest.MonkeyPatch,
    kind: str,
) -> None:
    """The provider's increase, 2 -> 4 under the same traffic, of a latest-reset sink connector's group driven
    by the REST recipe as a command pair, or by the ``connect`` driver kind (issue 40, item 3: the run itself
    calls ``PUT stop``, ``PUT resume`` and polls the status): the stop makes its tasks leave (the group
    EMPTY), the new partitions are seeded while it is, the resume brings them back: every delivered record is
    in the sink's files, those of the new partitions included; its time out of its group is compared with a
    plain stop/resume by the same REST calls."""
    topic = make_topic(f"connect-{kind}", partitions=2)
    name = f"safe-{topic.rsplit('-', 1)[1]}"
    group = f"connect-{name}"
    file = _sink(connect, admin, name, topic, 2, **{"consumer.override.auto.offset.reset": "latest"})
    drivers = {
        "command": {"kind": "command", **asdict(connect.commands(name)), "timeout": 60},
        "connect": {"kind": "connect", "url": connect.url, "connector": name, "timeout": 60},
    }
    monkeypatch.setenv("AIRFLOW_VAR_KSTATE_DRIVERS", json.dumps({"sink": drivers[kind]}))
    producer = SeqProducer(kafka_config, topic, rate=RATE)
    watcher = GroupWatcher(kafka_config, group, topic, interval=0.05)
    producer.start()
    watcher.start()
    try:
        since = _warm_up(producer, [file])
        before = _plain_stop_and_resume(connect, admin, name, watcher, 2)
        began = time.monotonic()
        dr = run_dag(
            DAG_ID,
            {
                "topic": topic,
                "partitions": 4,
                "consumer_groups": [group],
                "group_drivers": {group: "sink"},
                "key_order": "relax",
            },
        )
        ended = time.monotonic()
        assert dr.state == "success", states(dr)
        wait_group(admin, group, "STABLE", 2, timeout=30)
        assert wait_until(lambda: _out(watcher, began, 4) is not None, 10), _timeline(watcher, began)
        time.sleep(2.0)  # traffic on the four partitions, read by the resumed connector
        run_samples = list(watcher.samples)
        after = _plain_stop_and_resume(connect, admin, name, watcher, 4)
    finally:
        producer.stop()
        watcher.stop()
    assert not producer.errors, producer.errors[:5]
    lost = _lost(producer, file, since)
    counted = len([s for s in producer.produced if s >= since])
    written = _seqs(file)
    new = {s for s, p in producer.placed.items() if s >= since and p >= 2}
    watcher.samples = run_samples  # the run's samples only, not the plain stop/resume after it
    out = _out(watcher, began, 4)
    assert out is not None, f"the group never left, or never came back: {_timeline(watcher, began)}"
    downtime = float(out)
    plain = max(before, after)  # the slower of two plain stop/resumes: the machine's noise on both sides
    window = xcom(dr, "pause_window")
    progress = json.loads((Path(window["topics"][topic]["report_uri"]).parent / "progress.json").read_text())
    mine = progress["groups"][group]
    asked = (mine["back_at"] - mine["out_since"]) / 1000.0
    status = connect.status(name)
    print(f"connect {kind} run:", _timeline(watcher, began))
    print(
        f"connect {kind} 2 -> 4: lost {len(lost)} of {counted} delivered ({len(new)} to the new partitions); "
        f"group out of its group {downtime:.2f} s (broker view: first sample not STABLE to STABLE for good; "
        f"a plain stop/resume by the same commands {before:.2f} / {after:.2f} s), "
        f"stop asked to resume asked {asked:.2f} s; dag.test() {ended - began:.1f} s; timings {window['timings']}"
    )
    connect.delete(name)

    plan = xcom(dr, "plan")["groups"][group]
    assert plan["driver"] == {"name": "sink", **drivers[kind]}, plan
    assert window["drivers"]["stopped_groups"] == [group], window["drivers"]
    assert window["drivers"]["started_groups"] == [group], window["drivers"]
    assert window["drivers"]["start_failures"] == [], window["drivers"]
    assert mine["driver"] == f"{kind} sink", mine
    assert status["connector"]["state"] == "RUNNING" and len(status["tasks"]) == 2, status
    assert all(t["state"] == "RUNNING" for t in status["tasks"]), status
    assert new and new <= written, f"{len(new - written)} records of the new partitions not in the sink"
    assert not lost, f"lost {len(lost)} of {counted}: {_by_partition(lost)}"
    # loose (two cores shared with other JVMs): the window adds the create and the seed, not another restart
    assert downtime <= max(2 * plain, plain + 1.5), (
        f"out of its group {downtime:.2f} s, a plain stop/resume {plain:.2f} s"
    )
