"""The base of the provider's Spark operators: the Spark provider's ``SparkSubmitOperator`` that hands the
application the Kafka connection's config in a private file and reads back the application's report. What a
run adds to ``spark-submit``, the report and the errors are :mod:`airflow_provider_kstate.store.submission`'s.
"""

from __future__ import annotations

import json
from functools import partial
from typing import TYPE_CHECKING, Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from airflow_provider_kstate.errors import KStateConfigError, SparkApplicationError
from airflow_provider_kstate.operators.kafka import KStateKafkaOperator
from airflow_provider_kstate.store import submission
from airflow_provider_kstate.store.submission import APP_ERRORS, app_error

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_kstate.hooks.snapshot import KStateSnapshotHook

__all__ = ["APP_ERRORS", "KStateSparkApplicationOperator", "SparkApplicationError", "app_error"]


class KStateSparkApplicationOperator(KStateKafkaOperator, SparkSubmitOperator):
    """Submit a PySpark application that reads the Kafka config from a file and writes a JSON report.

    The application is called as ``APP --kafka-config-file CFG --report-file R [application_args]``; the
    config file (mode 0600) holds the ``kafka`` connection's librdkafka settings, SASL secrets included,
    and is removed afterwards. The report is pushed to XCom. Being a ``SparkSubmitOperator``, it takes and
    templates every parameter of it (``conf``, ``jars``, ``deploy_mode``, ``py_files`` ...), kills
    ``spark-submit`` (or the cluster's driver) in ``on_kill``, and injects OpenLineage's parent job.
    ``kafka_config_id`` and ``request_timeout`` (the worker's own requests): see ``docs/reference/parameters.md``.

    :param spark_conn_id: the Spark connection (conn type ``spark``); same as ``conn_id``.
    :param spark_conf: extra Spark properties, merged over
        :data:`~airflow_provider_kstate.store.submission.DEFAULT_SPARK_CONF` (``conf`` wins). (templated)
    :param spark_name: the Spark application name (default ``kstate-<task_id>``); same as ``name``.
    :param report_dir: where the application writes its report: None for a private local temporary
        directory (client deploy mode), or a directory URI on cluster storage a cluster-mode driver reaches
        (``hdfs://``, ``s3://`` ...). (templated)
    :param ship_kafka_config: also ship the config file with ``--files`` (for a driver in cluster deploy
        mode, which finds it by name in its working directory). None: when ``deploy_mode`` is ``cluster``.
    :param ship_provider: ship this package to the executors as a zip on ``py_files``, built per run.
    :param python_env_archive: a packed Python environment (``python -m airflow_provider_kstate.store.pack
        env``) for the executors: shipped as ``archives=ARCHIVE#env`` with
        ``spark.pyspark.python=./env/bin/python``. (templated)
    :param kill_grace: seconds ``on_kill`` gives ``spark-submit``'s children between SIGTERM and SIGKILL.
    :param archives: as ``SparkSubmitOperator``'s; given to ``spark-submit`` as ``spark.archives`` together
        with ``python_env_archive``'s.
    """

    template_fields = (*SparkSubmitOperator.template_fields, "spark_conf", "report_dir", "python_env_archive")
    ui_color = "#fdebd0"

    def __init__(
        self,
        *,
        spark_conn_id: str | None = None,
        spark_conf: dict[str, Any] | None = None,
        spark_name: str | None = None,
        report_dir: str | None = None,
        ship_kafka_config: bool | None = None,
        ship_provider: bool = False,
        python_env_archive: str | None = None,
        kill_grace: float = 3.0,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("conn_id", spark_conn_id or "spark_default")
        kwargs.setdefault("name", spark_name or f"kstate-{kwargs.get('task_id', 'app')}")
        archives = kwargs.pop("archives", None)  # to spark-submit with the run's (submission.run_parameters)
        super().__init__(**kwargs)
        self.spark_conn_id: str = kwargs["conn_id"]
        self.archives: str | None = archives
        self.deploy_mode: str | None = kwargs.get("deploy_mode")
        self.spark_conf = spark_conf
        self.report_dir = report_dir
        self.ship_kafka_config = ship_kafka_config
        self.ship_provider = ship_provider
        self.python_env_archive = python_env_archive
        self.kill_grace = kill_grace
        self._children_before: set[int] | None = None

    def app_path(self) -> str:
        """Return the application to submit (subclasses name one of the package's own)."""
        if not self.application:
            raise KStateConfigError(f"task {self.task_id!r}: no Spark application given")
        return self.application

    def app_args(self) -> list[str]:
        """Return the application's arguments besides the config and report files."""
        return [str(a) for a in self.application_args or []]

    def snapshot_hook(self) -> KStateSnapshotHook:
        """Return the hook of the Kafka connection (and of the snapshot's storage)."""
        from airflow_provider_kstate.hooks.snapshot import KStateSnapshotHook

        return KStateSnapshotHook(kafka_config_id=self.kafka_config_id, request_timeout=self.request_timeout)

    def submit(
        self, hook: KStateSnapshotHook, context: Context | None = None, args: list[str] | None = None
    ) -> dict[str, Any]:
        """Run the application with spark-submit and return its report; a failure it reported fails the task
        with its error (:func:`~airflow_provider_kstate.store.submission.submit`). Once per operator
        instance (one task try): the Spark operator keeps the hook of its first ``execute``.

        :param hook: gives the Kafka config file.
        :param context: the task's context (for OpenLineage's parent job).
        :param args: the application's own arguments; default :meth:`app_args`.
        """
        app, args = self.app_path(), self.app_args() if args is None else args
        with hook.kafka_config_file() as cfg:
            self._children_before = submission.child_pids()
            spark_submit = partial(SparkSubmitOperator.execute, self, context if context is not None else {})
            return submission.submit(self, cfg, app, args, spark_submit)

    def on_kill(self) -> None:
        """Kill ``spark-submit`` and what survives of the process tree the submission started
        (:func:`~airflow_provider_kstate.store.submission.kill_tree`): SIGTERM, then SIGKILL after
        :attr:`kill_grace` seconds (short: Airflow escalates to SIGKILL of the task itself soon after).
        """
        ended = submission.kill_tree(self._children_before, super().on_kill, self.kill_grace)
        if any(ended):
            self.log.info(
                "KILL spark-submit's processes: %s terminated, %s killed after %ss", *ended, self.kill_grace
            )

    def execute(self, context: Context) -> dict[str, Any]:  # type: ignore[override]
        report = self.submit(self.snapshot_hook(), context)
        self.log.info("Application %s reported: %s", self.app_path(), json.dumps(report)[:2000])
        return report
