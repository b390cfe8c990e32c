"""Apache Kafka, assembled from Maven Central and run here in KRaft combined mode (broker and controller in
one JVM per node): the default broker of the tests, the demo and the benchmarks.

* :func:`libs` copies the jars of one release (``org.apache.kafka:kafka_2.13`` with its dependencies and a
  log4j2 binding, named by ``support/kafka/pom.xml``) into the git-ignored ``.kstate/kafka/<version>/libs``
  once; later calls find them there.
* :func:`start` writes each node's ``server.properties`` and log4j2 configuration under the data folder,
  formats its storage (``kafka.tools.StorageTool format``), starts ``kafka.Kafka`` on free loopback ports and
  waits until every broker is registered. The cluster's layout (ports, pids) is kept in
  ``<data_dir>/cluster.json``, so :func:`stop`, :func:`kill_node` and a restart on the same ports and data
  find it again.

One node: replication factor 1. Three nodes (``nodes=3``): a three-voter controller quorum, replication
factor 3 and ``min.insync.replicas=2`` for the topics the tests create and for Kafka's internal topics.

Opt-in security (``start(..., secured=Secured(...))``, built by :mod:`kstate_support.kafka_security`): more
listeners on each node, each on its own free port (kept in the layout), and the settings they need (TLS
files, SASL mechanisms, the authorizer). The PLAINTEXT listener stays, as the inter-broker listener.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kstate_support import ROOT, maven

#: The release of ``make demo``/``make test``; ``KSTATE_KAFKA_VERSION`` picks another served one (4.0.0+).
DEFAULT_VERSION = "4.4.0"
POM = ROOT / "support" / "kafka" / "pom.xml"
DIST_DIR = ROOT / ".kstate" / "kafka"
CLUSTER_FILE = "cluster.json"

LOG4J2 = """\
Configuration:
  Appenders:
    File:
      name: server
      fileName: "{log}"
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: INFO
      AppenderRef:
        ref: server
    Logger:
      - name: kafka.request.logger
        level: WARN
      - name: org.apache.kafka.controller
        level: INFO
      - name: state.change.logger
        level: WARN
"""


class KafkaSetupError(RuntimeError):
    """An Apache Kafka node could not be formatted or started (the message says why); a failed fetch of its
    jars is a :class:`~kstate_support.maven.MavenError`."""


@dataclass
class Node:
    """One KRaft combined node: its id, its client port, its controller port and its process."""

    node_id: int
    port: int
    controller_port: int
    pid: int = 0
    #: The ports of the extra listeners of a :class:`Secured` cluster (``{listener name: port}``).
    listeners: dict[str, int] = field(default_factory=dict)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def address_of(self, listener: str) -> str:
        """The address of listener ``listener`` (``PLAINTEXT``: :attr:`address`)."""
        return self.address if listener == "PLAINTEXT" else f"127.0.0.1:{self.listeners[listener]}"


@dataclass
class Secured:
    """The extra listeners of a cluster and the broker settings they need (opt-in: see
    :mod:`kstate_support.kafka_security`).

    :param listeners: ``{listener name: security protocol}`` (``SASL_SSL``, ``SSL``, ``SASL_PLAINTEXT``),
        each listening on a free port of its own on every node.
    :param properties: ``server.properties`` settings added to every node's (TLS files, SASL, authorizer).
    """

    listeners: dict[str, str] = field(default_factory=dict)
    properties: dict[str, str] = field(default_factory=dict)


def version() -> str:
    """The Apache Kafka release to run: ``KSTATE_KAFKA_VERSION`` or :data:`DEFAULT_VERSION`."""
    return os.environ.get("KSTATE_KAFKA_VERSION") or DEFAULT_VERSION


def java() -> str:
    """The ``java`` to run the broker with: ``$JAVA_HOME/bin/java``, else the one on PATH (17+)."""
    home = os.environ.get("JAVA_HOME")
    exe = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not exe or not Path(exe).exists():
        raise KafkaSetupError(
            "Apache Kafka needs Java 17+: install it (apt-get install -y openjdk-17-jdk-headless) or set JAVA_HOME"
        )
    return exe


def libs(release: str | None = None) -> Path:
    """The folder holding every jar of Apache Kafka ``release``, fetched from Maven Central on first use."""
    release = release or version()
    return maven.copy_dependencies(
        POM,
        DIST_DIR / release / "libs",
        f"-Dkafka.version={release}",
        what=f"fetch Apache Kafka {release} from Maven Central",
        expect=f"kafka_2.13-{release}.jar",
    )


def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports on 127.0.0.1 that nothing listens on now."""
    import socket

    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for s in sockets:
            s.close()


def server_properties(node: Node, nodes: list[Node], log_dir: Path, secured: Secured | None = None) -> str:
    """The ``server.properties`` of ``node`` in a cluster of ``nodes`` (with the extra listeners and settings
    of ``secured``)."""
    replicas = min(3, len(nodes))
    min_isr = 2 if replicas >= 3 else 1
    voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in nodes)
    extra = secured.listeners if secured else {}
    listeners = "".join(f",{name}://127.0.0.1:{node.listeners[name]}" for name in extra)
    protocols = "".join(f",{name}:{protocol}" for name, protocol in extra.items())
    settings: dict[str, Any] = {
        "process.roles": "broker,controller",
        "node.id": node.node_id,
        "controller.quorum.voters": voters,
        "listeners": f"PLAINTEXT://127.0.0.1:{node.port},CONTROLLER://127.0.0.1:{node.controller_port}"
        + listeners,
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port}" + listeners,
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT" + protocols,
        "log.dirs": str(log_dir),
        "num.partitions": 1,
        "default.replication.factor": replicas,
        "min.insync.replicas": min_isr,
        "offsets.topic.replication.factor": replicas,
        "offsets.topic.num.partitions": 16,
        "transaction.state.log.replication.factor": replicas,
        "transaction.state.log.min.isr": min_isr,
        "transaction.state.log.num.partitions": 8,
        "share.coordinator.state.topic.replication.factor": replicas,
        "share.coordinator.state.topic.min.isr": min_isr,
        # Test-sized, not a change of semantics: a group's first join is not held back 3 s for more members.
        "group.initial.rebalance.delay.ms": 0,
        # KIP-848 and share group members heartbeat every second instead of every 5 (the broker's default,
        # also its minimum): an assignment that needs a revocation first (a second member joins) reaches
        # the members in 1-2 s, not 5-10 s. Both the provider's window and a plain restart wait on it alike.
        "group.consumer.min.heartbeat.interval.ms": 1000,
        "group.consumer.heartbeat.interval.ms": 1000,
        "group.share.min.heartbeat.interval.ms": 1000,
        "group.share.heartbeat.interval.ms": 1000,
        # The cleaner looks for work every second instead of every 15 (compaction tests wait on it).
        "log.cleaner.backoff.ms": 1000,
        "auto.create.topics.enable": "true",
    }
    if secured:
        settings.update(secured.properties)
    return "".join(f"{k}={v}\n" for k, v in settings.items())


def cluster_id() -> str:
    """A fresh KRaft cluster id (a base64url UUID, as ``kafka-storage random-uuid`` prints). Like Kafka's
    ``Uuid.randomUuid``, never one starting with ``-``: ``format -t -abc...`` reads it as an option (1 start
    in 64 failed with the tool's usage)."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def _classpath(release: str) -> str:
    return str(libs(release) / "*")


def _node_dir(data_dir: Path, node: Node) -> Path:
    return data_dir / f"node-{node.node_id}"


def _write_configs(data_dir: Path, nodes: list[Node], secured: Secured | None = None) -> None:
    for node in nodes:
        folder = _node_dir(data_dir, node)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "server.properties").write_text(server_properties(node, nodes, folder / "logs", secured))
        (folder / "log4j2.yaml").write_text(LOG4J2.format(log=folder / "server.log"))


def _format(data_dir: Path, nodes: list[Node], release: str, cid: str) -> None:
    for node in nodes:
        folder = _node_dir(data_dir, node)
        cmd = [
            java(), "-cp", _classpath(release), f"-Dlog4j2.configurationFile={folder / 'log4j2.yaml'}",
            "kafka.tools.StorageTool", "format", "--ignore-formatted",
            "-t", cid, "-c", str(folder / "server.properties"),
        ]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise KafkaSetupError(
                f"formatting node {node.node_id} failed: {(proc.stdout + proc.stderr)[-2000:]}"
            )


def heap_mb(nodes: int) -> int:
    """The broker JVM's heap: enough for the suite's topics, small enough for three nodes on a test machine."""
    return 768 if nodes == 1 else 512


def start_node(data_dir: Path, node: Node, release: str, count: int) -> int:
    """Start the JVM of ``node`` (already configured and formatted) and return its pid."""
    folder = _node_dir(data_dir, node)
    heap = heap_mb(count)
    cmd = [
        java(), f"-Xms{heap // 2}m", f"-Xmx{heap}m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
        "-Djava.awt.headless=true", f"-Dlog4j2.configurationFile={folder / 'log4j2.yaml'}",
        "-cp", _classpath(release), "kafka.Kafka", str(folder / "server.properties"),
    ]  # fmt: skip
    with (folder / "stdout.log").open("ab") as out:
        proc = subprocess.Popen(  # noqa: S603 - our own command line
            cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
    return proc.pid


def read_layout(data_dir: Path) -> dict[str, Any] | None:
    """The layout :func:`start` saved in ``data_dir`` (release, cluster id, nodes), or None."""
    path = data_dir / CLUSTER_FILE
    if not path.exists():
        return None
    return json.loads(path.read_text())


def _save_layout(
    data_dir: Path, release: str, cid: str, nodes: list[Node], secured: Secured | None = None
) -> None:
    layout: dict[str, Any] = {"release": release, "cluster_id": cid, "nodes": [asdict(n) for n in nodes]}
    if secured is not None:
        layout["secured"] = asdict(secured)
    (data_dir / CLUSTER_FILE).write_text(json.dumps(layout, indent=2) + "\n")


def nodes_of(layout: dict[str, Any]) -> list[Node]:
    return [Node(**n) for n in layout["nodes"]]


def secured_of(layout: dict[str, Any]) -> Secured | None:
    """The :class:`Secured` settings a layout was started with (None: PLAINTEXT only)."""
    secured = layout.get("secured")
    return None if secured is None else Secured(**secured)


def bootstrap_of(nodes: list[Node]) -> str:
    return ",".join(n.address for n in nodes)


def alive(pid: int) -> bool:
    """True while process ``pid`` runs (a zombie counts as gone)."""
    if pid <= 0:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _listening(address: str) -> bool:
    import socket

    host, port = address.rsplit(":", 1)
    with contextlib.suppress(OSError), socket.create_connection((host, int(port)), timeout=0.5):
        return True
    return False


def wait_ready(bootstrap: str, brokers: int, timeout: float, pids: list[int]) -> None:
    """Wait until ``brokers`` brokers answer at ``bootstrap`` and the controller quorum has a leader."""
    from confluent_kafka.admin import AdminClient

    deadline = time.monotonic() + timeout
    last: object = None
    admin: AdminClient | None = None
    while time.monotonic() < deadline:
        if not all(alive(p) for p in pids):
            raise KafkaSetupError(f"an Apache Kafka node exited while starting (see its server.log): {pids}")
        if admin is None:  # no client before a port listens: librdkafka would log every refused connect
            if not all(_listening(address) for address in bootstrap.split(",")):
                time.sleep(0.1)
                continue
            admin = AdminClient({"bootstrap.servers": bootstrap})
        try:
            meta = admin.list_topics(timeout=2)
            if len(meta.brokers) >= brokers and meta.controller_id >= 0:
                return
            last = f"{len(meta.brokers)} of {brokers} brokers registered"
        except Exception as exc:  # noqa: BLE001 - retried until the deadline
            last = exc
        time.sleep(0.2)
    raise KafkaSetupError(f"Apache Kafka at {bootstrap} was not ready within {timeout}s: {last}")


def start(
    data_dir: Path,
    nodes: int = 1,
    port: int | None = None,
    release: str | None = None,
    timeout: float = 90.0,
    secured: Secured | None = None,
) -> str:
    """Start an Apache Kafka cluster of ``nodes`` nodes with its data in ``data_dir`` and return its bootstrap
    servers (the PLAINTEXT listener's). A folder that already holds a formatted cluster is started again on
    the same ports, data kept (and with the security it was formatted with).

    :param port: the (first) client port to use; free ports are picked otherwise.
    :param secured: extra listeners and their settings (opt-in; :mod:`kstate_support.kafka_security`); each
        node's port of each is in :func:`read_layout` (``Node.listeners``).
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    # One start at a time per cluster: a node's restart thread and a test's restore() once both found the
    # same node dead and started two JVMs; the second failed to bind, and its pid, saved in the layout, was
    # the one later signalled (a SIGSTOP of an exited process's group left the real broker running).
    with _start_lock(data_dir):
        return _start_locked(data_dir, nodes, port, release, timeout, secured)


@contextlib.contextmanager
def _start_lock(data_dir: Path) -> Any:
    import fcntl

    with (data_dir / ".start.lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def running_pid(data_dir: Path, node: Node) -> int:
    """The pid of the JVM that runs ``node`` now, found by its command line (0: none): the layout's pid may
    be stale when the node was started by another process."""
    config = str(_node_dir(data_dir, node) / "server.properties").encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            cmdline = (entry / "cmdline").read_bytes()
            if b"kafka.Kafka" in cmdline and config in cmdline.split(b"\0") and alive(int(entry.name)):
                return int(entry.name)
    return 0


def _start_locked(
    data_dir: Path, nodes: int, port: int | None, release: str | None, timeout: float, secured: Secured | None
) -> str:
    layout = read_layout(data_dir)
    if layout is None:
        release = release or version()
        names = list(secured.listeners) if secured else []
        per_node = 2 + len(names)
        ports = free_ports(per_node * nodes)
        if port is not None:
            ports[0] = port
        members = [
            Node(
                i + 1,
                ports[per_node * i],
                ports[per_node * i + 1],
                listeners={name: ports[per_node * i + 2 + k] for k, name in enumerate(names)},
            )
            for i in range(nodes)
        ]
        cid = cluster_id()
        _write_configs(data_dir, members, secured)
        _format(data_dir, members, release, cid)
    else:
        release, cid, members = layout["release"], layout["cluster_id"], nodes_of(layout)
        secured = secured_of(layout)
    for node in members:
        if not alive(node.pid):
            node.pid = running_pid(data_dir, node) or start_node(data_dir, node, release, len(members))
    _save_layout(data_dir, release, cid, members, secured)
    bootstrap = bootstrap_of(members)
    wait_ready(bootstrap, len(members), timeout, [n.pid for n in members])
    return bootstrap


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)


def _reap(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        if not alive(pid):
            return True
        time.sleep(0.1)
    return False


def stop_node(data_dir: Path, node_id: int, kill: bool = False, timeout: float = 30.0) -> None:
    """Stop one node: SIGTERM (a controlled shutdown) and wait, or SIGKILL at once with ``kill``."""
    layout = read_layout(data_dir)
    if layout is None:
        return
    for node in nodes_of(layout):
        pid = node_pid(data_dir, node) if node.node_id == node_id else 0
        if pid:
            _signal(pid, signal.SIGKILL if kill else signal.SIGTERM)
            if not _reap(pid, timeout):
                _signal(pid, signal.SIGKILL)
                _reap(pid, 10)


def node_pid(data_dir: Path, node: Node) -> int:
    """The pid of the JVM running ``node`` now: the layout's, or the one found by its command line when the
    layout's is gone (0: the node does not run)."""
    return node.pid if alive(node.pid) else running_pid(data_dir, node)


def kill_node(data_dir: Path, node_id: int) -> None:
    """SIGKILL one node (a crash: no controlled shutdown, nothing flushed)."""
    stop_node(data_dir, node_id, kill=True)


def stop(data_dir: Path, timeout: float = 30.0) -> None:
    """Stop every node of the cluster in ``data_dir`` (SIGTERM, then SIGKILL past ``timeout``); no-op if none."""
    layout = read_layout(data_dir)
    if layout is None:
        return
    running = [pid for pid in (node_pid(data_dir, n) for n in nodes_of(layout)) if pid]
    for pid in running:
        _signal(pid, signal.SIGTERM)
    for pid in running:
        if not _reap(pid, timeout):
            _signal(pid, signal.SIGKILL)
            _reap(pid, 10)


def pids(data_dir: Path) -> list[int]:
    """The pids of the cluster's nodes that run now."""
    layout = read_layout(data_dir)
    return [] if layout is None else [n.pid for n in nodes_of(layout) if alive(n.pid)]
