"""Unit tests of ``KStateStreamsResizeOperator`` (operators/streams_resize.py) on fakes: bad input fails with a
named error before anything is stopped (no lease, no resize), a good run holds the topic's lease for the
whole resize and releases it, passes the drivers and the replacer on, and pushes its report; the example
DAG ``kstate_streams_resize`` parses without touching the network. The operator is a shell over
``cluster/streams_resize_task.py``: its resize (``StreamsResizeTask.resize``) is replaced here."""

from __future__ import annotations

import shutil
import stat
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_provider_kstate import errors
from airflow_provider_kstate.cluster.streams_resize_task import StreamsResizeTask
from airflow_provider_kstate.compat import AirflowFailException
from airflow_provider_kstate.increase.drivers import CommandDriver
from airflow_provider_kstate.increase.streams_apps import StreamsAppPlan, StreamsChangelog
from airflow_provider_kstate.increase.streams_plan import resize_args, spark_arguments
from airflow_provider_kstate.operators.kafka import KStateKafkaOperator
from airflow_provider_kstate.operators.streams_resize import KStateStreamsResizeOperator
from tests.unit.test_lease_keeper import MemoryLeaseLog

APP = "orders-streams"
TOPIC = "orders"
OWNER = "kstate_streams_resize/manual__1"
REGISTRY = {
    "app": {"kind": "command", "stop": "systemctl stop app", "start": "systemctl start app", "ready": "true"},
    "traffic": {"kind": "command", "stop": "systemctl stop p", "start": "systemctl start p"},
    "ctl": {"kind": "control"},
}
CHANGELOG = f"{APP}-KSTREAM-AGGREGATE-STATE-STORE-0000000001-changelog"


def _entry(partitions: int = 2, target: int = 4) -> StreamsAppPlan:
    return StreamsAppPlan(
        application_id=APP,
        protocol="classic",
        sources=[TOPIC],
        changelogs=[
            StreamsChangelog(
                topic=CHANGELOG, store="s", store_type="key-value", cleanup_policy="compact", partitions=2
            )
        ],
        partitions=partitions,
        target=target,
        actions=["stop", "grow", "re-place", "seed", "start"],
    )


RESULT = {
    "application_id": APP,
    "resized": True,
    "partitions": 4,
    "grown": [TOPIC, CHANGELOG],
    "timings": {"drain": 0.5, "replace": 1.2, "downtime_s": 3.25, "producer_downtime_s": 4.0},
    "replaced": {
        CHANGELOG: {
            "ok": True,
            "replace": {
                "records_read": 80,
                "live_keys": 40,
                "moved": 19,
                "seconds": 0.4,
                "records_per_s": 200.0,
            },
            "check": {"ok": True, "live_keys": 40, "misplaced": 0, "digest": "d", "digest_before": "d"},
        }
    },
    "start_failures": [],
}


class FakeAdmin:
    """What the operator reads of KStateAdminHook: the connection check, partition counts, the cluster."""

    def __init__(self, partitions: int = 2) -> None:
        self.partitions = partitions
        self.cluster = SimpleNamespace(config={"bootstrap.servers": "fake:9092"})
        self.checked = 0

    def check_connection(self) -> None:
        self.checked += 1

    def partition_count(self, topic: str) -> int:
        return self.partitions


class FakeLeaseHook(MemoryLeaseLog):
    """KStateLeaseHook on a list (the lease verbs) with a fake admin hook; records every instance."""

    made: list[FakeLeaseHook] = []
    admin_partitions = 2
    shared: MemoryLeaseLog | None = None

    def __init__(
        self, kafka_config_id: str = "", lease_topic: str = "", request_timeout: float = 30.0
    ) -> None:
        super().__init__()
        if FakeLeaseHook.shared is not None:
            self.records = FakeLeaseHook.shared.records
        self.admin = FakeAdmin(self.admin_partitions)
        FakeLeaseHook.made.append(self)


class Plan:
    """What the operator reads of a plan: its Streams applications and the groups it would seed."""

    def __init__(self, apps: dict[str, StreamsAppPlan], seeded: list[str]) -> None:
        self.streams_apps = apps
        self.seeded = seeded
        self.topic_names = [TOPIC]
        self.groups: dict[str, Any] = {}

    def where(self, flag: str) -> list[str]:
        return list(self.seeded) if flag == "seed" else []

    def resized_apps(self) -> dict[str, StreamsAppPlan]:
        return dict(self.streams_apps)


#: The real resize (the fixture replaces it; a test puts it back).
REAL_RESIZE = StreamsResizeTask.resize


def _recording(state: dict[str, Any]) -> Any:
    """The resize replaced: it records in ``state["seen"]`` what it was given and who held the lease, and
    returns ``state["result"]`` (RESULT unless set)."""

    def resize(self: StreamsResizeTask, entry: Any, replacer: Any, others: Any) -> dict[str, Any]:
        holder = FakeLeaseHook.made[-1].current(TOPIC)
        state["seen"] = {
            "entry": entry,
            "driver": self.args.driver,
            "producers": dict(self.args.producers),
            "replacer": replacer,
            "others": others,
            "holder": holder.owner if holder else None,
        }
        return dict(state.get("result", RESULT))

    return resize


class FakeControlHook:
    """KStateControlHook: its controller (the acknowledged clients; closed after the task)."""

    closed = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.get_conn = SimpleNamespace(client_piece_clients=dict, close=self.close)

    @classmethod
    def close(cls) -> None:
        cls.closed += 1


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Patch the lease and control hooks, the planner and the resize: ``state["plan"]`` is what the planner
    returns, ``state["calls"]`` counts its calls, ``state["request"]`` is the request it was given,
    ``state["seen"]`` what the resize was given."""
    from airflow_provider_kstate.cluster import streams_resize_task
    from airflow_provider_kstate.hooks import control as control_hooks
    from airflow_provider_kstate.hooks import lease as lease_hooks
    from airflow_provider_kstate.increase import streams_plan

    FakeLeaseHook.made = []
    FakeLeaseHook.admin_partitions = 2
    FakeLeaseHook.shared = None
    state: dict[str, Any] = {"plan": Plan({APP: _entry()}, [APP]), "calls": 0}

    def plan_increase(hook: Any, request: Any, present: Any, **kw: Any) -> Any:
        state["calls"] += 1
        state["request"] = request
        return state["plan"]

    monkeypatch.setattr(lease_hooks, "KStateLeaseHook", FakeLeaseHook)
    monkeypatch.setattr(streams_plan, "plan_increase", plan_increase)
    FakeControlHook.closed = 0
    monkeypatch.setattr(control_hooks, "KStateControlHook", FakeControlHook)
    monkeypatch.setattr(KStateStreamsResizeOperator, "_share_kept", lambda self: False)
    monkeypatch.setattr(
        StreamsResizeTask,
        "other_readers",
        lambda self, plan, owner: [g for g in plan.where("seed") if g not in plan.streams_apps] or None,
    )
    monkeypatch.setattr(StreamsResizeTask, "resize", _recording(state))
    monkeypatch.setattr(streams_resize_task, "describe", lambda plan: ["a plan"])
    return state


def _context() -> dict[str, Any]:
    ti = SimpleNamespace(
        dag_id="kstate_streams_resize",
        run_id="manual__1",
        try_number=1,
        get_dagrun_state=lambda **kw: "running",
    )
    return {"ti": ti}


def _op(**kw: Any) -> KStateStreamsResizeOperator:
    args: dict[str, Any] = {
        "task_id": "resize",
        "topic": TOPIC,
        "partitions": 4,
        "application_id": APP,
        "app_driver": "app",
        "producer_drivers": ["traffic"],
        "drivers": REGISTRY,
        "replacer": "local",
        **kw,
    }
    return KStateStreamsResizeOperator(**args)


def _fails(op: KStateStreamsResizeOperator, error: type[Exception], match: str) -> Exception:
    """Run ``op``; it fails the task (AirflowFailException) from ``error``."""
    with pytest.raises(AirflowFailException, match=match) as info:
        op.execute(_context())
    cause = info.value.__cause__
    assert isinstance(cause, error), repr(cause)
    return cause


# -------------------------------------------------------------------------------------------- a good run


def test_a_run_holds_the_lease_resizes_and_reports(cluster: dict[str, Any], capsys: Any) -> None:
    op = _op()
    report = op.execute(_context())
    request = cluster["request"]
    assert request.topics == (TOPIC,) and request.acknowledge_streams_groups == (APP,)
    assert request.group_drivers == {APP: cluster["seen"]["driver"]}, "the app is driven by its command pair"
    assert cluster["seen"]["entry"] == _entry()
    assert cluster["seen"]["holder"] == OWNER, "the topic's lease is held during the resize"
    hook = FakeLeaseHook.made[-1]
    assert hook.current(TOPIC) is None, "and released after it"
    assert hook.admin.checked == 1 and FakeControlHook.closed == 1, "the control channel is closed after"
    assert cluster["seen"]["driver"] == CommandDriver(
        name="app", stop="systemctl stop app", start="systemctl start app", ready="true"
    )
    assert (
        list(cluster["seen"]["producers"]) == ["traffic"]
        and cluster["seen"]["producers"]["traffic"].stop == "systemctl stop p"
    )
    assert callable(cluster["seen"]["replacer"])
    assert report["downtime_s"] == 3.25 and report["moved_keys"] == 19 and report["deep_check_passed"]
    assert report["partitions"] == {"before": 2, "after": 4} and report["replacer"] == "local"
    assert report["changelogs"][CHANGELOG]["records_per_s"] == 200.0
    assert report["changelogs"][CHANGELOG]["deep_check"] == {"ok": True, "live_keys": 40, "misplaced": 0}
    assert "downtime 3.25 s, 19 keys moved, deep check passed" in capsys.readouterr().out


def test_drivers_may_be_given_as_objects_and_dicts_and_producers_as_a_mapping(
    cluster: dict[str, Any],
) -> None:
    app = CommandDriver(name="mine", stop="a", start="b")
    op = _op(
        app_driver=app, producer_drivers={"p1": {"stop": "x", "start": "y"}, "p2": "traffic"}, drivers=None
    )
    with pytest.raises(AirflowFailException):  # p2 names the registry, which is empty now
        op.execute(_context())
    op = _op(app_driver=app, producer_drivers={"p1": {"stop": "x", "start": "y"}})
    op.execute(_context())
    assert cluster["seen"]["driver"] is app and sorted(cluster["seen"]["producers"]) == ["p1"]


def test_a_failed_start_fails_the_task_after_releasing_the_lease(cluster: dict[str, Any]) -> None:
    op = _op()
    cluster["result"] = {**RESULT, "start_failures": ["start of group orders-streams exited 1 after 0.1 s"]}
    _fails(op, errors.StreamsResizeError, "was resized to 4 partitions, but starting it")
    assert FakeLeaseHook.made[-1].current(TOPIC) is None


def test_the_resize_builds_streams_resize_with_the_admin_cluster(
    cluster: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_provider_kstate.cluster import streams_resize as domain

    made: list[Any] = []

    def run(self: Any) -> dict[str, Any]:
        made.append(self)
        return RESULT

    monkeypatch.setattr(domain.StreamsResize, "run", run)
    monkeypatch.setattr(StreamsResizeTask, "resize", REAL_RESIZE)
    op = KStateStreamsResizeOperator(
        task_id="r",
        topic=TOPIC,
        partitions=4,
        application_id=APP,
        app_driver="app",
        drivers=REGISTRY,
        replacer="local",
        drain_timeout=5,
        empty_timeout=6,
    )
    report = op.execute(_context())
    resize = made[0]
    admin = FakeLeaseHook.made[-1].admin
    assert resize.admin is admin.cluster and resize.kafka_config == admin.cluster.config
    assert (resize.drain_timeout, resize.empty_timeout, resize.producers) == (5.0, 6.0, {})
    assert report["resized"]


def test_the_spark_replacer_runs_the_spark_submit_given(cluster: dict[str, Any], tmp_path: Path) -> None:
    spark = tmp_path / "my-spark-submit"
    spark.write_text("#!/bin/sh\nexit 0\n")
    spark.chmod(spark.stat().st_mode | stat.S_IEXEC)
    op = _op(
        replacer="spark", spark_submit=str(spark), spark_args="--master local[1]", workdir=str(tmp_path / "w")
    )
    assert spark_arguments(op.spark_args) == ("--master", "local[1]")
    op.execute(_context())
    reports = cluster["seen"]["replacer"]([_entry().changelogs[0]], 2, 4)
    assert reports[CHANGELOG]["ok"] is False, "no report written: the re-placement failed, named"


# --------------------------------------------------------------------- refused before anything is stopped


def test_an_unknown_application_is_refused_before_the_lease(cluster: dict[str, Any]) -> None:
    cluster["plan"] = Plan({"other-app": _entry()}, [])
    _fails(_op(), errors.UnknownGroupError, r"'orders-streams' does not read 'orders'.*other-app")
    assert FakeLeaseHook.made[-1].records == [], "no lease taken"
    assert FakeControlHook.closed == 1, "the control channel is closed when the plan refuses the run too"


def test_a_target_below_the_current_count_is_refused_before_the_plan(cluster: dict[str, Any]) -> None:
    _fails(_op(partitions=1), errors.InvalidPartitionCountError, "a target above it")
    assert cluster["calls"] == 0 and FakeLeaseHook.made[-1].records == []


def test_a_target_equal_to_the_current_count_is_a_run_again(cluster: dict[str, Any], capsys: Any) -> None:
    """It plans and runs (the resize continues an interrupted one, or changes nothing), under the lease."""
    cluster["plan"] = Plan({APP: _entry(partitions=2, target=2)}, [APP])
    op = _op(partitions=2)
    cluster["result"] = {"application_id": APP, "resized": False, "partitions": 2}
    report = op.execute(_context())
    assert cluster["seen"]["holder"] == OWNER and cluster["calls"] == 1
    assert report["resized"] is False and report["continued"] is False and report["moved_keys"] == 0
    assert "not resized" in capsys.readouterr().out
    cluster["result"] = {**RESULT, "continued": True, "continued_because": ["no offsets"], "partitions": 2}
    report = op.execute(_context())
    assert report["resized"] and report["continued"] and report["continued_because"] == ["no offsets"]
    assert "continued the interrupted resize to 2 (no offsets)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("driver", "match"),
    [
        ("", "has no driver"),
        (None, "has no driver"),
        ("nope", "neither 'control' nor a driver of the registry"),
        ("ctl", "is not a command pair"),
        ("control", "is not a command pair"),
    ],
)
def test_a_missing_or_unusable_app_driver_is_refused_before_connecting(
    cluster: dict[str, Any], driver: Any, match: str
) -> None:
    _fails(_op(app_driver=driver), errors.InvalidDriverError, match)
    assert FakeLeaseHook.made == [], "nothing reached the cluster"


def test_an_unknown_producer_driver_is_refused(cluster: dict[str, Any]) -> None:
    _fails(_op(producer_drivers=["traffic", "ghost"]), errors.InvalidDriverError, "'ghost'")
    assert FakeLeaseHook.made == []


def test_other_readers_of_the_sources_are_run_with_the_resize(cluster: dict[str, Any]) -> None:
    """Another reader of the topic is no longer refused: the resize takes it out and back in the one run."""
    cluster["plan"] = Plan({APP: _entry()}, [APP, "billing"])
    op = _op(group_drivers={"billing": "app"})
    op.execute(_context())
    assert cluster["seen"]["others"] == ["billing"], cluster["seen"]
    assert cluster["request"].group_drivers["billing"].describe() == "command app"
    assert cluster["seen"]["holder"] == OWNER, "the lease is held while the readers are out"


def test_the_other_readers_run_is_the_plan_without_its_streams_apps() -> None:
    from kstate_support.fakes import PLAN

    from airflow_provider_kstate.increase.plan import Plan as RealPlan
    from airflow_provider_kstate.increase.run import IncreaseRun

    plan = RealPlan.from_dict(PLAN)
    args = resize_args(
        topic=TOPIC, partitions=4, application_id="live", app_driver="app", drivers=REGISTRY, replacer="local"
    )
    task = StreamsResizeTask(args, SimpleNamespace(), SimpleNamespace(), SimpleNamespace(info=print))
    apps = plan.replace(streams_apps={"live": _entry()})
    run = task.other_readers(apps, OWNER)
    assert isinstance(run, IncreaseRun) and "live" not in run.plan.groups, run
    assert run.plan.where("seed") == ["idle"]
    assert run.key_order == "relax", "the producers are stopped: the groups drain before they start"
    only = plan.replace(groups={"live": plan.groups["live"]}, streams_apps={"live": _entry()})
    assert task.other_readers(only, OWNER) is None


def test_a_held_lease_fails_the_run_without_resizing(cluster: dict[str, Any]) -> None:
    other = MemoryLeaseLog()
    other.acquire(TOPIC, "kstate_partition_increase/manual__9", 900)
    FakeLeaseHook.shared = other
    _fails(_op(), errors.LeaseHeldError, "another run")
    assert "seen" not in cluster


def test_a_topic_changed_while_planning_releases_the_lease(
    cluster: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster["plan"] = Plan({APP: _entry(partitions=3)}, [APP])  # the plan saw 3, the topic has 2 now
    _fails(_op(), errors.TopicChangedError, "changed to 2 partitions")
    assert "seen" not in cluster and FakeLeaseHook.made[-1].current(TOPIC) is None


def test_bad_arguments_are_named(cluster: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    _fails(_op(replacer="gpu"), errors.InvalidChoiceError, "replacer")
    _fails(_op(application_id=" "), errors.KStateConfigError, "application_id")
    _fails(_op(partitions="many"), errors.KStateConfigError, "partitions must be an integer")
    monkeypatch.setattr(shutil, "which", lambda *a, **k: None)
    _fails(_op(replacer="spark"), errors.KStateConfigError, "replacer=local")
    assert FakeLeaseHook.made == []


# ------------------------------------------------------------------------------------- the family, the DAG


def test_it_is_of_the_operator_family() -> None:
    assert issubclass(KStateStreamsResizeOperator, KStateKafkaOperator)
    op = KStateStreamsResizeOperator(
        task_id="x",
        topic="t",
        partitions=3,
        application_id="a",
        app_driver="d",
        kafka_config_id="k",
        request_timeout=7,
    )
    assert (op.kafka_config_id, op.request_timeout, op.replacer) == ("k", 7.0, "spark")
    assert {"topic", "partitions", "application_id", "app_driver", "producer_drivers", "replacer"} <= set(
        op.template_fields
    )


def test_the_example_dag_parses_without_the_network() -> None:
    from kstate_support.airflow_compat import dag_bag

    bag = dag_bag(str(Path(__file__).resolve().parents[3] / "dags"))
    assert not bag.import_errors, bag.import_errors
    dag = bag.get_dag("kstate_streams_resize")
    assert dag.task_ids == ["resize"]
    assert {"topic", "partitions", "application_id", "app_driver", "producer_drivers", "replacer"} <= set(
        dag.params
    )
    task = dag.get_task("resize")
    assert task.drivers == "{{ var.json.get('kstate_drivers', {}) }}"
