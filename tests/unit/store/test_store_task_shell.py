"""What the state operators hand the domain (issue 40, item 2): the rebuild's log text
(``store/tasks.py``), and a submission's run files, its parameters for one run, its reported failure and
the processes it started (``store/submission.py``); no Airflow."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest

from airflow_provider_kstate.errors import NotCompactedChangelogError
from airflow_provider_kstate.store import contract, submission, tasks
from airflow_provider_kstate.store.results import RebuildReport

TOPIC = "orders-changelog"


def test_the_rebuild_log_lines() -> None:
    assert tasks.rebuild_intent(6, None, 3) == (
        "6 partitions (all partitions) into a new version; keeping 3 versions"
    )
    assert "(only partitions [1])" in tasks.rebuild_intent(6, [1], 3)
    report = RebuildReport.from_dict(
        {
            "topic": TOPIC,
            "snapshot_uri": "/s",
            "snapshot_version": "v-20260101T000000-abcdef",
            "records_read": 13,
            "rows": 5,
            "layout": 2,
            "seconds": 1.5,
            "partitions": {},
        }
    )
    text = tasks.rebuilt_text(report)
    assert text.startswith(
        "version v-20260101T000000-abcdef, 13 changelog records read, 5 rows in 0 partitions"
    )
    assert text.endswith(f"1.5s; previous: {report.previous}")


def test_the_run_files_are_private_and_removed(tmp_path: Path) -> None:
    with submission.run_files(None, "t") as (report, ship):
        assert Path(ship).is_dir() and Path(report).parent.is_dir() and Path(report).name == "report.json"
    assert not Path(ship).exists() and not Path(report).parent.exists()
    with submission.run_files(str(tmp_path), "t") as (report, ship):
        assert Path(report).parent == tmp_path and Path(ship).is_dir()
        Path(report).write_text("{}")
    assert not Path(report).exists() and not Path(ship).exists()


def test_the_run_parameters_are_set_for_the_body_and_restored() -> None:
    operator = SimpleNamespace(conf={"a": "1"}, files=None)
    with (
        pytest.raises(RuntimeError),
        submission.run_parameters_set(operator, {"conf": {"b": "2"}, "files": "x"}),
    ):
        assert operator.conf == {"b": "2"} and operator.files == "x"
        raise RuntimeError("spark-submit failed")
    assert operator.conf == {"a": "1"} and operator.files is None


def test_a_reported_failure_replaces_spark_submits_error(tmp_path: Path) -> None:
    report = str(tmp_path / "r.json")
    with pytest.raises(RuntimeError, match="exit 2"), submission.reported_failure(report, "/a/app.py", "t"):
        raise RuntimeError("exit 2")  # no report: spark-submit's own error
    contract.fail(
        report, "not compacted", lambda text: None, "kstate-rebuild", contract.ErrorCode.NOT_COMPACTED
    )
    with pytest.raises(NotCompactedChangelogError, match="app.py refused: not compacted") as raised:
        with submission.reported_failure(report, "/a/app.py", "t"):
            raise RuntimeError("exit 2")
    assert isinstance(raised.value.__cause__, RuntimeError)
    with submission.reported_failure(report, "/a/app.py", "t"):
        pass  # no failure: nothing raised


def test_the_processes_a_submission_started_are_ended() -> None:
    assert submission.spawned_tree(None) == [] and submission.end_processes([], 0.1) == (0, 0)
    bystander = subprocess.Popen(["sleep", "60"])  # started before the submission: not its to end
    before = submission.child_pids()
    assert bystander.pid in before
    started = subprocess.Popen(["sh", "-c", "sleep 60 & sleep 60"])
    deadline = time.monotonic() + 10
    while len(psutil.Process(started.pid).children()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        tree = submission.spawned_tree(before)
        assert {p.pid for p in tree} >= {started.pid} and bystander.pid not in {p.pid for p in tree}
        terminated, killed = submission.end_processes(tree, 2.0)
        assert terminated + killed == len(tree) and started.wait(5) is not None
        assert bystander.poll() is None
    finally:
        for proc in (bystander, started):
            proc.kill()
            proc.wait()


def _spark_task(**given: object) -> SimpleNamespace:
    """A Spark task's own spark-submit parameters (the operator's defaults), with ``given``."""
    own: dict[str, object] = {
        "task_id": "t",
        "report_dir": None,
        "deploy_mode": None,
        "ship_kafka_config": None,
        "ship_provider": False,
        "python_env_archive": None,
        "spark_conf": None,
        "conf": {"spark.executor.cores": "2"},
        "archives": None,
        "files": None,
        "py_files": None,
        "application_args": None,
    }
    return SimpleNamespace(**{**own, **given})


def test_a_submission_runs_with_the_run_s_parameters_and_returns_the_report() -> None:
    task = _spark_task()
    seen: dict[str, object] = {}

    def spark_submit() -> (
        None
    ):  # what SparkSubmitOperator.execute sees, and the application writing its report
        args = list(task.application_args)  # type: ignore[arg-type]
        seen.update(args=args, conf=dict(task.conf))  # type: ignore[arg-type]
        Path(args[args.index("--report-file") + 1]).write_text('{"ok": true}')

    assert submission.submit(task, "/cfg.json", "/a/app.py", ["--topic", TOPIC], spark_submit) == {"ok": True}  # type: ignore[arg-type]
    assert seen["args"][:2] == ["--kafka-config-file", "/cfg.json"] and seen["args"][-2:] == [
        "--topic",
        TOPIC,
    ]  # type: ignore[index]
    assert seen["conf"] == {**submission.DEFAULT_SPARK_CONF, "spark.executor.cores": "2"}
    assert task.conf == {"spark.executor.cores": "2"} and task.application_args is None, "restored"

    def failing() -> None:
        args = list(task.application_args)  # type: ignore[arg-type]
        contract.fail(
            args[args.index("--report-file") + 1],
            "not compacted",
            lambda text: None,
            "kstate-rebuild",
            contract.ErrorCode.NOT_COMPACTED,
        )
        raise RuntimeError("spark-submit exited 1")

    with pytest.raises(NotCompactedChangelogError, match="app.py refused: not compacted"):
        submission.submit(task, "/cfg.json", "/a/app.py", [], failing)  # type: ignore[arg-type]


def test_a_kill_ends_the_submission_then_what_it_started() -> None:
    killed: list[bool] = []
    assert submission.kill_tree(None, lambda: killed.append(True), 0.1) == (0, 0) and killed == [True]


def test_the_shared_read_arguments_and_the_accepted_risk() -> None:
    class Log:
        lines: list[str] = []

        def warning(self, msg: str, *args: object) -> None:
            self.lines.append(msg % args)

    read = SimpleNamespace(
        topic=TOPIC,
        snapshot_uri="/s",
        progress_interval=2.5,
        changelog_reader="confluent",
        allow_non_compacted_changelog=False,
    )
    log = Log()
    assert tasks.read_args(read, None, log) == [  # type: ignore[arg-type]
        "--topic",
        TOPIC,
        "--snapshot-uri",
        "/s",
        "--progress-interval",
        "2.5",
    ]
    assert log.lines == []
    read.allow_non_compacted_changelog = True
    assert tasks.read_args(read, ["latest_offset", "other"], log)[-3:] == [  # type: ignore[arg-type]
        "--allow-broker-deviation",
        "latest_offset",
        "--allow-non-compacted",
    ]
    assert log.lines == [
        f"RISK ACCEPTED: allow_non_compacted_changelog=True for {TOPIC}: a changelog that retention trimmed "
        "may lack keys, so the snapshot may miss state"
    ]


def test_the_store_bad_error_quotes_each_failed_check() -> None:
    from airflow_provider_kstate.errors import StateCheckFailed
    from airflow_provider_kstate.store.results import CHECK_FORMAT

    def report(check: str, ok: bool) -> dict[str, object]:
        return {
            "format": CHECK_FORMAT,
            "check": check,
            "topic": TOPIC,
            "snapshot_uri": "/s",
            "ok": ok,
            "snapshot_ok": True,
            "problems": [] if ok else ["bad"],
            "failed_partitions": [] if ok else [1],
        }

    error = tasks.store_bad([report("fast", True), None, report("deep", False)])
    assert isinstance(error, StateCheckFailed)
    assert str(error) == (
        "the state store is bad and rebuild=never: deep check: problems ['bad'], failed partitions [1]"
    )
    assert tasks.check_report(None) is None and tasks.check_report(report("fast", True), "fast").ok  # type: ignore[union-attr]
