"""The plan of a Kafka Streams application's resize (issue 32, item 3; issue 40 item 2: the decisions of
:class:`~airflow_provider_kstate.operators.streams_resize.KStateStreamsResizeOperator`, without Airflow).

* :func:`resize_args` - the task's arguments, checked before anything is read or stopped
  (:class:`ResizeArgs`: the topic, the target, the application, its drivers, the replacer);
* :func:`command_driver` - a driver as the command pair that stops and starts the application or a producer
  (a control-driven or task-driven one is refused: they are stopped by commands);
* :func:`resize_request` - the plan request of the resize: the topic, the target, the application
  acknowledged and driven by its command pair, its producers' drivers, key order relaxed (the producers are
  stopped: the other groups drain before they start);
* :func:`plan_resize` - the plan of every source of the application (the one planner,
  :func:`~airflow_provider_kstate.increase.planner.plan_increase`): a target below the current count is
  refused before planning, the application must read the topic as a Kafka Streams application, and when its
  sources are more than the topic the plan is made again over all of them, so every reader of each is in it;
* :func:`other_readers_run` - the run of the other readers of its sources (the plan without its Streams
  applications), taken out around the grow in the same run.

It is a module of its own because :mod:`~airflow_provider_kstate.increase.streams_apps` is imported by the
plan, which the planner imports. No Airflow here.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_provider_kstate.enums import StrEnum
from airflow_provider_kstate.errors import (
    InvalidDriverError,
    InvalidPartitionCountError,
    KStateConfigError,
    UnknownGroupError,
)
from airflow_provider_kstate.increase.drivers import ActionDriver, Driver, as_driver, as_registry
from airflow_provider_kstate.increase.plan import Plan
from airflow_provider_kstate.increase.planner import plan_increase
from airflow_provider_kstate.increase.ports import AdminPort, ControlPort
from airflow_provider_kstate.increase.request import KeyOrder, PlanRequest
from airflow_provider_kstate.increase.run import IncreaseRun
from airflow_provider_kstate.increase.streams_apps import StreamsAppPlan
from airflow_provider_kstate.params import as_choice, as_int, as_mapping, as_str_list, as_topic


class ReplacerKind(StrEnum):
    """Where the changelogs are re-placed (:func:`~airflow_provider_kstate.cluster.streams_resize.replacer_for`)."""

    SPARK = "spark"
    LOCAL = "local"


@dataclass(frozen=True)
class ResizeArgs:
    """The arguments of a resize, checked (:func:`resize_args`)."""

    topic: str
    target: int
    app_id: str
    replacer: ReplacerKind
    #: The application's command pair, and its producers' (``{service: driver}``).
    driver: ActionDriver
    producers: dict[str, ActionDriver] = field(default_factory=dict)
    #: ``{group: driver}`` of the other readers not driven by the control protocol.
    group_drivers: dict[str, Driver] = field(default_factory=dict)
    exclude_groups: tuple[str, ...] = ()
    #: The spark-submit found and its arguments (``replacer=spark``; empty for ``local``).
    spark_submit: str = ""
    spark_args: tuple[str, ...] = ()

    def request(self) -> PlanRequest:
        """The plan request of the resize (:func:`resize_request`)."""
        return resize_request(
            self.topic,
            self.target,
            self.app_id,
            self.driver,
            self.producers,
            self.group_drivers,
            self.exclude_groups,
        )


def resize_args(
    *,
    topic: Any,
    partitions: Any,
    application_id: Any,
    app_driver: Any,
    producer_drivers: Any = None,
    drivers: Any = None,
    replacer: Any = ReplacerKind.SPARK,
    exclude_groups: Any = None,
    group_drivers: Any = None,
    spark_submit: Any = "spark-submit",
    spark_args: Any = (),
) -> ResizeArgs:
    """The operator's (rendered) arguments, checked before anything is read or stopped: a malformed one
    raises :class:`KStateConfigError` naming it; a missing, unknown or non-command driver of the application
    or of a producer :class:`InvalidDriverError`; ``replacer=spark`` without a spark-submit
    :class:`KStateConfigError`. The parameters are
    :class:`~airflow_provider_kstate.operators.streams_resize.KStateStreamsResizeOperator`'s."""
    topic = as_topic("topic", topic)
    target = as_int("partitions", partitions)
    app_id = str(application_id or "").strip()
    if not app_id:
        raise KStateConfigError("application_id must name the Kafka Streams application (its application.id)")
    kind = as_choice("replacer", replacer, ReplacerKind)
    registry = as_registry(as_mapping("drivers", drivers))
    if app_driver is None or (isinstance(app_driver, str) and not app_driver.strip()):
        raise InvalidDriverError(
            f"application {app_id!r} has no driver: name a command driver (a stop/start/ready command pair "
            "in the kstate_drivers Variable) with app_driver. Nothing was stopped."
        )
    driver = command_driver(f"application {app_id!r}", app_driver, registry)
    value = producer_drivers
    if isinstance(value, str) and not value.strip().startswith("{"):
        value = as_str_list("producer_drivers", value)
    if isinstance(value, (list, tuple)):
        value = {str(name): name for name in value}
    producers = {
        service: command_driver(f"producer {service!r}", d, registry)
        for service, d in as_mapping("producer_drivers", value).items()
    }
    spark: tuple[str, tuple[str, ...]] = ("", ())
    if kind is ReplacerKind.SPARK:
        spark = (spark_submit_path(spark_submit), spark_arguments(spark_args))
    excluded = tuple(as_str_list("exclude_groups", exclude_groups))
    others = {
        str(g): as_driver(f"group {g!r}", d, registry)
        for g, d in as_mapping("group_drivers", group_drivers).items()
    }
    return ResizeArgs(
        topic=topic,
        target=target,
        app_id=app_id,
        replacer=kind,
        driver=driver,
        producers=producers,
        group_drivers=others,
        exclude_groups=excluded,
        spark_submit=spark[0],
        spark_args=spark[1],
    )


def spark_submit_path(name: Any) -> str:
    """The spark-submit to run (PATH, then beside the worker's Python), or :class:`KStateConfigError`."""
    name = str(name or "spark-submit")
    found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if found is None:
        raise KStateConfigError(
            f"replacer=spark needs {name!r}, found neither on PATH nor beside {sys.executable}: install "
            "pyspark on the worker, give spark_submit, or re-place small changelogs in the worker with "
            "replacer=local. Nothing was stopped."
        )
    return found


def spark_arguments(args: Any) -> tuple[str, ...]:
    """spark-submit's arguments before the application: a list, a JSON list or a space-separated string."""
    if isinstance(args, str):
        args = as_str_list("spark_args", args) if args.strip().startswith("[") else args.split()
    return tuple(str(a) for a in args or ())


def command_driver(what: str, value: Any, registry: Mapping[str, Driver]) -> ActionDriver:
    """``value`` as a command driver: a CommandDriver, its dict form, or a name in ``registry``; raise
    :class:`InvalidDriverError` for an unknown or non-command one."""
    if isinstance(value, Mapping):
        value = Driver.from_dict(value, what)
    given = as_driver(what, value, registry)
    driver = given.commands()
    if driver is None:
        raise InvalidDriverError(
            f"{what}: driver {given.describe()!r} is not a command pair: a Kafka Streams application and the "
            "producers of its sources are stopped and started by commands (stop/start/ready). Nothing was stopped."
        )
    return driver


def resize_request(
    topic: str,
    target: int,
    app_id: str,
    driver: ActionDriver,
    producers: Mapping[str, ActionDriver],
    group_drivers: Mapping[str, Driver] | None = None,
    exclude_groups: Iterable[str] = (),
) -> PlanRequest:
    """The plan request of the resize of ``app_id`` (driven by ``driver``) growing ``topic`` to ``target``."""
    return PlanRequest(
        topics=(topic,),
        partitions=target,
        exclude_groups=tuple(exclude_groups),
        acknowledge_streams_groups=(app_id,),
        resize_streams_groups=(app_id,),
        group_drivers={**dict(group_drivers or {}), app_id: driver},
        producer_drivers=dict(producers),
        key_order=KeyOrder.RELAX,  # the producers are stopped: the other groups drain before they start
    )


def app_entry(plan: Plan, app_id: str, topic: str) -> StreamsAppPlan:
    """The application's entry of the plan, or :class:`UnknownGroupError` naming the ones found."""
    entry = plan.streams_apps.get(app_id)
    if entry is None:
        found = sorted(plan.streams_apps) or "none"
        raise UnknownGroupError(
            f"application {app_id!r} does not read {topic!r} as a Kafka Streams application (Streams "
            f"applications found on it: {found}). Check application_id. Nothing was stopped."
        )
    return entry


def plan_resize(
    admin: AdminPort,
    request: PlanRequest,
    app_id: str,
    present: Callable[[], Mapping[str, set[str]]],
    trust: Callable[[], bool] | None = None,
) -> tuple[Plan, StreamsAppPlan]:
    """Plan the increase of every source of the application ``request`` names (:func:`resize_request`):
    every reader of each source is in the plan. Return the plan and the application's entry, or refuse the
    run (nothing is stopped).

    :param present: the control channel's acknowledged clients (``plan_increase``'s ``present``).
    :param trust: the broker doctor's answer on share groups (``plan_increase``'s ``trust``).
    """
    topic, target = request.topics[0], request.partitions
    current = admin.partition_count(topic)
    if target is None or target < current:
        raise InvalidPartitionCountError(
            f"topic {topic!r} has {current} partitions: a resize needs a target above it (or equal to it: "
            f"a run again continues a resize that did not finish), got {target}. Nothing was stopped."
        )
    plan = plan_increase(admin, request, present, trust=trust)
    entry = app_entry(plan, app_id, topic)
    if set(entry.sources) - set(plan.topic_names):  # every source: every reader of each is planned
        sources = (topic, *[s for s in entry.sources if s != topic])
        request = request.model_copy(update={"topics": sources})
        plan = plan_increase(admin, request, present, trust=trust)
        entry = app_entry(plan, app_id, topic)
    return plan, entry


def other_readers_run(
    plan: Plan, admin: AdminPort, control: ControlPort, log: Any, owner: str, empty_timeout: float
) -> IncreaseRun | None:
    """The run of the other readers of the application's sources (the plan without its Streams
    applications, key order relaxed: the producers are stopped); None when the application is their only
    reader."""
    apps = set(plan.resized_apps())
    rest = plan.replace(groups={g: e for g, e in plan.groups.items() if g not in apps}, streams_apps={})
    if not rest.where("seed"):
        return None
    return IncreaseRun(
        rest, admin, control, log, owner, key_order="relax", empty_timeout=float(empty_timeout)
    )
