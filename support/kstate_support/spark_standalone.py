"""A real Spark standalone cluster for tests and benchmarks: a master and workers from the pyspark package.

Executors run a bare Python (a virtualenv with no packages); what the applications need reaches them
from the operators: the provider as a zip (``py_files``) and a venv-pack archive (``archives``).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def bare_python(where: Path) -> str:
    """Create a virtualenv with no packages (same interpreter version as the driver); return its python."""
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(where)], check=True)
    return str(where / "bin" / "python")


@dataclass
class StandaloneCluster:
    """A master and its workers, each a JVM of its own, stopped by PID."""

    work: Path
    workers: int = 2
    worker_memory: str = "1g"
    master_port: int = field(default_factory=free_port)
    ui_port: int = field(default_factory=free_port)
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    def _env(self) -> dict[str, str]:
        return {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_HOME": str(spark_home())}

    def _start(self, name: str, *args: str) -> None:
        log = open(self.work / f"{name}.log", "wb")  # noqa: SIM115 - lives as long as the process
        cmd = [str(spark_home() / "bin" / "spark-class"), *args]
        self.procs.append(
            subprocess.Popen(
                cmd, env=self._env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        )

    def start(self, timeout: float = 90.0) -> StandaloneCluster:
        self.work.mkdir(parents=True, exist_ok=True)
        self._start(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host", "127.0.0.1", "--port", str(self.master_port), "--webui-port", str(self.ui_port),
        )  # fmt: skip
        for i in range(self.workers):
            self.add_worker(i)
        self.wait_workers(self.workers, timeout)
        return self

    def add_worker(self, i: int) -> None:
        work_dir = self.work / f"worker-{i}"
        work_dir.mkdir(exist_ok=True)
        self._start(
            f"worker-{i}",
            "org.apache.spark.deploy.worker.Worker",
            "--host", "127.0.0.1", "--cores", "1", "--memory", self.worker_memory,
            "--webui-port", str(free_port()), "--work-dir", str(work_dir), self.url,
        )  # fmt: skip

    def alive_workers(self) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as resp:
                state = json.load(resp)
        except OSError:
            return 0
        return int(state.get("aliveworkers", 0))

    def wait_workers(self, count: int, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while self.alive_workers() < count:
            if time.monotonic() > deadline:
                logs = {p.name: p.read_text()[-2000:] for p in self.work.glob("*.log")}
                raise RuntimeError(f"{count} Spark workers did not register in {timeout}s: {logs}")
            time.sleep(1)

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        self.procs.clear()
