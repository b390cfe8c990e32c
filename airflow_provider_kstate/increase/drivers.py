"""How each protected group, and each producer service, is stopped and started: a driver per group.

A safe increase needs every live consumer out of its group from before the create until its group is
seeded. Services that run the client piece (or any implementation of ``docs/control-protocol.md``) leave
and rejoin on a record of the control topic; the others, in Java, Go or Node.js under Kubernetes, systemd or
Kafka Connect, are stopped and started by their own mechanism. Four kinds of driver:

``control``
    The control protocol: a ``pause`` / ``resume`` record for consumer groups, a layout for producers
    (``ControlledProducer``). The default for a group whose live members all acknowledged on the control
    topic.
``command``
    A command pair run by the worker through ``bash -c``: ``stop`` (the service leaves: ``kubectl scale
    --replicas=0``, ``systemctl stop``, ``docker stop``, Kafka Connect's ``PUT .../stop``), ``start`` and an
    optional ``ready`` check polled after the start until it exits 0. Each must be idempotent (a stop of a
    stopped service succeeds) and bounded by ``timeout``. The commands see ``KSTATE_TOPIC``,
    ``KSTATE_ACTION`` (stop, start, ready) and ``KSTATE_GROUP`` or ``KSTATE_PRODUCER``.
``connect``
    A Kafka Connect connector (a sink's group is ``connect-<name>``; a source connector is a producer service)
    stopped and started through the worker's REST API by the run itself: ``PUT /connectors/NAME/stop``,
    ``PUT /connectors/NAME/resume``, then ``GET /connectors/NAME/status`` polled until the connector and
    every task (at least one) are RUNNING; a FAILED one fails the check at once, with its trace's first line.
``task``
    Your own pause and resume tasks of the per-step layout (``pause_consumers=`` / ``resume_consumers=``):
    they drive every group that has no driver of its own.

The plan stores each group's driver (commands included: the approver reads what will run) and every later
step runs the plan's drivers, so a changed registry cannot change a run halfway. Put no secret in a
command or a URL: reference the worker's environment (``$CONNECT_TOKEN``) instead, which bash (or the
``connect`` driver, for its URL) expands at run time.

The ``command`` and ``connect`` kinds are action drivers (:class:`ActionDriver`): the run asks the driver
to perform each action (:meth:`ActionDriver.run`), :class:`CommandPairs` runs them concurrently and keeps
each one's timing for the run's report. A new kind that the run drives itself is one such subclass and its
``DriverKind`` value; nothing else dispatches on the kind.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Annotated, Any, ClassVar, Literal, Protocol

from pydantic import Field, GetCoreSchemaHandler, WithJsonSchema
from pydantic_core import CoreSchema, core_schema
from typing_extensions import TypedDict

from airflow_provider_kstate.enums import StrEnum, choice
from airflow_provider_kstate.errors import DriverCommandError, InvalidDriverError

#: Seconds each command of a command pair may run (and the ready check may keep failing) by default.
DEFAULT_COMMAND_TIMEOUT = 120.0
#: Characters of a command's output kept for the log and the error.
OUTPUT_TAIL = 2000
#: Command pairs run at once, at most (one per group or producer service).
MAX_PARALLEL = 16
#: What one action of a driver gave: an exit code (0: done; None: out of time) and what it said.
Outcome = tuple[int | None, str]


class DriverKind(StrEnum):
    """How a service is stopped and started (the module's docstring says what each does)."""

    CONTROL = "control"
    COMMAND = "command"
    CONNECT = "connect"
    TASK = "task"


class DriverDict(TypedDict, total=False):
    """The dict form of a driver (:meth:`Driver.to_dict`): in a plan, and as a registry entry (the
    ``kstate_drivers`` Variable). Only the fields that apply are written; :meth:`Driver.from_dict` reads it."""

    kind: Annotated[
        Literal["control", "command", "connect", "task"],
        Field(
            description="control (the control protocol), command (a command pair), connect (a Kafka Connect "
            "connector, by its REST API) or task (your own tasks); absent with a stop command: command"
        ),
    ]
    name: Annotated[str, Field(description="shown in the plan (command <name>)")]
    stop: Annotated[str, Field(description="command: makes the service leave its group, run with bash -c")]
    start: Annotated[str, Field(description="command: starts the service again")]
    ready: Annotated[str, Field(description="command, optional: polled after start until it exits 0")]
    url: Annotated[
        str,
        Field(
            description="connect: the Connect worker's REST base URL (http://connect:8083); $VARS of the "
            "worker's environment expanded at run time; user:password@ sent as basic auth, never logged"
        ),
    ]
    connector: Annotated[str, Field(description="connect: the connector's name")]
    #: int or float as given (a number in JSON): the plan keeps ``30`` as ``30``.
    timeout: Annotated[
        int | float,
        Field(gt=0),
        WithJsonSchema(
            {
                "type": "number",
                "exclusiveMinimum": 0,
                "description": "command, connect: seconds each action may take, and the ready check may keep "
                f"failing (absent: {DEFAULT_COMMAND_TIMEOUT})",
            }
        ),
    ]


@dataclass(frozen=True)
class Driver:
    """The base of the drivers: a kind and an optional name shown in the plan. Each kind is one subclass,
    registered by its ``kind`` (:data:`DRIVER_KINDS`): it says how it reads its dict form, how it takes its
    service out and back (the words of the plan and the approval prompt), whether the run runs commands
    for it and whether its live members must run the client piece."""

    kind: ClassVar[DriverKind]
    #: How the service leaves its group, and how it comes back (the approval prompt's words).
    leave_words: ClassVar[str]
    back_words: ClassVar[str]
    #: Whether a pause record makes the service leave: its live members must run the client piece.
    needs_client_piece: ClassVar[bool] = False
    name: str = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "kind" in cls.__dict__:
            DRIVER_KINDS[cls.kind] = cls

    def describe(self) -> str:
        """One word or two for the plan's line and the page: ``control``, ``command billing-k8s``."""
        return f"{self.kind} {self.name}".strip()

    def to_dict(self) -> dict[str, Any]:
        """The JSON-safe form stored in the plan (XCom and the lease): a :class:`DriverDict`."""
        out: dict[str, Any] = {"kind": str(self.kind)}
        if self.name:
            out["name"] = self.name
        return out

    def commands(self) -> ActionDriver | None:
        """The driver whose actions (stop, start, ready) the run performs to stop and start the service: a
        command pair, a connector's REST calls (None: the run performs none)."""
        return None

    @classmethod
    def read(cls, data: Mapping[str, Any], label: str) -> Driver:
        """The driver of this kind from its dict form (``kind`` checked already)."""
        unknown = sorted(set(data) - {"kind", "name"})
        if unknown:
            raise InvalidDriverError(f"driver {label!r}: unknown fields {unknown} for a {cls.kind} driver")
        return cls(name=label)

    @staticmethod
    def from_dict(data: Mapping[str, Any], name: str = "") -> Driver:
        """Read a driver from its dict form (a plan, or a registry entry such as the ``kstate_drivers``
        Variable); a bad one is :class:`InvalidDriverError` naming what is wrong."""
        if not isinstance(data, Mapping):
            raise InvalidDriverError(f"driver {name or '?'!r} must be an object, got {data!r}")
        kind = str(data.get("kind", "command" if "stop" in data else "")).strip()
        label = str(data.get("name") or name)
        choice(f"driver {label or '?'!r}: kind", kind, DriverKind, InvalidDriverError)
        return DRIVER_KINDS[DriverKind(kind)].read(data, label)


#: Every driver kind, by its ``kind`` (each subclass of :class:`Driver` registers itself).
DRIVER_KINDS: dict[DriverKind, type[Driver]] = {}


class _DriverWire:
    """A :class:`Driver` as a field of a document: read from its dict form (:class:`DriverDict`, validated),
    or given as a driver (the Python API); written as that dict."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        as_dict = handler.generate_schema(DriverDict)

        def read(value: Any, validate: Callable[[Any], Any]) -> Driver:
            return value if isinstance(value, Driver) else Driver.from_dict(validate(value))

        return core_schema.no_info_wrap_validator_function(
            read,
            as_dict,
            serialization=core_schema.plain_serializer_function_ser_schema(
                lambda driver: driver.to_dict(), return_schema=as_dict
            ),
        )


#: A driver in the plan (a group's, a producer service's).
#: A driver as a field of a document (the plan's groups and producers, the request's drivers).
DriverField = Annotated[Driver, _DriverWire]


def _timeout(name: str, value: Any) -> float:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise InvalidDriverError(
            f"driver {name!r}: timeout must be a number of seconds, got {value!r}"
        ) from None
    if seconds <= 0:
        raise InvalidDriverError(f"driver {name!r}: timeout must be positive, got {value!r}")
    return seconds


@dataclass(frozen=True)
class ControlDriver(Driver):
    """The control protocol: the client piece, or any implementation of ``docs/control-protocol.md``."""

    kind: ClassVar[DriverKind] = DriverKind.CONTROL
    leave_words: ClassVar[str] = "pause record"
    back_words: ClassVar[str] = "resume"
    needs_client_piece: ClassVar[bool] = True


@dataclass(frozen=True)
class TaskDriver(Driver):
    """Your own pause and resume tasks (the per-step layout's ``pause_consumers=`` / ``resume_consumers=``)."""

    kind: ClassVar[DriverKind] = DriverKind.TASK
    leave_words: ClassVar[str] = "your pause task"
    back_words: ClassVar[str] = "your resume task"


@dataclass(frozen=True)
class ActionDriver(Driver):
    """A driver whose actions the run performs itself: ``stop`` (the service leaves), ``start`` and ``ready``
    (polled after the start), each bounded by the driver's ``timeout``. :class:`CommandPairs` asks the
    driver for each (:meth:`run`), all drivers of a step at once, and keeps what each did in the run's report;
    a kind of this family is one subclass with its ``run``."""

    def commands(self) -> ActionDriver:
        return self

    def run(self, action: str, env: Mapping[str, str], runner: CommandRunner) -> Outcome:
        """Perform ``action`` (``stop``, ``start`` or ``ready``) once, within ``timeout`` (``ready``: poll until
        it holds or ``timeout``); return ``(0 when done, else a code or None when out of time, output)``.

        :param env: the run's names for the action (``KSTATE_TOPIC``, ``KSTATE_ACTION``, ``KSTATE_GROUP`` or
            ``KSTATE_PRODUCER``).
        :param runner: runs a shell command (the ``command`` kind's; tests pass a fake).
        """
        raise NotImplementedError


@dataclass(frozen=True)
class CommandDriver(ActionDriver):
    """Stop and start a service by commands, run by the worker through ``bash -c``.

    :param stop: makes the service leave its group (or stop producing) and returns when it has stopped, or
        soon after: the run waits for the broker to report the group EMPTY anyway.
    :param start: starts it again.
    :param ready: optional: polled after ``start`` (every second) until it exits 0, within ``timeout``.
    :param timeout: seconds each command may run, and the ready check may keep failing.
    :param name: shown in the plan (``command <name>``).
    """

    kind: ClassVar[DriverKind] = DriverKind.COMMAND
    leave_words: ClassVar[str] = "stop command"
    back_words: ClassVar[str] = "start command"
    stop: str = ""
    start: str = ""
    ready: str = ""
    timeout: float = DEFAULT_COMMAND_TIMEOUT

    def __post_init__(self) -> None:
        if not self.stop.strip() or not self.start.strip():
            raise InvalidDriverError(
                f"command driver {self.name or '?'!r} needs both a stop and a start command"
            )
        _timeout(self.name, self.timeout)

    def to_dict(self) -> dict[str, Any]:
        out = {**super().to_dict(), "stop": self.stop, "start": self.start}
        if self.ready:
            out["ready"] = self.ready
        if self.timeout != DEFAULT_COMMAND_TIMEOUT:
            out["timeout"] = self.timeout
        return out

    def command(self, action: str) -> str:
        """The command of ``action`` (``stop``, ``start`` or ``ready``)."""
        return str(getattr(self, action))

    def run(self, action: str, env: Mapping[str, str], runner: CommandRunner) -> Outcome:
        """Run the command of ``action`` through ``runner``; ``ready`` is polled until it exits 0 (a driver
        without a ready check is ready at once)."""
        if action != "ready":
            return runner.run(self.command(action), self.timeout, env)
        if not self.ready:
            return 0, ""
        return poll(lambda seconds: runner.run(self.ready, seconds, env), self.timeout)

    @classmethod
    def read(cls, data: Mapping[str, Any], label: str) -> Driver:
        _known(data, label, "stop", "start", "ready", "timeout")
        return cls(
            name=label,
            stop=str(data.get("stop") or ""),
            start=str(data.get("start") or ""),
            ready=str(data.get("ready") or ""),
            timeout=_timeout(label, data.get("timeout", DEFAULT_COMMAND_TIMEOUT)),
        )


#: The codes of the ``connect`` kind's outcomes: not yet (the ready check: not running yet; a stop or a
#: resume: 409, the worker is rebalancing), asked again until its timeout; failed (a FAILED connector or task,
#: any other HTTP error), at once.
NOT_YET, FAILED = 1, 2
#: The REST verb of each action of the ``connect`` kind (``ready`` reads ``status``).
CONNECT_VERBS = {"stop": "stop", "start": "resume"}


@dataclass(frozen=True, repr=False)
class ConnectDriver(ActionDriver):
    """Stop and start a Kafka Connect connector through its worker's REST API (Connect 3.5 and later):
    ``PUT /connectors/NAME/stop`` (not ``pause``: paused tasks stay in the group), ``PUT .../resume``, and
    ``GET .../status`` polled until the connector and every task, at least one, are RUNNING (right after a
    resume the connector shows RUNNING with no task yet); a FAILED connector or task fails the check at once.

    :param url: the worker's REST base URL (``http://connect:8083``: any worker of its cluster). ``$VARS`` of
        the worker's environment are expanded at each call; a ``user:password@`` is sent as basic auth and
        never logged (nor shown in the plan's line).
    :param connector: the connector's name (a sink connector's consumer group is ``connect-<connector>``).
    :param timeout: seconds each call may take, and the ready check may keep failing.
    :param name: shown in the plan (``connect <name>``; the connector when empty).
    """

    kind: ClassVar[DriverKind] = DriverKind.CONNECT
    leave_words: ClassVar[str] = "connector stop (REST)"
    back_words: ClassVar[str] = "connector resume (REST)"
    url: str = ""
    connector: str = ""
    timeout: float = DEFAULT_COMMAND_TIMEOUT

    def __post_init__(self) -> None:
        label = self.name or self.connector or "?"
        for what in ("url", "connector"):
            if not str(getattr(self, what)).strip():
                raise InvalidDriverError(f"connect driver {label!r} needs a {what}")
        scheme = urllib.parse.urlsplit(self.url).scheme
        if not self.url.startswith("$") and scheme not in ("http", "https"):
            raise InvalidDriverError(
                f"connect driver {label!r}: url must start with http:// or https://, got {redacted(self.url)!r}"
            )
        _timeout(label, self.timeout)

    def __repr__(self) -> str:
        return f"ConnectDriver(name={self.name!r}, url={redacted(self.url)!r}, connector={self.connector!r})"

    def describe(self) -> str:
        return f"{self.kind} {self.name or self.connector}"

    def to_dict(self) -> dict[str, Any]:
        out = {**super().to_dict(), "url": self.url, "connector": self.connector}
        if self.timeout != DEFAULT_COMMAND_TIMEOUT:
            out["timeout"] = self.timeout
        return out

    def run(self, action: str, env: Mapping[str, str], runner: CommandRunner) -> Outcome:
        """``stop`` / ``start``: a PUT (any 2xx is done: Connect answers 202 or 204; asked again while a
        rebalancing worker answers 409); ``ready``: the status polled until it runs, or at once its FAILED
        part. Each within ``timeout``; ``env`` and ``runner`` are not used."""
        attempt = self._ready_once if action == "ready" else self._put(CONNECT_VERBS[action])
        return poll(attempt, self.timeout, settled=lambda code: code != NOT_YET)

    def _put(self, verb: str) -> Callable[[float], Outcome]:
        def attempt(seconds: float) -> Outcome:
            status, _body, said = self._call("PUT", verb, min(seconds, self.timeout))
            if status is None or 200 <= status < 300:
                return (None if status is None else 0), said
            return (NOT_YET if status == 409 else FAILED), said

        return attempt

    def _ready_once(self, seconds: float) -> Outcome:
        status, body, said = self._call("GET", "status", min(seconds, self.timeout))
        if status != 200 or not isinstance(body, Mapping):
            return NOT_YET, said
        return readiness(self.connector, body)

    def _call(self, method: str, verb: str, timeout: float) -> tuple[int | None, Any, str]:
        """``method`` on ``/connectors/<connector>/<verb>``: (the HTTP status, 0 when nothing answered, None
        when out of time; the JSON body; what to log, without credentials)."""
        base, headers = endpoint(os.path.expandvars(self.url))
        target = f"{base.rstrip('/')}/connectors/{urllib.parse.quote(self.connector, safe='')}/{verb}"
        shown = f"{method} {target}"
        request = urllib.request.Request(target, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:  # noqa: S310 - http(s) checked
                return answer.status, _json(answer.read()), f"{shown}: HTTP {answer.status}"
        except urllib.error.HTTPError as exc:
            body = _json(exc.read())
            message = body.get("message", "") if isinstance(body, Mapping) else body or ""
            return exc.code, body, f"{shown}: HTTP {exc.code} {message}".strip()
        except (OSError, http.client.HTTPException, ValueError) as exc:  # URLError is an OSError
            reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
            if isinstance(reason, TimeoutError):
                return None, None, f"{shown}: no answer within {timeout:g} s"
            return 0, None, f"{shown}: no answer ({reason})"

    @classmethod
    def read(cls, data: Mapping[str, Any], label: str) -> Driver:
        _known(data, label, "url", "connector", "timeout")
        for what, meaning in (("url", "the worker's REST base URL"), ("connector", "the connector's name")):
            if not isinstance(data.get(what), str) or not data[what].strip():
                raise InvalidDriverError(f"driver {label!r}: a connect driver needs {what!r} ({meaning})")
        return cls(
            name=label,
            url=str(data["url"]).strip(),
            connector=str(data["connector"]).strip(),
            timeout=_timeout(label, data.get("timeout", DEFAULT_COMMAND_TIMEOUT)),
        )


def _known(data: Mapping[str, Any], label: str, *fields: str) -> None:
    """Refuse a dict form with a field its kind does not read, naming the fields."""
    unknown = sorted(set(data) - {"kind", "name", *fields})
    if unknown:
        raise InvalidDriverError(f"driver {label!r}: unknown fields {unknown}")


def readiness(connector: str, status: Mapping[str, Any]) -> Outcome:
    """What a connector's status (``GET /connectors/NAME/status``) says: ``(0, ...)`` when it and every task,
    at least one, are RUNNING; ``(FAILED, ...)`` naming the connector and the first line of the failed part's
    trace; else ``(NOT_YET, its states)``."""
    tasks = [t for t in status.get("tasks") or [] if isinstance(t, Mapping)]
    own = status.get("connector")
    parts = [("connector", own if isinstance(own, Mapping) else {})]
    parts += [(f"task {t.get('id', '?')}", t) for t in tasks]
    for what, part in parts:
        if part.get("state") == "FAILED":
            trace = (str(part.get("trace") or "").strip().splitlines() or ["no trace"])[0]
            worker = part.get("worker_id", "?")
            return FAILED, f"connector {connector!r}: {what} FAILED on {worker}: {trace}"
    states = ", ".join(f"{what} {part.get('state', '?')}" for what, part in parts)
    if tasks and all(part.get("state") == "RUNNING" for _, part in parts):
        return 0, f"connector {connector!r}: {states}"
    return NOT_YET, f"connector {connector!r}: {states}" + ("" if tasks else ", no task yet")


def endpoint(url: str) -> tuple[str, dict[str, str]]:
    """``url`` without its ``user:password@``, and the headers that send them (basic auth)."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None:
        return url, {}
    secret = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
    return redacted(url), {"Authorization": "Basic " + base64.b64encode(secret.encode()).decode()}


def redacted(url: str) -> str:
    """``url`` without the ``user:password@`` of its authority: what a log or an error may show."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def _json(raw: bytes) -> Any:
    text = raw.decode("utf-8", "replace")
    try:
        return json.loads(text) if text.strip() else None
    except json.JSONDecodeError:
        return text[-OUTPUT_TAIL:]


def poll(
    attempt: Callable[[float], Outcome],
    timeout: float,
    settled: Callable[[int | None], bool] = lambda c: c == 0,
) -> Outcome:
    """Call ``attempt(seconds left)`` until it gives 0 (or a code ``settled`` accepts) or ``timeout`` has
    passed, every 0.2 s for 2 s, then every second; return its last outcome."""
    started = time.monotonic()
    deadline = started + timeout
    while True:
        code, output = attempt(max(1.0, deadline - time.monotonic()))
        if code == 0 or settled(code) or time.monotonic() >= deadline:
            return code, output
        time.sleep(0.2 if time.monotonic() - started < 2.0 else 1.0)


CONTROL = ControlDriver()
TASK = TaskDriver()


def as_driver(what: str, value: Any, registry: Mapping[str, Driver]) -> Driver:
    """Return the driver ``value`` names for ``what`` (a group or a producer service).

    ``value`` is a :class:`Driver` (the Python API), ``"control"``, or the name of a driver in ``registry``
    (what a DAG run's params give: a trigger form names a driver, it never carries a command).
    """
    if isinstance(value, Driver):
        return value
    name = str(value or "").strip()
    if name == DriverKind.CONTROL:
        return CONTROL
    if name in registry:
        driver = registry[name]
        return driver if driver.name else replace(driver, name=name)
    known = ", ".join(sorted(registry)) or "none"
    raise InvalidDriverError(
        f"{what}: driver {value!r} is neither 'control' nor a driver of the registry (known: {known}). "
        "A run's params name drivers; their commands are defined by whoever deploys the DAG (the drivers "
        "argument, or the kstate_drivers Variable of the example DAGs). Nothing was changed."
    )


def as_registry(value: Any) -> dict[str, Driver]:
    """Return the named drivers of ``value`` (a mapping of name to :class:`Driver` or to its dict form)."""
    if value is None or value == "":
        return {}
    if not isinstance(value, Mapping):
        raise InvalidDriverError(f"drivers must be a mapping of name to driver, got {value!r}")
    return {
        str(name): d if isinstance(d, Driver) else Driver.from_dict(d, str(name)) for name, d in value.items()
    }


# --- running command pairs --------------------------------------------------------------------------------


@dataclass(frozen=True)
class CommandResult:
    """What one command did: exit code (None: killed at its timeout), seconds, the tail of its output."""

    target: str
    action: str
    returncode: int | None
    seconds: float
    output: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def describe(self) -> str:
        status = "timed out" if self.returncode is None else f"exited {self.returncode}"
        return f"{self.action} of {self.target} {status} after {self.seconds:.2f} s"


class CommandRunner(Protocol):
    """Runs one command of a driver (:class:`ShellRunner`; tests give a fake)."""

    def run(self, command: str, timeout: float, env: Mapping[str, str]) -> Outcome:
        """Run ``command`` with ``env`` added; return ``(exit code or None when killed at timeout, output)``."""
        ...


class ShellRunner:
    """Runs a command with ``bash -c`` in a session of its own, killed with its children at the timeout."""

    def run(self, command: str, timeout: float, env: Mapping[str, str]) -> tuple[int | None, str]:
        proc = subprocess.Popen(
            ["bash", "-c", command],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={**os.environ, **env},
            start_new_session=True,
        )
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_session(proc)
            out, _ = proc.communicate()
            return None, _tail(out)
        return proc.returncode, _tail(out)


def _kill_session(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _tail(out: bytes | None) -> str:
    return (out or b"")[-OUTPUT_TAIL:].decode("utf-8", "replace").strip()


@dataclass
class CommandPairs:
    """Runs the actions of a plan's drivers (:class:`ActionDriver`: command pairs, connectors' REST calls),
    concurrently, and keeps what each did.

    :param topic: the topic of the run (``KSTATE_TOPIC``).
    :param log: the task's logger.
    :param runner: the command runner (tests pass a fake).
    """

    topic: str
    log: Any
    runner: CommandRunner = field(default_factory=ShellRunner)

    def run(self, action: str, drivers: Mapping[str, ActionDriver], kind: str) -> list[CommandResult]:
        """Perform ``action`` (``stop``, ``start`` or ``ready``) of every driver at once; log each; return
        the results in ``drivers`` order.

        :param kind: ``group`` or ``producer``: what the names are (``KSTATE_GROUP`` / ``KSTATE_PRODUCER``).
        """
        if not drivers:
            return []
        with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL, len(drivers))) as pool:
            futures = [pool.submit(self._one, action, name, d, kind) for name, d in drivers.items()]
            return [f.result() for f in futures]

    def _one(self, action: str, target: str, driver: ActionDriver, kind: str) -> CommandResult:
        env = {"KSTATE_TOPIC": self.topic, "KSTATE_ACTION": action, f"KSTATE_{kind.upper()}": target}
        started = time.monotonic()
        code, output = driver.run(action, env, self.runner)
        result = CommandResult(f"{kind} {target}", action, code, round(time.monotonic() - started, 3), output)
        log = self.log.info if result.ok else self.log.error
        log("DRIVER %s (%s): %s", result.describe(), driver.describe(), _quote(output))
        return result

    def start(self, drivers: Mapping[str, ActionDriver], kind: str) -> list[CommandResult]:
        """Start every service, then wait for each started one's readiness (concurrently); return the
        failures (logged; the broker's view of the group decides what follows)."""
        started = self.run("start", drivers, kind)
        ok = {name for name, r in zip(drivers, started, strict=True) if r.ok}
        ready = self.run("ready", {n: d for n, d in drivers.items() if n in ok}, kind)
        return [r for r in started + ready if not r.ok]

    def stop(self, drivers: Mapping[str, ActionDriver], kind: str) -> None:
        """Stop every service at once; raise :class:`DriverCommandError` naming every stop that failed."""
        failed = [r for r in self.run("stop", drivers, kind) if not r.ok]
        if failed:
            raise DriverCommandError(
                "; ".join(f"{r.describe()}: {_quote(r.output)}" for r in failed)
                + ". Nothing was created; the services stopped so far are started again."
            )


def _quote(output: str) -> str:
    return repr(output[-400:]) if output else "no output"
