"""A production-shaped Airflow on one machine: PostgreSQL, Redis, the CeleryExecutor with two workers.

    with ProdStack(kafka_config) as stack:      # or stack.start() ... stack.stop()
        print(stack.base_url, stack.username, stack.password)

Every part is a real server on free loopback ports, with its data under ``.kstate/deploy-<tag>/``
(git-ignored):

* PostgreSQL (Debian's ``postgresql``): a private cluster made by ``initdb`` (password authentication, a
  generated password), run as the ``postgres`` user when this process is root (PostgreSQL refuses root);
* Redis (``redis-server``): the Celery broker, no persistence;
* Airflow 3 from its own virtualenv (``.kstate/deploy/venv``: the provider with its ``spark-local``,
  ``celery`` and ``postgres`` extras): ``api-server``, ``scheduler``, ``dag-processor``, ``triggerer`` and
  two ``celery worker`` processes. Each worker reports its own host name (``kstate-worker-1``/``-2``,
  through ``[core] hostname_callable``), so a task instance's ``hostname`` says which worker ran it; the
  Celery result backend is the same PostgreSQL.

Each process runs in its own process group; :meth:`ProdStack.stop` signals those groups by the PIDs it
recorded (SIGTERM, then SIGKILL after a grace period), then any process left carrying this deployment's
``AIRFLOW_HOME`` (a task's ``spark-submit``), then Redis and PostgreSQL, and raises if anything survives.
The PIDs are also written to ``pids.json`` so that ``scripts/deploy_local.py down`` can stop a deployment
whose owner died.
"""

from __future__ import annotations

import base64
import contextlib
import glob
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from kstate_support import ROOT

VENV = ROOT / ".kstate" / "deploy" / "venv"
EXTRAS = "spark-local,celery,postgres"
WORKERS = ("kstate-worker-1", "kstate-worker-2")
COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
HEALTHY = ("metadatabase", "scheduler", "triggerer", "dag_processor")


class StackError(RuntimeError):
    """A part of the deployment did not start, did not answer, or did not stop."""


def worker_hostname() -> str:
    """``[core] hostname_callable`` of the workers: the name this worker was started with."""
    return os.environ.get("KSTATE_WORKER_HOSTNAME") or socket.getfqdn()


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ensure_venv(fresh: bool = False) -> Path:
    """Build (once) the deployment's virtualenv with uv; return its ``bin`` folder."""
    spec = json.dumps({"extras": EXTRAS, "setup.cfg": (ROOT / "setup.cfg").read_text()})
    marker = VENV / ".kstate-spec"
    if fresh or not marker.exists() or marker.read_text() != spec:
        uv = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
        shutil.rmtree(VENV, ignore_errors=True)
        subprocess.run([uv, "venv", "-q", "-p", sys.executable, str(VENV)], check=True)
        install = [uv, "pip", "install", "-q", "--compile-bytecode", "-p", str(VENV / "bin" / "python")]
        subprocess.run([*install, "-e", f"{ROOT}[{EXTRAS}]", "-e", str(ROOT / "support")], check=True)
        marker.write_text(spec)
    return VENV / "bin"


def _pg_bin() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    if not initdb:
        raise StackError(
            "PostgreSQL is not installed: apt-get install -y postgresql (make deploy-local does)"
        )
    return Path(initdb).parent


def _as_owner() -> dict[str, Any]:
    """Popen arguments that drop root to the ``postgres`` user (PostgreSQL refuses to run as root)."""
    return {"user": "postgres", "group": "postgres"} if os.geteuid() == 0 else {}


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _has_env(pid: int, needle: bytes) -> bool:
    try:
        return needle in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False


def _wait(predicate: Any, timeout: float, what: str, interval: float = 0.3) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise StackError(f"{what} not within {timeout:.0f} s")


class ProdStack:
    """PostgreSQL + Redis + Airflow (CeleryExecutor, two workers) on free loopback ports.

    :param kafka_config: librdkafka settings of ``kafka_default``.
    :param dags_folder: the DAGs folder (default: the project's ``dags/``).
    :param env: extra environment for every Airflow process (e.g. shorter heartbeat timeouts).
    :param root: where the data, logs and home go (default ``.kstate/deploy-<tag>``).
    """

    def __init__(
        self,
        kafka_config: Mapping[str, Any],
        *,
        dags_folder: str | Path | None = None,
        env: Mapping[str, str] | None = None,
        root: str | Path | None = None,
        keep: bool = False,
    ) -> None:
        self.kafka_config = dict(kafka_config)
        self.dags_folder = Path(dags_folder or ROOT / "dags")
        self.extra_env = dict(env or {})
        self.root = Path(root) if root else ROOT / ".kstate" / f"deploy-{uuid.uuid4().hex[:6]}"
        self.keep = keep
        self.home = self.root / "airflow"
        self.logs = self.root / "logs"
        self.bin = VENV / "bin"
        self.username = "admin"
        self.password = secrets.token_urlsafe(12)
        self.pg_port = self.redis_port = self.api_port = 0
        self.base_url = ""
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.env: dict[str, str] = {}
        self.started_in = 0.0

    # ------------------------------------------------------------------ the servers

    def _start_postgres(self) -> None:
        pg = _pg_bin()
        data, pwfile = self.root / "pg" / "data", self.root / "pg" / "pw"
        data.mkdir(parents=True)
        self._db_password = secrets.token_hex(16)
        pwfile.write_text(self._db_password + "\n")
        if os.geteuid() == 0:
            shutil.chown(self.root / "pg", "postgres", "postgres")
            for path in (data, pwfile):
                shutil.chown(path, "postgres", "postgres")
        initdb = [str(pg / "initdb"), "-D", str(data), "-U", "airflow", f"--pwfile={pwfile}"]
        initdb += ["--auth=scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8"]
        subprocess.run(initdb, check=True, capture_output=True, **_as_owner())
        pwfile.unlink()
        self.pg_port = free_port()
        args = [
            str(pg / "postgres"),
            "-D",
            str(data),
            "-p",
            str(self.pg_port),
            "-c",
            "listen_addresses=127.0.0.1",
        ]
        args += ["-c", f"unix_socket_directories={self.root / 'pg'}", "-c", "max_connections=200"]
        self._spawn(
            "postgres", args, env={"LC_ALL": "C.UTF-8", "PATH": os.environ.get("PATH", "")}, **_as_owner()
        )
        createdb = [
            str(pg / "createdb"),
            "-h",
            "127.0.0.1",
            "-p",
            str(self.pg_port),
            "-U",
            "airflow",
            "airflow",
        ]
        env = {**os.environ, "PGPASSWORD": self._db_password}

        def created() -> bool:
            return subprocess.run(createdb, env=env, capture_output=True, check=False).returncode == 0

        _wait(created, 60, "PostgreSQL accepting connections")

    def _start_redis(self) -> None:
        server = shutil.which("redis-server")
        if not server:
            raise StackError(
                "redis-server is not installed: apt-get install -y redis-server (make deploy-local does)"
            )
        (self.root / "redis").mkdir()
        self.redis_port = free_port()
        args = [
            server,
            "--port",
            str(self.redis_port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ]
        self._spawn("redis", [*args, "--dir", str(self.root / "redis")], env=dict(os.environ))

        def pong() -> bool:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.redis_port), 1) as s,
            ):
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
            return False

        _wait(pong, 30, "Redis answering PING")

    # ------------------------------------------------------------------ Airflow

    def airflow_env(self) -> dict[str, str]:
        """The environment every Airflow process of the deployment shares."""
        db = f"airflow:{self._db_password}@127.0.0.1:{self.pg_port}/airflow"
        passwords = self.home / "passwords.json"
        passwords.write_text(json.dumps({self.username: self.password}))
        passwords.chmod(0o600)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "VIRTUAL_ENV", "PYSPARK"))}
        env.update(
            {
                "PATH": f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}",
                "AIRFLOW_HOME": str(self.home),
                "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags_folder),
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
                "AIRFLOW__CORE__FERNET_KEY": base64.urlsafe_b64encode(os.urandom(32)).decode(),
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{self.username}:admin",
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"postgresql+psycopg2://{db}",
                "AIRFLOW__CELERY__BROKER_URL": f"redis://127.0.0.1:{self.redis_port}/0",
                "AIRFLOW__CELERY__RESULT_BACKEND": f"db+postgresql://{db}",
                "AIRFLOW__CELERY__WORKER_CONCURRENCY": "4",
                "AIRFLOW__API__HOST": "127.0.0.1",
                "AIRFLOW__API__PORT": str(self.api_port),
                "AIRFLOW__API__BASE_URL": self.base_url,
                "AIRFLOW__API__WORKERS": "1",
                "AIRFLOW__API__SECRET_KEY": secrets.token_hex(16),
                "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
                "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
                "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "90",
                "AIRFLOW_CONN_KAFKA_DEFAULT": json.dumps({"conn_type": "kafka", "extra": self.kafka_config}),
                "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
                "SPARK_LOCAL_IP": "127.0.0.1",
                "PYSPARK_PYTHON": str(self.bin / "python"),
                "PYTHONUNBUFFERED": "1",
                "KSTATE_SNAPSHOT_ROOT": str(self.home / "snapshots"),
                # only the runs somebody triggers (kstate_state_maintenance is @daily otherwise)
                "KSTATE_MAINTENANCE_SCHEDULE": "",
            }
        )
        env.update(self.extra_env)
        return env

    def _spawn(self, name: str, args: list[str], env: Mapping[str, str], **kwargs: Any) -> None:
        self.logs.mkdir(parents=True, exist_ok=True)
        with open(self.logs / f"{name}.log", "ab") as log:
            self.procs[name] = subprocess.Popen(
                args,
                env=dict(env),
                cwd=str(self.root),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: stopped by its PID
                **kwargs,
            )
        self._write_pids()

    def _write_pids(self) -> None:
        pids = {name: proc.pid for name, proc in self.procs.items()}
        (self.root / "pids.json").write_text(json.dumps({"home": str(self.home), "pids": pids}))

    def _start_airflow(self) -> None:
        self.home.mkdir(parents=True)
        self.api_port = free_port()
        self.base_url = f"http://127.0.0.1:{self.api_port}"
        self.env = self.airflow_env()
        airflow = str(self.bin / "airflow")
        migrate = subprocess.run(
            [airflow, "db", "migrate"], env=self.env, capture_output=True, text=True, check=False
        )
        if migrate.returncode != 0:
            raise StackError(f"airflow db migrate failed:\n{migrate.stdout[-3000:]}{migrate.stderr[-3000:]}")
        for component in COMPONENTS:
            self._spawn(component, [airflow, component], self.env)
        for name in WORKERS:
            env = {
                **self.env,
                "KSTATE_WORKER_HOSTNAME": name,
                "AIRFLOW__CORE__HOSTNAME_CALLABLE": "kstate_support.prod_deploy.worker_hostname",
                "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
            }
            self._spawn(name, [airflow, "celery", "worker", "--celery-hostname", f"{name}@%h"], env)

    def _check_running(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise StackError(f"{name} exited with {proc.returncode}:\n{self.log_tail(name)}")

    def _healthy(self) -> bool:
        import httpx

        self._check_running()
        with contextlib.suppress(httpx.HTTPError, ValueError):
            health = httpx.get(f"{self.base_url}/api/v2/monitor/health", timeout=5, trust_env=False).json()
            return all((health.get(k) or {}).get("status") == "healthy" for k in HEALTHY)
        return False

    def _workers_ready(self) -> bool:
        self._check_running()
        return all(" ready." in (self.logs / f"{name}.log").read_text(errors="replace") for name in WORKERS)

    # ------------------------------------------------------------------ lifecycle

    def start(self, timeout: float = 300.0) -> ProdStack:
        """Start PostgreSQL, Redis and Airflow; return when the API reports every component healthy and
        both Celery workers are ready."""
        t0 = time.monotonic()
        self.root.mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o755)
        try:
            self._start_postgres()
            self._start_redis()
            self._start_airflow()
            _wait(
                self._healthy, timeout, "Airflow healthy (api-server, scheduler, triggerer, dag-processor)", 1
            )
            _wait(self._workers_ready, timeout, "both Celery workers ready", 1)
        except BaseException:
            self.stop()
            raise
        self.started_in = time.monotonic() - t0
        return self

    def kill_worker(self, name: str) -> int:
        """SIGKILL worker ``name`` and everything in its process group (its pool and the tasks running
        there), as a crashed machine would; return its PID."""
        proc = self.procs[name]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
        return proc.pid

    def _leftovers(self) -> list[int]:
        needle = f"AIRFLOW_HOME={self.home}".encode()
        me = os.getpid()
        return [
            int(e.name)
            for e in Path("/proc").iterdir()
            if e.name.isdigit()
            and int(e.name) != me
            and _alive(int(e.name))
            and _has_env(int(e.name), needle)
        ]

    def _stop_groups(self, names: list[str], grace: float) -> None:
        """SIGTERM the process groups of ``names``, wait up to ``grace`` s, then SIGKILL what is left."""
        procs = [self.procs[n] for n in names if n in self.procs]
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
            for proc in procs:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, sig)
            deadline = time.monotonic() + wait
            for proc in procs:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(max(0.1, deadline - time.monotonic()))
            if all(proc.poll() is not None for proc in procs):
                break

    def stop(self) -> None:
        """Stop every process this stack started, by the PIDs it recorded; raise if one survives."""
        airflow = [*WORKERS, *reversed(COMPONENTS)]
        self._stop_groups(airflow, grace=15.0)
        for pid in self._leftovers():  # a task's spark-submit in a session of its own
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self._stop_groups(["redis"], grace=5.0)
        # PostgreSQL's "fast" shutdown is SIGINT to the postmaster
        if "postgres" in self.procs and self.procs["postgres"].poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.procs["postgres"].pid, signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.procs["postgres"].wait(20)
        self._stop_groups(["postgres"], grace=5.0)
        survivors = [n for n, p in self.procs.items() if p.poll() is None] + [
            str(p) for p in self._leftovers()
        ]
        if not self.keep:
            shutil.rmtree(self.root, ignore_errors=True)
        if survivors:
            raise StackError(f"left running after stop: {survivors}")

    def __enter__(self) -> ProdStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def log_tail(self, name: str, lines: int = 40) -> str:
        with contextlib.suppress(OSError):
            return "\n".join((self.logs / f"{name}.log").read_text(errors="replace").splitlines()[-lines:])
        return ""

    def worker_log(self, name: str) -> str:
        return (self.logs / f"{name}.log").read_text(errors="replace")


def stop_recorded(root: Path) -> list[str]:
    """Stop the processes a dead owner's stack recorded in ``root/pids.json`` (SIGTERM, then SIGKILL)."""
    record = json.loads((root / "pids.json").read_text())
    stopped = []
    for name, pid in record["pids"].items():
        if not _alive(pid):
            continue
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, sig) if name != "postgres" else os.kill(
                    pid, signal.SIGINT if sig == signal.SIGTERM else sig
                )
            deadline = time.monotonic() + 15
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.2)
            if not _alive(pid):
                break
        stopped.append(f"{name} ({pid})")
    return stopped


@contextlib.contextmanager
def prod_stack(kafka_config: Mapping[str, Any], **kwargs: Any) -> Iterator[ProdStack]:
    """Context-manager form of :class:`ProdStack` (the virtualenv built first)."""
    ensure_venv()
    stack = ProdStack(kafka_config, **kwargs)
    stack.start()
    try:
        yield stack
    finally:
        stack.stop()
