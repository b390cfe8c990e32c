"""Issue 40 item 2: a Kafka Streams resize as a task runs it is the domain's
(:class:`~airflow_provider_kstate.cluster.streams_resize_task.StreamsResizeTask`), run here without Airflow on
fakes: it plans (logging the plan), holds the leases of the plan's topics for the resize and releases them,
passes the checked arguments on, logs and returns the report, and fails a run whose start failed. The
operator over it: tests/unit/operators/test_streams_resize_operator.py."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_provider_kstate.cluster import streams_resize_task
from airflow_provider_kstate.cluster.streams_resize import StreamsResize
from airflow_provider_kstate.cluster.streams_resize_task import StreamsResizeTask
from airflow_provider_kstate.errors import StreamsResizeError, TopicChangedError
from airflow_provider_kstate.increase import streams_plan
from airflow_provider_kstate.increase.drivers import CommandDriver
from airflow_provider_kstate.increase.streams_apps import StreamsAppPlan
from airflow_provider_kstate.lease_rules import LeaseSet
from tests.unit.test_lease_keeper import MemoryLeaseLog

APP = "orders-streams"
TOPIC = "orders"
OWNER = "kstate_streams_resize/manual__1"
DRIVER = CommandDriver(name="app", stop="stop", start="start", ready="true")
ENTRY = StreamsAppPlan(application_id=APP, protocol="streams", sources=[TOPIC], partitions=2, target=4)
RESULT = {"application_id": APP, "resized": True, "partitions": 4, "grown": [TOPIC], "start_failures": []}


class Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, msg: str, *args: Any) -> None:
        self.lines.append(msg % args)

    warning = error = info


class Admin:
    """The admin verbs the task uses: the connection check, partition counts, the cluster."""

    def __init__(self, partitions: int = 2) -> None:
        self.partitions, self.checked = partitions, 0
        self.cluster = SimpleNamespace(config={"bootstrap.servers": "fake:9092"})

    def check_connection(self) -> None:
        self.checked += 1

    def partition_count(self, topic: str) -> int:
        return self.partitions


@pytest.fixture
def run(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The planner returns ``state["plan"]``; StreamsResize.run records itself and who held the lease."""
    leases = MemoryLeaseLog()
    plan = SimpleNamespace(streams_apps={APP: ENTRY}, topic_names=[TOPIC], groups={})
    plan.resized_apps = lambda: {APP: ENTRY}
    plan.replace = lambda **kw: SimpleNamespace(where=lambda flag: [])
    state: dict[str, Any] = {"plan": plan, "leases": leases, "result": RESULT}

    def resize(self: StreamsResize) -> dict[str, Any]:
        holder = leases.current(TOPIC)
        state["resize"], state["holder"] = self, holder.owner if holder else None
        return dict(state["result"])

    monkeypatch.setattr(streams_plan, "plan_increase", lambda *a, **kw: state["plan"])
    monkeypatch.setattr(streams_resize_task, "describe", lambda plan: ["a plan"])
    monkeypatch.setattr(streams_resize_task, "readers", lambda plan: {APP: "streams application"})
    monkeypatch.setattr(StreamsResize, "run", resize)
    return state


def _task(fake: Admin, log: Log, **kw: Any) -> StreamsResizeTask:
    args = streams_plan.resize_args(
        topic=TOPIC, partitions=4, application_id=APP, app_driver=DRIVER, replacer="local", **kw
    )
    control = SimpleNamespace(client_piece_clients=dict)
    return StreamsResizeTask(args, fake, control, log, drain_timeout=5, empty_timeout=6)


def _leases(state: dict[str, Any], log: Log) -> Any:
    context = {"ti": SimpleNamespace(dag_id="kstate_streams_resize", run_id="manual__1", try_number=1)}
    return lambda topics: LeaseSet.for_topics(state["leases"], topics, context, 900, log)


def test_the_task_plans_holds_the_leases_resizes_and_reports(run: dict[str, Any]) -> None:
    admin, log = Admin(), Log()
    report = _task(admin, log).run(_leases(run, log))
    resize = run["resize"]
    assert admin.checked == 1 and run["holder"] == OWNER and run["leases"].current(TOPIC) is None
    assert (resize.app, resize.driver, resize.admin, resize.kafka_config) == (
        ENTRY,
        DRIVER,
        admin.cluster,
        admin.cluster.config,
    )
    assert (resize.drain_timeout, resize.empty_timeout, resize.others) == (5.0, 6.0, None)
    assert report["resized"] and report["protocol"] == "streams" and report["replacer"] == "local"
    assert report["readers"] == {APP: "streams application"}
    assert log.lines[:2] == ["PLAN a plan", f"STREAMS plan of {APP}: {ENTRY.actions}"]
    assert "STREAMS re-placement in the worker (replacer=local)" in log.lines
    assert f"STREAMS {APP} resized 2 -> 4: downtime None s, 0 keys moved, deep check passed" in log.lines


def test_a_topic_changed_while_planning_is_refused_under_the_lease_and_released(run: dict[str, Any]) -> None:
    log = Log()
    with pytest.raises(TopicChangedError, match="changed to 3 partitions"):
        _task(Admin(partitions=3), log).run(_leases(run, log))
    assert "resize" not in run and run["leases"].current(TOPIC) is None


def test_a_failed_start_fails_the_task_with_the_report_logged(run: dict[str, Any]) -> None:
    run["result"] = {**RESULT, "start_failures": ["start of group orders-streams exited 1"]}
    log = Log()
    with pytest.raises(StreamsResizeError, match="was resized to 4 partitions, but starting it"):
        _task(Admin(), log).run(_leases(run, log))
    assert any("resized 2 -> 4" in line for line in log.lines) and run["leases"].current(TOPIC) is None


def test_the_task_imports_no_airflow() -> None:
    code = (
        "import sys, airflow_provider_kstate.cluster.streams_resize_task\n"
        "sys.exit(1 if 'airflow' in sys.modules else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
