"""Unit tests of the state hook and operators: constructors, templating, the fast-check logic (fake admin)."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_kstate.errors import (
    KStateConfigError,
    SnapshotError,
    StateCheckFailed,
    TopicNotFoundError,
)
from airflow_provider_kstate.hooks import snapshot as state_hook
from airflow_provider_kstate.hooks.snapshot import KStateSnapshotHook, check_uri, load_manifest
from airflow_provider_kstate.operators.deep_check import KStateDeepCheckOperator
from airflow_provider_kstate.operators.fast_check import KStateFastCheckOperator
from airflow_provider_kstate.operators.rebuild import KStateRebuildOperator
from airflow_provider_kstate.operators.spark_app import KStateSparkApplicationOperator
from airflow_provider_kstate.params import as_optional_count, as_partitions
from airflow_provider_kstate.spark_apps import spark_app_path
from airflow_provider_kstate.store import tasks
from airflow_provider_kstate.store.manifest import (
    MANIFEST_NAME,
    Manifest,
    PartitionStats,
    write_manifest,
)
from airflow_provider_kstate.store.results import CHECK_FORMAT

TOPIC = "orders-changelog"


class FakeAdmin:
    """Stands in for KStateAdminHook: a topic with fixed watermarks; counts list-offsets calls."""

    def __init__(self, marks: dict[int, tuple[int, int]] | None, topic: str = TOPIC) -> None:
        self.marks = marks
        self.topic = topic
        self.watermark_calls = 0

    def partition_count(self, topic: str) -> int:
        if self.marks is None or topic != self.topic:
            raise TopicNotFoundError(f"topic {topic!r} does not exist on the cluster")
        return len(self.marks)

    def watermarks(self, topic: str, partitions: list[int]) -> dict[int, tuple[int, int]]:
        self.watermark_calls += 1
        assert self.marks is not None
        return {p: self.marks[p] for p in partitions}

    def topic_ids(self, topics: list[str]) -> dict[str, str]:
        return dict.fromkeys(topics, "")  # unknown: the fast check judges by offsets


def fast_check(cluster: Any, topic: str, uri: str) -> dict[str, Any]:
    """The snapshot hook's fast check (URI validated, errors translated) on the fake ``cluster``: its
    report document."""
    hook = KStateSnapshotHook()
    hook._admin = cluster
    return hook.fast_check(topic, uri).to_dict()


def make_snapshot(root: Path, ends: dict[int, int], topic: str = TOPIC, partitions: int | None = None) -> str:
    stats = {p: PartitionStats(0, e, e // 2, "0" * 16, {}) for p, e in ends.items()}
    write_manifest(
        str(root), Manifest(topic=topic, partitions=partitions or len(ends), partition_stats=stats)
    )
    return str(root)


# -- constructors and templating ------------------------------------------------------------------------


@pytest.fixture
def no_connections(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if anything looks a connection up (constructors must only store arguments)."""
    from airflow.sdk import BaseHook

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a connection was looked up at construction time")

    monkeypatch.setattr(BaseHook, "get_connection", classmethod(boom))


def test_constructors_only_store_arguments(no_connections: None) -> None:
    fast = KStateFastCheckOperator(task_id="f", topic="t", snapshot_uri="/s", fail_on_bad=False)
    deep = KStateDeepCheckOperator(task_id="d", topic="t", snapshot_uri="/s", sample_keys=3)
    rebuild = KStateRebuildOperator(
        task_id="r", topic="t", snapshot_uri="/s", partitions=8, only_partitions=[1]
    )
    app = KStateSparkApplicationOperator(task_id="a", application="/app.py", application_args=["--x", "1"])
    assert (fast.topic, fast.snapshot_uri, fast.fail_on_bad, fast.kafka_config_id) == (
        "t",
        "/s",
        False,
        "kafka_default",
    )
    assert (deep.sample_keys, deep.fail_on_bad, deep.spark_conn_id) == (3, True, "spark_default")
    assert (rebuild.partitions, rebuild.only_partitions) == (8, [1])
    assert app.application_args == ["--x", "1"]


@pytest.mark.parametrize(
    "operator",
    [KStateFastCheckOperator, KStateDeepCheckOperator, KStateRebuildOperator, KStateSparkApplicationOperator],
)
def test_template_fields_are_tuples(operator: Any) -> None:
    assert isinstance(operator.template_fields, tuple)
    assert all(isinstance(f, str) for f in operator.template_fields)


def test_constructors_are_keyword_only() -> None:
    with pytest.raises(TypeError):
        KStateFastCheckOperator("f", "t", "/s")  # type: ignore[misc]


def test_spark_apps_are_located_in_the_package() -> None:
    assert spark_app_path("rebuild.py").endswith("airflow_provider_kstate/spark_apps/rebuild.py")
    with pytest.raises(KStateConfigError, match="nope.py"):
        spark_app_path("nope.py")


# -- parsing ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("", None),
        ("None", None),
        ([], None),
        ("3,1", [1, 3]),
        ("[2, 0]", [0, 2]),
        ([4, 4], [4]),
        (5, [5]),
    ],
)
def test_parse_partitions(value: Any, expected: list[int] | None) -> None:
    assert as_partitions("partitions", value) == expected


def test_parse_partitions_rejects_garbage() -> None:
    with pytest.raises(KStateConfigError, match="not a list"):
        as_partitions("partitions", "a,b")
    with pytest.raises(KStateConfigError, match="negative"):
        as_partitions("partitions", [-1])


def test_parse_count() -> None:
    def parse_count(value: Any) -> int | None:
        return as_optional_count("partitions", value)

    assert parse_count(None) is None and parse_count("None") is None and parse_count("6") == 6
    with pytest.raises(KStateConfigError, match="at least 1"):
        parse_count(0)
    with pytest.raises(KStateConfigError, match="not an integer"):
        parse_count("six")


# -- the fast check -------------------------------------------------------------------------------------


def test_fast_check_ok(tmp_path: Path) -> None:
    uri = make_snapshot(tmp_path / "snap", {0: 10, 1: 5, 2: 0})
    report = fast_check(FakeAdmin({0: (0, 12), 1: (0, 5), 2: (0, 0)}), TOPIC, uri)
    assert report["ok"] and report["snapshot_ok"] and report["layout_ok"]
    assert report["failed_partitions"] == [] and report["problems"] == []
    assert report["partitions"]["0"] == {
        "ok": True,
        "problems": [],
        "log_start": 0,
        "high_watermark": 12,
        "start_offset": 0,
        "end_offset": 10,
        "rows": 5,
        "lag": 2,
    }
    json.dumps(report)  # XCom-able


def test_fast_check_missing_snapshot_is_a_failed_check(tmp_path: Path) -> None:
    report = fast_check(FakeAdmin({0: (0, 1)}), TOPIC, str(tmp_path / "never-built"))
    assert not report["ok"] and not report["snapshot_ok"] and report["snapshot_missing"]
    assert "snapshot missing" in report["problems"][0] and "does not exist" in report["problems"][0]


def test_fast_check_unfinished_snapshot_is_missing(tmp_path: Path) -> None:
    (tmp_path / "snap" / "partition=0").mkdir(parents=True)
    report = fast_check(FakeAdmin({0: (0, 1)}), TOPIC, str(tmp_path / "snap"))
    assert report["snapshot_missing"] and f"no {MANIFEST_NAME}" in report["problems"][0]


def test_fast_check_corrupt_manifest(tmp_path: Path) -> None:
    uri = make_snapshot(tmp_path / "snap", {0: 3})
    (tmp_path / "snap" / MANIFEST_NAME).write_text('{"format": "kstate-snapshot/1", "topic": ')
    report = fast_check(FakeAdmin({0: (0, 3)}), TOPIC, uri)
    assert not report["ok"] and not report["snapshot_ok"] and not report["snapshot_missing"]
    assert "corrupt" in report["problems"][0] and "not valid JSON" in report["problems"][0]


def test_fast_check_truncated_or_recreated_changelog_names_the_partition(tmp_path: Path) -> None:
    uri = make_snapshot(tmp_path / "snap", {0: 10, 1: 40, 2: 7})
    report = fast_check(FakeAdmin({0: (0, 10), 1: (0, 12), 2: (0, 9)}), TOPIC, uri)
    assert not report["ok"] and report["failed_partitions"] == [1]
    (problem,) = report["partitions"]["1"]["problems"]
    assert "up to 40" in problem and "ends at 12" in problem and "recreated" in problem


def test_fast_check_deleted_records_before_resume_offset(tmp_path: Path) -> None:
    uri = make_snapshot(tmp_path / "snap", {0: 10, 1: 4})
    report = fast_check(FakeAdmin({0: (0, 10), 1: (6, 20)}), TOPIC, uri)
    assert report["failed_partitions"] == [1]
    assert "starts at 6" in report["partitions"]["1"]["problems"][0]


def test_fast_check_store_left_behind_by_partition_increase(tmp_path: Path) -> None:
    uri = make_snapshot(tmp_path / "snap", {0: 3, 1: 3})
    report = fast_check(FakeAdmin({0: (0, 3), 1: (0, 3), 2: (0, 0), 3: (0, 0)}), TOPIC, uri)
    assert not report["ok"] and not report["layout_ok"]
    assert report["snapshot_partitions"] == 2 and report["topic_partitions"] == 4
    assert "has 2 partitions but topic" in report["problems"][0] and "has 4" in report["problems"][0]
    assert report["failed_partitions"] == [2, 3]
    assert report["partitions"]["3"]["problems"] == ["partition 3 is not in the snapshot"]


def test_fast_check_snapshot_of_another_topic(tmp_path: Path) -> None:
    uri = make_snapshot(tmp_path / "snap", {0: 3}, topic="other")
    report = fast_check(FakeAdmin({0: (0, 3)}), TOPIC, uri)
    assert not report["ok"] and "of topic 'other'" in report["problems"][0]


def test_fast_check_bad_input_raises(tmp_path: Path) -> None:
    with pytest.raises(TopicNotFoundError, match="nope"):
        fast_check(FakeAdmin({0: (0, 1)}), "nope", str(tmp_path))
    with pytest.raises(KStateConfigError, match="unsupported scheme 'ftp'"):
        fast_check(FakeAdmin({0: (0, 1)}), TOPIC, "ftp://host/snap")
    with pytest.raises(KStateConfigError, match="empty"):
        check_uri("  ")
    (tmp_path / "file").write_text("x")
    with pytest.raises(SnapshotError, match="is a file"):
        fast_check(FakeAdmin({0: (0, 1)}), TOPIC, str(tmp_path / "file"))


def test_fast_check_file_uri(tmp_path: Path) -> None:
    make_snapshot(tmp_path / "snap", {0: 3})
    assert load_manifest(f"file://{tmp_path}/snap").partitions == 1


def test_fast_check_is_o_partitions_with_one_offsets_round(tmp_path: Path) -> None:
    n = 1000
    uri = make_snapshot(tmp_path / "snap", dict.fromkeys(range(n), 100))
    admin = FakeAdmin(dict.fromkeys(range(n), (0, 100)))
    report = fast_check(admin, TOPIC, uri)
    # one offsets round whatever the partitions; its seconds by size are bench/bench_state.py --fast-check-only's
    assert report["ok"] and admin.watermark_calls == 1 and len(report["partitions"]) == n


# -- operators over the fast check ----------------------------------------------------------------------


@pytest.fixture
def fake_admin(monkeypatch: pytest.MonkeyPatch) -> FakeAdmin:
    admin = FakeAdmin({0: (0, 10), 1: (0, 3)})
    monkeypatch.setattr(KStateSnapshotHook, "admin", property(lambda self: admin))
    return admin


def test_fast_check_operator_reports_or_raises(tmp_path: Path, fake_admin: FakeAdmin) -> None:
    uri = make_snapshot(tmp_path / "snap", {0: 10, 1: 9})
    report = KStateFastCheckOperator(task_id="f", topic=TOPIC, snapshot_uri=uri, fail_on_bad=False).execute(
        {}
    )
    assert report["failed_partitions"] == [1]
    document = fast_check(fake_admin, TOPIC, uri)  # the XCom is the fast check's document, as it wrote it
    document["seconds"] = report["seconds"]
    assert json.dumps(report) == json.dumps(document)
    with pytest.raises(
        StateCheckFailed, match=r"partitions \[1\]\).*partition 1: snapshot covers offsets up to 9"
    ):
        KStateFastCheckOperator(task_id="f", topic=TOPIC, snapshot_uri=uri).execute({})


def test_rebuild_plan_validates_inputs(tmp_path: Path, fake_admin: FakeAdmin) -> None:
    uri = make_snapshot(tmp_path / "snap", {0: 10, 1: 3})
    hook = KStateSnapshotHook()

    def plan(topic: str = TOPIC, at: str = uri, **given: Any) -> tuple[int, list[int] | None]:
        """The rebuild's target and partitions, as its execute plans them (store.tasks.plan_rebuild)."""
        given.setdefault("keep_versions", 3)
        made = tasks.plan_rebuild(
            topic, given, lambda: hook.admin.partition_count(topic), lambda: hook.manifest(at).partitions
        )
        return made.target, made.only

    assert plan() == (2, None)
    assert plan(only_partitions="1") == (2, [1])
    with pytest.raises(KStateConfigError, match="fewer than topic"):
        plan(partitions=1)
    with pytest.raises(KStateConfigError, match="unchanged layout"):
        plan(partitions=4, only_partitions=[1])
    with pytest.raises(KStateConfigError, match=r"\[5\] do not exist"):
        plan(only_partitions=[5])
    with pytest.raises(SnapshotError, match="snapshot missing"):
        plan(at=str(tmp_path / "none"), only_partitions=[0])
    with pytest.raises(TopicNotFoundError):
        plan(topic="gone")
    with pytest.raises(KStateConfigError, match="keep_versions must be at least 1"):
        plan(keep_versions=0)


def test_kafka_config_file_is_private_and_removed(monkeypatch: pytest.MonkeyPatch) -> None:
    class Admin:
        def client_config(self) -> dict[str, Any]:
            return {"bootstrap.servers": "b:9092", "sasl.password": "s3cret", "oauth_cb": print}

    monkeypatch.setattr(KStateSnapshotHook, "admin", property(lambda self: Admin()))
    with KStateSnapshotHook().kafka_config_file() as path:
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
        assert json.loads(Path(path).read_text()) == {
            "bootstrap.servers": "b:9092",
            "sasl.password": "s3cret",
        }
    assert not os.path.exists(path)


def test_manifest_view_matches_the_spark_apps_manifest(tmp_path: Path) -> None:
    uri = make_snapshot(tmp_path / "snap", {0: 8, 1: 2})
    view = state_hook.load_manifest(uri)
    assert (
        view.topic == TOPIC
        and view.partitions == 2
        and view.partition_stats[0].end_offset == 8
        and view.partition_stats[1].rows == 1
    )


# -- the DAGs parse without touching the network --------------------------------------------------------


def test_dags_parse_with_validated_params(no_connections: None) -> None:
    from kstate_support.airflow_compat import dag_bag  # DagBag moved in Airflow 3.2

    bag = dag_bag(str(Path(__file__).resolve().parents[3] / "dags"))
    assert not bag.import_errors, bag.import_errors
    assert {"kstate_state_maintenance", "kstate_example_pipeline"} <= set(bag.dag_ids)
    dag = bag.get_dag("kstate_state_maintenance")
    params = dag.params
    assert params.get_param("rebuild").schema["enum"] == ["auto", "never", "force"]
    assert params.get_param("deep").schema["type"] == "boolean"
    partitions = params.get_param("partitions")
    assert partitions.schema["type"] == ["null", "integer"] and partitions.schema["minimum"] == 1
    assert partitions.description and all(params.get_param(n).description for n in params)
    from airflow.sdk.definitions.param import ParamValidationError

    with pytest.raises(ParamValidationError):
        params.get_param("partitions").resolve(0)
    with pytest.raises(ParamValidationError):
        params.get_param("rebuild").resolve("sometimes")
    assert dag.schedule == "@daily" or str(dag.timetable.summary) == "@daily"


def test_deep_check_operator_names_partitions_and_sample_keys(
    tmp_path: Path, fake_admin: FakeAdmin, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = make_snapshot(tmp_path / "snap", {0: 10, 1: 3})
    report = {
        "ok": False,
        "records_read": 13,
        "seconds": 1.5,
        "partitions": {
            "0": {"ok": True, "problems": []},
            "1": {
                "ok": False,
                "problems": ["row differences: 1 missing, 1 changed"],
                "missing_keys": ["b'acct-7'"],
                "changed_keys": ["b'acct-9'"],
            },
        },
    }
    monkeypatch.setattr(KStateDeepCheckOperator, "submit", lambda self, hook, *args: dict(report))
    monkeypatch.setattr(
        KStateDeepCheckOperator, "trust_broker", lambda self: []
    )  # the doctor: test_state_defences
    op = KStateDeepCheckOperator(task_id="d", topic=TOPIC, snapshot_uri=uri, fail_on_bad=False)
    result = op.execute({})
    assert result["failed_partitions"] == [1] and result["check"] == "deep"
    before = {**report, "check": "deep", "topic": TOPIC, "snapshot_uri": uri, "failed_partitions": [1]}
    before = {"format": CHECK_FORMAT, **before}  # the report's version, first
    assert json.dumps(result) == json.dumps(before)  # the XCom the operator pushed before CheckReport
    logged = capsys.readouterr().out
    assert "only_partitions=[1]" in logged and "acct-7" in logged
    op = KStateDeepCheckOperator(task_id="d", topic=TOPIC, snapshot_uri=uri)
    with pytest.raises(
        StateCheckFailed, match=r"partitions \[1\].*missing_keys=\[\"b'acct-7'\"\].*changed_keys"
    ):
        op.execute({})
    with pytest.raises(SnapshotError, match="snapshot missing"):
        KStateDeepCheckOperator(task_id="d", topic=TOPIC, snapshot_uri=str(tmp_path / "none")).execute({})


def test_spark_application_error_carries_the_reported_error(
    tmp_path: Path, fake_admin: FakeAdmin, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    from airflow_provider_kstate.errors import SparkApplicationError

    def failing_submit(hook: Any, application: str = "", **kwargs: Any) -> None:
        """The Spark provider's hook in client mode, spark-submit exiting 2 after the app wrote its report."""
        args = op.application_args  # the run's arguments, set on the operator for its execute
        Path(args[args.index("--report-file") + 1]).write_text(
            json.dumps({"ok": False, "error": "topic 'x' is not compacted"})
        )
        raise RuntimeError("Cannot execute: spark-submit ... Error code is: 2.")

    monkeypatch.setattr(KStateSnapshotHook, "kafka_config_file", _fake_cfg_file)
    monkeypatch.setattr(SparkSubmitHook, "submit", failing_submit)
    op = KStateSparkApplicationOperator(task_id="a", application=str(tmp_path / "app.py"))
    with pytest.raises(SparkApplicationError, match="app.py failed: topic 'x' is not compacted"):
        op.execute({})


def _fake_cfg_file(self: Any) -> Any:
    import contextlib

    @contextlib.contextmanager
    def cm() -> Any:
        yield "/dev/null"

    return cm()


# -- the Spark operators are SparkSubmitOperators -------------------------------------------------------


def test_spark_operators_are_spark_submit_operators_with_its_parameters_and_on_kill(tmp_path: Path) -> None:
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    op = KStateRebuildOperator(
        task_id="r",
        topic=TOPIC,
        snapshot_uri="/s",
        deploy_mode="client",
        archives="hdfs:///a.zip#a",
        jars="x.jar",
        yarn_queue="q",
        ship_provider=True,
        python_env_archive="hdfs:///apps/env.tar.gz",
        ship_kafka_config=True,
    )
    assert isinstance(op, SparkSubmitOperator)
    assert {"application_args", "conf", "py_files", "snapshot_uri", "partitions"} <= set(op.template_fields)
    from airflow_provider_kstate.store import submission

    run = submission.task_run_parameters(
        op, "/tmp/cfg/kafka.json", "/tmp/r/report.json", str(tmp_path), ["--topic", TOPIC]
    )
    with submission.run_parameters_set(op, run):  # what the operator's execute sees: its own and the run's
        cmd = op._get_hook()._build_spark_submit_command(op.application)
    line = " ".join(cmd)
    assert "--conf spark.archives=hdfs:///a.zip#a,hdfs:///apps/env.tar.gz#env" in line  # = --archives
    assert "spark.pyspark.python=./env/bin/python" in line and "--files /tmp/cfg/kafka.json" in line
    assert "airflow_provider_kstate.zip" in line and "--jars x.jar" in line
    assert cmd[-6:] == [
        "--kafka-config-file",
        "/tmp/cfg/kafka.json",
        "--report-file",
        "/tmp/r/report.json",
        "--topic",
        TOPIC,
    ]

    killed: list[bool] = []

    class Running:
        _is_yarn_cluster_mode = False
        _is_kubernetes = False

        def on_kill(self) -> None:
            killed.append(True)

    op._hook = Running()  # type: ignore[assignment]
    op.on_kill()
    assert killed == [True]


def test_on_kill_ends_the_process_tree_the_submission_started() -> None:
    import subprocess

    import psutil

    from airflow_provider_kstate.store import submission

    op = KStateSparkApplicationOperator(task_id="a", application="/app.py", kill_grace=0.5)
    bystander = subprocess.Popen(["sleep", "60"])  # started before the submission: not its to kill
    op._children_before = submission.child_pids()
    submit = subprocess.Popen(["sh", "-c", "sleep 60 & sleep 60"])  # spark-submit and its child
    deadline = time.monotonic() + 10
    while len(psutil.Process(submit.pid).children()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [c.pid for c in psutil.Process(submit.pid).children()]

    class ProviderKill:  # the Spark provider's on_kill (here: kills nothing)
        _is_yarn_cluster_mode = False
        _is_kubernetes = False

        def on_kill(self) -> None:
            pass

    op._hook = ProviderKill()  # type: ignore[assignment]
    try:
        op.on_kill()
        assert submit.wait(5) is not None
        for pid in left:
            assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        assert bystander.poll() is None
    finally:
        for proc in (bystander, submit):
            proc.kill()
            proc.wait()


@pytest.mark.parametrize(
    ("holder", "owner", "state", "expected"),
    [
        ("d/r1#try1", "d/r2#try1", "running", False),  # another run, still running
        ("d/r1#try1", "d/r2#try1", "", False),  # another deployment's run: unknown here
        ("d/r1#try1", "d/r2#try1", "failed", True),  # another run that has ended
        ("d/r1#try1", "d/r2#try1", "success", True),
        ("d/r1#try1@aa", "d/r1#try1@bb", "running", False),  # same run id and try: another deployment
        ("d/r1#try2@aa", "d/r1#try1@bb", "running", False),  # a later try holds it
        ("d/r1#try1@aa", "d/r1#try2@bb", "running", True),  # this task's own earlier try
        ("d/r1", "d/r1#try1", "running", True),  # written before tries were recorded
    ],
)
def test_snapshot_lease_takeover_rule(holder: str, owner: str, state: str, expected: bool) -> None:
    from airflow_provider_kstate.lease_rules import may_take_over

    assert may_take_over(holder, owner, state) is expected


def test_snapshot_owner_names_the_try() -> None:
    from types import SimpleNamespace

    from airflow_provider_kstate.lease_rules import run_of, snapshot_owner, try_of

    ti = SimpleNamespace(dag_id="d", run_id="scheduled__2026-11-23T00:00:00+00:00", try_number=3)
    owner = snapshot_owner({"ti": ti})
    assert owner.startswith("d/scheduled__2026-11-23T00:00:00+00:00#try3@")
    assert owner != snapshot_owner({"ti": ti})  # each execution has its own nonce
    assert run_of(owner) == "d/scheduled__2026-11-23T00:00:00+00:00" and try_of(owner) == 3
