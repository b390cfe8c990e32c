"""The in-window steps in one task, for the shortest consumer downtime."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.operators.consumers import KStatePausingOperator

if TYPE_CHECKING:
    from airflow.sdk import Context


class KStatePauseWindowOperator(KStatePausingOperator):
    """Pause, wait for EMPTY, increase, seed, resume and scale back-to-back in one task.

    The same idempotent steps as the per-step operators, without the scheduler's latency between them.
    Each group is stopped and started by its driver (the control protocol, or a command pair: see
    :mod:`airflow_provider_kstate.increase.drivers`). Command-driven groups are stopped first and waited
    for; only then do the others leave, so a slow or failing stop keeps nobody else out of their group.
    Live consumers are out of their groups only for the leave, the create, the seed of *their* groups and
    the rejoin: groups with live members (``active``) are seeded and resumed first, while producers stay on
    the old layout; groups without members (``empty``: nobody is down) are seeded right after, and each
    group is resumed only once it has an offset on every partition. Producers switch to the new layout only
    after the last group is seeded (with ``key_order="preserve"`` through the key-order barrier: see
    :mod:`airflow_provider_kstate.increase.key_order`); when a group is drained they were stopped before
    the create and start after the window, once it drained
    (:class:`~airflow_provider_kstate.operators.producers.KStateStartProducersOperator`).

    A failure before the create resumes every paused group at once (and starts what was stopped); the
    failure guard decides from the cluster after it, exactly as in the per-step layout. A wait that timed
    out because a member never left is not retried (:class:`GroupNeverLeftError`).

    Returns a summary (per group: partitions seeded and kept) with the URI of the seed report, the
    per-group, per-partition evidence that :class:`KStateVerifyOperator` reads. ``key_order``,
    ``empty_timeout`` and ``drain_timeout``: see :class:`~airflow_provider_kstate.operators.consumers.KStatePausingOperator`.

    The run covers every topic of the plan (:class:`~airflow_provider_kstate.increase.run.IncreaseRun`, a
    topic is a set of one): the groups leave once, every topic is created, each group is seeded on every
    topic it reads (a seed report per topic, in each topic's run folder), each group rejoins once it holds
    an offset on every partition of those topics, and each topic's producers switch once its new
    partitions' leaders serve them. XCom has each topic's summary (seeded, kept, report, switch) under
    ``topics``, and the run's totals, timings and drivers.
    """

    lineage_kind = "window"

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_provider_kstate.increase.plan import PlanMode
        from airflow_provider_kstate.increase.window import run_window
        from airflow_provider_kstate.metrics import METRICS_OUT

        plan = self.typed_plan
        run = self.pausing_run(context)
        try:
            with self.seed_reports(context) as (uris, reports):
                summary = run_window(
                    run, reports, self.empty_timeout, self.request_timeout, self.drain_timeout
                )
                rows = {t: r.rows for t, r in reports.items()}
        finally:
            self.control.close()
        for view in plan.views():
            entry = summary["topics"][view.topic]
            entry.update(report_uri=uris[view.topic], report_rows=rows[view.topic])
            METRICS_OUT.window(view, entry)
        for topic, cost in (summary["producers_started"] or {}).get("topics", {}).items():
            METRICS_OUT.drained(topic, cost)
        timings, stayed = summary["timings"], summary["stayed"]
        self.log.info(
            "WINDOW %s: live groups out for %s; every group the run pauses seeded and resumed after %.3f s"
            "%s; reports %s (%s rows)",
            ", ".join(plan.topic_names),
            out_for(timings),
            timings["whole_window_s"],
            f"; {len(stayed['positioned'])} groups stayed in their groups" if stayed else "",
            ", ".join(uris.values()),
            f"{sum(rows.values()):,}",
        )
        if plan.mode == PlanMode.REPAIR and not summary["seeded"]:
            self.log.info(
                "REPAIR %s: nothing to do: every protected group holds an offset on every partition",
                ", ".join(plan.topic_names),
            )
        return summary


def out_for(timings: dict[str, Any]) -> str:
    """The live groups' downtime for the log: as their services saw it (from the leave or stop to every
    partition held again and a record processed) when the run watched them, beside the run's own pause to
    resume."""
    window = f"{timings['live_window_s']:.3f} s from the pause to the resume"
    if "services_out_s" not in timings:
        return window
    return f"{timings['services_out_s']:.3f} s as their services saw it ({window})"
