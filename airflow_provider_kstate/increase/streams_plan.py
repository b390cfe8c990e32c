"""The plan of a Kafka Streams application's resize (issue 32, item 3; issue 40 item 2: the decisions of
:class:`~airflow_provider_kstate.operators.streams_resize.KStateStreamsResizeOperator`, without Airflow).

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

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from airflow_provider_kstate.errors import InvalidDriverError, InvalidPartitionCountError, UnknownGroupError
from airflow_provider_kstate.increase.drivers import CommandDriver, Driver, as_driver
from airflow_provider_kstate.increase.plan import Plan
from airflow_provider_kstate.increase.planner import plan_increase
from airflow_provider_kstate.increase.ports import AdminPort, ControlPort
from airflow_provider_kstate.increase.request import KeyOrder, PlanRequest
from airflow_provider_kstate.increase.run import IncreaseRun
from airflow_provider_kstate.increase.streams_apps import StreamsAppPlan


def command_driver(what: str, value: Any, registry: Mapping[str, Driver]) -> CommandDriver:
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
    driver: CommandDriver,
    producers: Mapping[str, CommandDriver],
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
