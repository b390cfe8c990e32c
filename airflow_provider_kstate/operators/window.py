"""The in-window steps in one task, for the shortest consumer downtime."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.failpoints import failpoint
from airflow_provider_kstate.operators.consumers import KStatePausingOperator

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_kstate.increase.plan import Plan
    from airflow_provider_kstate.increase.report import ReportWriter
    from airflow_provider_kstate.increase.run import IncreaseRun
    from airflow_provider_kstate.increase.steps import SeedResult


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
        from airflow_provider_kstate.metrics import METRICS_OUT

        plan = self.typed_plan
        run = self.pausing_run(context)
        try:
            with self.seed_reports(context) as (uris, reports):
                summary = self._window(run, reports)
                rows = {t: r.rows for t, r in reports.items()}
        finally:
            self.control.close()
        for view in plan.views():
            entry = summary["topics"][view.topic]
            entry.update(report_uri=uris[view.topic], report_rows=rows[view.topic])
            METRICS_OUT.window(view, entry)
        timings = summary["timings"]
        self.log.info(
            "WINDOW %s: live groups out for %.3f s; every group seeded and resumed after %.3f s; reports %s "
            "(%s rows)",
            ", ".join(plan.topic_names),
            timings["live_window_s"],
            timings["whole_window_s"],
            ", ".join(uris.values()),
            f"{sum(rows.values()):,}",
        )
        if plan.mode == PlanMode.REPAIR and not summary["seeded"]:
            self.log.info(
                "REPAIR %s: nothing to do: every protected group holds an offset on every partition",
                ", ".join(plan.topic_names),
            )
        return summary

    def _window(self, run: IncreaseRun, reports: dict[str, ReportWriter]) -> dict[str, Any]:
        live, offline = self._split(run.plan)
        timings: dict[str, float] = {}
        started = time.monotonic()
        self._before_create(run)
        first = run.again("seed", lambda: run.seed(live, reports))
        failpoint("mid_seed")
        resumed = run.again("resume", lambda: run.resume(live))
        # the groups resumed by the control record are back about when it is sent (their downtime); the
        # command-driven ones when their start and readiness commands are done (command_*_s). With no live
        # group nothing was resumed: the window is the time so far, as before the drivers; 0 when every live
        # group stays in its group (nobody was out).
        back = run.resumed_at if run.resumed_at is not None else time.monotonic()
        out = back - (run.paused_at or started) if live or not run.plan.staying() else 0.0
        timings["live_window_s"] = round(out, 3)
        failpoint("after_live_resume")  # live groups run, offline ones unseeded, producers on the old layout
        later = run.again("seed", lambda: run.seed(offline, reports))
        failpoint("after_seed")
        run.again("resume", lambda: run.resume(offline))
        failpoint("after_resume")
        timings["whole_window_s"] = round(time.monotonic() - started, 3)
        switch = run.again("scale", lambda: run.scale(live))["topics"]
        failpoint("after_scale")
        timings["switch_s"] = round(time.monotonic() - started - timings["whole_window_s"], 3)
        if run.stop_s is not None:
            timings["command_stop_s"] = run.stop_s
        if run.start_s is not None:
            timings["command_start_s"] = run.start_s
        topics = {
            s.topic: {
                "mode": str(s.plan.mode),  # XCom keeps plain strings
                "created": s.created_from is not None,
                **_merged(first[s.topic], later[s.topic]).summary(),
                **switch[s.topic],
            }
            for s in run.topics
        }
        if run.stayed:
            timings["positions_s"] = run.stayed["positioned_after_s"]
        return {
            "topics": topics,
            "stayed": run.stayed,
            "mode": str(run.plan.mode),
            "created": any(t["created"] for t in topics.values()),
            "seeded": sum(t["seeded"] for t in topics.values()),
            "kept": sum(t["kept"] for t in topics.values()),
            "timings": timings,
            "retried": [{"step": s, "error": e, "after_s": t} for s, e, t in run.retried],
            "drivers": {
                "stopped_groups": run.stopped_groups,
                "started_groups": resumed.get("started_groups", []),
                "producers_stopped": run.producers_stopped,
                "start_failures": [r.describe() for r in run.start_failures],
            },
        }

    def _before_create(self, run: IncreaseRun) -> None:
        """Pause, wait EMPTY and create; a failure before the partitions exist resumes every paused group at
        once (the run changed nothing: :meth:`_undo`), then fails the task."""
        try:
            run.again("pause", run.pause)
            failpoint("after_pause")
            run.again("wait_empty", lambda: run.wait_empty(self.empty_timeout))
            failpoint("after_empty")
            run.again("increase", lambda: run.increase(self.request_timeout))
            failpoint("after_create")
        except Exception:
            self._undo(run)
            raise

    def _undo(self, run: IncreaseRun) -> None:
        """Resume every paused group when no topic was grown; an error here is logged (the step's own error
        is the one to report, and the failure guard undoes again from the cluster)."""
        from airflow_provider_kstate.increase.plan import PlanMode

        topics = ", ".join(run.plan.topic_names)
        if run.create_unknown:
            self.log.warning(
                "UNDO %s: not now: a create got no answer and may still be applied; the groups stay paused "
                "(the retry continues, or the failure guard decides from the cluster)",
                topics,
            )
            return
        try:
            # each topic's count: never fewer than the run saw (a lagging broker may answer the old count)
            if run.plan.mode == PlanMode.INCREASE and run.created_nothing():
                run.undo_before_create()
        except Exception as exc:  # noqa: BLE001 - the original error is raised; the guard undoes again
            self.log.error("UNDO %s failed (%s): the failure guard resumes the groups", topics, exc)

    @staticmethod
    def _split(plan: Plan) -> tuple[list[str], list[str]]:
        """The groups the run seeds: those with live members (seeded and resumed first), and the others
        (the groups that stay in their groups are neither: the switch waits for their positions)."""
        from airflow_provider_kstate.increase.plan import GroupClass

        seeded = plan.seeded_by_run()
        live = [g for g in seeded if plan.groups[g].cls == GroupClass.ACTIVE]
        return live, [g for g in seeded if g not in live]


def _merged(first: SeedResult, later: SeedResult) -> SeedResult:
    """The two seed passes of a window (live groups, then the others) as one."""
    from airflow_provider_kstate.increase.steps import SeedResult

    return SeedResult(max(first.partitions, later.partitions), {**first.groups, **later.groups})
