"""A real Airflow deployment for end-to-end tests: ``airflow standalone`` on a free port with a fresh home.

    with AirflowDeployment(dags_folder=ROOT / "dags", env={"AIRFLOW_CONN_KAFKA_DEFAULT": ...}) as af:
        af.unpause("kstate_partition_increase")
        run = af.trigger("kstate_partition_increase", {"topic": "t", "partitions": 6})
        af.wait_for_run("kstate_partition_increase", run["dag_run_id"], timeout=180)

* ``start()`` picks free loopback ports (API server, worker and triggerer log servers, so that several
  deployments can run side by side), writes nothing outside its home, starts ``airflow standalone`` in
  its own process group and waits — bounded — until ``/api/v2/monitor/health`` reports the metadatabase,
  scheduler, triggerer and dag processor healthy. It fails early with the tail of the log if standalone
  exits.
* ``api`` is an ``httpx.Client`` authenticated as the admin user with a JWT from ``POST /auth/token``
  (the simple auth manager's generated password is read from the home).
* ``stop()`` sends SIGINT to standalone (SIGTERM would orphan the components; a SIGINT to the whole
  group hangs the scheduler joining its LocalExecutor workers), waits — bounded — for every process of the group and every process carrying this home in its
  environment to go, escalates to SIGTERM then SIGKILL only for those processes, and raises if any is
  left.

Every wait in this module has a deadline; nothing here blocks forever.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
STATE_DIR = ROOT / ".kstate"
VENV_BIN = Path(sys.executable).parent
TERMINAL_RUN_STATES = {"success", "failed"}
TERMINAL_TI_STATES = {"success", "failed", "skipped", "upstream_failed", "removed"}


class DeploymentError(RuntimeError):
    """The deployment did not start, did not answer, or did not stop as expected."""


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """Return ``(state, pgrp)`` of a process, or None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name is in parentheses and may contain spaces: split after the last ')'.
    fields = raw[raw.rfind(")") + 2 :].split()
    return fields[0], int(fields[2])


def _has_env(pid: int, needle: bytes) -> bool:
    try:
        return needle in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False


class AirflowDeployment:
    """``airflow standalone`` with a fresh ``AIRFLOW_HOME``, driven over its REST API."""

    def __init__(
        self,
        dags_folder: str | Path,
        *,
        env: Mapping[str, str] | None = None,
        home: str | Path | None = None,
        parallelism: int = 4,
        start_timeout: float = 150.0,
        stop_timeout: float = 8.0,
        keep_home: bool = False,
        save_log_to: str | Path | None = None,
    ) -> None:
        self.dags_folder = Path(dags_folder)
        self.home = Path(home) if home else STATE_DIR / f"airflow-e2e-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.extra_env = dict(env or {})
        self.parallelism = parallelism
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.keep_home = keep_home
        self.save_log_to = Path(save_log_to) if save_log_to else None
        self.port = 0
        self.base_url = ""
        self.username = "admin"
        self.password = ""
        self.env: dict[str, str] = {}
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_file: Any = None
        self._api: httpx.Client | None = None
        self.started_in: float = 0.0
        self.stopped_in: float = 0.0
        self.unclean_stop = False  # True when SIGINT alone did not stop everything in time

    # ------------------------------------------------------------------ lifecycle

    @property
    def snapshot_root(self) -> Path:
        """``KSTATE_SNAPSHOT_ROOT`` of the deployment: the example DAGs' default snapshots go under it."""
        return self.home / "snapshots"

    @property
    def log_path(self) -> Path:
        return self.home / "standalone.log"

    def _build_env(self) -> dict[str, str]:
        # Nothing of the caller's Airflow configuration leaks in (tests/conftest.py points AIRFLOW_HOME
        # and the metadata database at its own dag.test() home): only what is set here and in ``env``.
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
        env.update(
            {
                "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",  # standalone runs `airflow ...`
                "AIRFLOW_HOME": str(self.home),
                "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags_folder),
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__CORE__PARALLELISM": str(self.parallelism),
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{self.username}:admin",
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{self.home}/airflow.db",
                "AIRFLOW__API__HOST": "127.0.0.1",
                "AIRFLOW__API__PORT": str(self.port),
                "AIRFLOW__API__BASE_URL": self.base_url,
                "AIRFLOW__API__WORKERS": "1",
                "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
                "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
                # The DAG files do not change during a test session: parse them once at start-up, not
                # every 30 s (each re-parse writes to SQLite and competes with the tasks' API calls).
                "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "600",
                "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
                # On a busy machine a SQLite-backed API server can take tens of seconds to answer a task's
                # first call; the 5 s default makes the worker retry a request that then succeeds, and
                # the retry's 409/400 fails the task before it starts.
                "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "90",
                "SPARK_LOCAL_IP": "127.0.0.1",
                "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
                "PYTHONUNBUFFERED": "1",
                # The example DAGs' default snapshots (and their Assets) live in this deployment's home.
                "KSTATE_SNAPSHOT_ROOT": str(self.snapshot_root),
            }
        )
        env.update(self.extra_env)
        return env

    def start(self) -> AirflowDeployment:
        if self.proc is not None:
            raise DeploymentError("already started")
        self.home.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.env = self._build_env()
        t0 = time.monotonic()
        self._log_file = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [str(VENV_BIN / "airflow"), "standalone"],
            env=self.env,
            cwd=str(self.home),
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: what it leaves behind is findable
        )
        try:
            self._wait_healthy(self.start_timeout)
            self.password = self._read_password(deadline=time.monotonic() + 30)
            self._api = self._client()
        except BaseException:
            self.stop()
            raise
        self.started_in = time.monotonic() - t0
        return self

    def _wait_healthy(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last: Any = None
        with httpx.Client(base_url=self.base_url, timeout=5, trust_env=False) as c:
            while time.monotonic() < deadline:
                assert self.proc is not None
                if self.proc.poll() is not None:
                    raise DeploymentError(
                        f"airflow standalone exited with {self.proc.returncode}:\n{self.log_tail()}"
                    )
                try:
                    r = c.get("/api/v2/monitor/health")
                    last = r.text
                    if r.status_code == 200:
                        health = r.json()
                        components = ("metadatabase", "scheduler", "triggerer", "dag_processor")
                        if all((health.get(k) or {}).get("status") == "healthy" for k in components):
                            return
                except httpx.HTTPError as exc:
                    last = repr(exc)
                time.sleep(0.5)
        raise DeploymentError(f"not healthy within {timeout}s (last: {last}):\n{self.log_tail()}")

    def _read_password(self, deadline: float) -> str:
        path = self.home / "simple_auth_manager_passwords.json.generated"
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, ValueError):
                passwords = json.loads(path.read_text())
                if self.username in passwords:
                    return str(passwords[self.username])
            time.sleep(0.2)
        raise DeploymentError(f"no password for {self.username!r} in {path}")

    def token(self) -> str:
        """A JWT for the admin user, the way the UI's login form and REST clients get one."""
        r = httpx.post(
            f"{self.base_url}/auth/token",
            json={"username": self.username, "password": self.password},
            timeout=60,
            trust_env=False,
        )
        if r.status_code not in (200, 201):
            raise DeploymentError(f"POST /auth/token -> {r.status_code}: {r.text}")
        return str(r.json()["access_token"])

    def _client(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.base_url,
            headers={"Authorization": f"Bearer {self.token()}"},
            timeout=httpx.Timeout(90.0),  # SQLite under a loaded CI box can stall a request for a while
            trust_env=False,  # loopback only: never through an HTTP(S)_PROXY from the environment
        )

    @property
    def api(self) -> httpx.Client:
        if self._api is None:
            raise DeploymentError("deployment is not started")
        return self._api

    def _leftovers(self, pgid: int) -> list[int]:
        """Live (non-zombie) processes of our group, or carrying our AIRFLOW_HOME in their environment."""
        needle = f"AIRFLOW_HOME={self.home}".encode()
        me = os.getpid()
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == me:
                continue
            pid = int(entry.name)
            stat = _proc_stat(pid)
            if stat is None or stat[0] in ("Z", "X"):
                continue
            if stat[1] == pgid or _has_env(pid, needle):
                found.append(pid)
        return found

    def spark_processes(self) -> list[tuple[int, str]]:
        """Live ``spark-submit`` JVMs and PySpark processes (driver, workers, their children) started by
        this deployment's tasks: ``(pid, command line)`` of each process that carries our ``AIRFLOW_HOME``
        and whose command line names Spark, a Spark application of the package, or PySpark."""
        needle = f"AIRFLOW_HOME={self.home}".encode()
        markers = ("org.apache.spark", "spark_apps/", "pyspark", "spark-submit")
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            pid = int(entry.name)
            stat = _proc_stat(pid)
            if stat is None or stat[0] in ("Z", "X") or not _has_env(pid, needle):
                continue
            with contextlib.suppress(OSError):
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                if any(m in cmd for m in markers):
                    found.append((pid, cmd.strip()))
        return found

    def stop(self) -> None:
        """Stop with SIGINT, bounded; escalate only for our own leftovers; raise if anything survives."""
        if self._api is not None:
            self._api.close()
            self._api = None
        proc, self.proc = self.proc, None
        if proc is None:
            return
        t0 = time.monotonic()
        try:
            # SIGINT to standalone itself (not to the group): it then terminates each component in
            # order. A group-wide SIGINT also hits the LocalExecutor workers and the scheduler hangs
            # joining them.
            survivors = self._signal_and_wait(proc, [proc.pid], signal.SIGINT, self.stop_timeout)
            self.unclean_stop = bool(survivors)
            for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
                if not survivors:
                    break
                survivors = self._signal_and_wait(proc, survivors, sig, grace)
            if survivors:
                raise DeploymentError(f"processes left running after stop: {survivors}")
        finally:
            self.stopped_in = time.monotonic() - t0
            self._cleanup()

    def _signal_and_wait(
        self, proc: subprocess.Popen[bytes], pids: list[int], sig: int, timeout: float
    ) -> list[int]:
        """Send ``sig`` to ``pids``, wait up to ``timeout`` for all of ours to go; return the survivors."""
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + timeout
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))  # also reaps standalone itself
        while (left := self._leftovers(proc.pid)) and time.monotonic() < deadline:
            time.sleep(0.2)
        if proc.poll() is None and proc.pid not in left:
            left.insert(0, proc.pid)
        return left

    def _cleanup(self) -> None:
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        if self.save_log_to is not None:
            with contextlib.suppress(OSError):
                self.save_log_to.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(self.log_path, self.save_log_to)
        if not self.keep_home:
            shutil.rmtree(self.home, ignore_errors=True)

    def __enter__(self) -> AirflowDeployment:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def log_tail(self, lines: int = 60) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""

    # ------------------------------------------------------------------ CLI

    def cli(self, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        """Run ``airflow ARGS`` against this deployment's home and configuration (bounded)."""
        return subprocess.run(
            [str(VENV_BIN / "airflow"), *args],
            env=self.env,
            cwd=str(self.home),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    # ------------------------------------------------------------------ REST helpers

    def get_json(self, path: str, **params: Any) -> Any:
        r = self.api.get(path, params=params or None)
        if r.status_code != 200:
            raise DeploymentError(f"GET {path} -> {r.status_code}: {r.text}")
        return r.json()

    def import_errors(self) -> list[dict[str, Any]]:
        return list(self.get_json("/api/v2/importErrors", limit=100)["import_errors"])

    def wait_for_dags(self, dag_ids: Iterable[str], timeout: float = 90.0) -> None:
        """Wait until the dag processor has parsed every DAG (fail fast on an import error)."""
        wanted = set(dag_ids)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            errors = self.import_errors()
            if errors:
                raise DeploymentError(f"import errors: {json.dumps(errors, indent=1)}")
            found = {d for d in wanted if self.api.get(f"/api/v2/dags/{d}").status_code == 200}
            if found == wanted:
                return
            time.sleep(1)
        raise DeploymentError(f"DAGs {sorted(wanted - found)} not parsed within {timeout}s")

    def unpause(self, dag_id: str) -> None:
        r = self.api.patch(f"/api/v2/dags/{dag_id}", json={"is_paused": False})
        if r.status_code != 200 or r.json()["is_paused"]:
            raise DeploymentError(f"unpause {dag_id} -> {r.status_code}: {r.text}")

    def trigger(self, dag_id: str, conf: Mapping[str, Any]) -> httpx.Response:
        """Trigger a run with exactly the body the UI's trigger form posts (manual run, no logical date)."""
        body = {
            "conf": dict(conf),
            "data_interval_end": None,
            "data_interval_start": None,
            "logical_date": None,
        }
        return self.api.post(
            f"/api/v2/dags/{dag_id}/dagRuns",
            json=body,
            headers={"Referer": f"{self.base_url}/dags/{dag_id}/trigger"},
        )

    def wait_for_run(self, dag_id: str, run_id: str, timeout: float = 180.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        run: dict[str, Any] = {}
        while time.monotonic() < deadline:
            run = self.get_json(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")
            if run["state"] in TERMINAL_RUN_STATES:
                return run
            time.sleep(1)
        tis = {t["task_id"]: t["state"] for t in self.task_instances(dag_id, run_id)}
        raise DeploymentError(f"{dag_id}/{run_id} still {run.get('state')} after {timeout}s: {tis}")

    def watch_run(
        self, dag_id: str, run_id: str, timeout: float = 180.0, interval: float = 1.0
    ) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
        """Wait for the run like :meth:`wait_for_run`, recording every task-instance state change seen.

        Returns the finished run and, per task id, the distinct observations in order: ``state``,
        ``try_number``, and while deferred the ``trigger`` and ``triggerer_job`` the API reports.
        """
        deadline = time.monotonic() + timeout
        seen: dict[str, list[dict[str, Any]]] = {}
        while time.monotonic() < deadline:
            for ti in self.task_instances(dag_id, run_id):
                obs = {
                    "state": ti["state"],
                    "try_number": ti["try_number"],
                    "trigger": ti.get("trigger"),
                    "triggerer_job": ti.get("triggerer_job"),
                }
                history = seen.setdefault(ti["task_id"], [])
                if not history or history[-1]["state"] != obs["state"]:
                    history.append(obs)
            run = self.get_json(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")
            if run["state"] in TERMINAL_RUN_STATES:
                return run, seen
            time.sleep(interval)
        states = {t: h[-1]["state"] for t, h in seen.items()}
        raise DeploymentError(f"{dag_id}/{run_id} not finished after {timeout}s: {states}")

    def event_log(self, dag_id: str, run_id: str, task_id: str | None = None) -> list[dict[str, Any]]:
        """Audit-log events of a run (task state changes are recorded as events), oldest first."""
        params: dict[str, Any] = {"dag_id": dag_id, "run_id": run_id, "order_by": "when", "limit": 200}
        if task_id:
            params["task_id"] = task_id
        return list(self.get_json("/api/v2/eventLogs", **params)["event_logs"])

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        path = f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances"
        return list(self.get_json(path, limit=100)["task_instances"])

    def ti_tries(self, dag_id: str, run_id: str, task_id: str) -> list[dict[str, Any]]:
        """The task instance's history: one record per try (``/tries``)."""
        path = f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/tries"
        return list(self.get_json(path)["task_instances"])

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int = 1) -> str:
        """The task's log as text (the structured log lines flattened to ``event`` + fields)."""
        path = f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{try_number}"
        r = self.api.get(path, params={"full_content": True}, headers={"Accept": "application/json"})
        if r.status_code != 200:
            raise DeploymentError(f"GET {path} -> {r.status_code}: {r.text}")
        content = r.json().get("content")
        return _flatten_log(content)

    def failure_report(self, dag_id: str, run_id: str) -> str:
        """Task states plus the logs of failed tasks, for assertion messages."""
        out = []
        for ti in self.task_instances(dag_id, run_id):
            out.append(f"{ti['task_id']}: {ti['state']} (try {ti['try_number']})")
            if ti["state"] in ("failed", "up_for_retry", "upstream_failed") and ti["try_number"]:
                with contextlib.suppress(DeploymentError):
                    tail = self.task_log(dag_id, run_id, ti["task_id"], ti["try_number"])[-3000:]
                    out.append(tail)
        return "\n".join(out)


def _flatten_log(content: Any) -> str:
    if isinstance(content, str):
        return content
    lines = []
    for item in content or []:
        if isinstance(item, dict):
            extra = {k: v for k, v in item.items() if k not in ("event", "timestamp", "level", "logger")}
            line = f"{item.get('level', '')} {item.get('event', '')}"
            if extra:
                line += " " + json.dumps(extra, default=str)
            lines.append(line)
        else:
            lines.append(str(item))
    return "\n".join(lines)


@contextlib.contextmanager
def airflow_deployment(dags_folder: str | Path, **kwargs: Any) -> Iterator[AirflowDeployment]:
    """Context-manager form of :class:`AirflowDeployment`."""
    dep = AirflowDeployment(dags_folder, **kwargs)
    dep.start()
    try:
        yield dep
    finally:
        dep.stop()
