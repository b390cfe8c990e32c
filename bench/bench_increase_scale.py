"""Benchmark the safe partition increase at scale: target partitions x consumer groups (not a timed test).

    .venv/bin/python bench/bench_increase_scale.py                 # the grid, plain and with ~2 ms RTT
    .venv/bin/python bench/bench_increase_scale.py --quick         # 8x1 and 512x24 only (development)
    .venv/bin/python bench/bench_increase_scale.py --cells 4096x100 --rtt off
    .venv/bin/python bench/bench_increase_scale.py --cells 4096x100 --rtt-one-way-ms 2.8 --no-alone --trace \
        --rounds 2 --revisions before=/tmp/before after=/tmp/after   # two trees, interleaved, each call timed

Each cell ``NxG`` grows a topic from ``max(1, N // 64)`` to ``N`` partitions with the project's DAG
``kstate_partition_increase`` (``dag.test(run_conf={"topic", "partitions"})``, groups discovered), while
``G`` groups have committed offsets on the topic: most are OFFLINE (offsets committed with
``AdminClient.alter_consumer_group_offsets``, no member), 2 (1 when ``G == 1``) are LIVE: 2
``ControlledConsumer``s each, ``auto.offset.reset=latest``, while a keyed producer (``murmur2_random``)
writes 200 messages/s all the time.

Per cell, each DAG run in a FRESH subprocess (own ``AIRFLOW_HOME`` with a copy of a metadata DB migrated
once per bench), measured:

* **window** — the live consumers' downtime, in the consumer threads (``traffic.Timeline``, the definition
  of ``bench_partition_increase.py``): first live consumer stops -> every live group's consumers hold all
  ``N`` partitions again (per group; the cell's window spans the earliest start to the latest end);
* **restart** — a plain restart of the same live consumers (every consumer ``close()``s, new
  ControlledConsumers of the same groups subscribe, all groups at once), same definition: once before the
  safe run (at the original count) and twice after it (at ``N``); ratio = window / median restart at ``N``;
* **whole run** — ``dag.test()`` wall time in the fresh process: it includes the start-up a first
  ``dag.test()`` in a process pays (the in-process API server, reported as ``first_task_start_s``), as
  ``airflow dags test`` does; also the DagRun's own duration (start -> end date) and seconds per task;
* **task log** bytes and lines per task and in total: ``dag.test()`` writes no task log files, it prints
  each task's log between its "[DAG TEST] starting/end task" lines; counted there, less the in-process API
  server's lines (``all_*``: with them);
* **XCom** bytes per task (the ``xcom`` table of that run: length of the stored value);
* **peak RSS** of the subprocess: the kernel's high-water mark of its own memory since it started
  (``VmHWM`` in ``/proc/self/status``), also before ``dag.test()`` (the DagBag and Airflow's imports).
  Not ``ru_maxrss``: Linux carries a parent's RSS at ``fork`` into the child's ``ru_maxrss`` across
  ``exec``, so a run started from this bench (which holds the live consumers, ~260 MB) reported the bench's
  size, not its own. ``RUSAGE_CHILDREN`` is kept as ``children_maxrss_mb`` (the DAG run forks none);
* **state** (a failed run is reported, not hidden), **lost** messages of the live consumers (must be 0),
  and the **setup** time (topic, offsets, consumers).

``--rtt`` runs the grid once more with the same broker in a private network namespace behind a
delaying TCP proxy (``bench/_delay_proxy.py``): ~2 ms added to every round trip, measured with a trivial
request with and without. Prints tables and writes ``bench/results/increase_scale.json``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kstate_support import airflow_env as support_airflow
from kstate_support import bench
from kstate_support.bench import Column, progress

ROOT = Path(__file__).resolve().parent.parent

RESULTS = bench.results_path("increase_scale")
QUICK_RESULTS = bench.results_path("increase_scale-quick")
DAG_ID = "kstate_partition_increase"
GRID = ["8x1", "512x24", "4096x100", "8192x200"]
QUICK = ["8x1", "512x24"]
CHECK_INTERVAL = 0.2  # the ControlledConsumers' reaction time, as in bench_partition_increase
CONSUMERS_PER_GROUP = 2
#: Plain restarts at the target count after the safe run (the ratio's denominator is their median); one
#: more runs before the safe run, at the original count.
RESTARTS_AFTER = 2
RATE = 200
#: Targets of issue 9 at 4,096 x 100.
TARGETS = {
    "window_s": 2.0,
    "window_over_restart": 5.0,
    "whole_run_s": 20.0,
    "log_lines": 2000,
    "log_bytes": 1_000_000,
    "xcom_task_bytes": 64 * 1024,
    "peak_rss_mb": 300.0,
}
TARGET_CELL = "4096x100"


# ---------------------------------------------------------------------------------------------------
# The child: one DAG run in a fresh process.


def _xcom_bytes(dag_id: str, run_id: str) -> dict[str, int]:
    from airflow.utils.session import create_session
    from sqlalchemy import text

    query = text(
        "SELECT task_id, SUM(LENGTH(CAST(value AS BLOB))) FROM xcom"
        " WHERE dag_id = :dag AND run_id = :run GROUP BY task_id"
    )
    with create_session() as session:
        rows = session.execute(query, {"dag": dag_id, "run": run_id}).all()
    return {str(task).rsplit(".", 1)[-1]: int(size or 0) for task, size in rows}


def _task_states(dr: Any) -> dict[str, str]:
    return {ti.task_id: str(ti.state) for ti in dr.get_task_instances()}


def _peak_rss_mb() -> float:
    """This process's peak RSS since it started (``VmHWM``); ``ru_maxrss`` where there is no ``/proc``."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _cpu_s() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


#: The window's calls a ``--trace`` run times (class path -> methods; every public one when empty).
TRACED: dict[str, tuple[str, ...]] = {
    "airflow_provider_kstate.increase.run:IncreaseRun": (
        "pause",
        "leave",
        "wait_empty",
        "increase",
        "seed",
        "resume",
        "require_offsets",
        "scale",
    ),
    "airflow_provider_kstate.increase.steps:TopicSteps": (
        "pin",
        "increase",
        "seed",
        "_check_empty",
        "_committed",
        "_log_starts",
        "_record",
        "require_offsets",
        "missing",
        "partition_count",
        "scale",
        "wait_for_leaders",
        "announce_grow",
    ),
    "airflow_provider_kstate.increase.key_order:KeyOrderSwitch": ("announce", "switch", "_end_offsets"),
    "airflow_provider_kstate.cluster.admin:ClusterAdmin": (),
    "airflow_provider_kstate.cluster.control:Controller": (),
}


class Tracer:
    """Times the window's calls in a DAG run's process (``--trace``): ``(name, start, end, depth)`` per call,
    on ``time.monotonic()``, nested calls one level deeper; written as JSON when the process ends. Which
    step the live groups' seconds out go to, and how many requests each makes."""

    def __init__(self) -> None:
        import threading

        self.events: list[tuple[str, float, float, int, str]] = []
        self.local = threading.local()

    def wrap(self, cls: Any, name: str) -> None:
        import functools

        original = getattr(cls, name)
        label = f"{cls.__name__}.{name}"

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            import threading

            depth = getattr(self.local, "depth", 0)
            self.local.depth = depth + 1
            start = time.monotonic()
            try:
                return original(*args, **kwargs)
            finally:
                self.local.depth = depth
                thread = threading.current_thread().name
                self.events.append((label, start, time.monotonic(), depth, thread))

        setattr(cls, name, timed)

    def install(self) -> None:
        import importlib
        import inspect

        for path, methods in TRACED.items():
            module, name = path.split(":")
            cls = getattr(importlib.import_module(module), name)
            wanted = methods or tuple(
                n for n, f in vars(cls).items() if not n.startswith("_") and inspect.isfunction(f)
            )
            for method in wanted:
                self.wrap(cls, method)

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(self.events))


def trace_summary(events: list[list[Any]]) -> dict[str, Any]:
    """The live groups' window in a :class:`Tracer`'s events: from the run's ``pause`` to the end of its
    first ``resume``, each traced call's count and seconds inside it (nested calls counted in their own
    line too), and the steps of the run and of each topic in order (``[name, start_s, seconds, depth]``)."""
    pauses = [e for e in events if e[0] == "IncreaseRun.pause"]
    resumes = [e for e in events if e[0] == "IncreaseRun.resume"]
    if not pauses or not resumes:
        return {}
    start = min(e[1] for e in pauses)
    end = min(e[2] for e in resumes if e[2] >= start)
    inside = sorted((e for e in events if e[1] >= start and e[2] <= end), key=lambda e: e[1])
    calls: dict[str, dict[str, float]] = {}
    for name, began, ended, _depth, _thread in inside:
        entry = calls.setdefault(name, {"count": 0, "s": 0.0})
        entry["count"] += 1
        entry["s"] = round(entry["s"] + ended - began, 4)
    steps = [
        [name, round(began - start, 4), round(ended - began, 4), depth]
        for name, began, ended, depth, _thread in inside
        if not name.startswith(("ClusterAdmin.", "Controller.")) or depth <= 2
    ]
    return {"window_s": round(end - start, 4), "calls": calls, "steps": steps[:400]}


def _window_xcom(dag_id: str, run_id: str) -> dict[str, Any]:
    """The pause window's ``timings`` and ``retried`` from its XCom (empty when it cannot be read)."""
    from airflow.utils.session import create_session
    from sqlalchemy import text

    query = text(
        "SELECT value FROM xcom WHERE dag_id = :dag AND run_id = :run AND task_id LIKE '%pause_window'"
        " AND key = 'return_value'"
    )
    with contextlib.suppress(Exception), create_session() as session:
        row = session.execute(query, {"dag": dag_id, "run": run_id}).first()
        value = json.loads(row[0]) if row else {}
        value = json.loads(value) if isinstance(value, str) else value
        return {k: value.get(k) for k in ("timings", "retried")}
    return {}


def child_run(topic: str, partitions: int, out: Path) -> int:
    """Run the DAG once in this (fresh) process and write what it measured to ``out`` as JSON (with
    ``KSTATE_BENCH_TRACE``: the window's calls, timed, beside it: :class:`Tracer`)."""
    began = time.monotonic()
    tracer = Tracer() if os.environ.get("KSTATE_BENCH_TRACE") else None
    if tracer is not None:
        tracer.install()
    from airflow.dag_processing.dagbag import DagBag

    code = Path(os.environ.get(CODE_ENV) or ROOT)  # the tree whose package and DAG are measured
    bag = DagBag(dag_folder=str(code / "dags" / "kstate_partition_increase.py"))
    assert not bag.import_errors, bag.import_errors
    dag = bag.get_dag(DAG_ID)
    loaded = time.monotonic()
    base_rss = _peak_rss_mb()
    cpu_before = _cpu_s()
    dr = dag.test(run_conf={"topic": topic, "partitions": partitions})
    ended = time.monotonic()
    result = {
        "state": str(dr.state),
        "run_id": dr.run_id,
        "process_start": began,
        "dag_test_start": loaded,
        "dag_test_end": ended,
        "import_s": loaded - began,
        "dag_test_s": ended - loaded,
        "dagrun_s": (dr.end_date - dr.start_date).total_seconds() if dr.end_date and dr.start_date else None,
        "task_states": _task_states(dr),
        "xcom_bytes": _xcom_bytes(DAG_ID, dr.run_id),
        "window_xcom": _window_xcom(DAG_ID, dr.run_id),
        "peak_rss_mb": _peak_rss_mb(),
        "children_maxrss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        "rss_before_dag_test_mb": base_rss,
        "dag_test_cpu_s": _cpu_s() - cpu_before,
    }
    out.write_text(json.dumps(result))
    if tracer is not None:
        tracer.write(out.with_name("trace.json"))
    return 0


# ---------------------------------------------------------------------------------------------------
# Airflow homes: migrate once per bench, copy the DB into a fresh home per cell.


def _airflow_env(home: Path, config: dict[str, Any], code: Path = ROOT) -> dict[str, str]:
    """This process's environment plus the project's Airflow home ``home`` (:mod:`kstate_support.airflow_env`)
    with ``config`` as ``kafka_default``; the logging level stays the inherited one (INFO by default).

    :param code: the tree whose ``airflow_provider_kstate`` and ``dags`` the run imports (first on
        ``PYTHONPATH``, ahead of the checkout's: see :func:`code_trees`)."""
    level = os.environ.get("AIRFLOW__LOGGING__LOGGING_LEVEL", "INFO")
    paths = dict.fromkeys([str(code), str(ROOT), os.environ.get("PYTHONPATH", "")])
    return {
        **os.environ,
        **support_airflow.environ(home, config, log_level=level),
        "PYTHONPATH": os.pathsep.join(p for p in paths if p),
        CODE_ENV: str(code),
    }


#: The environment variable that names the code tree a DAG run imports (:func:`code_trees`).
CODE_ENV = "KSTATE_BENCH_CODE"
#: What a code tree holds: the package and the DAGs (the bench and its support stay the checkout's).
CODE_PATHS = ("airflow_provider_kstate", "dags")


def code_trees(base: Path, revisions: list[str]) -> dict[str, Path]:
    """``{name: tree}`` of the code each DAG run imports: with ``--revisions``, each git revision's package
    and DAGs (``git archive``; ``worktree``: a copy of the working tree's now, so that edits made while the
    bench runs do not reach it; ``NAME=DIR``: the tree ``DIR`` as it is), without: the checkout itself.
    Nothing in the checkout changes (no checkout, no worktree): the bench can compare before and after a
    change that is not committed yet, in a working tree others edit too (``before=DIR``: a copy with the
    change's patch reversed)."""
    if not revisions:
        return {"checkout": ROOT}
    trees = {}
    for rev in revisions:
        if "=" in rev:  # NAME=DIR: a tree made by hand (the working tree with a patch applied or reversed)
            name, folder = rev.split("=", 1)
            trees[name] = Path(folder).resolve()
            continue
        tree = base / f"code-{rev}"
        tree.mkdir(parents=True)
        if rev == "worktree":
            for path in CODE_PATHS:
                shutil.copytree(ROOT / path, tree / path, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            archive = subprocess.run(
                ["git", "archive", rev, *CODE_PATHS], cwd=ROOT, check=True, capture_output=True
            ).stdout
            subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
        trees[rev] = tree
    return trees


def migrate_template(base: Path) -> Path:
    """``airflow db migrate`` once into ``base/template``; return the migrated sqlite file."""
    home = base / "template"
    home.mkdir(parents=True)
    progress("airflow db migrate (once per bench)")
    subprocess.run(
        [str(Path(sys.executable).with_name("airflow")), "db", "migrate"],
        check=True,
        capture_output=True,
        env=_airflow_env(home, {"bootstrap.servers": "127.0.0.1:9"}),
        timeout=600,
    )
    return home / "airflow.db"


#: ``dag.test()`` writes no task log files: it runs each task in-process and prints the task's log to the
#: console, between these two lines of its own.
TASK_START = b"[DAG TEST] starting task_id="
TASK_END = b"[DAG TEST] end task task_id="
#: Lines printed during a task that are not the task's log: the in-process execution API server's (in a
#: deployment: the API server's log) and dag.test()'s own.
NOT_TASK_LOG = (b"[airflow.api_fastapi.", b"[airflow.sdk.definitions.dag]")


def _task_of(line: bytes, marker: bytes) -> str:
    return line.split(marker, 1)[1].split(b" ", 1)[0].decode().rsplit(".", 1)[-1]


def _stamp(line: bytes) -> float:
    from datetime import datetime

    return datetime.fromisoformat(line.split(b" ", 1)[0].decode().replace("Z", "+00:00")).timestamp()


def task_seconds(output: Path) -> dict[str, float]:
    """Seconds per task in a ``dag.test()`` output (its start and end lines), and ``first_task_start_s``:
    from the first task's start to its "Task started" (the in-process task runner and execution API's
    start-up, paid once per process, inside the first task's seconds)."""
    seconds: dict[str, float] = {}
    starts: dict[str, float] = {}
    with output.open("rb") as lines:
        for line in lines:
            if TASK_START in line:
                starts[_task_of(line, TASK_START)] = _stamp(line)
            elif TASK_END in line:
                task = _task_of(line, TASK_END)
                seconds[task] = round(_stamp(line) - starts.get(task, _stamp(line)), 3)
            elif b"Task started" in line and "first_task_start_s" not in seconds and starts:
                seconds["first_task_start_s"] = round(_stamp(line) - min(starts.values()), 3)
    return seconds


def log_sizes(output: Path) -> dict[str, dict[str, int]]:
    """Bytes and lines of each task's log in the output of a ``dag.test()`` process, per task id (the task
    group prefix dropped); ``all_bytes`` / ``all_lines`` also count the lines of the API server."""
    sizes: dict[str, dict[str, int]] = {}
    task = None
    with output.open("rb") as lines:
        for line in lines:
            if TASK_START in line:
                task = _task_of(line, TASK_START)
                sizes.setdefault(task, {"bytes": 0, "lines": 0, "all_bytes": 0, "all_lines": 0})
            elif TASK_END in line:
                task = None
            elif task is not None:
                entry = sizes[task]
                entry["all_bytes"] += len(line)
                entry["all_lines"] += 1
                if not any(marker in line for marker in NOT_TASK_LOG):
                    entry["bytes"] += len(line)
                    entry["lines"] += 1
    return sizes


def run_dag_subprocess(
    home: Path,
    db: Path,
    config: dict[str, Any],
    topic: str,
    partitions: int,
    timeout: float,
    code: Path = ROOT,
) -> dict[str, Any]:
    """Run the DAG in a fresh process with its own AIRFLOW_HOME; return the child's measurements (or the
    failure), the task log sizes and the child's peak RSS."""
    home.mkdir(parents=True)
    shutil.copy(db, home / "airflow.db")
    out = home / "result.json"
    command = [sys.executable, __file__, "--child", topic, str(partitions), str(out)]
    with (home / "child-output.log").open("w") as sink:
        try:
            proc = subprocess.run(
                command,
                env=_airflow_env(home, config, code),
                stdout=sink,
                stderr=sink,
                timeout=timeout,
                check=False,
            )
            returncode: int | str = proc.returncode
        except subprocess.TimeoutExpired:
            returncode = f"timeout after {timeout:.0f} s"
    result: dict[str, Any] = json.loads(out.read_text()) if out.exists() else {"state": "no result"}
    result["returncode"] = returncode
    result["logs"] = log_sizes(home / "child-output.log")
    result["task_seconds"] = task_seconds(home / "child-output.log")
    trace = home / "trace.json"
    if trace.exists():
        result["trace"] = trace_summary(json.loads(trace.read_text()))
    return result


# ---------------------------------------------------------------------------------------------------
# A cell: topic, offline groups, live groups, traffic.


def parse_cell(cell: str) -> tuple[int, int]:
    partitions, groups = (int(x) for x in cell.lower().split("x"))
    return partitions, groups


def commit_offline_offsets(config: dict[str, Any], topic: str, groups: list[str], partitions: int) -> None:
    """Commit offset 0 on every original partition for each group: requests of <= 256 partitions each
    (librdkafka's admin offset calls are quadratic in the partition count), all in flight at once."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(config)
    futures = []
    for group in groups:
        for first in range(0, partitions, 256):
            parts = [TopicPartition(topic, p, 0) for p in range(first, min(first + 256, partitions))]
            request = [ConsumerGroupTopicPartitions(group, parts)]
            futures += list(admin.alter_consumer_group_offsets(request, request_timeout=60).values())
    for future in futures:
        future.result(timeout=120)


class LiveGroups:
    """The live groups of a cell: ``ConsumerFleet``s of ControlledConsumers, one ``Timeline`` per group."""

    def __init__(self, config: dict[str, Any], topic: str, groups: list[str]) -> None:
        from kstate_support.traffic import Timeline

        self.config, self.topic, self.groups = config, topic, groups
        self.timelines = {group: Timeline() for group in groups}
        self.generation = 0
        self.errors: list[str] = []
        self.fleets = self._start_all()

    def _start(self, group: str) -> Any:
        from kstate_support.traffic import ConsumerFleet

        return ConsumerFleet(
            self.config,
            self.topic,
            group,
            n=CONSUMERS_PER_GROUP,
            controlled=True,
            check_interval=CHECK_INTERVAL,
            timeline=self.timelines[group],
            name=f"gen{self.generation}-",
        )

    def _start_all(self) -> dict[str, Any]:
        with concurrent.futures.ThreadPoolExecutor(len(self.groups)) as pool:
            return dict(zip(self.groups, pool.map(self._start, self.groups), strict=True))

    def stop(self, timeout: float = 60.0) -> None:
        """Stop every consumer of every live group at once; bounded: consumers still in ``close()`` after
        ``timeout`` are left behind (daemon threads) and a TimeoutError says so."""
        for fleet in self.fleets.values():
            fleet._halt.set()
        deadline = time.monotonic() + timeout
        for fleet in self.fleets.values():
            for thread in fleet._threads:
                thread.join(max(0.0, deadline - time.monotonic()))
        stuck = sum(t.is_alive() for fleet in self.fleets.values() for t in fleet._threads)
        if stuck:
            raise TimeoutError(f"{stuck} live consumers did not close() within {timeout:.0f} s")

    def restart(self) -> None:
        """Every consumer of every live group ``close()``s (all at once), then new ones subscribe."""
        self.stop(timeout=30)
        self.generation += 1
        self.fleets = self._start_all()

    def received(self) -> int:
        return sum(len(fleet.received) for fleet in self.fleets.values())

    def window(self, after: float, partitions: int, timeout: float, each: bool = True) -> dict[str, float]:
        """The live groups' downtime after ``after``: earliest first stop -> latest moment a group holds all
        ``partitions`` again (bounded wait; ``each``: :meth:`kstate_support.traffic.Timeline.window`)."""
        deadline = time.monotonic() + timeout
        found: dict[str, dict[str, float]] = {}
        while time.monotonic() < deadline and len(found) < len(self.groups):
            for group, fleet in self.fleets.items():
                if group not in found:
                    got = self.timelines[group].window(after, set(fleet.members), partitions, each)
                    if got is not None:
                        found[group] = got
            time.sleep(0.02)
        if len(found) < len(self.groups):
            missing = sorted(set(self.groups) - set(found))
            raise TimeoutError(
                f"live groups {missing} did not hold all {partitions} partitions within {timeout} s"
            )
        start = min(w["start"] for w in found.values())
        end = max(w["end"] for w in found.values())
        return {"window": end - start, "start": start, "end": end}


def _warm(live: LiveGroups, timeout: float = 120.0) -> None:
    from kstate_support.traffic import wait_until

    for fleet in live.fleets.values():
        if not wait_until(lambda f=fleet: len(f.received) >= 20, timeout):
            raise RuntimeError(f"live group {fleet.group} received nothing within {timeout} s")
    time.sleep(1.0)  # auto-commit records positions


def _since(live: LiveGroups) -> dict[str, int]:
    marks = {}
    for group, fleet in live.fleets.items():
        with fleet._lock:
            marks[group] = max(fleet.received) + 1
    return marks


def _lost(producer: Any, live: LiveGroups, since: dict[str, int]) -> dict[str, int]:
    from kstate_support.traffic import loss

    return {
        group: len(loss(producer, fleet, since[group], drain_timeout=60))
        for group, fleet in live.fleets.items()
    }


def partition_count(config: dict[str, Any], topic: str) -> int:
    from confluent_kafka.admin import AdminClient

    return len(AdminClient(config).list_topics(topic, timeout=30).topics[topic].partitions)


def measure_restart(live: LiveGroups, partitions: int) -> float | None:
    """A plain restart of the live groups' consumers; None when a group has more consumers than partitions
    (the window's definition needs every consumer to hold a partition) or when it did not complete in
    time (reported in ``live.errors``)."""
    if partitions < CONSUMERS_PER_GROUP:
        return None
    try:
        _warm(live, timeout=60)
        started = time.monotonic()
        live.restart()
        return live.window(started, partitions, timeout=60)["window"]
    except (TimeoutError, RuntimeError) as exc:
        progress(f"restart at {partitions} partitions failed: {exc}")
        live.errors.append(f"restart at {partitions}: {exc}")
        return None


@contextlib.contextmanager
def cell_traffic(config: dict[str, Any], partitions: int, groups: int) -> Iterator[dict[str, Any]]:
    """Create the cell's topic at its original count, commit the offline groups' offsets, start the producer
    and the live groups; yield them with the set-up timings; stop and delete everything afterwards."""
    from kstate_support.traffic import SeqProducer

    original = max(1, partitions // 64)
    began = time.monotonic()
    with bench.scratch_topic(config, f"scale{partitions}x{groups}", original) as topic:
        created = time.monotonic()
        n_live = 1 if groups == 1 else 2
        offline = [f"{topic}-off{i}" for i in range(groups - n_live)]
        commit_offline_offsets(config, topic, offline, original)
        committed = time.monotonic()
        producer = SeqProducer(config, topic, rate=RATE)
        producer.start()
        live = LiveGroups(config, topic, [f"{topic}-live{i}" for i in range(n_live)])
        setup = {
            "topic": topic,
            "original_partitions": original,
            "live_groups": n_live,
            "offline_groups": len(offline),
            "create_topic_s": created - began,
            "commit_offsets_s": committed - created,
            "start_traffic_s": time.monotonic() - committed,
        }
        try:
            yield {"topic": topic, "producer": producer, "live": live, "setup": setup}
        finally:
            with contextlib.suppress(TimeoutError):
                live.stop()
            setup["errors"] = live.errors
            producer.stop()


def _cpu_during(broker_dir: Path, began: dict[str, float | None]) -> dict[str, float | None]:
    """CPU seconds of the broker and of this process (producer, consumers) since ``began``."""
    now = bench.broker_cpu_s(broker_dir)
    broker_s = now - began["broker"] if now is not None and began["broker"] is not None else None
    own_s = sum(os.times()[:2]) - (began["bench"] or 0.0)
    return {"broker_cpu_s": broker_s, "bench_cpu_s": own_s}


def _safe_run(
    ctx: dict[str, Any], config: dict[str, Any], homes: dict[str, Path], partitions: int, timeout: float
) -> dict[str, Any]:
    live: LiveGroups = ctx["live"]
    _warm(live)
    since = _since(live)
    started = time.monotonic()
    cpu = {"broker": bench.broker_cpu_s(homes["broker"]), "bench": sum(os.times()[:2])}
    run = run_dag_subprocess(
        homes["cell"], homes["db"], config, ctx["topic"], partitions, timeout, homes.get("code", ROOT)
    )
    run["cpu_during_run"] = _cpu_during(homes["broker"], cpu)
    try:  # after a failed run the consumers may stay paused (failure_guard): a short bound then
        run["window"] = live.window(started, partitions, timeout=120 if run["state"] == "success" else 15)
    except TimeoutError as exc:
        run["window"] = {"error": str(exc)}
    run["lost"] = _lost(ctx["producer"], live, since)
    run["received"] = live.received()
    return run


def measure_cell(config: dict[str, Any], cell: str, homes: dict[str, Path], timeout: float) -> dict[str, Any]:
    """Set a cell up, then: restart (original count), the safe run, restarts (target count)."""
    partitions, groups = parse_cell(cell)
    row: dict[str, Any] = {"cell": cell, "partitions": partitions, "groups": groups}
    with cell_traffic(config, partitions, groups) as ctx:
        row["setup"] = ctx["setup"]
        original = ctx["setup"]["original_partitions"]
        progress(
            f"{cell}: set up in {sum(v for k, v in ctx['setup'].items() if k.endswith('_s')):.1f} s; restart"
        )
        row["restart_before_s"] = measure_restart(ctx["live"], original)
        progress(f"{cell}: safe run {original} -> {partitions}")
        row["run"] = _safe_run(ctx, config, homes, partitions, timeout)
        progress(f"{cell}: run {row['run']['state']}; restart at {partitions}")
        now = partition_count(config, ctx["topic"])
        row["restarts_after_s"] = [measure_restart(ctx["live"], now) for _ in range(RESTARTS_AFTER)]
    if homes.get("alone", True):
        row["alone"] = alone_run(config, cell, homes, timeout)
    return summarize(row)


def alone_run(config: dict[str, Any], cell: str, homes: dict[str, Path], timeout: float) -> dict[str, Any]:
    """The same increase on a fresh topic of the cell, with every group offline and no traffic: the run's
    cost without the embedded broker's fetch spin.

    The embedded broker answers every Fetch at once, even an empty one (it has no long poll:
    ``fetch.wait.max.ms`` and ``fetch.min.bytes`` are ignored) and has no fetch sessions (KIP-227), so each
    idle live consumer re-sends its whole partition list in a tight loop. Measured here: one idle consumer
    holding 2,048 partitions costs 0.65 of a core in the client and 0.47 in the broker, so the cell's four
    live consumers ask for about 4.5 cores of this 2-core machine for the whole run. A real broker holds an
    idle fetch for ``fetch.wait.max.ms`` and the consumers run on their own machines.
    """
    partitions, groups = parse_cell(cell)
    original = max(1, partitions // 64)
    with bench.scratch_topic(config, f"alone{partitions}x{groups}", original) as topic:
        commit_offline_offsets(config, topic, [f"{topic}-off{i}" for i in range(groups)], original)
        progress(f"{cell}: the same increase alone (no traffic) {original} -> {partitions}")
        started = bench.broker_cpu_s(homes["broker"])
        home = homes["cell"].with_name(homes["cell"].name + "-alone")
        run = run_dag_subprocess(
            home, homes["db"], config, topic, partitions, timeout, homes.get("code", ROOT)
        )
        ended = bench.broker_cpu_s(homes["broker"])
        run["broker_cpu_s"] = ended - started if ended is not None and started is not None else None
        return run


def summarize(row: dict[str, Any]) -> dict[str, Any]:
    """Add the headline numbers of a measured cell."""
    run = row["run"]
    logs = run.get("logs", {})
    xcom = run.get("xcom_bytes", {})
    window = run.get("window", {}).get("window")
    row["window_s"] = window
    restarts = [r for r in row["restarts_after_s"] if r is not None]
    row["restart_s"] = statistics.median(restarts) if restarts else None
    row["ratio"] = window / row["restart_s"] if window is not None and row["restart_s"] else None
    row["whole_run_s"] = run.get("dag_test_s")
    row["dagrun_s"] = run.get("dagrun_s")
    startup = run.get("task_seconds", {}).get("first_task_start_s")
    row["run_less_startup_s"] = row["whole_run_s"] - startup if row["whole_run_s"] and startup else None
    row["log_bytes"] = sum(v["bytes"] for v in logs.values())
    row["log_lines"] = sum(v["lines"] for v in logs.values())
    row["xcom_total_bytes"] = sum(xcom.values())
    row["xcom_max_task"] = max(xcom.items(), key=lambda kv: kv[1], default=("-", 0))
    row["peak_rss_mb"] = run.get("peak_rss_mb")
    row["success"] = run.get("state") == "success"
    row["lost"] = sum(run.get("lost", {}).values())
    row["dag_test_cpu_s"] = run.get("dag_test_cpu_s")
    row["broker_cpu_s"] = run.get("cpu_during_run", {}).get("broker_cpu_s")
    row["setup_s"] = sum(v for k, v in row["setup"].items() if k.endswith("_s"))
    alone = row.get("alone", {})
    row["alone_whole_run_s"] = alone.get("dag_test_s")
    row["alone_peak_rss_mb"] = alone.get("peak_rss_mb")
    row["alone_success"] = alone.get("state") == "success"
    row["alone_xcom_max"] = max(alone.get("xcom_bytes", {}).values(), default=None)
    return row


def failed_cell(cell: str, exc: BaseException) -> dict[str, Any]:
    partitions, groups = parse_cell(cell)
    return {"cell": cell, "partitions": partitions, "groups": groups, "success": False, "error": repr(exc)}


# ---------------------------------------------------------------------------------------------------
# Brokers and the grid.


def base_dir() -> Path:
    """The Airflow homes of a bench run (and partial.json), git-ignored, kept until the next run."""
    return ROOT / ".kstate" / "bench-scale-airflow"


def broker_dir(mode: str) -> Path:
    """The data folder of this run's ``mode`` broker (``plain`` or ``rtt``): one per process, since the
    plain and the delayed broker run side by side, and another bench may run at the same time."""
    return bench.broker_dir(f"bench-scale-{mode}-broker", per_process=True)


def plain_broker() -> contextlib.AbstractContextManager[dict[str, Any]]:
    """The cluster of ``KSTATE_BOOTSTRAP_SERVERS``, else the tests' broker (Apache Kafka) in :func:`broker_dir`."""
    return bench.broker("bench-scale-plain-broker", per_process=True)


@contextlib.contextmanager
def rtt_broker(one_way_ms: float) -> Iterator[dict[str, Any]]:
    from _delay_proxy import delayed_broker
    from kstate_support.broker import external_config

    if external_config() is not None:
        raise SystemExit(
            "--rtt needs a broker started here (a real cluster has its own round trips): use --rtt off"
        )

    with delayed_broker(broker_dir("rtt"), one_way_ms) as config:
        yield config
    shutil.rmtree(broker_dir("rtt"), ignore_errors=True)


def _measure_or_fail(
    config: dict[str, Any], mode: str, cell: str, homes: dict[str, Any], timeout: float
) -> Any:
    try:
        return measure_cell(config, cell, homes, timeout)
    except Exception as exc:  # noqa: BLE001 - a failed cell is reported, the grid goes on
        progress(f"[{mode}] {cell} FAILED: {exc!r}")
        return failed_cell(cell, exc)


def run_grids(
    modes: list[str], cells: list[str], base: Path, db: Path, args: argparse.Namespace
) -> list[Any]:
    """Both brokers run side by side; cell by cell, the plain run and then the delayed one, so that the load
    of a shared machine falls on both alike. With ``--revisions``, each mode's cell runs once per revision,
    interleaved (A B, then B A in the next round): one grid per mode and revision."""
    from _delay_proxy import round_trip_ms

    trees = code_trees(base, args.revisions)
    grids: dict[tuple[str, str], dict[str, Any]] = {}
    with contextlib.ExitStack() as stack:
        configs = {
            mode: stack.enter_context(plain_broker() if mode == "plain" else rtt_broker(args.rtt_one_way_ms))
            for mode in modes
        }
        for mode, config in configs.items():
            trip = round_trip_ms(config)
            for code in trees:
                grids[mode, code] = {"mode": mode, "code": code, "round_trip_ms": trip, "cells": []}
            progress(f"[{mode}] round trip of a trivial request (list_topics): {trip:.2f} ms")
        for round_ in range(args.rounds):
            for cell in cells:
                for mode, config in configs.items():
                    order = list(trees) if round_ % 2 == 0 else list(reversed(trees))
                    for code in order:
                        grids[mode, code]["cells"].append(
                            _measure_one(config, mode, code, cell, trees[code], base, db, args, round_)
                        )
                        _save_partial(args.partial_output, grids)
    return list(grids.values())


def _measure_one(
    config: dict[str, Any],
    mode: str,
    code: str,
    cell: str,
    tree: Path,
    base: Path,
    db: Path,
    args: argparse.Namespace,
    round_: int,
) -> Any:
    """One cell at one revision, with the load average when it started."""
    revision = "" if code == "checkout" else code
    name = "-".join(part for part in (mode, revision, cell, f"r{round_}") if part)
    homes = {"cell": base / name, "db": db, "broker": broker_dir(mode), "code": tree, "alone": args.alone}
    progress(f"[{' '.join(part for part in (mode, revision) if part)}] {cell}")
    load = os.getloadavg()
    row = _measure_or_fail(config, mode, cell, homes, args.timeout)
    row["round"] = round_
    row["load_before"] = [round(x, 2) for x in load]
    row["load_after"] = [round(x, 2) for x in os.getloadavg()]
    return row


def _save_partial(path: Path, grids: dict[Any, Any]) -> None:
    """After each cell: what is measured so far, so that a stopped bench keeps its finished cells."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"partial": True, "grids": list(grids.values())}, indent=2, default=str))


# ---------------------------------------------------------------------------------------------------
# Output.


def _fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


#: A grid's table: one row per measured cell.
GRID_COLUMNS = [
    Column("cell", "cell"),
    Column("setup", "setup_s", ".1f"),
    Column("window", "window_s", ".3f"),
    Column("restart", "restart_s", ".3f"),
    Column("ratio", "ratio", ".2f"),
    Column("run", "whole_run_s", ".1f"),
    Column("dagrun", "dagrun_s", ".1f"),
    Column("run-su", "run_less_startup_s", ".1f"),
    Column("runCPU", "dag_test_cpu_s", ".1f"),
    Column("brkCPU", "broker_cpu_s", ".1f"),
    Column("log ln", "log_lines"),
    Column("log KiB", lambda r: r["log_bytes"] / 1024, ".0f"),
    Column("xcom max", lambda r: r["xcom_max_task"][1] / 1024, ".1f"),
    Column("(task)", lambda r: r["xcom_max_task"][0][:14]),
    Column("xcom KiB", lambda r: r["xcom_total_bytes"] / 1024, ".1f"),
    Column("RSS MB", "peak_rss_mb", ".0f"),
    Column("state", lambda r: "ok" if r["success"] else r["run"].get("state")),
    Column("lost", "lost"),
]


def target_check(row: dict[str, Any]) -> dict[str, Any]:
    """Each target of issue 9 for a measured row: (value, limit, met)."""
    checks = {
        "window_s": ("window_s", row.get("window_s")),
        "window_over_restart": ("window_over_restart", row.get("ratio")),
        "whole_run_s": ("whole_run_s", row.get("alone_whole_run_s")),
        "whole_run_with_traffic_s": ("whole_run_s", row.get("whole_run_s")),
        "log_lines": ("log_lines", row.get("log_lines")),
        "log_bytes": ("log_bytes", row.get("log_bytes")),
        "xcom_task_bytes": ("xcom_task_bytes", row.get("xcom_max_task", ("-", None))[1]),
        "peak_rss_mb": ("peak_rss_mb", row.get("alone_peak_rss_mb")),
        "peak_rss_with_traffic_mb": ("peak_rss_mb", row.get("peak_rss_mb")),
    }
    return {
        name: {"value": value, "limit": TARGETS[key], "met": value is not None and value <= TARGETS[key]}
        for name, (key, value) in checks.items()
    }


def print_grid(grid: dict[str, Any]) -> None:
    """The grid's table, then per cell: a failure, the same increase alone, the targets."""
    bench.print_table(
        [row for row in grid["cells"] if "error" not in row],
        GRID_COLUMNS,
        title=f"\n[{grid['mode']}{' ' + grid['code'] if grid.get('code', 'checkout') != 'checkout' else ''}] round trip of a trivial request: {grid['round_trip_ms']:.2f} ms."
        " window/restart: live consumers' downtime, seconds; ratio = window / restart at the target count;"
        " run = dag.test() wall, dagrun = the DagRun's start -> end, run-su = run less the dag.test start-up;"
        " runCPU = the run's CPU seconds, brkCPU = the broker's during the run (the traffic's share of 2 cores).",
    )
    for row in grid["cells"]:
        if "error" in row:
            print(f"{row['cell']:>9}  FAILED: {row['error'][:150]}")
            continue
        if row.get("alone"):
            print(f"{row['cell']:>9} {_alone_line(row)}")
        if row["cell"] == TARGET_CELL:
            met = ", ".join(
                f"{name} {_fmt(c['value'], '.3g')} <= {c['limit']:g}: {'yes' if c['met'] else 'NO'}"
                for name, c in row["targets"].items()
            )
            print(f"{row['cell']:>9} targets: {met}")


def _alone_line(row: dict[str, Any]) -> str:
    alone = row["alone"]
    return (
        "the same increase alone (every group offline, no traffic): run"
        f" {_fmt(row['alone_whole_run_s'], '.1f')} s, dagrun {_fmt(alone.get('dagrun_s'), '.1f')} s,"
        f" runCPU {_fmt(alone.get('dag_test_cpu_s'), '.1f')} s, brkCPU {_fmt(alone.get('broker_cpu_s'), '.1f')} s,"
        f" peak RSS {_fmt(row['alone_peak_rss_mb'], '.0f')} MB (before dag.test"
        f" {_fmt(alone.get('rss_before_dag_test_mb'), '.0f')}), xcom max"
        f" {_fmt((row['alone_xcom_max'] or 0) / 1024, '.1f')} KiB, {'ok' if row['alone_success'] else alone.get('state')}"
    )


def print_tasks(grid: dict[str, Any]) -> None:
    """Per task: seconds, log lines, log KiB, XCom KiB."""
    print(f"\n[{grid['mode']}] per task: seconds / log lines / log KiB / XCom KiB")
    for row in grid["cells"]:
        if "error" in row:
            continue
        run = row["run"]
        cells = []
        for task, log in run.get("logs", {}).items():
            xcom = run.get("xcom_bytes", {}).get(task, 0) / 1024
            secs = run.get("task_seconds", {}).get(task, 0.0)
            cells.append(f"{task} {secs:.1f}s/{log['lines']}/{log['bytes'] / 1024:.0f}/{xcom:.1f}")
        first = run.get("task_seconds", {}).get("first_task_start_s")
        print(f"{row['cell']:>9} {'; '.join(cells)}; dag.test start-up {_fmt(first, '.1f')} s")


GROWTH = (
    "window_s",
    "restart_s",
    "whole_run_s",
    "run_less_startup_s",
    "log_bytes",
    "xcom_total_bytes",
    "peak_rss_mb",
)


def growth(grid: dict[str, Any]) -> list[dict[str, Any]]:
    """Each cell's cost relative to the grid's first measured cell (and its size: partitions x groups)."""
    rows = [r for r in grid["cells"] if "error" not in r]
    if not rows:
        return []
    first = rows[0]
    out = []
    for row in rows:
        entry: dict[str, Any] = {"cell": row["cell"]}
        entry["size"] = row["partitions"] * row["groups"] / (first["partitions"] * first["groups"])
        for key in GROWTH:
            value, base = row.get(key), first.get(key)
            entry[key] = round(value / base, 2) if value is not None and base else None
        out.append(entry)
    return out


def print_growth(grid: dict[str, Any]) -> None:
    if not grid["growth"]:
        return
    columns = [Column("cell", "cell"), Column("size", "size", ".0f")]
    columns += [Column(key.removesuffix("_s"), key, ".2f") for key in GROWTH]
    title = f"\n[{grid['mode']}] growth relative to {grid['growth'][0]['cell']} (x):"
    bench.print_table(grid["growth"], columns, title=title)


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 2) if values else None


def flatness(grid: dict[str, Any]) -> dict[str, Any]:
    """The window and the restart per group count: does the window stay flat as groups grow?"""
    rows = [r for r in grid["cells"] if r.get("window_s") is not None]
    if len(rows) < 2:
        return {}
    first, last = rows[0], rows[-1]
    return {
        "windows_s": {r["cell"]: round(r["window_s"], 3) for r in rows},
        "window_growth_first_to_last": round(last["window_s"] / first["window_s"], 2),
        "group_growth_first_to_last": last["groups"] / first["groups"],
        # a failed restart has no ratio: the median is over the cells that have one (None when none has)
        "median_ratio": _median([r["ratio"] for r in rows if r.get("ratio") is not None]),
    }


# ---------------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cells", nargs="+", default=GRID, help=f"NxG cells (default: {' '.join(GRID)})")
    parser.add_argument("--quick", action="store_true", help=f"only {' '.join(QUICK)}")
    parser.add_argument("--rtt", choices=["both", "off", "only"], default="both", help="the ~2 ms RTT grid")
    parser.add_argument("--rtt-one-way-ms", type=float, default=1.0, help="delay added in each direction")
    parser.add_argument("--timeout", type=float, default=300.0, help="bound on one DAG run (seconds)")
    parser.add_argument(
        "--output", type=Path, help=f"default: {RESULTS.name} ({QUICK_RESULTS.name} with --quick)"
    )
    parser.add_argument(
        "--revisions",
        nargs="+",
        default=[],
        metavar="REV",
        help="measure each git revision's package and DAGs, interleaved (worktree: the working tree's now;"
        " NAME=DIR: the tree DIR, holding airflow_provider_kstate/ and dags/)",
    )
    parser.add_argument(
        "--rounds", type=int, default=1, help="rounds over the cells (the order of the revisions alternates)"
    )
    parser.add_argument("--no-alone", dest="alone", action="store_false", help="skip the same increase alone")
    parser.add_argument(
        "--trace", action="store_true", help="time the window's calls in each DAG run (run -> trace)"
    )
    parser.add_argument("--child", nargs=3, metavar=("TOPIC", "PARTITIONS", "OUT"), help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def print_side_by_side(result: dict[str, Any]) -> None:
    """Plain vs added RTT, cell by cell: the window and the whole run (without ``--revisions``)."""
    if len(result["grids"]) != 2 or result.get("revisions"):
        return
    plain, rtt = ({r["cell"]: r for r in g["cells"]} for g in result["grids"][:2])
    print(
        f"\nadded round trip: {result['added_round_trip_ms']:.2f} ms; window (s) and whole run (s), plain -> rtt"
    )
    for cell, row in plain.items():
        other = rtt.get(cell, {})
        print(
            f"{cell:>9} window {_fmt(row.get('window_s'), '.3f')} -> {_fmt(other.get('window_s'), '.3f')}"
            f"   run {_fmt(row.get('whole_run_s'), '.1f')} -> {_fmt(other.get('whole_run_s'), '.1f')}"
            f"   run less start-up {_fmt(row.get('run_less_startup_s'), '.1f')}"
            f" -> {_fmt(other.get('run_less_startup_s'), '.1f')}"
        )


def print_revisions(result: dict[str, Any]) -> None:
    """With ``--revisions``: per mode and cell, each revision's window against the restart of the same run
    (ratio), round by round, and the load average when each run started."""
    if not result.get("revisions"):
        return
    print("\nrevisions: live consumers out (window) vs plain restart, s (ratio); load average at the start")
    for grid in result["grids"]:
        for row in grid["cells"]:
            load = row.get("load_before", [None])[0]
            print(
                f"[{grid['mode']:>5}] {row['cell']:>9} r{row.get('round', 0)} {grid['code']:>10}: window"
                f" {_fmt(row.get('window_s'), '.3f')} restart {_fmt(row.get('restart_s'), '.3f')}"
                f" ({_fmt(row.get('ratio'), '.2f')}x), load {_fmt(load, '.1f')},"
                f" {'ok' if row.get('success') else 'FAILED'}, lost {row.get('lost')}"
            )


def code_version() -> dict[str, Any]:
    """The commit the package and DAGs were measured at, and whether they had uncommitted changes."""
    paths = ["airflow_provider_kstate", "dags"]
    return {
        "head": bench.git("rev-parse", "--short", "HEAD"),
        "package_last_commit": bench.git("log", "-1", "--format=%h %s", "--", *paths)[:120],
        "package_uncommitted": bool(bench.git("status", "--porcelain", "--", *paths)),
    }


def _exit_on_sigterm(_signum: int, _frame: Any) -> None:
    raise SystemExit(143)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)  # the brokers and proxies are stopped on the way out
    if args.child:
        return child_run(args.child[0], int(args.child[1]), Path(args.child[2]))
    cells = QUICK if args.quick else args.cells
    output = args.output or (QUICK_RESULTS if args.quick else RESULTS)
    args.partial_output = base_dir() / "partial.json"
    modes = {"both": ["plain", "rtt"], "off": ["plain"], "only": ["rtt"]}[args.rtt]
    if args.trace:
        os.environ["KSTATE_BENCH_TRACE"] = "1"  # the DAG runs inherit it
    result: dict[str, Any] = {
        "cells": cells,
        "targets": TARGETS,
        "target_cell": TARGET_CELL,
        "revisions": args.revisions,
        "rtt_one_way_ms": args.rtt_one_way_ms if "rtt" in modes else None,
        "grids": [],
    }
    started = time.monotonic()
    base = base_dir()  # git-ignored; kept for a look at the task logs
    shutil.rmtree(base, ignore_errors=True)
    db = migrate_template(base)
    for grid in run_grids(modes, cells, base, db, args):
        for row in grid["cells"]:
            if "error" not in row:
                row["targets"] = target_check(row)
        grid["flatness"] = flatness(grid)
        grid["growth"] = growth(grid)
        result["grids"].append(grid)
    result["bench_s"] = time.monotonic() - started
    result["code"] = code_version()
    trips = {g["mode"]: g["round_trip_ms"] for g in result["grids"]}
    if "plain" in trips and "rtt" in trips:
        result["added_round_trip_ms"] = trips["rtt"] - trips["plain"]
    bench.write_results(output, result)
    for grid in result["grids"]:
        print_grid(grid)
        print_tasks(grid)
        print_growth(grid)
        print(f"flatness: {json.dumps(grid['flatness'])}")
    print_side_by_side(result)
    print_revisions(result)
    print(f"\nbench took {result['bench_s']:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
