"""Issue 10: versioned snapshots (store/layout.py): a rebuild killed at each publish step leaves the previous
version current, the next rebuild cleans up and migrates the legacy layout, keep-N pruning, and one writer per
snapshot (the snapshot lease).

Real broker, real local Spark (spark-submit, killed by the failpoint file), real lease topic. The kill test
(7 spark-submits and a deep check) takes 130 s here, so it is chaos; the lease test (0.6 s) runs in make test.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from airflow_provider_kstate.errors import SnapshotLeaseHeldError
from airflow_provider_kstate.hooks.lease import KStateLeaseHook
from airflow_provider_kstate.operators.rebuild import KStateRebuildOperator
from airflow_provider_kstate.spark_apps.read_progress import PROGRESS_NAME
from airflow_provider_kstate.store import fast_check, layout
from airflow_provider_kstate.store.manifest import MANIFEST_NAME

APPS = Path(__file__).resolve().parents[2] / "airflow_provider_kstate" / "spark_apps"
N = 3


class Admin:
    """The two questions the fast check asks, answered by a plain consumer (no Airflow connection)."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.consumer = Consumer({**config, "group.id": "kstate-test-versions", "enable.auto.commit": False})

    def partition_count(self, topic: str) -> int:
        return len(self.consumer.list_topics(topic, timeout=10).topics[topic].partitions)

    def watermarks(self, topic: str, partitions: list[int]) -> dict[int, tuple[int, int]]:
        return {
            p: self.consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in partitions
        }

    def topic_ids(self, topics: list[str]) -> dict[str, str]:
        return dict.fromkeys(topics, "")  # unknown: judged by offsets (test_topic_identity.py reads ids)


def rebuild(
    cfg: Path, topic: str, uri: Path, *extra: str, failpoint: str | None = None
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """spark-submit rebuild.py on local[2]; with ``failpoint`` the driver SIGKILLs itself there."""
    venv_bin = str(Path(sys.executable).parent)
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    env["PATH"] = f"{venv_bin}{os.pathsep}{os.environ['PATH']}"
    if failpoint:
        armed = uri.parent / "failpoints"
        armed.write_text(failpoint + "\n")
        env["KSTATE_FAILPOINT_FILE"] = str(armed)
    report = uri.parent / "report.json"
    report.unlink(missing_ok=True)
    args = ["--kafka-config-file", str(cfg), "--topic", topic, "--snapshot-uri", str(uri)]
    cmd = [f"{venv_bin}/spark-submit", "--master", "local[2]", "--conf", "spark.ui.enabled=false"]
    cmd += [str(APPS / "rebuild.py"), *args, "--report-file", str(report), *extra]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=400)
    return proc, json.loads(report.read_text()) if report.exists() else {}


def versions(uri: Path) -> list[str]:
    return layout.versions(os.listdir(uri))


def assert_fast_ok(admin: Admin, topic: str, uri: Path) -> dict[str, Any]:
    report = fast_check.fast_check(admin, topic, str(uri)).to_dict()
    assert report["ok"], report
    return report


@pytest.fixture
def changelog(
    make_topic: Callable[..., str], kafka_config: dict[str, Any], tmp_path: Path
) -> tuple[str, Path]:
    topic = make_topic("versions", N, config={"cleanup.policy": "compact"})
    producer = Producer(kafka_config)
    for i in range(60):
        producer.produce(topic, key=f"k{i % 25}".encode(), value=f"v{i}".encode())
    producer.flush(30)
    cfg = tmp_path / "kafka.json"
    cfg.write_text(json.dumps(kafka_config))
    return topic, cfg


def _to_legacy(uri: Path) -> None:
    """Turn a versioned snapshot into today's layout: data and manifest directly under the root."""
    current = layout.resolve(str(uri)).uri
    for entry in Path(current).iterdir():
        shutil.move(str(entry), uri / entry.name)
    shutil.rmtree(current)
    (uri / layout.POINTER_NAME).unlink()


@pytest.mark.integration
@pytest.mark.spark
@pytest.mark.chaos
def test_a_rebuild_killed_at_each_publish_step_leaves_the_previous_version_current(
    changelog: tuple[str, Path], kafka_config: dict[str, Any], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if os.environ.get("KSTATE_CHAOS") != "1" and "chaos" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("chaos (7 spark-submits): make chaos, or -m chaos")
    topic, cfg = changelog
    admin = Admin(kafka_config)
    uri = tmp_path / "store"
    proc, _ = rebuild(cfg, topic, uri)
    assert proc.returncode == 0, proc.stderr[-2000:]
    _to_legacy(uri)
    (tmp_path / "store.previous").mkdir()  # an old layout's sibling, removed by the migrating rebuild
    legacy = (uri / MANIFEST_NAME).read_bytes()
    assert layout.resolve(str(uri)).legacy and assert_fast_ok(admin, topic, uri)["snapshot_version"] is None

    # killed before the manifest: a version directory without a manifest, the legacy root still current
    proc, _ = rebuild(cfg, topic, uri, failpoint="rebuild.before_manifest")
    assert proc.returncode != 0 and len(versions(uri)) == 1  # the fault is real: a leftover is on disk
    assert not (uri / versions(uri)[0] / MANIFEST_NAME).exists()
    assert layout.resolve(str(uri)).legacy and (uri / MANIFEST_NAME).read_bytes() == legacy
    assert_fast_ok(admin, topic, uri)

    # killed after the manifest, before the pointer: a complete version no reader sees
    proc, _ = rebuild(cfg, topic, uri, failpoint="rebuild.before_pointer")
    assert proc.returncode != 0 and len(versions(uri)) == 2
    assert (uri / versions(uri)[1] / MANIFEST_NAME).exists() and not (uri / layout.POINTER_NAME).exists()
    assert layout.resolve(str(uri)).legacy
    assert_fast_ok(admin, topic, uri)

    # killed after the pointer, before pruning: the new version is current, the leftovers still there
    proc, _ = rebuild(cfg, topic, uri, failpoint="rebuild.before_prune")
    assert proc.returncode != 0 and len(versions(uri)) == 3
    current = layout.resolve(str(uri))
    assert current.version == versions(uri)[2] and (uri / MANIFEST_NAME).exists()  # legacy not yet removed
    assert assert_fast_ok(admin, topic, uri)["snapshot_version"] == current.version
    check = deep_check(cfg, topic, uri)
    assert check["ok"] and check["snapshot_version"] == current.version, json.dumps(check)[:2000]

    # the next run is clean: leftovers, legacy files and the old sibling removed, keep-N history only
    kept = (layout.POINTER_NAME, PROGRESS_NAME, current.version)  # the progress document is the last run's
    doomed = {str(uri / n) for n in os.listdir(uri) if n not in kept}
    doomed.add(str(tmp_path / "store.previous"))
    proc, report = rebuild(cfg, topic, uri, "--keep-versions", "2")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert versions(uri) == [current.version, report["snapshot_version"]]
    assert sorted(os.listdir(uri)) == sorted([layout.POINTER_NAME, PROGRESS_NAME, *versions(uri)])
    assert not (tmp_path / "store.previous").exists()
    assert set(report["removed"]) == doomed and len(doomed) >= 2 + 1 + N + 1  # leftovers, legacy, sibling
    assert all(f"removed {where}" in proc.stderr for where in doomed)
    assert_fast_ok(admin, topic, uri)

    # keep-N: a run with --keep-versions 1 keeps only the current version
    proc, report = rebuild(cfg, topic, uri, "--keep-versions", "1")
    assert proc.returncode == 0 and versions(uri) == [report["snapshot_version"]]


def deep_check(cfg: Path, topic: str, uri: Path) -> dict[str, Any]:
    venv_bin = str(Path(sys.executable).parent)
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    report = uri.parent / "check.json"
    cmd = [f"{venv_bin}/spark-submit", "--master", "local[2]", str(APPS / "deep_check.py")]
    cmd += ["--kafka-config-file", str(cfg), "--topic", topic, "--snapshot-uri", str(uri)]
    proc = subprocess.run(
        [*cmd, "--report-file", str(report)], env=env, capture_output=True, text=True, timeout=400
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return dict(json.loads(report.read_text()))


class _TI:
    def __init__(self, dag_id: str, run_id: str, state: str, try_number: int = 1) -> None:
        self.dag_id, self.run_id, self.state, self.try_number = dag_id, run_id, state, try_number

    def get_dagrun_state(self, dag_id: str, run_id: str) -> str:
        return self.state


@pytest.mark.integration
def test_two_maintenance_runs_on_one_snapshot_exactly_one_writes(
    tmp_path: Path, unique: Callable[[str], str]
) -> None:
    """The snapshot lease: while run A holds it, run B fails clearly naming A and writes nothing; so does a
    run of the same run id in another deployment (same try); once A has ended, B takes the lease over, and
    a retry of a task takes over its own earlier try. The real two-deployment race is
    tests/integration/test_snapshot_race.py."""
    lease_topic = unique("leases")
    uri = str(tmp_path / "store")
    key = f"snapshot:{uri}"
    op = KStateRebuildOperator(task_id="rebuild", topic="t", snapshot_uri=uri, lease_topic=lease_topic)
    a = {"ti": _TI("kstate_state_maintenance", "run-a", "running")}
    b = {"ti": _TI("kstate_state_maintenance", "run-b", "running")}
    twin = {"ti": _TI("kstate_state_maintenance", "run-a", "running")}  # run-a of another deployment
    with op.snapshot_lease(a, uri) as held:  # type: ignore[arg-type]
        assert held == key
        for other in (b, twin):
            with pytest.raises(SnapshotLeaseHeldError, match="kstate_state_maintenance/run-a#try1") as info:
                with op.snapshot_lease(other, uri):  # type: ignore[arg-type]
                    pytest.fail("no other writer may get the lease while run A holds it")
            assert "wrote nothing" in str(info.value)
    hook = KStateLeaseHook(lease_topic=lease_topic)
    assert hook.current(key) is None  # released after the body
    hook.acquire(key, "kstate_state_maintenance/run-a#try1@dead", 300)  # A crashed holding it...
    b_ended = {"ti": _TI("kstate_state_maintenance", "run-b", "failed")}  # ... and its run has ended
    with op.snapshot_lease(b_ended, uri):  # type: ignore[arg-type]
        holder = hook.current(key)
        assert holder is not None and holder.owner.startswith("kstate_state_maintenance/run-b#try1@")
    hook.acquire(
        key, "kstate_state_maintenance/run-b#try1@dead", 300
    )  # B's try 1 crashed; Airflow retries it
    retry = {"ti": _TI("kstate_state_maintenance", "run-b", "running", try_number=2)}
    with op.snapshot_lease(retry, uri):  # type: ignore[arg-type]
        holder = hook.current(key)
        assert holder is not None and holder.owner.startswith("kstate_state_maintenance/run-b#try2@")
    assert hook.current(key) is None
