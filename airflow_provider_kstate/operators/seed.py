"""Seed every affected group's offsets to the log start (earliest) wherever it has none."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.operators.step import KStateStepOperator

if TYPE_CHECKING:
    from airflow.sdk import Context


class KStateSeedOffsetsOperator(KStateStepOperator):
    """Commit, for each group the plan seeds, the log-start offset of every partition it has no offset on,
    on every topic it reads.

    Every group must be EMPTY first (the broker refuses offsets otherwise): if one is not, the step fails
    with :class:`GroupNotEmptyError` before writing anything. Offsets a group already has are kept, so a
    rerun continues where the last one stopped. The per-group, per-partition evidence (offset committed,
    seeded or kept, log start at seed time) goes to each topic's seed report (in its run folder); XCom has
    each topic's summary and report URI under ``topics``, and the totals.
    """

    lineage_kind = "seed"

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_provider_kstate.metrics import METRICS_OUT

        with self.seed_reports(context) as (uris, reports):
            results = self.run(context).seed(None, reports)
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
            "topics": topics,
            "seeded": sum(t["seeded"] for t in topics.values()),
            "kept": sum(t["kept"] for t in topics.values()),
        }
