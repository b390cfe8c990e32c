"""A StatsD server for the tests, and Airflow's metrics pointed at it.

:class:`StatsdListener` is a UDP socket on ``127.0.0.1`` (a free port) read by a thread that keeps every
line it receives, parsed (``name:value|type[|@rate][|#tag:value,...]``: StatsD, and DogStatsD's tags).
:func:`airflow_statsd` points this process's Airflow at it for a block, as a worker would be configured
(``AIRFLOW__METRICS__STATSD_ON``, host, port, prefix), and initialises Airflow's ``Stats`` again as the task
runner does when a task starts (``dag.test()`` runs tasks in this process, whose ``Stats`` was set up when
Airflow was imported, with metrics off); on the way out the environment and ``Stats`` are restored.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_provider_kstate.increase.run import switch_of, topic_entry

#: StatsD type codes by name.
COUNTER, GAUGE, TIMER = "c", "g", "ms"


@dataclass(frozen=True)
class Sample:
    """One received metric: its full name (prefix included), value, StatsD type and DogStatsD tags."""

    name: str
    value: float
    kind: str
    tags: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, line: str) -> Sample | None:
        """Read one StatsD line; None when it is not one."""
        name, sep, rest = line.partition(":")
        fields = rest.split("|")
        if not sep or len(fields) < 2:
            return None
        tags: dict[str, str] = {}
        for extra in fields[2:]:
            if extra.startswith("#"):
                for tag in extra[1:].split(","):
                    key, _, value = tag.partition(":")
                    tags[key] = value
        try:
            return cls(name, float(fields[0]), fields[1], tags)
        except ValueError:
            return None


class StatsdListener:
    """A UDP StatsD server on ``127.0.0.1`` that keeps what it receives (``with`` closes it)."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port: int = self.sock.getsockname()[1]
        self.received: list[Sample] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="statsd-listener", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.sock.recv(65535)
            except TimeoutError:
                continue
            except OSError:
                return
            parsed = [Sample.parse(line) for line in data.decode(errors="replace").splitlines()]
            with self._lock:
                self.received += [s for s in parsed if s is not None]

    def samples(self, prefix: str = "") -> list[Sample]:
        """Every sample received so far whose name starts with ``prefix``."""
        with self._lock:
            return [s for s in self.received if s.name.startswith(prefix)]

    def named(self, name: str) -> list[Sample]:
        """The samples received under exactly ``name``."""
        return [s for s in self.samples(name) if s.name == name]

    def clear(self) -> None:
        """Forget what was received so far."""
        with self._lock:
            self.received.clear()

    def wait(self, predicate: Callable[[StatsdListener], bool], timeout: float = 5.0) -> bool:
        """Wait until ``predicate(self)`` holds (UDP datagrams arrive a moment after they are sent)."""
        deadline = time.monotonic() + timeout
        while not predicate(self):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()

    def __enter__(self) -> StatsdListener:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def initialize_stats() -> None:
    """Set Airflow's ``Stats`` up from the configuration now, as the task runner does at a task's start
    (Airflow 3.3: ``initialize(factory=..., export_legacy_names=...)``; 3.2: ``initialize(factory=...)``)."""
    from airflow.sdk.observability.metrics import stats_utils
    from airflow.sdk.observability.stats import Stats

    from airflow_provider_kstate.compat import conf

    try:
        Stats.initialize(
            factory=stats_utils.get_stats_factory(),
            export_legacy_names=conf.getboolean("metrics", "legacy_names_on", fallback=True),
        )
    except TypeError:  # task SDK 1.2: the factory takes the Stats class, no legacy-name switch
        Stats.initialize(factory=stats_utils.get_stats_factory(Stats))  # type: ignore[call-arg]


@contextmanager
def airflow_statsd(listener: StatsdListener, prefix: str = "airflow") -> Iterator[None]:
    """Send this process's Airflow metrics to ``listener`` for the block (plain StatsD, ``prefix``)."""
    if importlib.util.find_spec("statsd") is None:  # Airflow would fall back to no metrics, and log it
        raise RuntimeError("Airflow's StatsD client is missing: install the test extra (statsd)")
    settings = {
        "AIRFLOW__METRICS__STATSD_ON": "True",
        "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
        "AIRFLOW__METRICS__STATSD_PORT": str(listener.port),
        "AIRFLOW__METRICS__STATSD_PREFIX": prefix,
    }
    saved = {key: os.environ.get(key) for key in settings}
    os.environ.update(settings)
    try:
        initialize_stats()
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        initialize_stats()


#: Where the increase's metrics arrive with Airflow's default ``statsd_prefix``.
INCREASE = "airflow.kstate.increase."
_WINDOW, _STEP = "safe_partition_increase.pause_window", "safe_partition_increase.seed_offsets"


def name_part(value: str) -> str:
    """An id as it appears in a name carrying ids (as ``airflow_provider_kstate.metrics.name_part``)."""
    return re.sub(r"[^a-zA-Z0-9_-]", "_", value.replace(".", "__"))


def received_increase(listener: StatsdListener, topic: str, group: str) -> dict[str, Any]:
    """One run's increase metrics as ``listener`` received them (Airflow's default prefix): each one's
    ``(value, StatsD type)`` under its tagged name, and whether the name carrying the ids came too."""
    names = {
        "created": "partitions_created",
        "seeded": "partitions_seeded",
        "downtime": "group_downtime",
        "barrier_hold": "barrier_hold",
        "verify_ok": "verify.ok",
        "verify_failed": "verify.failed",
    }
    ids = {key: [topic, group] if key == "downtime" else [topic] for key in names}
    out: dict[str, Any] = {}
    for key, name in names.items():
        out[key] = [(s.value, s.kind) for s in listener.named(INCREASE + name)]
        with_ids = listener.named(".".join([INCREASE + name, *(name_part(i) for i in ids[key])]))
        out[f"{key}_with_ids"] = [(s.value, s.kind) for s in with_ids]
    return out


def recorded_increase(dr: Any, group: str) -> dict[str, Any]:
    """The same numbers as one run recorded them (XCom, ``progress.json``), in the shape of
    :func:`received_increase`: timers in milliseconds, as StatsD carries them."""
    window = _task_xcom(dr, _WINDOW)
    seed = window or _task_xcom(dr, _STEP)
    plan = _task_xcom(dr, "safe_partition_increase.plan")
    topic = plan["topic"]
    switch = switch_of(window or _task_xcom(dr, "safe_partition_increase.scale_producers"), topic)
    entry = run_progress(dr, topic)["groups"][group]
    created = plan["target_partitions"] - plan["original_partitions"]
    out = {
        "created": [(float(created), COUNTER)],
        "seeded": [(float(seed["seeded"]), COUNTER)],
        "downtime": [(float(_served_at(entry) - entry["out_since"]), TIMER)],
        "barrier_hold": [(round(switch["hold_to_switch_s"] * 1000, 4), TIMER)],
        "verify_ok": [(1.0, COUNTER)],
        "verify_failed": [],
    }
    return {**out, **{f"{key}_with_ids": value for key, value in out.items()}}


def run_progress(dr: Any, topic: str) -> dict[str, Any]:
    """One run's ``progress.json`` for ``topic`` (beside the seed report of its window or seed step)."""
    seed = _task_xcom(dr, _WINDOW) or _task_xcom(dr, _STEP)
    return json.loads((Path(topic_entry(seed, topic)["report_uri"]).parent / "progress.json").read_text())


def _served_at(entry: dict[str, Any]) -> int:
    """When a group's service was back (``progress.json``): processing, else held, else asked back."""
    return int(entry.get("processing_at") or entry.get("held_at") or entry["back_at"])


def _task_xcom(dr: Any, task_id: str) -> Any:
    ti = dr.get_task_instance(task_id)
    return None if ti is None else ti.xcom_pull(task_ids=task_id)
