"""Seed every affected group's offsets to the log start (earliest) wherever it has none."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.operators.base import KStateStepOperator

if TYPE_CHECKING:
    from airflow.sdk import Context


class KStateSeedOffsetsOperator(KStateStepOperator):
    """Commit, for each group the plan seeds, the log-start offset of every partition it has no offset on.

    Every group must be EMPTY first (the broker refuses offsets otherwise): if one is not, the step fails
    with :class:`GroupNotEmptyError` before writing anything. Offsets a group already has are kept, so a
    rerun continues where the last one stopped. The per-group, per-partition evidence (offset committed,
    seeded or kept, log start at seed time) goes to the seed report; XCom gets a summary and its URI.

    A plan of several co-partitioned topics seeds every group on every topic it reads, with a seed report
    per topic (in each topic's run folder); XCom has each topic's summary and report under ``topics``.
    """

    lineage_kind = "seed"

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_provider_kstate.increase.report import write_report
        from airflow_provider_kstate.metrics import METRICS_OUT

        if self.typed_plan.several:
            return self._several(context)
        steps = self.steps(context)
        uri = self.report_uri(context, "seed")
        ids = self.typed_plan.ids_of(self.topic)
        with write_report(uri, self.report_storage, evidence=True, topic_ids=ids) as report:
            result = steps.seed(None, report)
            rows = report.rows
        METRICS_OUT.seeded(self.topic, result.summary())
        return {"topic": self.topic, **result.summary(), "report_uri": uri, "report_rows": rows}

    def _several(self, context: Context) -> dict[str, Any]:
        """Seed every group on each topic it reads; a report per topic."""
        from contextlib import ExitStack

        from airflow_provider_kstate.increase.report import write_report
        from airflow_provider_kstate.metrics import METRICS_OUT

        plan = self.typed_plan
        steps = self.topic_set_steps(context)
        uris: dict[str, str] = {}
        for view in plan.views():
            with self.on_topic(view):
                uris[view.topic] = self.report_uri(context, "seed")
        with ExitStack() as stack:
            reports = {
                t: stack.enter_context(
                    write_report(uri, self.report_storage, evidence=True, topic_ids=plan.ids_of(t))
                )
                for t, uri in uris.items()
            }
            results = steps.seed(plan.where("seed"), reports)
            rows = {t: r.rows for t, r in reports.items()}
        topics: dict[str, Any] = {}
        for topic, result in results.items():
            METRICS_OUT.seeded(topic, result.summary())
            topics[topic] = {**result.summary(), "report_uri": uris[topic], "report_rows": rows[topic]}
            self.log.info(
                "SEED %s: %s partitions seeded, %s kept; report %s",
                topic,
                topics[topic]["seeded"],
                topics[topic]["kept"],
                uris[topic],
            )
        return {
            "topic": plan.topic,
            "topics": topics,
            "seeded": sum(t["seeded"] for t in topics.values()),
            "kept": sum(t["kept"] for t in topics.values()),
        }
