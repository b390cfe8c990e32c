"""The ``connect`` driver kind (issue 40, item 3): a Kafka Connect connector stopped, resumed and checked
ready through its worker's REST API by the run itself, in the place a command pair takes. Against a tiny
local HTTP server that answers as a Connect worker does (``PUT stop`` 204, ``PUT resume`` 202, the status
RUNNING with no task for a moment after a resume), without a broker."""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from airflow_provider_kstate.errors import DriverCommandError, InvalidDriverError, UndrivableGroupError
from airflow_provider_kstate.increase.drivers import (
    CommandPairs,
    ConnectDriver,
    Driver,
    DriverKind,
    readiness,
    redacted,
)
from airflow_provider_kstate.increase.fleet import (
    DriverChoice,
    assign_drivers,
    check_drivable,
    commanded_live,
    commands_of,
    producer_commands,
)
from airflow_provider_kstate.increase.plan import Plan
from tests.unit.increase.test_drivers import FleetCluster, _info, _plan, _steps

LOG = logging.getLogger("test_connect_driver")
TRACE = "org.apache.kafka.connect.errors.ConnectException: disk full\n\tat io.kstate.Sink.put(Sink.java:42)"


class FakeConnect:
    """One connector on a Connect worker's REST API, as a worker answers (Connect 3.5+).

    :param tasks: the connector's tasks once it runs.
    :param warm_up: status reads after a resume that still show the connector RUNNING with no task.
    :param fail: a task FAILED (with :data:`TRACE`) once the connector runs again.
    :param stop_code: what ``PUT stop`` answers (a worker answers 204; 202 is accepted too).
    :param delay: seconds every answer waits (a worker that does not answer in time).
    :param conflicts: the first PUTs answered 409 (a worker rebalancing).
    """

    def __init__(
        self,
        name: str = "sink-1",
        tasks: int = 2,
        warm_up: int = 2,
        fail: bool = False,
        stop_code: int = 204,
        delay: float = 0.0,
        conflicts: int = 0,
    ) -> None:
        self.name, self.tasks, self.warm_up, self.fail = name, tasks, warm_up, fail
        self.stop_code, self.delay, self.conflicts = stop_code, delay, conflicts
        self.state = "RUNNING"
        self.reads_since_resume = warm_up
        self.calls: list[str] = []
        self.auth: list[str | None] = []
        self.on_stop: Callable[[], None] = lambda: None
        self.on_resume: Callable[[], None] = lambda: None
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def status(self) -> dict[str, Any]:
        tasks: list[dict[str, Any]] = []
        if self.state == "RUNNING" and self.reads_since_resume >= self.warm_up:
            tasks = [{"id": i, "state": "RUNNING", "worker_id": "w1:8083"} for i in range(self.tasks)]
            if self.fail:
                tasks[-1] = {**tasks[-1], "state": "FAILED", "trace": TRACE}
        self.reads_since_resume += 1
        return {"name": self.name, "connector": {"state": self.state, "worker_id": "w1:8083"}, "tasks": tasks}

    def answer(self, method: str, path: str, auth: str | None) -> tuple[int, Any]:
        """What the worker answers ``method`` on ``path``: (HTTP status, JSON body or None)."""
        time.sleep(self.delay)
        self.auth.append(auth)
        parts = path.strip("/").split("/")  # connectors, NAME, verb
        if len(parts) != 3 or parts[0] != "connectors" or parts[1] != self.name:
            return 404, {"error_code": 404, "message": f"Connector {parts[1]} not found"}
        call = f"{method} {parts[2]}"
        self.calls.append(call)
        if method == "PUT" and self.conflicts > 0:
            self.conflicts -= 1
            return 409, {"error_code": 409, "message": "Cannot complete request momentarily"}
        if call == "PUT stop":
            self.state = "STOPPED"
            self.on_stop()
            return self.stop_code, None
        if call == "PUT resume":
            self.state, self.reads_since_resume = "RUNNING", 0
            self.on_resume()
            return 202, None
        if call == "GET status":
            return 200, self.status()
        return 405, {"error_code": 405, "message": "HTTP 405 Method Not Allowed"}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _route(self, method: str) -> None:
                code, body = fake.answer(method, self.path, self.headers.get("Authorization"))
                raw = b"" if body is None else json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_PUT(self) -> None:  # noqa: N802 - http.server's name
                self._route("PUT")

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                self._route("GET")

        return Handler

    def __enter__(self) -> FakeConnect:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def connect() -> Iterator[FakeConnect]:
    with FakeConnect() as fake:
        yield fake


def _driver(fake: FakeConnect, **kw: Any) -> ConnectDriver:
    return ConnectDriver(name="sink", url=fake.url, connector=fake.name, **kw)


def test_the_dict_form_round_trips_and_a_bad_one_names_its_field() -> None:
    form = {"kind": "connect", "url": "http://connect:8083", "connector": "sink-1"}
    driver = Driver.from_dict(form, "sink")
    assert driver == ConnectDriver(name="sink", url="http://connect:8083", connector="sink-1")
    assert driver.kind == DriverKind.CONNECT and driver.commands() is driver
    assert not driver.needs_client_piece and driver.describe() == "connect sink"
    assert ConnectDriver(url="http://c:8083", connector="sink-1").describe() == "connect sink-1"
    assert driver.to_dict() == {"name": "sink", **form}
    assert Driver.from_dict({**form, "timeout": 30}).to_dict()["timeout"] == 30
    with pytest.raises(InvalidDriverError, match=r"driver 'sink': unknown fields \['stop'\]"):
        Driver.from_dict({**form, "stop": "curl -X PUT ..."}, "sink")
    for field in ("url", "connector"):
        missing = {k: v for k, v in form.items() if k != field}
        with pytest.raises(InvalidDriverError, match=f"a connect driver needs '{field}'"):
            Driver.from_dict(missing, "sink")
        with pytest.raises(InvalidDriverError, match=f"a connect driver needs '{field}'"):
            Driver.from_dict({**form, field: "  "}, "sink")
    with pytest.raises(InvalidDriverError, match="timeout must be positive"):
        Driver.from_dict({**form, "timeout": 0}, "sink")
    with pytest.raises(InvalidDriverError, match="url must start with http") as refused:
        Driver.from_dict({**form, "url": "ftp://ops:hunter2@connect:21"}, "sink")
    assert "hunter2" not in str(refused.value) and "connect:21" in str(refused.value)


def test_the_registry_variable_names_it_and_the_plan_keeps_it() -> None:
    """The ``kstate_drivers`` Variable's dict form, named by a run's ``group_drivers``; the plan (XCom, the
    lease) carries it through its document and reads it back; a bad entry refuses the registry whole."""
    registry = {"sink": {"kind": "connect", "url": "http://connect:8083", "connector": "sink-1"}}
    choice = DriverChoice.build({"connect-sink-1": "sink"}, None, registry)
    driver = choice.groups["connect-sink-1"]
    assert isinstance(driver, ConnectDriver) and driver.connector == "sink-1"
    infos = {"connect-sink-1": _info("connect-sink-1", "connector-consumer-sink-1-0")}
    plan = assign_drivers(_plan(**infos), infos, {}, choice)
    assert Plan.from_dict(plan.to_dict()).groups["connect-sink-1"].driver == driver
    assert plan.to_dict()["groups"]["connect-sink-1"]["driver"]["kind"] == "connect"
    with pytest.raises(InvalidDriverError, match="a connect driver needs 'connector'"):
        DriverChoice.build({"connect-sink-1": "sink"}, None, {"sink": {"kind": "connect", "url": "http://c"}})


def test_a_connect_sink_with_this_driver_is_driven_like_a_command_group() -> None:
    """Its members run no client piece: without a driver the plan refuses it; with a connect driver it is
    drivable, and the run stops and starts it where it stops and starts the command groups."""
    infos = {"connect-sink-1": _info("connect-sink-1", "connector-consumer-sink-1-0")}
    undriven = assign_drivers(_plan(**infos), infos, {}, DriverChoice())
    with pytest.raises(UndrivableGroupError, match="ConnectDriver"):
        check_drivable(undriven)
    driver = ConnectDriver(url="http://connect:8083", connector="sink-1")
    plan = assign_drivers(_plan(**infos), infos, {}, DriverChoice(groups={"connect-sink-1": driver}))
    check_drivable(plan)
    assert plan.groups["connect-sink-1"].driver_problem == ""
    assert commanded_live(plan) == ["connect-sink-1"] and commands_of(plan, ["connect-sink-1"]) == {
        "connect-sink-1": driver
    }
    source = ConnectDriver(url="http://connect:8083", connector="orders-source")  # a source: a producer
    assert producer_commands(plan.replace(producers={"orders-source": source})) == {"orders-source": source}


@pytest.mark.parametrize("stop_code", [202, 204])
def test_stop_start_and_ready_over_http(stop_code: int) -> None:
    with FakeConnect(stop_code=stop_code) as fake:
        pairs = CommandPairs("orders", LOG)
        pairs.stop({"connect-sink-1": _driver(fake)}, "group")
        assert fake.calls == ["PUT stop"] and fake.state == "STOPPED"
        pairs.stop({"connect-sink-1": _driver(fake)}, "group")  # idempotent: a stopped connector stops
        assert pairs.start({"connect-sink-1": _driver(fake)}, "group") == []
    assert fake.calls[:4] == ["PUT stop", "PUT stop", "PUT resume", "GET status"]
    # right after the resume the connector runs with no task: not ready until its tasks run
    assert fake.calls.count("GET status") == fake.warm_up + 1


def test_a_rebalancing_worker_is_asked_again_within_the_timeout() -> None:
    with FakeConnect(conflicts=2) as fake:
        CommandPairs("orders", LOG).stop({"g": _driver(fake, timeout=30)}, "group")
    assert fake.calls == ["PUT stop"] * 3 and fake.state == "STOPPED"


def test_a_failed_task_fails_the_check_at_once_naming_the_connector_and_its_trace(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with FakeConnect(fail=True, warm_up=0) as fake:
        pairs = CommandPairs("orders", LOG)
        with caplog.at_level(logging.INFO, logger=LOG.name):
            failures = pairs.start({"connect-sink-1": _driver(fake, timeout=60)}, "group")
    assert fake.calls.count("GET status") == 1, "a FAILED task is not polled again"
    assert [f.action for f in failures] == ["ready"] and not failures[0].ok
    said = failures[0].output
    assert "connector 'sink-1': task 1 FAILED" in said and "ConnectException: disk full" in said
    assert "Sink.java" not in said, "only the trace's first line"
    assert "ConnectException: disk full" in caplog.text


def test_an_unknown_connector_or_a_worker_that_does_not_answer_is_a_failed_stop(connect: FakeConnect) -> None:
    pairs = CommandPairs("orders", LOG)
    wrong = ConnectDriver(name="typo", url=connect.url, connector="sink-2")
    with pytest.raises(
        DriverCommandError, match=r"stop of group g exited 2.*HTTP 404 Connector sink-2 not found"
    ):
        pairs.stop({"g": wrong}, "group")
    with FakeConnect(delay=1.5) as slow:
        with pytest.raises(DriverCommandError, match=r"stop of group g timed out.*no answer within 0.3 s"):
            pairs.stop({"g": _driver(slow, timeout=0.3)}, "group")
    gone = ConnectDriver(url="http://127.0.0.1:1", connector="sink-1")
    with pytest.raises(DriverCommandError, match=r"stop of group g exited 2.*no answer"):
        pairs.stop({"g": gone}, "group")


def test_credentials_in_the_url_go_as_basic_auth_and_are_never_logged(
    connect: FakeConnect, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONNECT_PASSWORD", "s3cret-from-env")
    port = connect.server.server_address[1]
    literal = ConnectDriver(url=f"http://ops:s3cret@127.0.0.1:{port}", connector=connect.name)
    from_env = ConnectDriver(url=f"http://ops:$CONNECT_PASSWORD@127.0.0.1:{port}", connector=connect.name)
    pairs = CommandPairs("orders", LOG)
    with caplog.at_level(logging.INFO, logger=LOG.name):
        pairs.stop({"g": literal}, "group")
        pairs.stop({"g": from_env}, "group")
        wrong = ConnectDriver(url=f"http://ops:s3cret@127.0.0.1:{port}", connector="nope")
        with pytest.raises(DriverCommandError) as refused:
            pairs.stop({"g": wrong}, "group")
    basic = "Basic " + base64.b64encode(b"ops:s3cret").decode()
    assert connect.auth[:2] == [basic, "Basic " + base64.b64encode(b"ops:s3cret-from-env").decode()]
    shown = caplog.text + str(refused.value) + repr(literal) + literal.describe()
    assert "s3cret" not in shown and f"127.0.0.1:{port}/connectors/" in caplog.text
    assert from_env.to_dict()["url"] == f"http://ops:$CONNECT_PASSWORD@127.0.0.1:{port}", (
        "expanded at run time"
    )
    assert (
        redacted("https://a:b@c:8083/x") == "https://c:8083/x"
        and redacted("http://c:8083") == "http://c:8083"
    )


def test_readiness_needs_the_connector_and_a_task_running() -> None:
    running = {"state": "RUNNING"}
    assert readiness("s", {"connector": running, "tasks": []})[0] == 1
    assert readiness("s", {"connector": running, "tasks": [{"id": 0, **running}]})[0] == 0
    paused = {"connector": running, "tasks": [{"id": 0, **running}, {"id": 1, "state": "UNASSIGNED"}]}
    assert readiness("s", paused) == (
        1,
        "connector 's': connector RUNNING, task 0 RUNNING, task 1 UNASSIGNED",
    )
    failed = {"connector": {"state": "FAILED", "trace": "boom\nat x", "worker_id": "w"}, "tasks": []}
    assert readiness("s", failed) == (2, "connector 's': connector FAILED on w: boom")


def test_the_run_stops_and_starts_a_connect_sink_where_it_stops_and_starts_command_groups(
    connect: FakeConnect,
) -> None:
    """The same window as a command group's (test_drivers): the connector is stopped first and waited for
    EMPTY before any other group is asked to leave, and started after the resume record."""
    cluster = FleetCluster({"cc-svc": ("cc-0",), "connect-sink-1": ("connector-consumer-sink-1-0",)})

    def stopped() -> None:
        cluster.events.append("REST stop")
        cluster.running["connect-sink-1"] = ()

    def resumed_() -> None:
        cluster.events.append("REST resume")
        cluster.running["connect-sink-1"] = cluster.members["connect-sink-1"]

    connect.on_stop, connect.on_resume = stopped, resumed_
    infos = {g: _info(g, *m) for g, m in cluster.members.items()}
    choice = DriverChoice(groups={"connect-sink-1": _driver(connect)})
    plan = assign_drivers(_plan(**infos), infos, {"cc-svc": {"cc-0"}}, choice)
    steps = _steps(cluster, plan)
    out = steps.pause()
    steps.wait_empty(1.0)
    assert cluster.events[:2] == ["REST stop", "pause-record ['cc-svc', 'connect-sink-1']"]
    assert out["stopped_groups"] == ["connect-sink-1"] and steps.stop_s is not None
    cluster.partitions = 4
    steps.topics[0].known = {"cc-svc": 4, "connect-sink-1": 4}
    resumed = steps.resume()
    assert cluster.events[-2:] == ["resume-record ['cc-svc', 'connect-sink-1']", "REST resume"]
    assert connect.calls[:3] == ["PUT stop", "PUT resume", "GET status"]
    assert resumed["started_groups"] == ["connect-sink-1"] and resumed["start_failures"] == []
    assert cluster.running["connect-sink-1"] == ("connector-consumer-sink-1-0",)
