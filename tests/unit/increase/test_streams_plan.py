"""Issue 40 item 2: the plan of a Kafka Streams application's resize is the domain's
(:mod:`airflow_provider_kstate.increase.streams_plan`): the request, the target check before planning, the
application's entry, the plan made again over every source of the application, the other readers' run, the
drivers as command pairs. The operator only gathers inputs (tests/unit/operators/test_streams_resize_operator.py)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from kstate_support.fakes import PLAN

from airflow_provider_kstate.errors import (
    InvalidChoiceError,
    InvalidDriverError,
    InvalidPartitionCountError,
    KStateConfigError,
    UnknownGroupError,
)
from airflow_provider_kstate.increase import streams_plan
from airflow_provider_kstate.increase.drivers import CommandDriver, Driver, as_registry
from airflow_provider_kstate.increase.plan import Plan
from airflow_provider_kstate.increase.request import KeyOrder
from airflow_provider_kstate.increase.run import IncreaseRun
from airflow_provider_kstate.increase.streams_apps import StreamsAppPlan
from airflow_provider_kstate.increase.streams_plan import (
    command_driver,
    other_readers_run,
    plan_resize,
    resize_request,
)

APP = "orders-streams"
TOPIC = "orders"
DRIVER = CommandDriver(name="app", stop="stop app", start="start app", ready="true")
REGISTRY = as_registry(
    {"app": {"kind": "command", "stop": "a", "start": "b"}, "ctl": {"kind": "control"}, "job": DRIVER}
)


def _entry(sources: tuple[str, ...] = (TOPIC,), partitions: int = 2) -> StreamsAppPlan:
    return StreamsAppPlan(
        application_id=APP, protocol="classic", sources=list(sources), partitions=partitions, target=4
    )


class Admin:
    def __init__(self, partitions: int = 2) -> None:
        self.partitions = partitions

    def partition_count(self, topic: str) -> int:
        return self.partitions


@pytest.fixture
def planner(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """``plan_increase`` replaced: ``state["plans"]`` maps the request's topics to the plan it returns;
    ``state["requests"]`` records each request, ``state["kw"]`` its keywords."""
    state: dict[str, Any] = {"plans": {}, "requests": [], "kw": []}

    def plan_increase(cluster: Any, request: Any, present: Any, **kw: Any) -> Any:
        state["requests"].append(request)
        state["kw"].append(kw)
        assert present() == {"g": {"c"}}
        return state["plans"][request.topics]

    monkeypatch.setattr(streams_plan, "plan_increase", plan_increase)
    return state


def _plan(topics: tuple[str, ...], apps: dict[str, StreamsAppPlan]) -> Any:
    return SimpleNamespace(topic_names=list(topics), streams_apps=apps)


def _request(target: int = 4, **kw: Any) -> Any:
    return resize_request(TOPIC, target, APP, DRIVER, {"traffic": DRIVER}, **kw)


def test_the_request_acknowledges_the_app_drives_it_by_its_pair_and_relaxes_the_key_order() -> None:
    other = Driver.from_dict({"kind": "control"}, "billing")
    request = _request(group_drivers={"billing": other}, exclude_groups=["audit"])
    assert request.topics == (TOPIC,) and request.partitions == 4
    assert request.acknowledge_streams_groups == (APP,) and request.exclude_groups == ("audit",)
    assert request.group_drivers == {"billing": other, APP: DRIVER}
    assert request.producer_drivers == {"traffic": DRIVER}
    assert request.key_order == KeyOrder.RELAX, (
        "the producers are stopped: the groups drain before they start"
    )


def test_a_plan_of_the_topic_alone_when_it_is_the_apps_only_source(planner: dict[str, Any]) -> None:
    plan = _plan((TOPIC,), {APP: _entry()})
    planner["plans"][(TOPIC,)] = plan
    trust = lambda: True  # noqa: E731
    got, entry = plan_resize(Admin(), _request(), APP, lambda: {"g": {"c"}}, trust=trust)
    assert got is plan and entry == _entry() and len(planner["requests"]) == 1
    assert planner["kw"] == [{"trust": trust}]


def test_every_source_of_the_app_is_planned_again_with_the_topic_first(planner: dict[str, Any]) -> None:
    sources = ("clicks", TOPIC, "views")
    planner["plans"][(TOPIC,)] = _plan((TOPIC,), {APP: _entry(sources)})
    everything = _plan((TOPIC, "clicks", "views"), {APP: _entry(sources, partitions=2)})
    planner["plans"][(TOPIC, "clicks", "views")] = everything
    plan, entry = plan_resize(Admin(), _request(), APP, lambda: {"g": {"c"}})
    assert plan is everything and entry.sources == list(sources)
    assert [r.topics for r in planner["requests"]] == [(TOPIC,), (TOPIC, "clicks", "views")]
    assert planner["requests"][1].acknowledge_streams_groups == (APP,), "the same request, every source"


def test_a_target_below_the_current_count_is_refused_before_planning(planner: dict[str, Any]) -> None:
    with pytest.raises(InvalidPartitionCountError, match="has 5 partitions: a resize needs a target above"):
        plan_resize(Admin(5), _request(4), APP, dict)
    assert planner["requests"] == []


def test_an_equal_target_is_planned(planner: dict[str, Any]) -> None:
    planner["plans"][(TOPIC,)] = _plan((TOPIC,), {APP: _entry()})
    plan_resize(Admin(4), _request(4), APP, lambda: {"g": {"c"}})
    assert len(planner["requests"]) == 1


def test_an_app_that_does_not_read_the_topic_is_refused_naming_the_apps_found(
    planner: dict[str, Any],
) -> None:
    planner["plans"][(TOPIC,)] = _plan((TOPIC,), {"other": _entry()})
    with pytest.raises(UnknownGroupError, match=r"'orders-streams' does not read 'orders'.*\['other'\]"):
        plan_resize(Admin(), _request(), APP, lambda: {"g": {"c"}})
    planner["plans"][(TOPIC,)] = _plan((TOPIC,), {})
    with pytest.raises(UnknownGroupError, match="found on it: none"):
        plan_resize(Admin(), _request(), APP, lambda: {"g": {"c"}})


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("job", DRIVER),
        (DRIVER, DRIVER),
        ({"stop": "x", "start": "y"}, CommandDriver(name="producer 'p'", stop="x", start="y")),
    ],
)
def test_a_driver_is_a_command_pair_by_name_object_or_dict(value: Any, expected: CommandDriver) -> None:
    got = command_driver("producer 'p'", value, REGISTRY)
    assert (got.stop, got.start, got.ready) == (expected.stop, expected.start, expected.ready)


@pytest.mark.parametrize(
    ("value", "match"),
    [("ctl", "is not a command pair"), ("control", "is not a command pair"), ("nope", "'nope'")],
)
def test_a_driver_that_is_no_command_pair_is_refused(value: str, match: str) -> None:
    with pytest.raises(InvalidDriverError, match=match):
        command_driver("application 'a'", value, REGISTRY)


def test_the_other_readers_run_is_the_plan_without_its_streams_apps() -> None:
    plan = Plan.from_dict(PLAN)
    apps = plan.replace(streams_apps={"live": _entry()})
    log = SimpleNamespace()
    run = other_readers_run(apps, SimpleNamespace(), SimpleNamespace(), log, "owner", 7)
    assert isinstance(run, IncreaseRun) and "live" not in run.plan.groups, run
    assert run.plan.where("seed") == ["idle"] and run.plan.streams_apps == {}
    assert (run.key_order, run.empty_timeout, run.owner, run.log) == ("relax", 7.0, "owner", log)
    only = plan.replace(groups={"live": plan.groups["live"]}, streams_apps={"live": _entry()})
    assert other_readers_run(only, SimpleNamespace(), SimpleNamespace(), log, "owner", 7) is None


def test_only_the_applications_the_run_resizes_are_planned_as_a_resize() -> None:
    """``resize_streams_groups`` (set by the resize's request) names the applications whose state moves: the
    plan's runbook lists their Streams steps, their report says so, and the other readers' run leaves them
    out. An application only acknowledged (the plain increase) is paused and seeded like a consumer group,
    and the plan says its state is not moved, instead of listing a resize the run would not do."""
    from airflow_provider_kstate.increase.plan import GroupRole, describe, readers
    from airflow_provider_kstate.increase.request import PlanRequest

    base = Plan.from_dict(PLAN)
    app = base.groups["live"].replace(role=GroupRole.STREAMS)
    entry = _entry().model_copy(update={"application_id": "live"})
    plan = base.replace(groups={**base.groups, "live": app}, streams_apps={"live": entry})
    resized = plan.replace(request=resize_request(TOPIC, 4, "live", DRIVER, {}))
    acknowledged = plan.replace(request=PlanRequest(topics=(TOPIC,), acknowledge_streams_groups=("live",)))
    assert resized.request is not None and resized.request.resize_streams_groups == ("live",)
    assert set(resized.resized_apps()) == {"live"} and acknowledged.resized_apps() == {}
    lines = " ".join(describe(resized))
    assert "its Streams steps below" in lines and "streams application live" in lines
    lines = " ".join(describe(acknowledged))
    assert "its state not moved" in lines and "streams application live" not in lines
    assert readers(resized)["live"].startswith("streams application: drained")
    assert not readers(acknowledged)["live"].startswith("streams application")
    admin: Any = SimpleNamespace()
    kept = other_readers_run(acknowledged, admin, SimpleNamespace(), SimpleNamespace(), "o", 1.0)
    assert kept is not None and "live" in kept.plan.groups, "an acknowledged app is one of the others"
    out = other_readers_run(resized, admin, SimpleNamespace(), SimpleNamespace(), "o", 1.0)
    assert out is not None and "live" not in out.plan.groups


# -- the task's arguments, checked before anything is read or stopped -----------------------------------


def _args(**kw: Any) -> streams_plan.ResizeArgs:
    given: dict[str, Any] = {
        "topic": TOPIC,
        "partitions": "4",
        "application_id": f" {APP} ",
        "app_driver": "job",
        "producer_drivers": "app",
        "drivers": {"app": {"kind": "command", "stop": "a", "start": "b"}, "job": DRIVER},
        "replacer": "local",
        **kw,
    }
    return streams_plan.resize_args(**given)


def test_the_arguments_are_typed_and_the_request_is_the_resize_request() -> None:
    args = _args(exclude_groups="audit", group_drivers='{"billing": "app"}', spark_args="--ignored")
    assert (args.topic, args.target, args.app_id, args.replacer) == (TOPIC, 4, APP, "local")
    assert args.driver == DRIVER and list(args.producers) == ["app"] and args.producers["app"].stop == "a"
    assert args.group_drivers["billing"].describe() == "command app" and args.exclude_groups == ("audit",)
    assert (args.spark_submit, args.spark_args) == ("", ()), (
        "replacer=local: spark is neither looked up nor parsed"
    )
    assert args.request() == resize_request(
        TOPIC, 4, APP, DRIVER, args.producers, args.group_drivers, ["audit"]
    )
    mapping = _args(producer_drivers={"p": {"stop": "x", "start": "y"}}, drivers=None, app_driver=DRIVER)
    assert mapping.producers["p"].start == "y" and mapping.group_drivers == {}


def test_the_spark_replacer_is_found_and_its_arguments_parsed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    spark = tmp_path / "spark-submit"
    spark.write_text("#!/bin/sh\n")
    spark.chmod(0o755)
    args = _args(replacer="spark", spark_submit=str(spark), spark_args='["--master", "local[1]"]')
    assert (args.spark_submit, args.spark_args) == (str(spark), ("--master", "local[1]"))
    assert streams_plan.spark_arguments("--master local[2] --conf a=b") == (
        "--master",
        "local[2]",
        "--conf",
        "a=b",
    )
    monkeypatch.setattr(streams_plan.shutil, "which", lambda *a, **k: None)
    with pytest.raises(KStateConfigError, match="replacer=local. Nothing was stopped"):
        _args(replacer="spark")


@pytest.mark.parametrize(
    ("kw", "error", "match"),
    [
        ({"topic": " "}, KStateConfigError, "topic"),
        ({"partitions": "many"}, KStateConfigError, "partitions must be an integer"),
        ({"application_id": None}, KStateConfigError, "application_id"),
        ({"replacer": "gpu"}, InvalidChoiceError, "replacer"),
        ({"app_driver": " "}, InvalidDriverError, "has no driver"),
        (
            {"app_driver": "ctl", "drivers": {"ctl": {"kind": "control"}}},
            InvalidDriverError,
            "not a command pair",
        ),
        ({"producer_drivers": ["app", "ghost"]}, InvalidDriverError, "'ghost'"),
        ({"exclude_groups": 7}, KStateConfigError, "exclude_groups"),
        ({"group_drivers": {"billing": "ghost"}}, InvalidDriverError, "ghost"),
        # the first wrong argument is named: the topic before the driver
        ({"topic": "", "app_driver": None}, KStateConfigError, "topic"),
    ],
)
def test_a_wrong_argument_is_named(kw: dict[str, Any], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        _args(**kw)
