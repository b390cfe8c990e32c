"""The one broker helper of the tests, the demo and the benchmarks.

:func:`cluster` yields the librdkafka configuration of the cluster to use: the one named by
``KSTATE_BOOTSTRAP_SERVERS`` (a real cluster; extra librdkafka settings such as SASL as JSON in
``KSTATE_KAFKA_CONFIG``), else an embedded broker (noida-db) started here and stopped afterwards.

    python -m kstate_support.broker up   [--data-dir .kstate/broker]   # prints the bootstrap address
    python -m kstate_support.broker down [--data-dir .kstate/broker]

``up`` picks a free loopback port, starts ``noida-db up --only kafka`` with its data in a project-local,
git-ignored folder, waits until the broker answers the Kafka protocol and prints ``127.0.0.1:PORT``.
``down`` stops it with ``noida-db down`` (a SIGTERM to the Python wrapper would leave the binary running).
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

from kstate_support import ROOT

DEFAULT_DATA_DIR = ROOT / ".kstate" / "broker"


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
def cluster(data_dir: Path = DEFAULT_DATA_DIR) -> Iterator[dict[str, Any]]:
    """Yield the librdkafka configuration of the cluster to use: the real one of
    :func:`external_config`, else a fresh embedded broker with its data in ``data_dir`` (stopped after)."""
    config = external_config()
    if config is not None:
        yield config
        return
    with running(data_dir) as bootstrap:
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
    raise RuntimeError(f"embedded broker at {bootstrap} did not answer within {timeout}s: {last}")


def up(data_dir: Path = DEFAULT_DATA_DIR, port: int | None = None, timeout: float = 30.0) -> str:
    """Start the broker (stopping a stale one in ``data_dir`` first) and return its bootstrap address."""
    data_dir.mkdir(parents=True, exist_ok=True)
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
    subprocess.run(
        [_noida(), "down", "--data-dir", str(data_dir)],
        check=False,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


@contextlib.contextmanager
def running(data_dir: Path = DEFAULT_DATA_DIR, fresh: bool = True) -> Iterator[str]:
    """Run a broker for the duration of the block; ``fresh`` wipes its data first."""
    if fresh and data_dir.exists():
        down(data_dir)
        shutil.rmtree(data_dir, ignore_errors=True)
    bootstrap = up(data_dir)
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
    args = parser.parse_args(argv)
    if args.action == "down":
        down(args.data_dir)
        return 0
    if args.fresh and args.data_dir.exists():
        down(args.data_dir)
        shutil.rmtree(args.data_dir, ignore_errors=True)
    print(up(args.data_dir))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
