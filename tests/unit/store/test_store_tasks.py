"""The state tasks' decisions and the Spark submission, in the domain (``store/tasks.py``,
``store/submission.py``): no Airflow, no operator."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_kstate.errors import (
    BrokerDeviationError,
    KStateConfigError,
    SnapshotError,
    SparkApplicationError,
    StateCheckFailed,
)
from airflow_provider_kstate.store import contract, submission, tasks
from airflow_provider_kstate.store.results import CheckReport, RebuildReport

TOPIC = "orders-changelog"


def _base(**overrides: Any) -> list[str]:
    given: dict[str, Any] = {
        "progress_interval": 10.0,
        "changelog_reader": "confluent",
        "accepted": None,
        "allow_non_compacted": False,
        **overrides,
    }
    return tasks.store_args(TOPIC, "/s", **given)


def test_the_shared_arguments_pass_only_what_the_app_can_use() -> None:
    assert _base() == ["--topic", TOPIC, "--snapshot-uri", "/s", "--progress-interval", "10"]
    args = _base(
        progress_interval=2.5,
        changelog_reader="spark",
        accepted=["read_committed", "latest_offset", "last_stable_offset"],
        allow_non_compacted=True,
    )
    assert args[args.index("--progress-interval") + 1] == "2.5"
    assert args[args.index("--changelog-reader") + 1] == "spark"
    assert args[args.index("--allow-broker-deviation") + 1] == "latest_offset,last_stable_offset"
    assert args[-1] == "--allow-non-compacted"
    assert "--allow-broker-deviation" not in _base(accepted=["read_committed"])


def test_the_deep_check_and_rebuild_arguments() -> None:
    assert tasks.deep_check_args(["--topic", TOPIC], 5) == ["--topic", TOPIC, "--sample-keys", "5"]
    assert tasks.rebuild_args([], 3, None) == ["--partitions", "3"]
    assert tasks.rebuild_args([], 3, [0, 2], 4) == [
        "--partitions",
        "3",
        "--only-partitions",
        "0,2",
        "--keep-versions",
        "4",
    ]


def test_progress_interval_and_keep_versions() -> None:
    assert tasks.progress_seconds("2.5") == 2.5 and tasks.progress_seconds(0) == 0.0
    for bad in (-1, float("nan")):
        with pytest.raises(KStateConfigError, match="progress_interval"):
            tasks.progress_seconds(bad)
    assert tasks.keep_count(3, "3") == 3
    for keep in (None, 0):
        with pytest.raises(KStateConfigError, match="keep_versions must be at least 1, got 'x'"):
            tasks.keep_count(keep, "x")


def test_the_rebuild_target_and_scope() -> None:
    assert tasks.rebuild_target(TOPIC, 2, None) == 2 and tasks.rebuild_target(TOPIC, 2, 4) == 4
    with pytest.raises(KStateConfigError, match="partitions=1 is fewer than topic"):
        tasks.rebuild_target(TOPIC, 2, 1)

    def unread() -> int:
        raise AssertionError("a full rebuild reads no manifest")

    assert tasks.rebuild_scope(2, None, unread) is None and tasks.rebuild_scope(2, [], unread) == []
    assert tasks.rebuild_scope(2, [1], lambda: 2) == [1]
    with pytest.raises(KStateConfigError, match=r"\[5\] do not exist in a 2-partition layout"):
        tasks.rebuild_scope(2, [0, 5], unread)  # refused before the snapshot is read
    with pytest.raises(KStateConfigError, match="snapshot has 2 partitions and the target is 4"):
        tasks.rebuild_scope(4, [1], lambda: 2)
    assert tasks.scope_text(None) == "all partitions" and tasks.scope_text([1]) == "only partitions [1]"


def test_the_broker_doctor_names_and_accepts() -> None:
    assert tasks.app_subject("deep_check.py", TOPIC) == f"the deep check of {TOPIC!r}"
    assert tasks.accepted_deviations(["latest_offset", "read_committed"], ("read_committed",)) == [
        "read_committed"
    ]


def test_the_check_verdict_and_the_rebuild_report() -> None:
    good = CheckReport.read(
        {"ok": True, "partitions": {"0": {"ok": True, "problems": []}}}, "deep", TOPIC, "/s"
    )
    assert tasks.check_failure("deep", "/s", TOPIC, good) is None
    bad = CheckReport.read(
        {"ok": False, "partitions": {"1": {"ok": False, "problems": ["row differences: 1 missing"]}}},
        "deep",
        TOPIC,
        "/s",
    )
    failure = tasks.check_failure("deep", "/s", TOPIC, bad)
    assert isinstance(failure, StateCheckFailed)
    assert str(failure).startswith(f"deep check of '/s' against {TOPIC!r} failed (partitions [1]): ")
    with pytest.raises(SnapshotError, match="reported failure: boom; the previous snapshot is unchanged"):
        tasks.rebuilt({"ok": False, "error": "boom"}, "/s", TOPIC)
    written = {
        "ok": True,
        "topic": TOPIC,
        "snapshot_uri": "/s",
        "snapshot_version": "v-20260101T000000-abcdef",
        "records_read": 0,
        "rows": 0,
        "layout": 3,
        "partitions": {},
    }
    assert isinstance(tasks.rebuilt(written, "/s", TOPIC), RebuildReport)


def test_a_submission_adds_the_files_the_run_needs(tmp_path: Path) -> None:
    plain = submission.plan_submission(
        "/c.json",
        "/r.json",
        str(tmp_path),
        ["--x"],
        deploy_mode=None,
        ship_kafka_config=None,
        ship_provider=False,
        python_env_archive=None,
    )
    assert plain == submission.Submission(
        args=["--kafka-config-file", "/c.json", "--report-file", "/r.json", "--x"]
    )
    cluster = submission.plan_submission(
        "/c.json",
        "/r.json",
        str(tmp_path),
        [],
        deploy_mode="CLUSTER",
        ship_kafka_config=None,
        ship_provider=False,
        python_env_archive="hdfs:///env.tar.gz",
        driver_python="/py",
    )
    assert cluster.files == ["/c.json"] and cluster.archives == ["hdfs:///env.tar.gz#env"]
    assert cluster.conf == {"spark.pyspark.python": "./env/bin/python"}  # the driver runs in the cluster
    client = submission.plan_submission(
        "/c.json",
        "/r.json",
        str(tmp_path),
        [],
        deploy_mode="client",
        ship_kafka_config=False,
        ship_provider=False,
        python_env_archive="env.tar.gz",
        driver_python="/py",
    )
    assert client.files == [] and client.conf["spark.pyspark.driver.python"] == "/py"


def test_the_run_parameters_merge_the_operators_and_the_runs() -> None:
    sub = submission.Submission(args=["--a"], files=["/c.json"], archives=["e.tgz#env"], conf={"k": "run"})
    run = submission.run_parameters(
        sub,
        spark_conf={"k": "spark_conf", "spark.archives": "x.zip"},
        conf={"spark.ui.showConsoleProgress": "true"},
        archives="a.zip#a",
        files=None,
        py_files="p.zip",
    )
    assert run["application_args"] == ["--a"] and run["files"] == "/c.json" and run["py_files"] == "p.zip"
    assert run["conf"] == {
        "spark.ui.showConsoleProgress": "true",
        "spark.sql.session.timeZone": "UTC",
        "k": "run",
        "spark.archives": "x.zip,a.zip#a,e.tgz#env",
    }
    bare = submission.run_parameters(
        submission.Submission(args=[]), spark_conf=None, conf=None, archives=None, files=None, py_files=None
    )
    assert bare["conf"] == submission.DEFAULT_SPARK_CONF and bare["files"] is None


def test_the_report_is_read_back_and_removed(tmp_path: Path) -> None:
    with submission.report_file(None, "t") as local:
        Path(local).write_text(json.dumps({"ok": True}))
        assert submission.read_report(local, "app.py") == {"ok": True}
    assert not Path(local).exists()
    with submission.report_file(str(tmp_path), "t") as there:
        assert Path(there).parent == tmp_path and Path(there).name.startswith("t-")
        Path(there).write_text("[1]")
        with pytest.raises(SnapshotError, match="not a JSON object"):
            submission.read_report(there, "app.py")
    assert not Path(there).exists()
    with pytest.raises(SnapshotError, match="exited without writing its report"):
        submission.read_report(str(tmp_path / "none.json"), "app.py")


def test_a_failure_report_picks_the_tasks_error(tmp_path: Path) -> None:
    report = str(tmp_path / "r.json")
    assert submission.failure_error(report, "/a/rebuild.py", "rebuild") is None  # none written
    contract.fail(
        report, "bounds disagree", lambda text: None, "kstate-rebuild", contract.ErrorCode.OFFSET_BOUNDS
    )
    error = submission.failure_error(report, "/a/rebuild.py", "rebuild")
    assert isinstance(error, BrokerDeviationError) and str(error).startswith(
        "rebuild.py failed: bounds disagree"
    )
    contract.fail(report, "boom", lambda text: None, "kstate-rebuild", contract.ErrorCode.INTERNAL)
    assert isinstance(submission.failure_error(report, "/a/rebuild.py", "rebuild"), SparkApplicationError)
