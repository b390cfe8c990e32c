"""A Kafka Streams application's resize as one task runs it (issue 40, item 2: the body of
:class:`~airflow_provider_kstate.operators.streams_resize.KStateStreamsResizeOperator`, without Airflow).

:meth:`StreamsResizeTask.run`, with the arguments checked already
(:func:`~airflow_provider_kstate.increase.streams_plan.resize_args`):

1. checks the connection and plans every source of the application and every reader of each
   (:func:`~airflow_provider_kstate.increase.streams_plan.plan_resize`), logging the plan;
2. takes the leases of the plan's topics (held, and renewed, for the whole resize) and refuses a topic that
   changed while planning;
3. makes the replacer (:func:`~airflow_provider_kstate.cluster.streams_resize.replacer_for`) and the run of
   the other readers of the sources
   (:func:`~airflow_provider_kstate.increase.streams_plan.other_readers_run`), then runs
   :class:`~airflow_provider_kstate.cluster.streams_resize.StreamsResize`;
4. logs and returns its report (:func:`~airflow_provider_kstate.cluster.streams_resize.resize_report`), or
   fails when starting the application or its producers failed.

Everything that can be refused is refused before anything is stopped: a malformed argument, a missing or
non-command driver (:class:`~airflow_provider_kstate.errors.InvalidDriverError`), both by
:func:`~airflow_provider_kstate.increase.streams_plan.resize_args`; a target below the current count
(:class:`~airflow_provider_kstate.errors.InvalidPartitionCountError`; equal to it: a run again, which continues
a resize that did not finish and otherwise changes nothing), an application that does not read the topic as
a Kafka Streams application (:class:`~airflow_provider_kstate.errors.UnknownGroupError`), a topology the run
cannot resize (:class:`~airflow_provider_kstate.errors.UnsupportedStreamsTopologyError`), another reader of
its sources the plan refuses (a live group without a driver, a share group that would start the new
partitions at their end, a second Streams application not acknowledged), another run holding a source's
lease.

**Every reader of the sources in one run.** The plan covers every source of the application (a
co-partitioned topic set), so it names every reader of each. The other readers (consumer groups on their
drivers: the client piece's control record, a command pair; offline groups) are taken out of their groups
once the application is stopped, seeded on each new partition after the grow and back before the
application starts; the producers, stopped for the application's drain, start only once those groups have
consumed the old partitions (key order; a group still behind after ``drain_timeout`` is named and the
producers start). A share group that the broker starts on new partitions at their first record (the broker
doctor's last verdict) is left alone.

The caller gives it the admin verbs, the control channel, the logger and how the leases are taken.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_provider_kstate.cluster.streams_resize import (
    Replacer,
    StreamsResize,
    replacer_for,
    report_lines,
    resize_report,
)
from airflow_provider_kstate.errors import StreamsResizeError, TopicChangedError
from airflow_provider_kstate.increase.plan import Plan, describe, readers
from airflow_provider_kstate.increase.run import IncreaseRun
from airflow_provider_kstate.increase.streams_apps import StreamsAppPlan
from airflow_provider_kstate.increase.streams_plan import (
    ReplacerKind,
    ResizeArgs,
    other_readers_run,
    plan_resize,
)
from airflow_provider_kstate.lease_rules import LeaseSet


@dataclass
class StreamsResizeTask:
    """One resize: its checked arguments and what it runs with.

    :param args: the checked arguments.
    :param admin: the admin verbs (``check_connection``, ``partition_count``, ``cluster``: the
        :class:`~airflow_provider_kstate.cluster.admin.ClusterAdmin` and its ``config``).
    :param control: the control channel (its client-piece clients for the plan; the other readers' pause
        and resume).
    :param log: where the lines go (the task's logger).
    :param trust: the broker doctor's answer on share groups (``plan_increase``'s ``trust``).
    :param workdir: where the Spark replacer writes its files; empty: a temporary folder.
    :param drain_timeout: seconds the application may take to consume its sources.
    :param empty_timeout: seconds its group (and another reader stopped by its command) may take to empty.
    """

    args: ResizeArgs
    admin: Any
    control: Any
    log: Any
    trust: Callable[[], bool] | None = None
    workdir: str = ""
    drain_timeout: float = 120.0
    empty_timeout: float = 120.0

    def run(self, leases: Callable[[Sequence[str]], LeaseSet]) -> dict[str, Any]:
        """Plan, hold ``leases(the plan's topics)``, resize, report (the module's docstring says how)."""
        args = self.args
        self.admin.check_connection()
        plan, entry = self.plan()
        keeper = leases(plan.topic_names)
        with keeper.holding(), tempfile.TemporaryDirectory(prefix="kstate-streams-") as scratch:
            current = self.admin.partition_count(args.topic)
            if current != entry.partitions:
                raise TopicChangedError(
                    f"topic {args.topic!r} changed to {current} partitions while planning; nothing was "
                    "stopped. Run again."
                )
            replacer = self.replacer(Path(self.workdir) if self.workdir else Path(scratch))
            others = self.other_readers(plan, keeper.owner)
            result = self.resize(entry, replacer, others)
        report = resize_report(args.topic, entry, result, str(args.replacer), readers(plan))
        for line in report_lines(report):
            self.log.info("STREAMS %s", line)
        if report["start_failures"]:
            raise StreamsResizeError(
                f"application {args.app_id!r} was resized to {args.target} partitions, but starting it (or "
                f"its producers) failed: {report['start_failures']}. Its topics, state and offsets are in "
                "place: start it by its driver. The lease is released."
            )
        return report

    def plan(self) -> tuple[Plan, StreamsAppPlan]:
        """Plan the resize (every source of the application, every reader of each) and log the plan; or
        refuse the run."""
        args = self.args
        present = self.control.client_piece_clients
        plan, entry = plan_resize(self.admin, args.request(), args.app_id, present, trust=self.trust)
        for line in describe(plan):
            self.log.info("PLAN %s", line)
        self.log.info("STREAMS plan of %s: %s", args.app_id, entry.actions)
        return plan, entry

    def replacer(self, workdir: Path) -> Replacer:
        """The re-placement of the changelogs the arguments name (``spark`` or ``local``)."""
        args = self.args
        if args.replacer is ReplacerKind.LOCAL:
            self.log.info("STREAMS re-placement in the worker (replacer=local)")
        else:
            self.log.info("STREAMS re-placement by %s %s", args.spark_submit, " ".join(args.spark_args))
        config = self.admin.cluster.config
        return replacer_for(args.replacer, config, workdir, args.spark_submit, args.spark_args)

    def other_readers(self, plan: Plan, owner: str) -> IncreaseRun | None:
        """The run of the other readers of the sources (``other_readers_run``); None when the application is
        their only reader."""
        run = other_readers_run(plan, self.admin, self.control, self.log, owner, float(self.empty_timeout))
        if run is not None:
            self.log.info("STREAMS the other readers of %s: %s", plan.topic_names, run.plan.where("seed"))
        return run

    def resize(self, entry: StreamsAppPlan, replacer: Replacer, others: IncreaseRun | None) -> dict[str, Any]:
        """Run :class:`~airflow_provider_kstate.cluster.streams_resize.StreamsResize`; return its result."""
        return StreamsResize(
            app=entry,
            admin=self.admin.cluster,
            kafka_config=self.admin.cluster.config,
            driver=self.args.driver,
            replacer=replacer,
            producers=dict(self.args.producers),
            log=self.log,
            drain_timeout=float(self.drain_timeout),
            empty_timeout=float(self.empty_timeout),
            others=others,
        ).run()
