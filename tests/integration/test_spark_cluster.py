"""The Spark operators on a real standalone cluster: a master and 2 workers, executors on a bare Python.

The executors' interpreter is a virtualenv with no packages: the operators ship the provider as a zip
(``py_files``) and its dependencies as a venv-pack archive (``archives=env.tar.gz#env``). The deep check
and the rebuild there give the same snapshot, digests and reports as on ``local[2]``.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kstate_support.spark_standalone import StandaloneCluster, bare_python

from airflow_provider_kstate.plugins.rebuild_progress import snapshot_progress

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".kstate" / "spark-env"
# A standalone cluster (master, 2 workers, a packed environment): its own target, `make test-cluster`
pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.cluster]
SECRET = f"kstate-secret-{uuid.uuid4().hex[:8]}"
SMALL = {"spark.executor.memory": "512m", "spark.driver.memory": "512m", "spark.ui.enabled": "false"}


class _RunningTI:
    """The task instance a rebuild's snapshot lease is taken for: a manual run, running."""

    dag_id, run_id = "kstate_test_spark_cluster", f"manual-{uuid.uuid4().hex[:8]}"
    stats_tags: dict[str, str] = {}  # read by the task SDK's resumable-job mixin of SparkSubmitOperator

    def get_dagrun_state(self, dag_id: str, run_id: str) -> str:
        return "running"


def _context() -> dict[str, Any]:
    return {"ti": _RunningTI()}


@pytest.fixture(scope="session")
def env_archive() -> str:
    """The executors' dependencies packed with venv-pack (cached by the pinned versions)."""
    from airflow_provider_kstate.store.pack import env_archive as build
    from airflow_provider_kstate.store.pack import pinned

    tag = uuid.uuid5(uuid.NAMESPACE_URL, ",".join(pinned())).hex[:12]
    dest = CACHE / f"env-{tag}.tar.gz"
    if not dest.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        part = CACHE / f"env-{tag}.part-{os.getpid()}.tar.gz"  # venv-pack infers the format from the name
        build(str(part))
        os.replace(part, dest)
    return str(dest)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: Any) -> Iterator[tuple[StandaloneCluster, str]]:
    """One standalone cluster for the session (2 workers, 1 core and 1 GB each) and its bare Python."""
    work = tmp_path_factory.mktemp("spark-cluster")
    bare = bare_python(work / "bare-venv")
    spark = StandaloneCluster(work / "cluster").start()
    os.environ["AIRFLOW_CONN_SPARK_CLUSTER"] = json.dumps(
        {"conn_type": "spark", "host": "spark://127.0.0.1", "port": spark.master_port}
    )
    try:
        yield spark, bare
    finally:
        spark.stop()


@pytest.fixture(scope="module")
def store_topic(kafka_config: dict[str, Any], admin: AdminClient) -> Iterator[str]:
    topic = f"kstate-test-cluster-{uuid.uuid4().hex[:8]}"
    for f in admin.create_topics([NewTopic(topic, 4, 1, config={"cleanup.policy": "compact"})]).values():
        f.result(timeout=30)
    producer = Producer({**kafka_config, "partitioner": "murmur2_random"})
    for i in range(2000):
        producer.produce(topic, key=b"k-%04d" % (i % 700), value=b"v-%d" % i if i % 13 else None)
    assert producer.flush(30) == 0
    yield topic
    for f in admin.delete_topics([topic]).values():
        f.exception(timeout=30)


def _secret_connection(monkeypatch: pytest.MonkeyPatch, kafka_config: dict[str, Any]) -> None:
    """A Kafka connection carrying a secret (ignored by PLAINTEXT brokers) that must never be logged."""
    extra = {**kafka_config, "sasl.username": "kstate", "sasl.password": SECRET}
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_CLUSTER", json.dumps({"conn_type": "kafka", "extra": extra}))


def _rebuild_locally(uri: str, **common: Any) -> dict[str, Any]:
    """The same rebuild on ``local[2]``: what the cluster's must equal."""
    from airflow_provider_kstate.operators.rebuild import KStateRebuildOperator

    return KStateRebuildOperator(task_id="rl", snapshot_uri=uri, conf=dict(SMALL), **common).execute(
        _context()
    )


def _cluster_kwargs(
    cluster: tuple[StandaloneCluster, str], env_archive: str, tmp: Path, **common: Any
) -> dict[str, Any]:
    """The operator's arguments for the cluster; with ``common`` (topic, connection), what the test adds."""
    return {
        "spark_conn_id": "spark_cluster",
        "kafka_config_id": "kafka_cluster",
        **common,
        "conf": dict(SMALL),
        "ship_provider": True,
        "python_env_archive": env_archive,
        "ship_kafka_config": True,  # the cluster-mode path: the config travels with --files
        "report_dir": f"file://{tmp}",  # the report on storage a cluster-mode driver reaches
        "executor_memory": "512m",
        "driver_memory": "512m",
    }


def _manifest_stats(uri: str) -> dict[int, Any]:
    from airflow_provider_kstate.store.layout import resolve
    from airflow_provider_kstate.store.manifest import read_manifest

    manifest = read_manifest(resolve(uri).uri)  # the pointer's current version
    # offsets, rows and digest; the data files' names differ between any two writes
    return {
        p: {k: v for k, v in s.to_dict().items() if k != "files"} for p, s in manifest.partition_stats.items()
    }


def _comparable(report: dict[str, Any]) -> dict[str, Any]:
    """A report without what differs between two equal rebuilds: timings, locations, version and file names."""
    drop = {"seconds", "snapshot_uri", "previous", "warnings", "snapshot_version", "removed"}
    out = {k: v for k, v in report.items() if k not in drop}
    if isinstance(out.get("partitions"), dict):
        out["partitions"] = {
            p: {k: v for k, v in e.items() if k != "files"} if isinstance(e, dict) else e
            for p, e in out["partitions"].items()
        }
    return out


def test_rebuild_and_deep_check_on_the_cluster_match_local(
    cluster: tuple[StandaloneCluster, str],
    env_archive: str,
    store_topic: str,
    kafka_config: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    from airflow_provider_kstate.operators.deep_check import KStateDeepCheckOperator
    from airflow_provider_kstate.operators.rebuild import KStateRebuildOperator

    _secret_connection(monkeypatch, kafka_config)
    local_uri, cluster_uri = str(tmp_path / "local"), str(tmp_path / "cluster")
    common = {"topic": store_topic, "kafka_config_id": "kafka_cluster"}
    local = _rebuild_locally(local_uri, **common)
    kwargs = _cluster_kwargs(cluster, env_archive, tmp_path, **common)
    remote = KStateRebuildOperator(task_id="rc", snapshot_uri=cluster_uri, **kwargs).execute(_context())
    assert _comparable(remote) == _comparable(local)
    assert _manifest_stats(cluster_uri) == _manifest_stats(local_uri)

    deep_local = KStateDeepCheckOperator(
        task_id="dl", snapshot_uri=local_uri, conf=dict(SMALL), **common
    ).execute(_context())
    deep_remote = KStateDeepCheckOperator(task_id="dc", snapshot_uri=cluster_uri, **kwargs).execute(
        _context()
    )
    assert deep_remote["ok"] and deep_local["ok"]
    assert _comparable(deep_remote) == _comparable(deep_local)
    assert not list(tmp_path.glob("dc-*.json")), "the report on shared storage is removed after reading"
    logged = capfd.readouterr()
    assert "kstate-rebuild: ok" in logged.out + logged.err  # the task log is here ...
    assert SECRET not in logged.out + logged.err  # ... and the connection's secret is not
    for kind in ("rebuild", "deep check"):  # the drivers' progress, from 0 to the 2,000 offsets, logged
        assert (
            f"PROGRESS {kind} {store_topic}: 0 of 2,000 offsets (0.0%) in 4 partitions"
            in logged.out + logged.err
        )
        assert f"PROGRESS {kind} {store_topic}: 2,000 of 2,000 offsets (100.0%)" in logged.out + logged.err
    progress = snapshot_progress(cluster_uri)  # what the page shows: the cluster rebuild's last document
    assert progress is not None and (progress["state"], progress["read"], progress["total"]) == (
        "done",
        2000,
        2000,
    )
    assert progress["live_reports"] >= 1  # the executors' Python workers reached the driver's listener


def test_without_the_archive_the_bare_executors_cannot_run_the_apps(
    cluster: tuple[StandaloneCluster, str], env_archive: str, store_topic: str, tmp_path: Path
) -> None:
    from airflow_provider_kstate.errors import SparkApplicationError
    from airflow_provider_kstate.operators.rebuild import KStateRebuildOperator

    kwargs = {**_cluster_kwargs(cluster, env_archive, tmp_path), "kafka_config_id": "kafka_default"}
    kwargs.pop("python_env_archive")
    # the driver (client mode, here) keeps this interpreter; the executors get the bare one
    kwargs["conf"] = {
        **SMALL,
        "spark.pyspark.python": cluster[1],
        "spark.pyspark.driver.python": sys.executable,
    }
    op = KStateRebuildOperator(task_id="rb", topic=store_topic, snapshot_uri=str(tmp_path / "s"), **kwargs)
    with pytest.raises(
        SparkApplicationError, match="No module named|must be installed|ImportError|Python worker"
    ):
        op.execute(_context())


def test_pyspark_cluster_deploy_mode_is_refused_by_the_standalone_master(
    cluster: tuple[StandaloneCluster, str],
    env_archive: str,
    store_topic: str,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Standalone masters run only JVM drivers in cluster mode: spark-submit refuses a Python one."""
    from airflow_provider_kstate.operators.rebuild import KStateRebuildOperator

    kwargs = {**_cluster_kwargs(cluster, env_archive, tmp_path), "kafka_config_id": "kafka_default"}
    op = KStateRebuildOperator(
        task_id="rm", topic=store_topic, snapshot_uri=str(tmp_path / "s"), deploy_mode="cluster", **kwargs
    )
    with pytest.raises(Exception, match="spark-submit|Cluster deploy mode|not supported") as info:
        op.execute(_context())
    logged = capfd.readouterr()
    assert "not supported for python applications on standalone clusters" in (
        str(info.value) + logged.out + logged.err
    )


def test_the_rebuild_through_sparks_kafka_source_on_the_cluster_matches_local(
    cluster: tuple[StandaloneCluster, str],
    env_archive: str,
    store_topic: str,
    kafka_config: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``changelog_reader="spark"`` on the standalone cluster: Spark's Kafka source in the executors of the
    workers (its jars shipped with ``jars``: the bare executors have none), the same snapshot as the default
    reader on ``local[2]``."""
    from kstate_support import spark_kafka

    from airflow_provider_kstate.operators.rebuild import KStateRebuildOperator

    # the plain connection: the Spark reader refuses SASL settings without a mechanism (the secret one above)
    monkeypatch.setenv(
        "AIRFLOW_CONN_KAFKA_CLUSTER", json.dumps({"conn_type": "kafka", "extra": kafka_config})
    )
    local_uri, cluster_uri = str(tmp_path / "local"), str(tmp_path / "cluster-spark-source")
    common = {"topic": store_topic, "kafka_config_id": "kafka_cluster"}
    local = _rebuild_locally(local_uri, **common)
    kwargs = _cluster_kwargs(cluster, env_archive, tmp_path, **common)
    remote = KStateRebuildOperator(
        task_id="rs",
        snapshot_uri=cluster_uri,
        changelog_reader="spark",
        jars=",".join(spark_kafka.jars()),
        **kwargs,
    ).execute(_context())
    assert _comparable(remote) == _comparable(local)
    assert _manifest_stats(cluster_uri) == _manifest_stats(local_uri)
