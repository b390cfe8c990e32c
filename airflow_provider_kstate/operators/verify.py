"""Prove, per group and partition, that no message is skipped; then free the topic. The rule is the
domain's (:mod:`airflow_provider_kstate.increase.verification`); this step reads the cluster and the
seed report, calls it, and logs and writes what it found."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.defaults import PRESERVE
from airflow_provider_kstate.errors import ReportError, VerificationError
from airflow_provider_kstate.failpoints import failpoint
from airflow_provider_kstate.operators.base import KStateStepOperator

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_kstate.increase.plan import Plan
    from airflow_provider_kstate.increase.report import Exceptions, ReportWriter
    from airflow_provider_kstate.increase.verification import Marks, SeedEvidence


class KStateVerifyOperator(KStateStepOperator):
    """Judge every partition of the topic for every protected group, from the cluster and the seed report.

    Each group must hold an offset on every partition; an offset this run seeded must have been the log
    start at seed time; on a new partition the offset must not be below today's log start. An offset a
    group already had is safe, whatever its value. The verdict per group and partition (offset, log start
    and end, lag, seeded or kept, problem) goes to the verify report; the log has one line per group and
    the exceptions up to a cap; XCom gets the summary and the reports' URIs. On success the topic's lease
    is released.

    :param seed_report: the XCom of the pause window or of :class:`KStateSeedOffsetsOperator` (each topic's
        ``report_uri`` under ``topics``); None: this run's seed reports at the default location.
    :param release_lease: release the topic's lease when verification passes.
    :param key_order: with ``preserve``, first wait (up to ``barrier_timeout``) for each group with live
        members to pass the key-order barrier (committed offsets at or past it on every partition),
        release it on the control channel and record when it passed (templated).
    :param barrier_timeout: seconds to wait for the groups to pass the barrier; a group still below it is
        logged, not failed: its consumers release themselves once it passes.
    :param producers_started: the XCom of
        :class:`~airflow_provider_kstate.operators.producers.KStateStartProducersOperator`: each drained
        group is reported ``drained`` with the producers' downtime and the backlog it consumed.
    """

    lineage_kind = "verify"

    template_fields: tuple[str, ...] = ("plan", "seed_report", "key_order", "producers_started")

    def __init__(
        self,
        *,
        seed_report: Any = None,
        release_lease: bool = True,
        key_order: str = PRESERVE,
        barrier_timeout: float = 300.0,
        producers_started: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.producers_started = producers_started
        self.seed_report = seed_report
        self.release_lease = release_lease
        self.key_order = key_order
        self.barrier_timeout = barrier_timeout

    def execute(self, context: Context) -> dict[str, Any]:
        """Judge each topic of the plan as a run of one (its own verify report, in its run folder), then
        give one verdict; the leases are released when every topic passed."""
        plan = self.typed_plan
        summaries = {view.topic: self._verify(context, view) for view in plan.views()}
        passed: dict[str, Any] = {}
        for summary in summaries.values():
            passed.update(summary["key_order"].get("groups", {}))
        failed = [t for t, s in summaries.items() if not s["ok"]]
        self._report_progress(context, {"groups": passed}, len(failed))
        if failed:
            raise VerificationError(
                "; ".join(
                    f"{summaries[t]['problems']:,} partitions of {t!r} would have messages skipped (report "
                    f"{summaries[t]['report_uri']})"
                    for t in failed
                )
                + ". See the lines above. The lease of every topic stays held."
            )
        self.log.info(
            "VERIFY %s: no group skips a message on any partition (%s)",
            ", ".join(plan.topic_names),
            ", ".join(f"{t}: {s['partitions']:,}" for t, s in summaries.items()),
        )
        if self.release_lease:
            self.keeper(context).release()
        for view in plan.views():
            self._add_topic_event(context, view, summaries[view.topic]["partitions"])
        return {
            "topics": summaries,
            "ok": True,
            "partitions": max(s["partitions"] for s in summaries.values()),
            "groups": len(plan.where("seed")),
            "problems": 0,
            "cautions": sum(s["cautions"] for s in summaries.values()),
            "lag_total": sum(s["lag_total"] for s in summaries.values()),
        }

    def _verify(self, context: Context, plan: Plan) -> dict[str, Any]:
        """Judge every partition of one topic (``plan``: its view) for every protected group; write its
        verify report; return its summary (nothing is released nor raised here)."""
        from airflow_provider_kstate.increase.key_order import check_key_order
        from airflow_provider_kstate.increase.replicas import wait_for_leaders
        from airflow_provider_kstate.increase.report import Exceptions, write_report
        from airflow_provider_kstate.increase.verification import Marks
        from airflow_provider_kstate.metrics import METRICS_OUT

        topic = plan.topic
        if plan.new_partitions:  # the switch waited for them already; a per-step run may skip the switch
            wait_for_leaders(
                self.admin, topic, plan.new_partitions, max(self.barrier_timeout, self.request_timeout)
            )
        barrier = self._barrier(context, plan) if check_key_order(self.key_order) == PRESERVE else {}
        barrier = self._drained(plan, barrier)
        count = self.admin.partition_count(topic)
        watermarks = self.admin.watermarks(topic, range(count))
        marks = Marks.of(plan, watermarks, count)
        evidence, seed_uri = self._evidence(context, topic, count)
        uri = self.report_uri(context, "verify", topic)
        problems, cautions = Exceptions(self.log, "VERIFY"), Exceptions(self.log, "VERIFY caution:")
        lag_total = 0
        with write_report(uri, self.report_storage) as report:
            for group, committed in self.admin.committed_offsets_many(plan.where("seed"), topic, count):
                lag_total += self._group(group, committed, marks, evidence, report, problems, cautions)
                failpoint("mid_verify")
            rows = report.rows
        problems.close(uri)
        cautions.close(uri)
        METRICS_OUT.verified(topic, not problems.count)
        return {
            "ok": not problems.count,
            "partitions": count,
            "groups": len(plan.where("seed")),
            "problems": problems.count,
            "cautions": cautions.count,
            "lag_total": lag_total,
            "report_uri": uri,
            "report_rows": rows,
            "seed_report_uri": seed_uri,
            "key_order": barrier,
        }

    def _barrier(self, context: Context, plan: Plan) -> dict[str, Any]:
        """Release every live group of one topic once it passed the key-order barrier; per group, when."""
        from airflow_provider_kstate.increase.key_order import watch_release
        from airflow_provider_kstate.lease_rules import run_owner

        seeded = plan.where("seed")
        live = [g for g, info in self.admin.describe_groups(seeded, plan.topic).items() if info.members]
        try:
            return watch_release(
                self.admin, self.control, plan, self.log, run_owner(context), self.barrier_timeout, live
            )
        finally:
            self.control.close()

    def _report_progress(self, context: Context, order: dict[str, Any], problems: int) -> None:
        """The groups past the barrier (or drained) are ``passed``; the run ends here."""
        from airflow_provider_kstate.increase.events import GroupState

        events = self.events(context)
        events.step("verify")
        passed = [g for g, e in order.get("groups", {}).items() if "passed_after_s" in e or "drained" in e]
        events.groups(passed, GroupState.PASSED)
        events.finish("failed" if problems else "success")

    def _drained(self, plan: Plan, order: dict[str, Any]) -> dict[str, Any]:
        """Add each drained group to the key-order summary: the producers waited until it had consumed
        everything written before them (``drained``), with their downtime and the backlog at the switch."""
        from airflow_provider_kstate.increase.key_order import ORDER_DRAINED

        drained = plan.marked(ORDER_DRAINED)
        if not drained:
            return order
        from airflow_provider_kstate.increase.run import topic_entry

        started = topic_entry(self.producers_started, plan.topic)  # the cost of this topic's producers
        entry = {
            "drained": "the producers started once it had consumed every record written before they stopped",
            "plan": str(ORDER_DRAINED),
            "producer_downtime_s": started.get("producer_downtime_s"),
            "backlog_at_switch": started.get("backlog_at_switch"),
        }
        groups = {**order.get("groups", {}), **{g: dict(entry) for g in drained}}
        for group in drained:
            self.log.info("VERIFY group %s was drained before the producers started: %s", group, entry)
        return {**order, "groups": groups}

    def _add_topic_event(self, context: Context, plan: Plan, count: int) -> None:
        """Add the grown topic's ``kafka://`` Asset event to this task's AssetAlias outlets (an increase)."""
        from airflow_provider_kstate.assets import add_topic_event
        from airflow_provider_kstate.increase.plan import PlanMode

        if plan.mode != PlanMode.INCREASE:
            return
        servers = str(self.admin.client_config().get("bootstrap.servers", ""))
        extra = {"original_partitions": plan.original_partitions, "partitions": count}
        asset = add_topic_event(list(self.outlets), context, servers, plan.topic, extra)
        if asset is not None:
            self.log.info(
                "ASSET %s: event added (%s -> %s partitions)", asset.uri, plan.original_partitions, count
            )

    def _evidence(self, context: Context, topic: str, count: int) -> tuple[SeedEvidence, str]:
        from airflow_provider_kstate.increase.run import topic_entry
        from airflow_provider_kstate.increase.verification import SeedEvidence

        given = topic_entry(self.seed_report, topic)  # the window's or the seed step's report of the topic
        uri = str(given.get("report_uri") or self.report_uri(context, "seed", topic))
        try:
            evidence = SeedEvidence.from_report(count, uri, self.report_storage)
        except ReportError as exc:
            self.log.warning("VERIFY no seed report (%s): judging from the cluster alone", exc)
            return SeedEvidence(count), ""
        self.log.info("VERIFY read the seed report %s (%s rows)", uri, f"{evidence.rows:,}")
        return evidence, uri

    def _group(
        self,
        group: str,
        committed: dict[int, int],
        marks: Marks,
        evidence: SeedEvidence,
        report: ReportWriter,
        problems: Exceptions,
        cautions: Exceptions,
    ) -> int:
        """Judge one group's partitions (:func:`judge_group`), log its exceptions and line, write its rows."""
        from airflow_provider_kstate.increase.verification import judge_group, report_rows

        verdict = judge_group(group, committed, marks, evidence)
        for p in verdict.bad:
            problems.add("group %s partition %s: SKIP: %s", group, p, verdict.problems[p])
        for p, text in verdict.cautions.items():
            cautions.add("group %s partition %s: %s", group, p, text)
        flags = evidence.flags(group)
        report.write_lines(report_rows(group, verdict.offsets, marks, verdict.lags, flags, verdict.problems))
        self._line(group, len(marks.starts), verdict.bad, verdict.seeded, verdict.lag, verdict.worst)
        return verdict.lag

    def _line(
        self, group: str, count: int, bad: list[int], seeded: int, lag: int, worst: tuple[int, int]
    ) -> None:
        from airflow_provider_kstate.increase.report import ranges

        verdict = (
            f"{len(bad):,} partitions WOULD SKIP messages: {ranges(bad)}"
            if bad
            else "every one holds an offset from which no message is skipped"
        )
        self.log.info(
            "VERIFY group %s: %s partitions, %s; %s seeded by this run at the log start; lag %s (max %s on partition %s)",
            group,
            f"{count:,}",
            verdict,
            f"{seeded:,}",
            f"{lag:,}",
            f"{worst[0]:,}",
            worst[1],
        )
