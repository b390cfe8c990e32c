"""Prove, per group and partition, that no message is skipped; then free the topic. The judging is the
domain's (:class:`~airflow_provider_kstate.increase.verification.TopicVerification`); this step gathers
its inputs, calls it per topic and gives one verdict."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.defaults import PRESERVE
from airflow_provider_kstate.errors import VerificationError
from airflow_provider_kstate.failpoints import failpoint
from airflow_provider_kstate.operators.step import KStateStepOperator

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_kstate.increase.plan import Plan


class KStateVerifyOperator(KStateStepOperator):
    """Judge every partition of the topic for every protected group, from the cluster and the seed report
    (the rule and the report: :class:`~airflow_provider_kstate.increase.verification.TopicVerification`);
    XCom gets the summary and the reports' URIs. On success the topic's lease is released.

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
        from airflow_provider_kstate.increase import verification as v
        from airflow_provider_kstate.increase.events import GroupState
        from airflow_provider_kstate.increase.key_order import check_key_order
        from airflow_provider_kstate.increase.run import topic_entry
        from airflow_provider_kstate.lease_rules import run_owner
        from airflow_provider_kstate.metrics import METRICS_OUT

        plan, preserve = self.typed_plan, check_key_order(self.key_order) == PRESERVE
        judge = v.TopicVerification(
            self.admin,
            self.log,
            self.report_storage,
            control=self.control if preserve else None,  # the barrier's channel, only when preserved
            owner=run_owner(context),
            barrier_timeout=self.barrier_timeout,
            leader_timeout=max(self.barrier_timeout, self.request_timeout),
            after_group=lambda: failpoint("mid_verify"),
        )
        summaries: dict[str, dict[str, Any]] = {}
        for view in plan.views():  # the seed report: the window's or the seed step's, else this run's
            topic, seed = view.topic, topic_entry(self.seed_report, view.topic).get("report_uri")
            seed_uri = str(seed or self.report_uri(context, "seed", topic))
            started = topic_entry(self.producers_started, topic)  # the cost of this topic's producers
            summaries[topic] = judge.verify(
                view, self.report_uri(context, "verify", topic), seed_uri, started
            )
            METRICS_OUT.verified(topic, summaries[topic]["ok"])
        failed = v.failure(summaries)  # the groups past the barrier (or drained) passed; the run ends here
        events = self.events(context)
        events.step("verify")
        events.groups(v.passed_groups(summaries), GroupState.PASSED)
        events.finish("failed" if failed else "success")
        if failed:
            raise VerificationError(failed)
        self.log.info(
            "VERIFY %s: no group skips a message on any partition (%s)",
            ", ".join(plan.topic_names),
            ", ".join(f"{t}: {s['partitions']:,}" for t, s in summaries.items()),
        )
        if self.release_lease:
            self.keeper(context).release()
        for view in plan.views():
            self._add_topic_event(context, view, summaries[view.topic]["partitions"])
        return v.overall(summaries, len(plan.where("seed")))

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
