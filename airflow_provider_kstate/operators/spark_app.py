"""The base of the provider's Spark operators: ``SparkSubmitOperator`` handing the application the Kafka
config in a private file and reading back its report (:mod:`airflow_provider_kstate.store.submission`).
"""

from __future__ import annotations

import json
from functools import partial
from typing import TYPE_CHECKING, Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from airflow_provider_kstate.errors import KStateConfigError
from airflow_provider_kstate.operators.kafka import KStateKafkaOperator

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_kstate.hooks.snapshot import KStateSnapshotHook


class KStateSparkApplicationOperator(KStateKafkaOperator, SparkSubmitOperator):
    """Submit a PySpark application that reads the Kafka config from a file and writes a JSON report.

    The application is called as ``APP --kafka-config-file CFG --report-file R [application_args]``; the
    config file (mode 0600, removed afterwards) holds the ``kafka`` connection's librdkafka settings. The
    report is pushed to XCom. It takes and templates every parameter of ``SparkSubmitOperator``; what a
    cluster needs: ``docs/spark-cluster.md``; ``kafka_config_id``, ``request_timeout``:
    ``docs/reference/parameters.md``.

    :param spark_conn_id: the Spark connection (conn type ``spark``); same as ``conn_id``.
    :param spark_conf: extra Spark properties, merged over
        :data:`~airflow_provider_kstate.store.submission.DEFAULT_SPARK_CONF` (``conf`` wins). (templated)
    :param spark_name: the Spark application name (default ``kstate-<task_id>``); same as ``name``.
    :param report_dir: where the application writes its report: None for a private local temporary
        directory (client mode), or a directory on cluster storage a cluster-mode driver reaches. (templated)
    :param ship_kafka_config: also ship the config file with ``--files`` (for a cluster-mode driver); None:
        when ``deploy_mode`` is ``cluster``.
    :param ship_provider: ship this package to the executors as a zip on ``py_files``, built per run.
    :param python_env_archive: a packed Python environment for the executors (``python -m
        airflow_provider_kstate.store.pack env``), shipped as ``archives=ARCHIVE#env``. (templated)
    :param kill_grace: seconds ``on_kill`` gives ``spark-submit``'s children between SIGTERM and SIGKILL.
    :param archives: as ``SparkSubmitOperator``'s; given as ``spark.archives`` with ``python_env_archive``'s.
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
        """Run the application with spark-submit, once per task try, and return its report
        (:func:`~airflow_provider_kstate.store.submission.submit`); ``hook`` gives the Kafka config file,
        ``context`` OpenLineage's parent job, ``args`` the application's arguments (default :meth:`app_args`).
        """
        # imported where it runs, not at parse: it brings the Spark apps' pydantic contract
        from airflow_provider_kstate.store import submission

        app, args = self.app_path(), self.app_args() if args is None else args
        with hook.kafka_config_file() as cfg:
            self._children_before = submission.child_pids()
            spark_submit = partial(SparkSubmitOperator.execute, self, context if context is not None else {})
            return submission.submit(self, cfg, app, args, spark_submit)

    def on_kill(self) -> None:
        """Kill ``spark-submit`` and what survives of its process tree: SIGTERM, then SIGKILL after
        :attr:`kill_grace` seconds (:func:`~airflow_provider_kstate.store.submission.kill_tree`)."""
        from airflow_provider_kstate.store import submission

        ended = submission.kill_tree(self._children_before, super().on_kill, self.kill_grace)
        if any(ended):
            self.log.info(
                "KILL spark-submit's processes: %s terminated, %s killed after %ss", *ended, self.kill_grace
            )

    def execute(self, context: Context) -> dict[str, Any]:  # type: ignore[override]
        report = self.submit(self.snapshot_hook(), context)
        self.log.info("Application %s reported: %s", self.app_path(), json.dumps(report)[:2000])
        return report
