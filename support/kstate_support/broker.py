"""The one broker helper of the tests, the demo and the benchmarks.

:func:`cluster` yields the librdkafka configuration of the cluster to use: the one named by
``KSTATE_BOOTSTRAP_SERVERS`` (a real cluster; extra librdkafka settings such as SASL as JSON in
``KSTATE_KAFKA_CONFIG``), else a broker started here and stopped afterwards.

    python -m kstate_support.broker up   [--nodes 3] [--data-dir .kstate/broker]   # prints the bootstrap
    python -m kstate_support.broker down [--data-dir .kstate/broker]

The broker started here is **Apache Kafka** (4.4.0 by default, ``KSTATE_KAFKA_VERSION`` for another
release), assembled from Maven Central and run in KRaft combined mode by :mod:`kstate_support.apache_kafka`:
``up`` fetches its jars once into ``.kstate/kafka/``, formats a node per ``--nodes`` under the data folder,
starts them on free loopback ports, waits until every broker is registered and prints the bootstrap servers.
``down`` stops them. ``KSTATE_BROKER=noida`` picks the embedded emulator (noida-db 0.2.3) instead, the
other broker of the matrix (Tansu has its own helper, :mod:`kstate_support.tansu`).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kstate_support import ROOT, apache_kafka

DEFAULT_DATA_DIR = ROOT / ".kstate" / "broker"
#: The brokers this helper can start: Apache Kafka (the default) and the embedded emulator.
KINDS = ("kafka", "noida")


def kind() -> str:
    """The broker :func:`up` starts: ``KSTATE_BROKER`` (``kafka`` or ``noida``), Apache Kafka by default."""
    name = os.environ.get("KSTATE_BROKER") or "kafka"
    if name not in KINDS:
        raise SystemExit(
            f"KSTATE_BROKER={name!r} is not a broker this helper starts: one of {', '.join(KINDS)}"
        )
    return name


def describe() -> str:
    """What :func:`up` starts, for a person: ``Apache Kafka 4.4.0 (KRaft)`` or the emulator."""
    if kind() == "kafka":
        return f"Apache Kafka {apache_kafka.version()} (KRaft)"
    return "the embedded emulator (noida-db 0.2.3)"


def external_config() -> dict[str, Any] | None:
    """Return the configuration of the real cluster named by ``KSTATE_BOOTSTRAP_SERVERS`` (with the JSON
    extras of ``KSTATE_KAFKA_CONFIG``), or None when no cluster is named."""
    bootstrap = os.environ.get("KSTATE_BOOTSTRAP_SERVERS")
    if not bootstrap:
        return None
    extra = json.loads(os.environ.get("KSTATE_KAFKA_CONFIG") or "{}")
    if not isinstance(extra, dict):
        raise SystemExit("KSTATE_KAFKA_CONFIG must be a JSON object of librdkafka settings")
    return {"bootstrap.servers": bootstrap, **extra}


@contextlib.contextmanager
def cluster(data_dir: Path = DEFAULT_DATA_DIR, nodes: int = 1) -> Iterator[dict[str, Any]]:
    """Yield the librdkafka configuration of the cluster to use: the real one of
    :func:`external_config`, else a fresh broker with its data in ``data_dir`` (stopped after)."""
    config = external_config()
    if config is not None:
        yield config
        return
    with running(data_dir, nodes=nodes) as bootstrap:
        yield {"bootstrap.servers": bootstrap}


def _noida() -> str:
    exe = shutil.which("noida-db") or str(Path(sys.executable).with_name("noida-db"))
    if not Path(exe).exists():
        raise SystemExit("noida-db is not installed: run `make venv` (it installs noida-db==0.2.3)")
    return exe


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_ready(bootstrap: str, timeout: float) -> None:
    from confluent_kafka.admin import AdminClient

    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=2)
            return
        except Exception as exc:  # noqa: BLE001 - retried until the deadline
            last = exc
            time.sleep(0.2)
    raise RuntimeError(f"broker at {bootstrap} did not answer within {timeout}s: {last}")


def up(
    data_dir: Path = DEFAULT_DATA_DIR, port: int | None = None, timeout: float = 90.0, nodes: int = 1
) -> str:
    """Start the broker and return its bootstrap servers.

    A data folder that already holds an Apache Kafka cluster is started again with its data and ports (its
    nodes that still run are kept); the emulator stops a stale one in ``data_dir`` first.

    :param port: the (first) client port; a free one otherwise.
    :param nodes: how many Apache Kafka nodes (1, or 3 for replication factor 3); the emulator has one.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    if kind() == "kafka":  # the nodes of a cluster in data_dir that still run are kept; the others start
        bootstrap = apache_kafka.start(data_dir, nodes=nodes, port=port, timeout=timeout)
        (data_dir / "bootstrap").write_text(bootstrap)
        return bootstrap
    if nodes != 1:
        raise SystemExit("the embedded emulator (KSTATE_BROKER=noida) runs one node only")
    down(data_dir)
    port = port or free_port()
    subprocess.run(
        [_noida(), "up", "--only", "kafka", "--kafka-port", str(port), "--data-dir", str(data_dir)],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    bootstrap = f"127.0.0.1:{port}"
    _wait_ready(bootstrap, timeout)
    (data_dir / "bootstrap").write_text(bootstrap)
    return bootstrap


def down(data_dir: Path = DEFAULT_DATA_DIR) -> None:
    """Stop the broker that runs with ``data_dir``; a no-op when none runs."""
    if not data_dir.exists():
        return
    if apache_kafka.read_layout(data_dir) is not None:
        apache_kafka.stop(data_dir)
        return
    subprocess.run(
        [_noida(), "down", "--data-dir", str(data_dir)],
        check=False,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


@contextlib.contextmanager
def running(data_dir: Path = DEFAULT_DATA_DIR, fresh: bool = True, nodes: int = 1) -> Iterator[str]:
    """Run a broker for the duration of the block; ``fresh`` wipes its data first."""
    if fresh and data_dir.exists():
        down(data_dir)
        shutil.rmtree(data_dir, ignore_errors=True)
    bootstrap = up(data_dir, nodes=nodes)
    sigterm = signal.getsignal(signal.SIGTERM)
    try:
        yield bootstrap
    finally:
        release_kafka_clients(sigterm)
        down(data_dir)


def release_kafka_clients(sigterm: Any) -> None:
    """Destroy the Kafka clients nothing uses any more, while the broker still answers (librdkafka logs
    "Connection refused" for every client left after it stops).

    Airflow's in-process task runner (``dag.test()``) leaves its SIGTERM handler installed, a closure over
    the last task instance, so that task's hooks and their clients outlive the run: the handler from
    before is put back, then reference cycles are collected.

    :param sigterm: the SIGTERM handler to restore (``signal.getsignal(signal.SIGTERM)`` taken earlier).
    """
    if signal.getsignal(signal.SIGTERM) is not sigterm:
        signal.signal(signal.SIGTERM, sigterm)
    gc.collect()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("action", choices=["up", "down"])
    parser.add_argument(
        "--data-dir", type=Path, default=Path(os.environ.get("KSTATE_BROKER_DIR", DEFAULT_DATA_DIR))
    )
    parser.add_argument("--fresh", action="store_true", help="wipe the data folder before starting")
    parser.add_argument("--nodes", type=int, default=1, choices=[1, 3], help="Apache Kafka nodes (1 or 3)")
    args = parser.parse_args(argv)
    if args.action == "down":
        down(args.data_dir)
        return 0
    if args.fresh and args.data_dir.exists():
        down(args.data_dir)
        shutil.rmtree(args.data_dir, ignore_errors=True)
    print(up(args.data_dir, nodes=args.nodes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
