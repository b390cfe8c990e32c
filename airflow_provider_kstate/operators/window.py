"""The in-window steps in one task, for the shortest consumer downtime."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.failpoints import failpoint
from airflow_provider_kstate.operators.consumers import KStatePausingOperator

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_kstate.increase.report import ReportWriter
    from airflow_provider_kstate.increase.steps import SafeIncreaseSteps, SeedResult
    from airflow_provider_kstate.increase.topic_set import TopicSetSteps


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

    A plan of several co-partitioned topics runs in the same one window
    (:class:`~airflow_provider_kstate.increase.topic_set.TopicSetSteps`): the groups leave once, every topic
    is created, each group is seeded on every topic it reads (a seed report per topic, in each topic's run
    folder), each group rejoins once it holds an offset on every partition of those topics, and each
    topic's producers switch. XCom then has the summary of each topic under ``topics``.
    """

    lineage_kind = "window"

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_provider_kstate.increase.plan import PlanMode
        from airflow_provider_kstate.increase.report import write_report
        from airflow_provider_kstate.metrics import METRICS_OUT

        if self.typed_plan.several:
            return self._several(context)
        steps = self.pausing_steps(context)
        uri = self.report_uri(context, "seed")
        try:
            ids = steps.plan.ids_of(steps.topic)
            with write_report(uri, self.report_storage, evidence=True, topic_ids=ids) as report:
                summary = self._window(steps, report)
                rows = report.rows
        finally:
            self.control.close()
        summary.update(report_uri=uri, report_rows=rows)
        METRICS_OUT.window(steps.plan, summary)
        timings = summary["timings"]
        self.log.info(
            "WINDOW %s: live groups out for %.3f s; every group seeded and resumed after %.3f s; report %s (%s rows)",
            self.topic,
            timings["live_window_s"],
            timings["whole_window_s"],
            uri,
            f"{rows:,}",
        )
        if steps.plan.mode == PlanMode.REPAIR and not summary["seeded"]:
            self.log.info(
                "REPAIR %s: nothing to do: every protected group holds an offset on every partition",
                self.topic,
            )
        return summary

    def _window(self, steps: SafeIncreaseSteps, report: ReportWriter) -> dict[str, Any]:
        live, offline = self._split(steps)
        timings: dict[str, float] = {}
        started = time.monotonic()
        self._before_create(steps)
        first = steps.seed(live, report)
        failpoint("mid_seed")
        resumed = steps.resume(live)
        # the groups resumed by the control record are back about when it is sent (their downtime); the
        # command-driven ones when their start and readiness commands are done (command_*_s). With no live
        # group nothing was resumed: the window is the time so far, as before the drivers.
        back = steps.resumed_at if steps.resumed_at is not None else time.monotonic()
        timings["live_window_s"] = round(back - (steps.paused_at or started), 3)
        failpoint("after_live_resume")  # live groups run, offline ones unseeded, producers on the old layout
        later = steps.seed(offline, report)
        failpoint("after_seed")
        steps.resume(offline)
        failpoint("after_resume")
        timings["whole_window_s"] = round(time.monotonic() - started, 3)
        switch = steps.scale(live=live)
        failpoint("after_scale")
        timings["switch_s"] = round(time.monotonic() - started - timings["whole_window_s"], 3)
        if steps.stop_s is not None:
            timings["command_stop_s"] = steps.stop_s
        if steps.start_s is not None:
            timings["command_start_s"] = steps.start_s
        return {
            **_summary(steps, first, later, timings),
            "switch": switch,
            "drivers": {
                "stopped_groups": steps.stopped_groups,
                "started_groups": resumed.get("started_groups", []),
                "producers_stopped": steps.producers_stopped,
                "start_failures": [r.describe() for r in steps.start_failures],
            },
        }

    def _before_create(self, steps: Any, undo: Callable[[Any], None] | None = None) -> None:
        """Pause, wait EMPTY and create (one topic's steps, or a topic set's); a failure before the
        partitions exist resumes every paused group at once (the run changed nothing: ``undo``, by default
        :meth:`_undo`), then fails the task."""
        try:
            steps.pause()
            failpoint("after_pause")
            steps.wait_empty(self.empty_timeout)
            failpoint("after_empty")
            steps.increase(self.request_timeout)
            failpoint("after_create")
        except Exception:
            (undo or self._undo)(steps)
            raise

    def _undo(self, steps: SafeIncreaseSteps) -> None:
        """Resume every paused group when the partitions were not created; an error here is logged (the
        step's own error is the one to report, and the failure guard undoes again from the cluster)."""
        from airflow_provider_kstate.increase.plan import PlanMode

        plan = steps.plan
        if steps.create_unknown:
            self.log.warning(
                "UNDO %s: not now: the create got no answer and may still be applied; the groups stay paused "
                "(the retry continues, or the failure guard decides from the cluster)",
                self.topic,
            )
            return
        try:
            # the steps' count: never fewer than the run saw (a lagging broker may answer the old count)
            if plan.mode == PlanMode.INCREASE and steps.partition_count() == plan.original_partitions:
                steps.undo_before_create()
        except Exception as exc:  # noqa: BLE001 - the original error is raised; the guard undoes again
            self.log.error("UNDO %s failed (%s): the failure guard resumes the groups", self.topic, exc)

    def _several(self, context: Context) -> dict[str, Any]:
        """The window of a plan of several topics: one leave, every create, every seed, one rejoin."""
        from airflow_provider_kstate.increase.report import write_report
        from airflow_provider_kstate.metrics import METRICS_OUT

        plan = self.typed_plan
        steps = self.topic_set_steps(context, **self.pausing_options())
        uris = {view.topic: self._seed_uri(context, view) for view in plan.views()}
        try:
            with ExitStack() as stack:
                reports = {
                    t: stack.enter_context(
                        write_report(uri, self.report_storage, evidence=True, topic_ids=plan.ids_of(t))
                    )
                    for t, uri in uris.items()
                }
                summary = self._window_of_set(steps, reports)
                rows = {t: r.rows for t, r in reports.items()}
        finally:
            self.control.close()
        for view in plan.views():
            entry = summary["topics"][view.topic]
            entry.update(report_uri=uris[view.topic], report_rows=rows[view.topic])
            METRICS_OUT.window(view, {**entry, "switch": summary["switch"].get(view.topic)})
        timings = summary["timings"]
        self.log.info(
            "WINDOW %s: live groups out for %.3f s; every group seeded on every topic and resumed after %.3f s; "
            "reports %s",
            ", ".join(plan.topic_names),
            timings["live_window_s"],
            timings["whole_window_s"],
            uris,
        )
        return summary

    def _seed_uri(self, context: Context, view: Any) -> str:
        with self.on_topic(view):
            return self.report_uri(context, "seed")

    def _window_of_set(self, steps: TopicSetSteps, reports: dict[str, ReportWriter]) -> dict[str, Any]:
        live, offline = self._split(steps.whole)
        timings: dict[str, float] = {}
        started = time.monotonic()
        self._before_create(steps, self._undo_set)
        first = steps.seed(live, reports)
        failpoint("mid_seed")
        resumed = steps.resume(live)
        back = steps.resumed_at if steps.resumed_at is not None else time.monotonic()
        timings["live_window_s"] = round(back - (steps.paused_at or started), 3)
        failpoint("after_live_resume")
        later = steps.seed(offline, reports)
        failpoint("after_seed")
        steps.resume(offline)
        failpoint("after_resume")
        timings["whole_window_s"] = round(time.monotonic() - started, 3)
        switch = steps.scale(live)
        failpoint("after_scale")
        timings["switch_s"] = round(time.monotonic() - started - timings["whole_window_s"], 3)
        topics = {
            s.topic: {
                "mode": str(s.plan.mode),
                "created": s.created_from is not None,
                **_merged(first[s.topic], later[s.topic]).summary(),
            }
            for s in steps.topics
        }
        return {
            "topic": steps.plan.topic,
            "topics": topics,
            "mode": str(steps.plan.mode),
            "created": any(t["created"] for t in topics.values()),
            "seeded": sum(t["seeded"] for t in topics.values()),
            "kept": sum(t["kept"] for t in topics.values()),
            "timings": timings,
            "switch": switch,
            "drivers": {
                "stopped_groups": steps.whole.stopped_groups,
                "started_groups": resumed.get("started_groups", []),
                "producers_stopped": steps.whole.producers_stopped,
                "start_failures": [r.describe() for r in steps.whole.start_failures],
            },
        }

    def _undo_set(self, steps: TopicSetSteps) -> None:
        """Resume every paused group when no topic was grown (see :meth:`_undo`)."""
        from airflow_provider_kstate.increase.plan import PlanMode

        if steps.create_unknown:
            self.log.warning(
                "UNDO %s: not now: a create got no answer and may still be applied; the groups stay paused",
                steps.plan.topic_names,
            )
            return
        try:
            if steps.plan.mode == PlanMode.INCREASE and steps.created_nothing():
                steps.undo_before_create()
        except Exception as exc:  # noqa: BLE001 - the original error is raised; the guard undoes again
            self.log.error(
                "UNDO %s failed (%s): the failure guard resumes the groups", steps.plan.topic_names, exc
            )

    @staticmethod
    def _split(steps: SafeIncreaseSteps) -> tuple[list[str], list[str]]:
        from airflow_provider_kstate.increase.plan import GroupClass

        seeded = steps.plan.where("seed")
        live = [g for g in seeded if steps.plan.groups[g].cls == GroupClass.ACTIVE]
        return live, [g for g in seeded if g not in live]


def _merged(first: SeedResult, later: SeedResult) -> SeedResult:
    """The two seed passes of a window (live groups, then the others) as one."""
    from airflow_provider_kstate.increase.steps import SeedResult

    return SeedResult(max(first.partitions, later.partitions), {**first.groups, **later.groups})


def _summary(
    steps: SafeIncreaseSteps, first: SeedResult, later: SeedResult, timings: dict[str, float]
) -> dict[str, Any]:
    merged = _merged(first, later)
    return {
        "topic": steps.topic,
        "mode": str(steps.plan.mode),  # XCom keeps plain strings
        "created": steps.created_from is not None,
        **merged.summary(),
        "timings": timings,
    }
