"""Resize a stateful Kafka Streams application from Airflow (issue 32, item 3): one task plans the resize,
holds the topic's lease, and runs :class:`~airflow_provider_kstate.cluster.streams_resize.StreamsResize`
(drain, stop the application by its driver, grow its sources, repartition topics and changelogs, re-place
the changelogs, seed, start).

Everything that can be refused is refused before anything is stopped: a malformed argument, an application
that does not read the topic as a Kafka Streams application (:class:`~airflow_provider_kstate.errors.UnknownGroupError`),
a target below the current count (:class:`~airflow_provider_kstate.errors.InvalidPartitionCountError`; equal
to it: a run again, which continues a resize that did not finish and otherwise changes nothing),
a missing or non-command driver (:class:`~airflow_provider_kstate.errors.InvalidDriverError`), a topology
the run cannot resize (the plan's :class:`~airflow_provider_kstate.errors.UnsupportedStreamsTopologyError`),
another reader of its sources the plan refuses (a live group without a driver, a share group that would
start the new partitions at their end, a second Streams application not acknowledged), another run holding
a source's lease.

**Every reader of the sources in one run.** The plan covers every source of the application (a
co-partitioned topic set), so it names every reader of each. The other readers (consumer groups on their
drivers: the client piece's control record, a command pair; offline groups) are taken out of their groups
once the application is stopped, seeded on each new partition after the grow and back before the
application starts; the producers, stopped for the application's drain, start only once those groups have
consumed the old partitions (key order; a group still behind after ``drain_timeout`` is named and the
producers start). A share group that the broker starts on new partitions at their first record (the broker
doctor's last verdict) is left alone.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.enums import StrEnum
from airflow_provider_kstate.errors import (
    InvalidDriverError,
    KStateConfigError,
    StreamsResizeError,
    TopicChangedError,
)
from airflow_provider_kstate.operators.base import KStateIncreaseOperator
from airflow_provider_kstate.params import as_choice, as_int, as_mapping, as_str_list, as_topic

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_kstate.cluster.control import Controller
    from airflow_provider_kstate.cluster.streams_resize import Replacer
    from airflow_provider_kstate.hooks.admin import KStateAdminHook
    from airflow_provider_kstate.increase.drivers import CommandDriver, Driver
    from airflow_provider_kstate.increase.plan import Plan
    from airflow_provider_kstate.increase.run import IncreaseRun
    from airflow_provider_kstate.increase.streams_apps import StreamsAppPlan


class ReplacerKind(StrEnum):
    """Where the changelogs are re-placed (:func:`~airflow_provider_kstate.cluster.streams_resize.replacer_for`)."""

    SPARK = "spark"
    LOCAL = "local"


#: spark-submit's arguments before the application, unless given (``spark_args``).
DEFAULT_SPARK_ARGS = ("--master", "local[2]", "--conf", "spark.ui.enabled=false")


class KStateStreamsResizeOperator(KStateIncreaseOperator):
    """Grow ``topic`` to ``partitions`` for the Kafka Streams application ``application_id`` reading it:
    its co-partitioned sources, repartition topics and changelogs grow together, its state moves with its
    keys (:mod:`airflow_provider_kstate.cluster.streams_resize`), and it restarts on the new layout.

    The task plans (:func:`~airflow_provider_kstate.increase.planner.plan_increase`, the application
    acknowledged), takes the topic's lease (held, and renewed, for the whole resize; a second run on the
    topic fails with :class:`~airflow_provider_kstate.errors.LeaseHeldError`), runs the resize and pushes its
    report to XCom: the application's downtime, the keys each changelog moved, the re-placement's rate, the
    deep check of each changelog, each step's seconds.

    :param topic: the topic to grow (one of the application's sources; the others grow with it).
    :param partitions: the target partition count, above the current one.
    :param application_id: the application's ``application.id`` (its group id).
    :param app_driver: how the application is stopped and started: a
        :class:`~airflow_provider_kstate.increase.drivers.CommandDriver`, its dict form, or the name of a
        command driver in ``drivers`` (a DAG run's params name drivers; they never carry commands).
    :param producer_drivers: the producer services of its sources, stopped for the drain: a list of driver
        names in ``drivers``, or ``{service: driver}``. Every producer of its sources must be named: the
        resize refuses to grow while records still arrive.
    :param drivers: the named drivers (``{name: driver}``), e.g. the ``kstate_drivers`` Variable.
    :param replacer: ``spark`` (``spark-submit replace_changelog.py``, for changelogs of any size) or
        ``local`` (the same tasks and deep check in threads of the worker, for small changelogs).
    :param exclude_groups: other groups reading the topic that the run leaves alone (a risk accepted).
    :param group_drivers: ``{group: driver name}`` of the other readers of its sources that are not driven by
        the control protocol (the names of ``drivers``, or drivers): each is stopped and started by it.
    :param spark_submit: the ``spark-submit`` command (``replacer=spark``); looked up on PATH and beside
        the worker's Python.
    :param spark_args: its arguments before the application (master, conf ...).
    :param workdir: where the Spark replacer writes its report and config file (mode 0600, removed after);
        empty: a temporary folder of the task.
    :param drain_timeout: seconds the application may take to consume its sources once the producers stop.
    :param empty_timeout: seconds its group may take to become EMPTY after its stop command.
    :param kwargs: the connection, the lease topic and TTL of
        :class:`~airflow_provider_kstate.operators.base.KStateIncreaseOperator`.
    """

    template_fields: tuple[str, ...] = (
        "topic",
        "partitions",
        "application_id",
        "app_driver",
        "producer_drivers",
        "drivers",
        "replacer",
        "exclude_groups",
        "group_drivers",
        "spark_submit",
        "spark_args",
        "workdir",
    )
    ui_color = "#e8f5e9"

    def __init__(
        self,
        *,
        topic: str,
        partitions: int | str,
        application_id: str,
        app_driver: Any,
        producer_drivers: Any = None,
        drivers: Any = None,
        replacer: str = ReplacerKind.SPARK,
        exclude_groups: list[str] | str | None = None,
        group_drivers: Any = None,
        spark_submit: str = "spark-submit",
        spark_args: list[str] | tuple[str, ...] | str = DEFAULT_SPARK_ARGS,
        workdir: str = "",
        drain_timeout: float = 120.0,
        empty_timeout: float = 120.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.topic = topic
        self.partitions = partitions
        self.application_id = application_id
        self.app_driver = app_driver
        self.producer_drivers = producer_drivers
        self.drivers = drivers
        self.replacer = replacer
        self.exclude_groups = exclude_groups
        self.group_drivers = group_drivers
        self.spark_submit = spark_submit
        self.spark_args = spark_args
        self.workdir = workdir
        self.drain_timeout = drain_timeout
        self.empty_timeout = empty_timeout

    # -- the inputs, checked before anything is read or stopped -----------------------------------------

    def app_id(self) -> str:
        app_id = str(self.application_id or "").strip()
        if not app_id:
            raise KStateConfigError(
                "application_id must name the Kafka Streams application (its application.id)"
            )
        return app_id

    def command_drivers(self, app_id: str) -> tuple[CommandDriver, dict[str, CommandDriver]]:
        """The application's driver and its producers' (``{service: driver}``); raise
        :class:`InvalidDriverError` for a missing, unknown or non-command one."""
        from airflow_provider_kstate.increase.drivers import as_registry
        from airflow_provider_kstate.increase.streams_plan import command_driver

        registry = as_registry(as_mapping("drivers", self.drivers))
        if self.app_driver is None or (isinstance(self.app_driver, str) and not self.app_driver.strip()):
            raise InvalidDriverError(
                f"application {app_id!r} has no driver: name a command driver (a stop/start/ready command pair "
                "in the kstate_drivers Variable) with app_driver. Nothing was stopped."
            )
        app = command_driver(f"application {app_id!r}", self.app_driver, registry)
        value = self.producer_drivers
        if isinstance(value, str) and not value.strip().startswith("{"):
            value = as_str_list("producer_drivers", value)
        if isinstance(value, (list, tuple)):
            value = {str(name): name for name in value}
        producers = {
            service: command_driver(f"producer {service!r}", driver, registry)
            for service, driver in as_mapping("producer_drivers", value).items()
        }
        return app, producers

    def other_drivers(self) -> dict[str, Driver]:
        """``group_drivers`` as ``{group: driver}`` (the names of ``drivers``, or drivers)."""
        from airflow_provider_kstate.increase.drivers import as_driver, as_registry

        named = as_registry(as_mapping("drivers", self.drivers))
        return {
            str(g): as_driver(f"group {g!r}", d, named)
            for g, d in as_mapping("group_drivers", self.group_drivers).items()
        }

    def replacer_kind(self) -> ReplacerKind:
        return as_choice("replacer", self.replacer, ReplacerKind)

    def spark_submit_path(self) -> str:
        """The spark-submit to run (PATH, then beside the worker's Python), or KStateConfigError."""
        name = str(self.spark_submit or "spark-submit")
        found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
        if found is None:
            raise KStateConfigError(
                f"replacer=spark needs {name!r}, found neither on PATH nor beside {sys.executable}: install "
                "pyspark on the worker, give spark_submit, or re-place small changelogs in the worker with "
                "replacer=local. Nothing was stopped."
            )
        return found

    def spark_arguments(self) -> tuple[str, ...]:
        args = self.spark_args
        if isinstance(args, str):
            args = as_str_list("spark_args", args) if args.strip().startswith("[") else args.split()
        return tuple(str(a) for a in args or ())

    # -- the task -----------------------------------------------------------------------------------------

    def execute(self, context: Context) -> dict[str, Any]:
        topic = as_topic("topic", self.topic)
        target = as_int("partitions", self.partitions)
        app_id = self.app_id()
        kind = self.replacer_kind()
        driver, producers = self.command_drivers(app_id)
        spark_submit = self.spark_submit_path() if kind is ReplacerKind.SPARK else ""
        from airflow_provider_kstate.cluster.streams_resize import report_lines, resize_report
        from airflow_provider_kstate.hooks.lease import KStateLeaseHook
        from airflow_provider_kstate.increase.plan import readers
        from airflow_provider_kstate.lease_rules import LeaseSet

        hook = KStateLeaseHook(
            self.kafka_config_id, lease_topic=self.lease_topic, request_timeout=self.request_timeout
        )
        admin = hook.admin
        admin.check_connection()
        plan, entry = self.plan_app(admin, topic, target, app_id, driver, producers)
        keeper = LeaseSet.for_topics(hook, plan.topic_names, context, self.lease_ttl, self.log)
        try:
            with keeper.holding(), tempfile.TemporaryDirectory(prefix="kstate-streams-") as scratch:
                current = admin.partition_count(topic)
                if current != entry.partitions:
                    raise TopicChangedError(
                        f"topic {topic!r} changed to {current} partitions while planning; nothing was stopped. "
                        "Run again."
                    )
                workdir = Path(str(self.workdir or "")) if self.workdir else Path(scratch)
                replacer = self.make_replacer(kind, admin.cluster.config, workdir, spark_submit)
                others = self.other_readers(plan, admin, keeper.owner)
                result = self.resize(entry, admin, driver, producers, replacer, others)
        finally:
            self._close_control()
        report = resize_report(topic, entry, result, str(kind), readers(plan))
        for line in report_lines(report):
            self.log.info("STREAMS %s", line)
        if report["start_failures"]:
            raise StreamsResizeError(
                f"application {app_id!r} was resized to {target} partitions, but starting it (or its "
                f"producers) failed: {report['start_failures']}. Its topics, state and offsets are in place: "
                "start it by its driver. The lease is released."
            )
        return report

    def plan_app(
        self,
        admin: KStateAdminHook,
        topic: str,
        target: int,
        app_id: str,
        driver: CommandDriver,
        producers: Mapping[str, CommandDriver],
    ) -> tuple[Plan, StreamsAppPlan]:
        """Plan the resize (:func:`~airflow_provider_kstate.increase.streams_plan.plan_resize`: every source
        of the application, every reader of each) and log the plan; or refuse the run."""
        from airflow_provider_kstate.increase.plan import describe
        from airflow_provider_kstate.increase.streams_plan import plan_resize, resize_request

        excluded = as_str_list("exclude_groups", self.exclude_groups)
        request = resize_request(topic, target, app_id, driver, producers, self.other_drivers(), excluded)
        plan, entry = plan_resize(
            admin, request, app_id, self.control.client_piece_clients, trust=self._share_kept
        )
        for line in describe(plan):
            self.log.info("PLAN %s", line)
        self.log.info("STREAMS plan of %s: %s", app_id, entry.actions)
        return plan, entry

    @cached_property
    def control(self) -> Controller:
        """The controller of the control channel (the other readers' pause and resume; closed after)."""
        from airflow_provider_kstate.hooks.control import KStateControlHook

        return KStateControlHook(
            self.kafka_config_id, control_topic=self.control_topic, request_timeout=self.request_timeout
        ).get_conn

    def _close_control(self) -> None:
        if "control" in self.__dict__:
            self.control.close()
            del self.__dict__["control"]

    def _share_kept(self) -> bool:
        """Whether the broker starts a share group on added partitions at their first record, by the broker
        doctor's last verdict (no probe here; never checked: not known, so such a share group is refused)."""
        from airflow_provider_kstate.doctor.promises import SHARE_NEW_PARTITIONS
        from airflow_provider_kstate.hooks.doctor import KStateDoctorHook

        verdict = KStateDoctorHook(self.kafka_config_id, request_timeout=self.request_timeout).last_verdict()
        return bool(verdict is not None and verdict.kept(SHARE_NEW_PARTITIONS))

    def other_readers(self, plan: Plan, admin: KStateAdminHook, owner: str) -> IncreaseRun | None:
        """The run of the other readers of the application's sources
        (:func:`~airflow_provider_kstate.increase.streams_plan.other_readers_run`); None when the
        application is their only reader."""
        from airflow_provider_kstate.increase.streams_plan import other_readers_run

        run = other_readers_run(plan, admin, self.control, self.log, owner, float(self.empty_timeout))
        if run is not None:
            self.log.info("STREAMS the other readers of %s: %s", plan.topic_names, run.plan.where("seed"))
        return run

    def make_replacer(
        self, kind: ReplacerKind, kafka_config: Mapping[str, Any], workdir: Path, spark_submit: str
    ) -> Replacer:
        from airflow_provider_kstate.cluster.streams_resize import replacer_for

        if kind is ReplacerKind.LOCAL:
            self.log.info("STREAMS re-placement in the worker (replacer=local)")
        else:
            self.log.info("STREAMS re-placement by %s %s", spark_submit, " ".join(self.spark_arguments()))
        return replacer_for(kind, kafka_config, workdir, spark_submit, self.spark_arguments())

    def resize(
        self,
        entry: StreamsAppPlan,
        admin: KStateAdminHook,
        driver: CommandDriver,
        producers: Mapping[str, CommandDriver],
        replacer: Replacer,
        others: IncreaseRun | None = None,
    ) -> dict[str, Any]:
        """Run the resize (the seam the unit tests replace)."""
        from airflow_provider_kstate.cluster.streams_resize import StreamsResize

        return StreamsResize(
            app=entry,
            admin=admin.cluster,
            kafka_config=admin.cluster.config,
            driver=driver,
            replacer=replacer,
            producers=dict(producers),
            log=self.log,
            drain_timeout=float(self.drain_timeout),
            empty_timeout=float(self.empty_timeout),
            others=others,
        ).run()
