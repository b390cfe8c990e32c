"""The deep check of a state store: its snapshot row by row against the changelog, in Spark
(``docs/guides/state.md``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.operators.store_spark import KStateStoreSparkOperator
from airflow_provider_kstate.store import tasks

if TYPE_CHECKING:
    from airflow.sdk import Context


class KStateDeepCheckOperator(KStateStoreSparkOperator):
    """Compare the snapshot row by row with the changelog folded read_committed, in Spark.

    Finds what the fast check cannot: dropped rows, values from aborted transactions, stale values,
    keys in the wrong partition, manifest statistics that do not match the rows. Pushes the report
    (``ok``, per-partition ``problems`` and sample keys, ``failed_partitions``) to XCom.

    :param topic: the changelog topic. (templated)
    :param snapshot_uri: the snapshot's directory. (templated)
    :param sample_keys: how many example keys to report per kind of problem.
    :param fail_on_bad: raise StateCheckFailed when the store is bad (else only report it).
    :param kwargs: ``progress_interval``, ``storage_conn_id``, ``allow_broker_deviation``,
        ``changelog_reader``, ``allow_non_compacted_changelog`` (the Spark store tasks' shared parameters:
        :class:`~airflow_provider_kstate.operators.store_spark.KStateStoreSparkOperator`) and those of
        :class:`~airflow_provider_kstate.operators.spark_app.KStateSparkApplicationOperator`.
    """

    app_name = "deep_check.py"

    def __init__(
        self, *, topic: str, snapshot_uri: str, sample_keys: int = 5, fail_on_bad: bool = True, **kwargs: Any
    ) -> None:
        super().__init__(topic=topic, snapshot_uri=snapshot_uri, **kwargs)
        self.sample_keys = sample_keys
        self.fail_on_bad = fail_on_bad

    def app_args(self, accepted: list[str] | None = None) -> list[str]:
        return tasks.deep_check_args(tasks.read_args(self, accepted, self.log), self.sample_keys)

    def execute(self, context: Context) -> dict[str, Any]:  # type: ignore[override]
        from airflow_provider_kstate.store import results
        from airflow_provider_kstate.store.results import CheckReport

        hook = self.snapshot_hook()
        hook.admin.partition_count(self.topic)  # TopicNotFoundError before Spark starts
        hook.manifest(self.snapshot_uri)  # SnapshotError naming the problem before Spark starts
        accepted = self.trust_broker()  # BrokerDeviationError before Spark starts
        written = self.submit(hook, context, self.app_args(accepted))
        report = CheckReport.read(written, check="deep", topic=self.topic, snapshot_uri=self.snapshot_uri)
        # the XCom: the application's report with check, topic and the verdict
        return self.finish_check(context, "deep", report, results.deep_lines(report))
