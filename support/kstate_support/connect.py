"""A real Kafka Connect worker for the tests (issue 30, deliverable 3): ``connect-runtime`` of the broker's
release (:mod:`kstate_support.apache_kafka` fetches it with the broker: kafka-tools depends on it) and a sink
connector built from ``support/connect`` against that release's connect-api (Apache's connect-file is not
served for 4.4.0 and its 4.3.1 does not load on a 4.4.0 worker: see ``support/connect/pom.xml``).

:class:`ConnectWorker` writes a worker's properties and log4j2 configuration under its run folder, starts
``org.apache.kafka.connect.cli.ConnectDistributed`` (or ``ConnectStandalone``) on a free loopback REST port,
waits until its REST API answers, and stops it (SIGTERM, then SIGKILL) afterwards. :meth:`ConnectWorker.sink`
creates a sink connector writing one line per record value (task ``i`` to ``<file>.<i>``); its consumer group
is ``connect-<name>``. :meth:`ConnectWorker.commands` gives the README's REST recipe (stop / start / ready)
for a connector, as the shell strings a user configures as the group's command pair.

    python -m kstate_support.connect up --bootstrap 127.0.0.1:9092 [--run-dir .kstate/connect/run]
    python -m kstate_support.connect down [--run-dir ...]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from kstate_support import ROOT, apache_kafka, maven
from kstate_support.fleet import CommandPair

POM = ROOT / "support" / "connect" / "pom.xml"
SOURCES = ROOT / "support" / "connect" / "src"
BUILD = ROOT / ".kstate" / "connect" / "build"
DEFAULT_RUN_DIR = ROOT / ".kstate" / "connect" / "run"
#: The sink connector of ``support/connect`` (what Apache's FileStreamSink does; see the pom for why not it).
SINK = "io.kstate.support.connect.LineFileSinkConnector"

#: Worker settings sized for tests, not changes of semantics: sink offsets are committed every second (the
#: default is 60 s; a stop commits anyway), and the sink tasks' consumers refresh metadata every 4 s instead of
#: every 5 min (:data:`kstate_support.traffic.CONSUMER_METADATA_MS`): new partitions are seen within seconds.
TEST_WORKER: dict[str, Any] = {
    "offset.flush.interval.ms": 1000,
    "consumer.metadata.max.age.ms": 4000,
    "consumer.session.timeout.ms": 10000,
    "consumer.heartbeat.interval.ms": 1000,
    "scheduled.rebalance.max.delay.ms": 0,
}

LOG4J2 = """\
Configuration:
  Appenders:
    File:
      name: worker
      fileName: "{log}"
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: INFO
      AppenderRef:
        ref: worker
    Logger:
      - name: org.apache.kafka.clients
        level: WARN
      - name: org.reflections
        level: ERROR
"""


class ConnectError(RuntimeError):
    """The Connect worker could not be assembled, started, or did not do what was asked (the message says)."""


def plugin_jar(release: str | None = None) -> Path:
    """The sink connector's jar, built with Maven against connect-api of ``release`` on first use (and again
    when a source under ``support/connect`` is newer than it)."""
    release = release or apache_kafka.version()
    build = BUILD / release
    jar = build / "kstate-line-sink.jar"
    sources = [POM, *SOURCES.rglob("*")]
    if jar.exists() and all(p.stat().st_mtime <= jar.stat().st_mtime for p in sources):
        return jar
    maven.run(
        POM,
        "package",
        f"-Dkafka.version={release}",
        f"-Dconnect.build={build}",
        what="build the sink connector (support/connect)",
    )
    if not jar.exists():
        raise ConnectError(f"building the sink connector (support/connect) left no {jar}")
    return jar


def classpath(release: str | None = None) -> str:
    """The worker's classpath: the broker release's jars (connect-runtime among them) and the sink's jar."""
    kafka = apache_kafka.libs(release)
    if not any(kafka.glob("connect-runtime-*.jar")):
        raise ConnectError(
            f"{kafka} has no connect-runtime jar (support/kafka/pom.xml must pull kafka-tools)"
        )
    return f"{kafka / '*'}{os.pathsep}{plugin_jar(release)}"


def _http(method: str, url: str, body: Any = None, timeout: float = 10) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - our own loopback worker
            raw = resp.read()
            return resp.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        try:
            return exc.code, json.loads(raw) if raw else None
        except json.JSONDecodeError:
            return exc.code, raw.decode(errors="replace")


class ConnectWorker:
    """One Kafka Connect worker process.

    :param bootstrap: the Kafka cluster's bootstrap servers.
    :param run_dir: where its properties, log, pid and the sink files go.
    :param mode: ``distributed`` (internal topics, REST stop/resume as users run it) or ``standalone``.
    :param overrides: more worker properties (``TEST_WORKER`` are the defaults here).
    """

    def __init__(
        self,
        bootstrap: str,
        run_dir: Path = DEFAULT_RUN_DIR,
        mode: str = "distributed",
        heap_mb: int = 384,
        overrides: dict[str, Any] | None = None,
    ) -> None:
        if mode not in ("distributed", "standalone"):
            raise ValueError(f"mode {mode!r}: distributed or standalone")
        self.bootstrap = bootstrap
        self.run_dir = Path(run_dir)
        self.mode = mode
        self.heap_mb = heap_mb
        self.overrides = {**TEST_WORKER, **(overrides or {})}
        self.port = 0
        self.pid = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def properties(self) -> dict[str, Any]:
        tag = self.run_dir.name
        settings: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap,
            "listeners": f"http://127.0.0.1:{self.port}",
            "rest.advertised.host.name": "127.0.0.1",
            "rest.advertised.port": self.port,
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            # Lets a connector override its tasks' consumer settings (consumer.override.auto.offset.reset).
            "connector.client.config.override.policy": "All",
            # Plugins found by their ServiceLoader manifests only: no reflective scan of every jar (seconds).
            "plugin.discovery": "service_load",
        }
        if self.mode == "distributed":
            settings |= {
                "group.id": f"connect-cluster-{tag}",
                "config.storage.topic": f"connect-{tag}-configs",
                "offset.storage.topic": f"connect-{tag}-offsets",
                "status.storage.topic": f"connect-{tag}-status",
                "config.storage.replication.factor": -1,
                "offset.storage.replication.factor": -1,
                "status.storage.replication.factor": -1,
                "offset.storage.partitions": 1,
                "status.storage.partitions": 1,
            }
        else:
            settings["offset.storage.file.filename"] = str(self.run_dir / "connect.offsets")
        return {**settings, **self.overrides}

    def start(self, timeout: float = 120.0) -> str:
        """Start the worker and wait until its REST API answers; return its URL."""
        if self.pid and apache_kafka.alive(self.pid):
            return self.url
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.port = self.port or apache_kafka.free_ports(1)[0]
        props = self.run_dir / "worker.properties"
        props.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        log4j = self.run_dir / "log4j2.yaml"
        log4j.write_text(LOG4J2.format(log=self.run_dir / "connect.log"))
        main = "ConnectDistributed" if self.mode == "distributed" else "ConnectStandalone"
        cmd = [
            apache_kafka.java(), f"-Xms{self.heap_mb // 2}m", f"-Xmx{self.heap_mb}m", "-XX:+UseG1GC",
            "-Djava.awt.headless=true", f"-Dlog4j2.configurationFile={log4j}",
            "-cp", classpath(), f"org.apache.kafka.connect.cli.{main}", str(props),
        ]  # fmt: skip
        with (self.run_dir / "stdout.log").open("ab") as out:
            proc = subprocess.Popen(  # noqa: S603 - our own command line
                cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
            )
        self.pid = proc.pid
        (self.run_dir / "worker.pid").write_text(f"{self.pid}\n")
        (self.run_dir / "url").write_text(self.url)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not apache_kafka.alive(self.pid):
                raise ConnectError(
                    f"the Connect worker exited while starting: see {self.run_dir / 'connect.log'}"
                )
            with contextlib.suppress(OSError):
                status, body = _http("GET", f"{self.url}/connectors", timeout=2)
                if status == 200:
                    return self.url
            time.sleep(0.3)
        self.stop()
        raise ConnectError(f"the Connect worker did not answer at {self.url} within {timeout}s")

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the worker (SIGTERM: its tasks commit and leave; SIGKILL past ``timeout``)."""
        if not self.pid:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGTERM)
        if not apache_kafka._reap(self.pid, timeout):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)
            apache_kafka._reap(self.pid, 10)
        self.pid = 0

    def __enter__(self) -> ConnectWorker:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the REST API ------------------------------------------------------------------------------------

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        return _http(method, f"{self.url}{path}", body)

    def sink(self, name: str, topic: str, file: Path, tasks: int = 1, **config: Any) -> None:
        """Create (or reconfigure) sink connector ``name`` writing ``topic``'s values to ``file.<task>``.

        :param config: more connector settings, e.g. ``{"consumer.override.auto.offset.reset": "latest"}``.
        """
        settings = {
            "connector.class": SINK,
            "tasks.max": str(tasks),
            "topics": topic,
            "file": str(file),
            **{k: str(v) for k, v in config.items()},
        }
        status, body = self.request("PUT", f"/connectors/{name}/config", settings)
        if status not in (200, 201):
            raise ConnectError(f"creating connector {name}: HTTP {status} {body}")

    def status(self, name: str) -> dict[str, Any]:
        status, body = self.request("GET", f"/connectors/{name}/status")
        if status != 200:
            raise ConnectError(f"status of {name}: HTTP {status} {body}")
        return dict(body)

    def running(self, name: str) -> bool:
        """The connector and at least one task RUNNING (and every task RUNNING)."""
        try:
            body = self.status(name)
        except ConnectError:
            return False
        states = [body["connector"]["state"], *(t["state"] for t in body["tasks"])]
        return bool(body["tasks"]) and all(s == "RUNNING" for s in states)

    def wait_running(self, name: str, timeout: float = 60.0) -> float:
        """Poll until :meth:`running`; return the seconds waited."""
        began = time.monotonic()
        while not self.running(name):
            if time.monotonic() - began > timeout:
                raise ConnectError(f"connector {name} not RUNNING within {timeout}s: {self.status(name)}")
            time.sleep(0.2)
        return time.monotonic() - began

    def delete(self, name: str) -> None:
        self.request("DELETE", f"/connectors/{name}")

    # -- the command pair ----------------------------------------------------------------------------------

    def commands(self, name: str, readme: bool = False) -> CommandPair:
        """The REST recipe for connector ``name`` as the group's command pair (shell strings).

        ``readme=True``: the README's recipe verbatim (stop = ``PUT stop``; ready = connector and every task
        RUNNING, which an empty task list also passes). Otherwise the corrected one: the same stop and start,
        and a ready check that also requires at least one task.
        """
        base = shlex.quote(f"{self.url}/connectors/{name}")
        stop = f"curl -fsS -X PUT {base}/stop"
        start = f"curl -fsS -X PUT {base}/resume"
        if readme:
            ready = f"curl -fsS {base}/status | jq -e '[.connector.state, .tasks[].state] | all(. == \"RUNNING\")'"
        else:
            ready = (
                f"curl -fsS {base}/status | jq -e "
                "'(.tasks | length > 0) and ([.connector.state, .tasks[].state] | all(. == \"RUNNING\"))'"
            )
        return CommandPair(stop=stop, start=start, ready=ready)


def read_sink(file: Path) -> list[str]:
    """The lines the sink's tasks wrote so far to ``file.<task>`` (a torn last line is left out)."""
    out: list[str] = []
    for part in sorted(file.parent.glob(file.name + ".*")):
        out += part.read_text().split("\n")[:-1]  # "" after a complete line, or a line still being written
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("action", choices=["up", "down"])
    parser.add_argument("--bootstrap", help="the Kafka cluster (up)")
    parser.add_argument("--run-dir", type=Path, default=DEFAULT_RUN_DIR)
    parser.add_argument("--mode", choices=["distributed", "standalone"], default="distributed")
    args = parser.parse_args(argv)
    pidfile = args.run_dir / "worker.pid"
    if args.action == "down":
        if pidfile.exists():
            worker = ConnectWorker("", args.run_dir)
            worker.pid = int(pidfile.read_text())
            if apache_kafka.alive(worker.pid):
                worker.stop()
            pidfile.unlink()
        return 0
    if not args.bootstrap:
        parser.error("up needs --bootstrap")
    print(ConnectWorker(args.bootstrap, args.run_dir, mode=args.mode).start())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
