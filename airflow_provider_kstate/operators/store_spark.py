"""The base of the state-store tasks that run in Spark (the deep check, the rebuild): a topic, a snapshot,
the package's own application, and a broker the changelog read can trust (``docs/guides/state.md``)."""

from __future__ import annotations

from typing import Any

from airflow_provider_kstate import defaults
from airflow_provider_kstate.operators.spark_app import KStateSparkApplicationOperator
from airflow_provider_kstate.operators.store_task import KStateStoreTask
from airflow_provider_kstate.spark_apps import app_file, package_app
from airflow_provider_kstate.store import tasks


class KStateStoreSparkOperator(KStateStoreTask, KStateSparkApplicationOperator):
    """Common ground of the deep check and the rebuild; ``topic``, ``snapshot_uri``: as theirs,
    ``storage_conn_id``: ``docs/reference/parameters.md``.

    :param allow_non_compacted_changelog: read a non-compacted changelog whose log start moved (logged as
        ``RISK ACCEPTED``: a changelog that retention trimmed may lack keys).
    :param allow_broker_deviation: the broker doctor's broken promises to accept (a list, ``"['x']"`` or
        ``"x,y"``). Before Spark starts, the promises a changelog read relies on
        (:data:`~airflow_provider_kstate.doctor.promises.STATE_NEEDS`) must hold, else the task fails with
        :class:`~airflow_provider_kstate.errors.BrokerDeviationError`; so does an application whose read
        bounds disagree with where a fetch ends (nothing is published; ``docs/guides/broker-doctor.md``).
        (templated)
    :param progress_interval: seconds between two ``PROGRESS`` lines (offsets read of the total, percent,
        rate, time left) the driver logs while reading the changelog, copied into the task log; 0: none.
    :param changelog_reader: ``confluent`` (confluent-kafka in the tasks, the default and the faster:
        ``bench/results/changelog_reader.json``) or ``spark`` (Spark's Kafka source: spark-sql-kafka-0-10
        given with ``jars=`` or ``packages=``); the results are the same. (templated)
    """

    template_fields = (
        *KStateSparkApplicationOperator.template_fields,
        "topic",
        "snapshot_uri",
        "allow_broker_deviation",
        "changelog_reader",
    )
    app_name = ""

    def __init__(
        self,
        *,
        topic: str,
        snapshot_uri: str,
        storage_conn_id: str | None = None,
        allow_non_compacted_changelog: bool = False,
        allow_broker_deviation: list[str] | str | None = None,
        progress_interval: float = defaults.DEFAULT_INTERVAL,
        changelog_reader: str = tasks.DEFAULT_CHANGELOG_READER,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("application", app_file(self.app_name))
        super().__init__(**kwargs)
        self.topic = topic
        self.snapshot_uri = snapshot_uri
        self.storage_conn_id = storage_conn_id
        self.allow_non_compacted_changelog = allow_non_compacted_changelog
        self.allow_broker_deviation = allow_broker_deviation
        self.changelog_reader = changelog_reader
        self.progress_interval = tasks.progress_seconds(progress_interval)

    def trust_broker(self) -> list[str]:
        """Refuse a broker whose changelog reads cannot be trusted, by the doctor's verdict (cached per
        cluster), before Spark starts; return the broken promises ``allow_broker_deviation`` accepts.

        :raises BrokerDeviationError: a promise of ``STATE_NEEDS`` is broken and not accepted.
        """
        from airflow_provider_kstate.doctor.promises import STATE_NEEDS
        from airflow_provider_kstate.operators.doctor import allowed_deviations, broker_verdict

        verdict = broker_verdict(self, STATE_NEEDS, tasks.app_subject(self.app_name, self.topic))
        return tasks.accepted_deviations(verdict.broken(), allowed_deviations(self.allow_broker_deviation))

    def app_path(self) -> str:
        return package_app(self.application, self.app_name)
