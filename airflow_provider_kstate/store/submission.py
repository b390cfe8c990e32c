"""Submitting the package's Spark applications, without Airflow: what a run adds to ``spark-submit``, where
the application writes its report, how that report is read back, how a failed one fails the task, and
ending the processes a submission started.

The Airflow side (``operators/spark_app.py``) gathers the operator's parameters, hands them here and runs
the Spark provider's ``SparkSubmitOperator`` with the result; the error codes' meaning is
:mod:`~airflow_provider_kstate.store.contract`'s.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from airflow_provider_kstate.errors import (
    BrokerDeviationError,
    KStateError,
    NotCompactedChangelogError,
    SnapshotError,
    SparkApplicationError,
    StoredOffsetsError,
    TopicRecreatedError,
)
from airflow_provider_kstate.store import contract
from airflow_provider_kstate.store import uri as uris
from airflow_provider_kstate.store.tasks import BOUND_DEVIATIONS

#: Spark settings every kstate application gets unless the caller overrides them.
DEFAULT_SPARK_CONF = {"spark.ui.showConsoleProgress": "false", "spark.sql.session.timeZone": "UTC"}
#: How a failed application fails the task, by its report's error code: the error and its message
#: (``{app}``: the application's file, ``{error}``: its error line, ``{task}``: the task id). The one place
#: that maps codes; a code not here fails with :class:`SparkApplicationError` (retried).
APP_ERRORS: dict[str, tuple[type[KStateError], str]] = {  # keys: contract.ErrorCode values (parse time)
    # a retry cannot fix the topic's policy
    "not-compacted": (NotCompactedChangelogError, "{app} refused: {error}"),
    # a retry resumes the same stored offsets against the same log: the message names the ways out
    "topic-recreated": (TopicRecreatedError, "{app} refused: {error}"),
    "stored-offsets": (StoredOffsetsError, "{app} refused: {error}"),
    # a retry cannot fix the broker: nothing was read or published
    "offset-bounds": (
        BrokerDeviationError,
        "{app} failed: {error}. {task} refused to trust the read: nothing was published and the current "
        "snapshot is unchanged. Run it on a broker whose ListOffsets matches its fetches, or accept "
        f"allow_broker_deviation={list(BOUND_DEVIATIONS)} to bound reads by where fetches end "
        "(logged as RISK ACCEPTED)",
    ),
}
#: Any other code.
APP_FAILED: tuple[type[KStateError], str] = (SparkApplicationError, "{app} failed: {error}")


def app_error(failure: contract.AppFailure, app: str, task: str) -> KStateError:
    """Return the error a task fails with when its application reported ``failure`` (:data:`APP_ERRORS`).

    :param app: the application's path.
    :param task: the task id.
    """
    cls, message = APP_ERRORS.get(failure.error_code, APP_FAILED)
    return cls(message.format(app=Path(app).name, error=failure.error, task=task))


def failure_error(report: str, app: str, task: str) -> KStateError | None:
    """Return the error a task fails with when spark-submit failed, by the failure report the application
    wrote at ``report``; None when it wrote none (the caller then raises spark-submit's own error)."""
    failure = contract.reported_failure(report)
    return None if failure is None else app_error(failure, app, task)


@contextlib.contextmanager
def reported_failure(report: str, app: str, task: str) -> Iterator[None]:
    """Run the body (spark-submit); when it fails, raise the error the application reported at ``report``
    (:func:`failure_error`) instead, chained to spark-submit's own, or spark-submit's own when it reported none.
    """
    try:
        yield
    except Exception as exc:
        error = failure_error(report, app, task)
        if error is None:
            raise
        raise error from exc


def joined(*parts: str | None) -> str | None:
    """Return the non-empty ``parts`` as one comma-separated list (None when there are none)."""
    items = [p for p in parts if p]
    return ",".join(items) or None


@dataclass
class Submission:
    """What one run adds to the operator's own spark-submit parameters (never secrets, only paths)."""

    args: list[str]
    files: list[str] = field(default_factory=list)
    py_files: list[str] = field(default_factory=list)
    archives: list[str] = field(default_factory=list)
    conf: dict[str, str] = field(default_factory=dict)


def plan_submission(
    cfg: str,
    report: str,
    ship: str,
    args: list[str],
    *,
    deploy_mode: str | None,
    ship_kafka_config: bool | None,
    ship_provider: bool,
    python_env_archive: str | None,
    driver_python: str = sys.executable,
) -> Submission:
    """Return what one run adds to spark-submit: the config and report files before the application's
    ``args``, the config file shipped with ``--files`` (``ship_kafka_config``; None: in cluster deploy
    mode), this package zipped into ``ship`` for ``py_files`` (``ship_provider``) and a packed Python
    environment as ``archives=ARCHIVE#env`` (``python_env_archive``)."""
    sub = Submission(args=["--kafka-config-file", cfg, "--report-file", report, *args])
    cluster = (deploy_mode or "client").lower() == "cluster"
    if cluster if ship_kafka_config is None else ship_kafka_config:
        sub.files.append(cfg)
    if ship_provider:
        from airflow_provider_kstate.store.pack import provider_zip

        sub.py_files.append(provider_zip(ship))
    if python_env_archive:
        sub.archives.append(f"{python_env_archive}#env")
        sub.conf["spark.pyspark.python"] = "./env/bin/python"
        if not cluster:
            sub.conf.setdefault("spark.pyspark.driver.python", driver_python)
    return sub


def run_parameters(
    sub: Submission,
    *,
    spark_conf: Mapping[str, Any] | None,
    conf: Mapping[str, Any] | None,
    archives: str | None,
    files: str | None,
    py_files: str | None,
) -> dict[str, Any]:
    """Return the Spark operator's parameters for one run: its own (``conf``, ``archives``, ``files``,
    ``py_files``) with the run's added.

    ``conf`` is :data:`DEFAULT_SPARK_CONF`, then ``spark_conf``, the run's, then the operator's ``conf``; the
    archives travel as ``spark.archives`` (what ``--archives`` sets, Spark 3.1+): any ``spark.archives`` in
    that conf, the operator's ``archives`` and the run's environment archive.
    """
    merged = {**DEFAULT_SPARK_CONF, **(spark_conf or {}), **sub.conf, **(conf or {})}
    shipped = joined(merged.get("spark.archives"), archives, *sub.archives)
    if shipped:
        merged["spark.archives"] = shipped
    return {
        "application_args": sub.args,
        "files": joined(files, *sub.files),
        "py_files": joined(py_files, *sub.py_files),
        "conf": merged,
    }


class SparkTask(Protocol):
    """A Spark task's own (rendered) spark-submit parameters, as a run adds to them
    (:class:`~airflow_provider_kstate.operators.spark_app.KStateSparkApplicationOperator` documents each)."""

    @property
    def task_id(self) -> str: ...

    @property
    def report_dir(self) -> str | None: ...

    @property
    def deploy_mode(self) -> str | None: ...

    @property
    def ship_kafka_config(self) -> bool | None: ...

    @property
    def ship_provider(self) -> bool: ...

    @property
    def python_env_archive(self) -> str | None: ...

    @property
    def spark_conf(self) -> Mapping[str, Any] | None: ...

    @property
    def conf(self) -> Mapping[str, Any] | None: ...

    @property
    def archives(self) -> str | None: ...

    @property
    def files(self) -> str | None: ...

    @property
    def py_files(self) -> str | None: ...


def task_run_parameters(task: SparkTask, cfg: str, report: str, ship: str, args: list[str]) -> dict[str, Any]:
    """Return ``task``'s spark-submit parameters for one run (:func:`plan_submission`, then
    :func:`run_parameters`): the config file ``cfg``, the report file ``report``, what is shipped (built in
    ``ship``) and the application's ``args``."""
    sub = plan_submission(
        cfg,
        report,
        ship,
        args,
        deploy_mode=task.deploy_mode,
        ship_kafka_config=task.ship_kafka_config,
        ship_provider=task.ship_provider,
        python_env_archive=task.python_env_archive,
    )
    return run_parameters(
        sub,
        spark_conf=task.spark_conf,
        conf=task.conf,
        archives=task.archives,
        files=task.files,
        py_files=task.py_files,
    )


def submit(
    task: SparkTask, cfg: str, app: str, args: list[str], spark_submit: Callable[[], object]
) -> dict[str, Any]:
    """Run ``spark_submit`` with ``task``'s parameters set to this run's (:func:`task_run_parameters`, restored
    afterwards) and return the report application ``app`` wrote; a failure it reported fails with its error
    (:func:`reported_failure`, :data:`APP_ERRORS`).

    :param cfg: the Kafka config file the application reads.
    :param args: the application's own arguments.
    """
    with run_files(task.report_dir, task.task_id) as (report, ship):
        run = task_run_parameters(task, cfg, report, ship, args)
        with reported_failure(report, app, task.task_id), run_parameters_set(task, run):
            spark_submit()
        return read_report(report, app)


@contextlib.contextmanager
def run_parameters_set(operator: object, run: Mapping[str, Any]) -> Iterator[None]:
    """Set the operator's parameters to the run's (:func:`run_parameters`) while the body runs, then restore
    its own."""
    saved = {name: getattr(operator, name) for name in run}
    try:
        for name, value in run.items():
            setattr(operator, name, value)
        yield
    finally:
        for name, value in saved.items():
            setattr(operator, name, value)


@contextlib.contextmanager
def run_files(report_dir: str | None, task: str) -> Iterator[tuple[str, str]]:
    """Yield ``(report, ship)``: where the application writes its report (:func:`report_file`) and a private
    temporary directory for what the run ships (the provider zip); both removed afterwards."""
    with report_file(report_dir, task) as report, tempfile.TemporaryDirectory(prefix="kstate-ship-") as ship:
        yield report, ship


@contextlib.contextmanager
def report_file(report_dir: str | None, task: str) -> Iterator[str]:
    """Yield where the application writes its report, removed afterwards: a private local temporary
    directory's ``report.json`` (no ``report_dir``), else ``<report_dir>/<task>-<nonce>.json``."""
    if not report_dir:
        with tempfile.TemporaryDirectory(prefix="kstate-report-") as tmp:
            yield os.path.join(tmp, "report.json")
        return
    path = uris.join(report_dir, f"{task}-{uuid.uuid4().hex}.json")
    try:
        yield path
    finally:
        with contextlib.suppress(Exception):
            fs, where = uris.filesystem(path)
            fs.delete_file(where)


def read_report(path: str, app: str) -> dict[str, Any]:
    """Return the JSON object the application ``app`` wrote at ``path``.

    :raises SnapshotError: when it wrote none, or not a JSON object.
    """
    try:
        report = contract.load_report(path)
    except FileNotFoundError as exc:
        raise SnapshotError(f"Spark application {app} exited without writing its report {path}") from exc
    except ValueError as exc:
        raise SnapshotError(f"Spark application {app} wrote a report that is not JSON: {exc}") from exc
    if not isinstance(report, dict):
        raise SnapshotError(f"Spark application {app} wrote a report that is not a JSON object")
    return report


def child_pids() -> set[int]:
    """Return the pids of this process's children now (a submission's are the ones started after)."""
    import psutil

    try:
        return {child.pid for child in psutil.Process().children()}
    except psutil.Error:
        return set()


def spawned_tree(before: set[int] | None) -> list[Any]:
    """Return this process's children not in ``before`` and all their descendants, as ``psutil`` processes.

    :param before: the children's pids when the submission began (:func:`child_pids`); None: nothing was
        submitted.
    """
    import psutil

    if before is None:
        return []
    tree: list[Any] = []
    try:
        for child in psutil.Process().children():
            if child.pid not in before:
                tree += [child, *child.children(recursive=True)]
    except psutil.Error:
        pass
    return tree


def kill_tree(before: set[int] | None, kill: Callable[[], object], grace: float) -> tuple[int, int]:
    """End a submission: ``kill`` it (the Spark provider's ``on_kill``: spark-submit's JVM and a cluster-mode
    driver), then what survives of the process tree it started (:func:`spawned_tree` of ``before``; in
    client mode the PySpark driver and, with a ``local`` master, its Python workers) by :func:`end_processes`.

    :returns: how many ended on SIGTERM and how many were killed.
    """
    tree = spawned_tree(before)
    kill()
    return end_processes(tree, grace)


def end_processes(procs: list[Any], grace: float) -> tuple[int, int]:
    """SIGTERM the live ones of ``procs``, SIGKILL what is left after ``grace`` seconds.

    :returns: how many ended on SIGTERM and how many were killed (``(0, 0)``: none was running).
    """
    import psutil

    live = [p for p in procs if p.is_running()]
    for p in live:
        with contextlib.suppress(psutil.Error):
            p.terminate()
    _, alive = psutil.wait_procs(live, timeout=grace)
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(alive, timeout=5)
    return len(live) - len(alive), len(alive)
