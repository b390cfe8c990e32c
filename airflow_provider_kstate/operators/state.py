"""Operators that check a state store against its changelog and rebuild it with Spark.

* :class:`KStateFastCheckOperator` - the O(partitions) check in the worker (manifest, offsets, layout).
* :class:`KStateDeepCheckOperator` - a Spark job folding the changelog (read_committed) and comparing it
  with the snapshot row by row.
* :class:`KStateRebuildOperator` - a Spark job rebuilding the snapshot from the changelog and publishing it
  atomically (the previous one is kept at ``URI + ".previous"``).
* :class:`KStateSparkApplicationOperator` - their base: submits a PySpark application with the Spark
  provider's ``SparkSubmitHook``, hands it the Kafka connection's librdkafka config in a 0600 temp file
  (never on the command line), and pushes the application's JSON report to XCom.

Each check returns its report (``ok``, per-partition problems) and raises
:class:`~airflow_provider_kstate.exceptions.StateCheckFailed` when ``fail_on_bad`` is set and the store is bad.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_provider_kstate.exceptions import (
    KStateConfigError,
    SnapshotError,
    SparkApplicationError,
    StateCheckFailed,
)
from airflow_provider_kstate.hooks.state import KStateSnapshotHook
from airflow_provider_kstate.operators.maintenance import failed_partitions

if TYPE_CHECKING:
    from airflow.sdk import Context


#: Spark settings every kstate application gets unless the caller overrides them.
DEFAULT_SPARK_CONF = {"spark.ui.showConsoleProgress": "false", "spark.sql.session.timeZone": "UTC"}


def spark_app_path(name: str) -> str:
    """Return the path of one of the package's Spark applications (``rebuild.py``, ``deep_check.py``).

    :param name: the application's file name in ``airflow_provider_kstate/spark_apps``.
    """
    import airflow_provider_kstate

    path = Path(airflow_provider_kstate.__file__).resolve().parent / "spark_apps" / name
    if not path.is_file():
        raise KStateConfigError(f"the package's Spark application {name!r} is missing at {path}")
    return str(path)


def parse_partitions(value: Any) -> list[int] | None:
    """Normalize a partition list given as a list, a comma-separated string, a JSON list or None.

    :param value: the value (templated fields arrive as strings unless rendered as native objects).
    """
    if value is None or value == "" or value == "None" or value == []:
        return None
    if isinstance(value, str):
        text = value.strip().strip("[]")
        items: list[Any] = [v for v in (s.strip() for s in text.split(",")) if v]
    elif isinstance(value, int):
        items = [value]
    else:
        items = list(value)
    try:
        parts = sorted({int(v) for v in items})
    except (TypeError, ValueError) as exc:
        raise KStateConfigError(f"partitions {value!r} is not a list of partition numbers") from exc
    if any(p < 0 for p in parts):
        raise KStateConfigError(f"partitions {value!r} has negative partition numbers")
    return parts or None


def parse_count(value: Any, name: str = "partitions") -> int | None:
    """Normalize an optional positive partition count (None, "", "None" mean: the topic's count)."""
    if value is None or value == "" or value == "None":
        return None
    try:
        count = int(value)
    except (TypeError, ValueError) as exc:
        raise KStateConfigError(f"{name} {value!r} is not an integer") from exc
    if count < 1:
        raise KStateConfigError(f"{name} must be at least 1, got {count}")
    return count


def _summarize_problems(report: dict[str, Any], limit: int = 3) -> str:
    """Return a one-paragraph statement of what failed: global problems, then each failing partition."""
    lines = list(report.get("problems") or [])
    for p in failed_partitions(report):
        entry = report["partitions"][str(p)]
        detail = "; ".join(str(x) for x in entry.get("problems", [])[:limit]) or "failed"
        samples = _samples(entry)
        lines.append(f"partition {p}: {detail}{samples}")
    return " | ".join(lines) or "no details in the report"


def _samples(entry: dict[str, Any]) -> str:
    parts = []
    for kind in ("missing_keys", "extra_keys", "changed_keys", "misplaced_keys"):
        keys = entry.get(kind)
        if isinstance(keys, list) and keys:
            parts.append(f"{kind}={keys[:5]}")
    return f" (sample keys: {', '.join(parts)})" if parts else ""


class KStateFastCheckOperator(BaseOperator):
    """Check a snapshot's manifest against the changelog's offsets and layout, in the worker, O(partitions).

    Pushes the report (``ok``, ``problems``, ``failed_partitions``, per-partition offsets) to XCom.
    A missing snapshot is a failed check (``snapshot_ok: False``), not an error.

    :param topic: the changelog topic. (templated)
    :param snapshot_uri: the snapshot's directory (local path or ``file://`` URI). (templated)
    :param kafka_config_id: the Kafka connection (conn type ``kafka``).
    :param fail_on_bad: raise StateCheckFailed when the store is bad (else only report it).
    :param timeout: seconds to wait for each admin request.
    """

    template_fields: Sequence[str] = ("topic", "snapshot_uri")
    ui_color = "#d9f2e6"

    def __init__(
        self,
        *,
        topic: str,
        snapshot_uri: str,
        kafka_config_id: str = "kafka_default",
        fail_on_bad: bool = True,
        timeout: float = 30.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.topic = topic
        self.snapshot_uri = snapshot_uri
        self.kafka_config_id = kafka_config_id
        self.fail_on_bad = fail_on_bad
        self.timeout = timeout

    def execute(self, context: Context) -> dict[str, Any]:
        hook = KStateSnapshotHook(kafka_config_id=self.kafka_config_id, timeout=self.timeout)
        report = hook.fast_check(self.topic, self.snapshot_uri)
        log_fast_report(self.log, report)
        if self.fail_on_bad and not report["ok"]:
            raise StateCheckFailed(
                f"fast check of {self.snapshot_uri!r} against {self.topic!r} failed "
                f"(partitions {report['failed_partitions']}): {_summarize_problems(report)}"
            )
        return report


def log_fast_report(log: Any, report: dict[str, Any]) -> None:
    """Log the fast check like a runbook: the verdict, each problem, each failing partition, the fix."""
    log.info(
        "Fast check of snapshot %s against %s (%s partitions, snapshot %s): %s in %.3fs",
        report["snapshot_uri"],
        report["topic"],
        report["topic_partitions"],
        report.get("snapshot_partitions"),
        "OK" if report["ok"] else "FAILED",
        report["seconds"],
    )
    for problem in report["problems"]:
        log.warning("  store: %s", problem)
    for p in report["failed_partitions"]:
        for problem in report["partitions"][str(p)]["problems"]:
            log.warning("  %s", problem)
    if not report["ok"]:
        log.warning("  next: rebuild the snapshot (KStateRebuildOperator, or the DAG with rebuild=auto)")


class KStateSparkApplicationOperator(BaseOperator):
    """Submit a PySpark application that reads the Kafka config from a file and writes a JSON report.

    The application is called as ``APP --kafka-config-file CFG --report-file R [application_args]``; the
    config file (mode 0600) holds the ``kafka`` connection's librdkafka settings, SASL secrets included,
    and is removed afterwards. Submission goes through the Spark provider's ``SparkSubmitHook`` on
    ``spark_conn_id``. The report is pushed to XCom.

    :param application: path of the PySpark application. (templated)
    :param application_args: further arguments of the application. (templated)
    :param kafka_config_id: the Kafka connection (conn type ``kafka``).
    :param spark_conn_id: the Spark connection (conn type ``spark``).
    :param spark_conf: extra Spark properties (merged over ``DEFAULT_SPARK_CONF``). (templated)
    :param py_files: extra Python files for the executors (``.zip``/``.py``), comma-separated.
    :param env_vars: environment variables for spark-submit. (templated)
    :param driver_memory: the driver's memory (e.g. ``1g``).
    :param executor_memory: each executor's memory (e.g. ``1g``).
    :param spark_name: the Spark application name.
    :param verbose: pass ``--verbose`` to spark-submit.
    """

    template_fields: Sequence[str] = ("application", "application_args", "spark_conf", "env_vars")
    ui_color = "#fdebd0"

    def __init__(
        self,
        *,
        application: str = "",
        application_args: list[str] | None = None,
        kafka_config_id: str = "kafka_default",
        spark_conn_id: str = "spark_default",
        spark_conf: dict[str, Any] | None = None,
        py_files: str | None = None,
        env_vars: dict[str, str] | None = None,
        driver_memory: str | None = None,
        executor_memory: str | None = None,
        spark_name: str | None = None,
        verbose: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.application = application
        self.application_args = application_args
        self.kafka_config_id = kafka_config_id
        self.spark_conn_id = spark_conn_id
        self.spark_conf = spark_conf
        self.py_files = py_files
        self.env_vars = env_vars
        self.driver_memory = driver_memory
        self.executor_memory = executor_memory
        self.spark_name = spark_name
        self.verbose = verbose

    def app_path(self) -> str:
        """Return the application to submit (subclasses name one of the package's own)."""
        if not self.application:
            raise KStateConfigError(f"task {self.task_id!r}: no Spark application given")
        return self.application

    def app_args(self) -> list[str]:
        """Return the application's arguments besides the config and report files."""
        return [str(a) for a in self.application_args or []]

    def submit(self, hook: KStateSnapshotHook) -> dict[str, Any]:
        """Run the application with spark-submit and return its report."""
        with hook.kafka_config_file() as cfg, tempfile.TemporaryDirectory(prefix="kstate-report-") as tmp:
            report_file = os.path.join(tmp, "report.json")
            args = ["--kafka-config-file", cfg, "--report-file", report_file, *self.app_args()]
            try:
                self._spark_hook(args).submit(self.app_path())
            except Exception as exc:
                error = _reported_error(report_file)
                if error is None:
                    raise
                raise SparkApplicationError(f"{Path(self.app_path()).name} failed: {error}") from exc
            return _read_report(report_file, self.app_path())

    def _spark_hook(self, args: list[str]) -> Any:
        from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

        return SparkSubmitHook(
            conf={**DEFAULT_SPARK_CONF, **(self.spark_conf or {})},
            conn_id=self.spark_conn_id,
            py_files=self.py_files,
            driver_memory=self.driver_memory,
            executor_memory=self.executor_memory,
            name=self.spark_name or f"kstate-{self.task_id}",
            application_args=args,
            env_vars=self.env_vars,
            verbose=self.verbose,
        )

    def execute(self, context: Context) -> dict[str, Any]:
        report = self.submit(KStateSnapshotHook(kafka_config_id=self.kafka_config_id))
        self.log.info("Application %s reported: %s", self.app_path(), json.dumps(report)[:2000])
        return report


def _reported_error(path: str) -> str | None:
    """Return the ``error`` a failed application wrote in its report, if it wrote one."""
    try:
        with open(path, encoding="utf-8") as f:
            report = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(report, dict):
        return None
    error = report.get("error") or report.get("message")
    return str(error) if error else None


def _read_report(path: str, app: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            report = json.load(f)
    except FileNotFoundError as exc:
        raise SnapshotError(f"Spark application {app} exited without writing its report {path}") from exc
    except ValueError as exc:
        raise SnapshotError(f"Spark application {app} wrote a report that is not JSON: {exc}") from exc
    if not isinstance(report, dict):
        raise SnapshotError(f"Spark application {app} wrote a report that is not a JSON object")
    return report


class _StoreSparkOperator(KStateSparkApplicationOperator):
    """Common ground of the deep check and the rebuild: a topic, a snapshot URI, input validation."""

    template_fields: Sequence[str] = ("topic", "snapshot_uri", "spark_conf", "env_vars")
    app_name = ""

    def __init__(self, *, topic: str, snapshot_uri: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.topic = topic
        self.snapshot_uri = snapshot_uri

    def app_path(self) -> str:
        return spark_app_path(self.app_name)

    def _base_args(self) -> list[str]:
        return ["--topic", self.topic, "--snapshot-uri", self.snapshot_uri]


class KStateDeepCheckOperator(_StoreSparkOperator):
    """Compare the snapshot row by row with the changelog folded read_committed, in Spark.

    Finds what the fast check cannot: dropped rows, values from aborted transactions, stale values,
    keys in the wrong partition, manifest statistics that do not match the rows. Pushes the report
    (``ok``, per-partition ``problems`` and sample keys) to XCom.

    :param topic: the changelog topic. (templated)
    :param snapshot_uri: the snapshot's directory. (templated)
    :param sample_keys: how many example keys to report per kind of problem.
    :param fail_on_bad: raise StateCheckFailed when the store is bad (else only report it).
    :param kwargs: see :class:`KStateSparkApplicationOperator` (``spark_conn_id``, ``spark_conf`` ...).
    """

    app_name = "deep_check.py"

    def __init__(
        self,
        *,
        topic: str,
        snapshot_uri: str,
        sample_keys: int = 5,
        fail_on_bad: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(topic=topic, snapshot_uri=snapshot_uri, **kwargs)
        self.sample_keys = sample_keys
        self.fail_on_bad = fail_on_bad

    def app_args(self) -> list[str]:
        return [*self._base_args(), "--sample-keys", str(self.sample_keys)]

    def execute(self, context: Context) -> dict[str, Any]:
        hook = KStateSnapshotHook(kafka_config_id=self.kafka_config_id)
        hook.admin.partition_count(self.topic)  # TopicNotFoundError before Spark starts
        hook.manifest(self.snapshot_uri)  # SnapshotError naming the problem before Spark starts
        report = self.submit(hook)
        report.setdefault("check", "deep")
        report.setdefault("topic", self.topic)
        report.setdefault("snapshot_uri", self.snapshot_uri)
        report["failed_partitions"] = failed_partitions(report)
        log_deep_report(self.log, report)
        if self.fail_on_bad and not report.get("ok"):
            raise StateCheckFailed(
                f"deep check of {self.snapshot_uri!r} against {self.topic!r} failed "
                f"(partitions {report['failed_partitions']}): {_summarize_problems(report)}"
            )
        return report


def log_deep_report(log: Any, report: dict[str, Any]) -> None:
    """Log the deep check like a runbook: the verdict, then per failing partition what and which keys."""
    log.info(
        "Deep check of snapshot %s against %s: %s (%s changelog records read in %ss)",
        report.get("snapshot_uri"),
        report.get("topic"),
        "OK" if report.get("ok") else "FAILED",
        report.get("records_read"),
        report.get("seconds"),
    )
    for problem in report.get("problems") or []:
        log.warning("  store: %s", problem)
    for p in report["failed_partitions"]:
        entry = report["partitions"][str(p)]
        for problem in entry.get("problems", []):
            log.warning("  partition %s: %s", p, problem)
        if _samples(entry):
            log.warning("  partition %s:%s", p, _samples(entry))
    if report["failed_partitions"]:
        log.warning(
            "  next: rebuild only these partitions (KStateRebuildOperator only_partitions=%s) "
            "or the DAG with rebuild=auto",
            report["failed_partitions"],
        )


class KStateRebuildOperator(_StoreSparkOperator):
    """Rebuild the snapshot from the changelog (read_committed fold) in Spark and publish it atomically.

    The previous snapshot is kept at ``snapshot_uri + ".previous"``. Inputs are validated before Spark
    starts: the topic must exist, the URI must be one the package reads, ``partitions`` must be at least
    the topic's count, and ``only_partitions`` needs a readable snapshot with the same layout.

    :param topic: the changelog topic. (templated)
    :param snapshot_uri: the snapshot's directory. (templated)
    :param partitions: the partition count to key the snapshot for; None: the topic's. (templated)
    :param only_partitions: rebuild only these partitions, keeping the others (the layout must be
        unchanged); a list, a comma-separated string or None for all. (templated)
    :param kwargs: see :class:`KStateSparkApplicationOperator` (``spark_conn_id``, ``spark_conf`` ...).
    """

    template_fields: Sequence[str] = (
        "topic",
        "snapshot_uri",
        "partitions",
        "only_partitions",
        "spark_conf",
        "env_vars",
    )
    app_name = "rebuild.py"

    def __init__(
        self,
        *,
        topic: str,
        snapshot_uri: str,
        partitions: int | str | None = None,
        only_partitions: list[int] | str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(topic=topic, snapshot_uri=snapshot_uri, **kwargs)
        self.partitions = partitions
        self.only_partitions = only_partitions

    def _plan(self, hook: KStateSnapshotHook) -> tuple[int, list[int] | None]:
        """Validate the inputs against the cluster and the snapshot; return (target count, only list)."""
        current = hook.admin.partition_count(self.topic)
        target = parse_count(self.partitions) or current
        if target < current:
            raise KStateConfigError(
                f"partitions={target} is fewer than topic {self.topic!r}'s {current}: Kafka cannot shrink "
                "a topic, so a store keyed for fewer partitions would be wrong at once"
            )
        only = parse_partitions(self.only_partitions)
        if only:
            self._check_partial(hook, target, only)
        return target, only

    def _check_partial(self, hook: KStateSnapshotHook, target: int, only: list[int]) -> None:
        out_of_range = [p for p in only if p >= target]
        if out_of_range:
            raise KStateConfigError(
                f"only_partitions {out_of_range} do not exist in a {target}-partition layout"
            )
        manifest = hook.manifest(self.snapshot_uri)
        if manifest.partitions != target:
            raise KStateConfigError(
                f"only_partitions needs an unchanged layout, but the snapshot has {manifest.partitions} "
                f"partitions and the target is {target}: rebuild all partitions"
            )

    def execute(self, context: Context) -> dict[str, Any]:
        hook = KStateSnapshotHook(kafka_config_id=self.kafka_config_id)
        root = _local_root(self.snapshot_uri)
        target, only = self._plan(hook)
        self._args = [*self._base_args(), "--partitions", str(target)]
        if only:
            self._args += ["--only-partitions", ",".join(str(p) for p in only)]
        self.log.info(
            "Rebuilding snapshot %s of %s for %s partitions (%s); the previous one goes to %s.previous",
            self.snapshot_uri,
            self.topic,
            target,
            f"only partitions {only}" if only else "all partitions",
            root,
        )
        report = self.submit(hook)
        if not report.get("ok"):
            raise SnapshotError(
                f"rebuild of {self.snapshot_uri!r} from {self.topic!r} reported failure: "
                f"{report.get('error') or report}; the previous snapshot is unchanged"
            )
        self.log.info(
            "Rebuilt %s: %s changelog records read, %s rows in %s partitions, %ss; previous snapshot: %s",
            self.snapshot_uri,
            report.get("records_read"),
            report.get("rows"),
            len(report.get("partitions") or {}),
            report.get("seconds"),
            report.get("previous"),
        )
        return report

    def app_args(self) -> list[str]:
        return list(getattr(self, "_args", None) or self._base_args())


def _local_root(uri: str) -> str:
    from airflow_provider_kstate.hooks.state import check_uri

    return check_uri(uri).rstrip("/")
