"""Issue 10: two maintenance runs on one snapshot at once, in two Airflow deployments: exactly one writes.

Each deployment has its own ``AIRFLOW_HOME`` and metadata database, so neither can see the other's runs
(the holder's state is "unknown here", which never allows a takeover). Both start
``kstate_state_maintenance`` at once, for the same logical date, with ``rebuild=force`` on one snapshot URI:
one takes the snapshot lease and publishes a version; the other reaches ``rebuild`` while that lease is
held and fails with ``SnapshotLeaseHeldError`` (fatal: not retried), writing nothing. ``airflow dags test``
names each run after the moment it starts, so the run ids differ here; two runs with one run id (two
deployments on one schedule) are pinned by ``test_snapshot_versions.py``. Real parts: the embedded broker,
``airflow dags test`` in two processes, local Spark. About 60-100 s here, so it is chaos.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from kstate_support import airflow_env

from airflow_provider_kstate.hooks.lease import KStateLeaseHook
from airflow_provider_kstate.store import layout

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

LOGICAL_DATE = "2026-11-23T00:00:00+00:00"


def deployment(home: Path, kafka_config: dict[str, Any]) -> dict[str, str]:
    """An Airflow deployment of its own: a migrated home and database, the project's DAGs."""
    home.mkdir(parents=True)
    env = {**os.environ, **airflow_env.environ(home, kafka_config), "KSTATE_MAINTENANCE_SCHEDULE": ""}
    airflow_env.migrate(env)
    return env


def start(env: dict[str, str], conf: dict[str, Any], log: Path) -> subprocess.Popen[bytes]:
    airflow = str(Path(sys.executable).with_name("airflow"))
    cmd = [airflow, "dags", "test", "kstate_state_maintenance", LOGICAL_DATE, "-c", json.dumps(conf)]
    with log.open("wb") as out:
        return subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)


def finished(text: str) -> str:
    """The DagRun's final state as ``airflow dags test`` prints it in its output ``text``."""
    line = next((ln for ln in text.splitlines() if "DagRun Finished" in ln), "")
    assert line, text[-3000:]
    return "success" if "state=success" in line else "failed"


def test_two_deployments_rebuild_one_snapshot_at_once_exactly_one_writes(
    kafka_config: dict[str, Any], make_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = make_topic("race", 3, config={"cleanup.policy": "compact"})
    producer = Producer(kafka_config)
    for i in range(300):
        producer.produce(topic, key=f"k{i % 40}".encode(), value=f"v{i}".encode())
    assert producer.flush(30) == 0
    uri = tmp_path / "snapshot"
    conf = {"changelog_topic": topic, "snapshot_uri": str(uri), "rebuild": "force", "deep": False}
    envs = [deployment(tmp_path / f"airflow-{name}", kafka_config) for name in ("a", "b")]
    logs = [tmp_path / f"run-{name}.log" for name in ("a", "b")]

    started = time.monotonic()
    procs = [start(env, conf, log) for env, log in zip(envs, logs, strict=True)]
    for proc in procs:
        proc.wait(timeout=400)  # bounded: dag.test() does not enforce timeouts itself
    seconds = time.monotonic() - started

    texts = [log.read_text(errors="replace") for log in logs]
    outcome = {finished(text): text for text in texts}
    states = sorted(outcome)
    assert states == ["failed", "success"], (states, [t[-2000:] for t in texts])
    loser, winner = outcome["failed"], outcome["success"]
    # The loser failed at rebuild on the lease, naming the winner's run as unknown to its own Airflow, and
    # was not retried (a lease held is fatal).
    assert "SnapshotLeaseHeldError" in loser and "wrote nothing" in loser, loser[-3000:]
    held = next(ln for ln in winner.splitlines() if "LEASE snapshot:" in ln and " held by " in ln)
    winner_owner = held.split(" held by ", 1)[1].split()[0]
    assert f"held by {winner_owner} since" in loser and "Airflow state unknown here" in loser
    assert loser.count("SnapshotLeaseHeldError: snapshot") == 1  # one try
    assert "released" in winner
    # Exactly one version was written and it is the current one; the fast recheck of the winner passed.
    assert len(layout.versions(os.listdir(uri))) == 1, os.listdir(uri)
    assert layout.resolve(str(uri)).version is not None
    assert KStateLeaseHook().current(f"snapshot:{uri}") is None  # released
    print(f"two deployments at once: {seconds:.1f} s; states {states}")
