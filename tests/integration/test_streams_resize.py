"""Issue 32, items 2 and 3: a stateful Kafka Streams 4.4 application (``support/streams``) planned and
resized on a real Apache Kafka.

* The plan (``test_the_plan_names_the_streams_application``): with the app running, on the classic protocol
  (a ``consumer`` group with the ``stream`` assignor) and on KIP-1071's streams protocol (a ``streams``
  group the client neither lists nor describes), the plan names its ``application.id``, its co-partitioned
  sources, its changelogs with their store types (key-value for ``count``, window for the ``join``'s two
  stores) and says what the resize does; unacknowledged, it is refused before anything is paused.
* The resize (``test_resize_a_stateful_streams_application``, chaos: ~1-2 min a cell): the app runs under
  live keyed traffic (the Java client's murmur2 placement); the resize stops the producers (a command pair
  holding the traffic), waits until the app consumed everything, stops the app by its driver (a command pair
  around its JVM), grows the sources and changelogs 2 -> 4, re-places each changelog with
  ``spark-submit replace_changelog.py`` (or the same tasks in-process: ``local``; its deep check: every live key in ``murmur2(key) % 4``, the live
  rows those of before), seeds the new source partitions, starts the app and the producers. After more
  traffic: 0 records lost, and each key's count (``count``) or the join's results (``join``) equal a
  from-scratch computation of the test from every acknowledged input record. The app's downtime is measured
  against a plain restart of it (same driver, same traffic).

With ``KSTATE_STREAMS_RESULTS=DIR`` each resize cell writes its numbers to ``DIR/resize-<cell>.json``.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kstate_support import streams
from kstate_support.fakes import plan_request
from kstate_support.streams import KeyedTraffic, StreamsApp

from airflow_provider_kstate.client_piece.murmur2 import partition_for
from airflow_provider_kstate.cluster.admin import ClusterAdmin
from airflow_provider_kstate.cluster.streams_resize import (
    StreamsResize,
    local_replacer,
    spark_submit_replacer,
)
from airflow_provider_kstate.errors import UnsupportedGroupTypeError
from airflow_provider_kstate.increase.drivers import CommandDriver, CommandPairs
from airflow_provider_kstate.increase.plan import build_plan, describe

pytestmark = [pytest.mark.integration]

RATE = 50.0
KEYS = 40
WINDOW_MS = 2000


@pytest.fixture
def topics(admin: Any, make_topic: Any, unique: Any) -> Iterator[dict[str, Any]]:
    """A maker of the test's topics; the app's internal topics are deleted afterwards too."""
    app_ids: list[str] = []
    yield {"make": make_topic, "app_id": lambda name: app_ids.append(unique(name)) or app_ids[-1]}
    internal = [t for t in admin.list_topics(timeout=10).topics if any(t.startswith(a) for a in app_ids)]
    for future in admin.delete_topics(internal).values() if internal else []:
        try:
            future.result(timeout=30)
        except Exception:  # noqa: BLE001 - best-effort clean-up
            pass


def _skip_unless_plain(kafka_config: dict[str, Any]) -> None:
    extra = set(kafka_config) - {"bootstrap.servers"}
    if extra:
        pytest.skip(f"the Streams app takes a bootstrap address only, the cluster needs {sorted(extra)}")


def _app(shape: str, protocol: str, kafka_config: dict[str, Any], topics: Any, run_dir: Path) -> StreamsApp:
    make = topics["make"]
    inputs = [make(f"sr-{shape}-in{i}", partitions=2) for i in range(2 if shape == "join" else 1)]
    output = make(f"sr-{shape}-out", partitions=2)
    app_id = topics["app_id"](f"sr-{shape}-{protocol[:2]}")
    return StreamsApp(
        shape,
        kafka_config["bootstrap.servers"],
        app_id,
        inputs,
        output,
        run_dir,
        protocol=protocol,
        window_ms=WINDOW_MS,
    )


@pytest.mark.parametrize(
    ("shape", "protocol"),
    # make test: the key-value store on the classic protocol; the join's window stores on a streams group
    # repeat the same recognition with other store types and the KIP-1071 path (make chaos).
    [("count", "classic"), pytest.param("join", "streams", marks=pytest.mark.chaos)],
)
def test_the_plan_names_the_streams_application(
    shape: str, protocol: str, kafka_config: dict[str, Any], topics: Any, tmp_path: Path
) -> None:
    _skip_unless_plain(kafka_config)
    app = _app(shape, protocol, kafka_config, topics, tmp_path / "app")
    app_id = app._args["app_id"]
    inputs = app._args["inputs"]
    traffic = KeyedTraffic(kafka_config, inputs, rate=20, keys=10)
    app.start()
    try:
        app.wait_running(120)
        traffic.start()
        time.sleep(3)  # a commit or two: the group has offsets on its sources
        admin = ClusterAdmin(kafka_config)
        with pytest.raises(UnsupportedGroupTypeError, match="acknowledge_streams_groups"):
            build_plan(admin, inputs[0], plan_request(inputs[0], 4))
        plan = build_plan(admin, inputs[0], plan_request(inputs[0], 4, acknowledge_streams_groups=[app_id]))
    finally:
        traffic.stop()
        app.stop()
    print("\n".join(describe(plan)))
    assert plan.groups[app_id].role == "streams" and plan.groups[app_id].type == protocol.upper()
    entry = plan.streams_apps[app_id]
    assert entry.protocol == protocol and entry.sources == sorted(inputs)
    assert (entry.partitions, entry.target, entry.repartitions) == (2, 4, [])
    stores = {c.topic: (c.store_type, c.cleanup_policy, c.partitions) for c in entry.changelogs}
    if shape == "count":
        assert stores == {
            f"{app_id}-KSTREAM-AGGREGATE-STATE-STORE-0000000001-changelog": ("key-value", "compact", 2)
        }
    else:  # a stream-stream join's window stores keep duplicates: cleanup.policy=delete
        assert sorted(stores.values()) == [("window", "delete", 2)] * 2
        assert all("-KSTREAM-JOIN" in t for t in stores)
    text = " ".join(entry.actions)
    assert "re-place" in text and "seed group" in text and "stop the application by its driver" in text
    again = type(plan).from_dict(plan.to_dict())
    assert again.streams_apps == plan.streams_apps


# -- the resize -----------------------------------------------------------------------------------------


class HeldTraffic(KeyedTraffic):
    """Keyed traffic a command pair can hold: ``stop`` touches ``hold`` and waits for ``held`` (everything
    written so far acknowledged); ``start`` removes both, and the traffic goes on with a new producer (a
    producer service started again: it reads the topics' partition counts afresh)."""

    def __init__(self, config: dict[str, Any], topics: list[str], folder: Path, **kw: Any) -> None:
        super().__init__(config, topics, **kw)
        self.config = config
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.held_s = 0.0

    def driver(self) -> CommandDriver:
        hold, held = shlex.quote(str(self.folder / "hold")), shlex.quote(str(self.folder / "held"))
        return CommandDriver(
            name="traffic",
            stop=f"touch {hold}; for i in $(seq 600); do [ -f {held} ] && exit 0; sleep 0.05; done; exit 1",
            start=f"rm -f {hold} {held}",
            timeout=60,
        )

    def held(self) -> bool:
        from confluent_kafka import Producer

        if not (self.folder / "hold").exists():
            return False
        self.producer.flush(30)
        (self.folder / "held").touch()
        paused = time.monotonic()
        while (self.folder / "hold").exists() and not self._halt.is_set():
            time.sleep(0.05)
        self.held_s += time.monotonic() - paused
        self.producer = Producer({**self.config, **PRODUCER})
        return True


PRODUCER = {
    "partitioner": "murmur2_random",
    "linger.ms": 5,
    "acks": "all",
    "enable.idempotence": True,
    "topic.metadata.refresh.interval.ms": 500,
}


def _app_driver(app: StreamsApp, folder: Path) -> CommandDriver:
    """A command pair around the app's JVM, as a team's service manager would run it: ``start`` launches it
    in the background (its pid in a file), ``stop`` SIGTERMs it and waits for it to exit, ``ready`` waits for
    it to be RUNNING with tasks after the events its earlier runs wrote (their count kept by ``start``)."""
    folder.mkdir(parents=True, exist_ok=True)
    pid = shlex.quote(str(folder / "pid"))
    since = shlex.quote(str(folder / "since"))
    events = shlex.quote(str(app.events_file))
    log = shlex.quote(str(app.log_file))
    argv = " ".join(shlex.quote(a) for a in app.argv)
    ready = (
        "import json,sys\n"
        "since=int(open(sys.argv[2]).read() or 0)\n"
        "ev=[json.loads(x) for x in open(sys.argv[1]).read().splitlines()[since:] if x.strip()]\n"
        "sys.exit(0 if any(e['ev']=='state' and e['to']=='RUNNING' and e.get('tasks') for e in ev) else 1)\n"
    )
    (folder / "ready.py").write_text(ready)
    return CommandDriver(
        name="streams-app",
        start=(
            f"(cat {events} 2>/dev/null || true) | wc -l > {since}; "
            f"setsid nohup {argv} >> {log} 2>&1 < /dev/null & echo $! > {pid}"
        ),
        stop=(
            f"p=$(cat {pid} 2>/dev/null) || exit 0; kill -TERM $p 2>/dev/null || exit 0; "
            f"for i in $(seq 300); do kill -0 $p 2>/dev/null || exit 0; sleep 0.1; done; kill -KILL $p; exit 0"
        ),
        ready=f"{shlex.quote(sys.executable)} {shlex.quote(str(folder / 'ready.py'))} {events} {since}",
        timeout=120,
    )


def _timed_restart(pairs: CommandPairs, group: str, driver: CommandDriver) -> float:
    """A plain restart of the app by its driver: seconds from the stop command to its ready check passing."""
    started = time.monotonic()
    pairs.stop({group: driver}, "group")
    failed = pairs.start({group: driver}, "group")
    assert not failed, [f.describe() for f in failed]
    return round(time.monotonic() - started, 3)


def _results(
    traffic: KeyedTraffic, app: Any, kafka_config: dict[str, Any], output: str, stop_app: Any
) -> tuple[list[Any], list[tuple[str, bytes, int]]]:
    """After the traffic stopped: what it wrote and, once the app's output settled, what the app wrote (the
    app stopped by ``stop_app`` either way); no traffic or app error."""
    try:
        assert not traffic.errors, traffic.errors[:3]
        records = traffic.records()

        def read() -> list[tuple[str, bytes, int]]:
            return streams.read_topic(kafka_config, output, timeout=60)

        _settle(read)
        assert app.errors() == [], app.errors()
        return records, read()
    finally:
        stop_app()


def _settle(read: Any, quiet_s: float = 6.0, timeout: float = 60.0) -> None:
    """Wait until the app's output stops growing for ``quiet_s``."""
    deadline = time.monotonic() + timeout
    size, since = len(read()), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(2.0)
        now = len(read())
        if now != size:
            size, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return


@pytest.mark.chaos
@pytest.mark.spark
@pytest.mark.parametrize(
    ("shape", "protocol", "replacer"),
    [
        ("count", "classic", "spark"),
        ("count", "streams", "spark"),
        ("join", "classic", "spark"),
        ("count", "classic", "local"),
        ("join", "streams", "local"),
    ],
)
def test_resize_a_stateful_streams_application(
    shape: str, protocol: str, replacer: str, kafka_config: dict[str, Any], topics: Any, tmp_path: Path
) -> None:
    _skip_unless_plain(kafka_config)
    app = _app(shape, protocol, kafka_config, topics, tmp_path / "app")
    app_id, inputs, output = app._args["app_id"], app._args["inputs"], app._args["output"]
    log = _Log()
    pairs = CommandPairs(inputs[0], log)
    driver = _app_driver(app, tmp_path / "driver")
    traffic = HeldTraffic(kafka_config, inputs, tmp_path / "traffic", rate=RATE, keys=KEYS)
    producers = {"traffic": traffic.driver()}
    assert not pairs.start({app_id: driver}, "group"), log.lines[-3:]
    try:
        traffic.start()
        time.sleep(8)
        restart_s = _timed_restart(pairs, app_id, driver)  # the baseline, on the old layout
        time.sleep(4)
        admin = ClusterAdmin(kafka_config)
        plan = build_plan(admin, inputs[0], plan_request(inputs[0], 4, acknowledge_streams_groups=[app_id]))
        entry = plan.streams_apps[app_id]
        assert entry.sources == sorted(inputs) and entry.changelogs
        before = len(traffic.records())
        resize = StreamsResize(
            app=entry,
            admin=admin,
            kafka_config=kafka_config,
            driver=driver,
            replacer=spark_submit_replacer(
                kafka_config,
                tmp_path / "spark",
                spark_submit=str(Path(sys.executable).parent / "spark-submit"),
                spark_args=("--master", "local[2]", "--conf", "spark.ui.enabled=false"),
            )
            if replacer == "spark"
            else local_replacer(kafka_config),
            producers=producers,
            log=log,
            pairs=pairs,
        )
        result = resize.run()
        time.sleep(10)  # traffic on the new layout, keys on their new partitions
    finally:
        traffic.stop()
    records, out = _results(traffic, app, kafka_config, output, lambda: pairs.stop({app_id: driver}, "group"))
    if shape == "count":
        verdict = streams.count_verdict(records, out)
        exact = verdict["keys_wrong"] == 0 and verdict["lost"] == 0 and verdict["over"] == 0
    else:
        verdict = streams.join_verdict(records, out, inputs[0], inputs[1], WINDOW_MS)
        exact = verdict["missing"] == 0 and verdict["duplicated"] == 0 and verdict["extra"] == 0
    reports = result["replaced"]
    cell = {
        "shape": shape,
        "protocol": protocol,
        "replacer": replacer,
        "sources": "2 -> 4",
        "records_written": len(records),
        "records_before_resize": before,
        "records_in_new_partitions": sum(1 for r in records if r.partition >= 2),
        "verdict": verdict,
        "timings": result["timings"],
        "app_downtime_s": result["timings"]["downtime_s"],
        "plain_restart_s": restart_s,
        "replace": {
            t: {
                k: r["replace"][k] for k in ("records_read", "live_keys", "moved", "seconds", "records_per_s")
            }
            for t, r in reports.items()
        },
        "check": {
            t: {k: r["check"][k] for k in ("live_keys", "misplaced", "digest", "digest_before")}
            for t, r in reports.items()
        },
        "tasks_after": next((e["tasks"] for e in reversed(app.events()) if e.get("tasks")), None),
    }
    print(json.dumps(cell, indent=1))
    results = os.environ.get("KSTATE_STREAMS_RESULTS")
    if results:
        Path(results).mkdir(parents=True, exist_ok=True)
        (Path(results) / f"resize-{shape}-{protocol}-{replacer}.json").write_text(
            json.dumps(cell, indent=1) + "\n"
        )
    assert result["resized"] and not result["start_failures"], result
    assert all(r["ok"] and r["check"]["misplaced"] == 0 for r in reports.values()), reports
    assert all(r["replace"]["moved"] > 0 for r in reports.values()), "some keys must have moved"
    assert cell["records_in_new_partitions"] > 0, cell
    assert cell["tasks_after"] == ["0_0", "0_1", "0_2", "0_3"], cell
    assert exact, cell
    # Independently of the application's own check: every live changelog key, less its window bytes, is a key
    # the test wrote, in murmur2(key) % 4.
    written = {r.key.encode() for r in records}
    for changelog in entry.changelogs:
        suffix = {"key-value": 0, "window": 12, "session": 16}[changelog.store_type]
        live = _live_keys(kafka_config, changelog.topic)
        assert live, changelog.topic
        for key, partition in live.items():
            record_key = key[: len(key) - suffix]
            assert record_key in written and partition_for(record_key, 4) == partition, (changelog.topic, key)


def _live_keys(kafka_config: dict[str, Any], topic: str) -> dict[bytes, int]:
    """``{changelog key: partition}`` of every live key of ``topic`` (read here, read_committed, folded)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            **kafka_config,
            "group.id": f"kstate-live-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    try:
        count = len(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        consumer.assign([TopicPartition(topic, p, 0) for p in range(count)])
        latest: dict[bytes, tuple[int, bool]] = {}
        done: set[int] = set()
        deadline = time.monotonic() + 60
        while len(done) < count and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=0.5):
                if msg.error() is not None:
                    done.add(msg.partition())
                else:
                    latest[msg.key()] = (msg.partition(), msg.value() is not None)
        assert len(done) == count, f"{topic}: read to the end of {sorted(done)} of {count} partitions only"
        return {k: p for k, (p, live) in latest.items() if live}
    finally:
        consumer.close()


class _Log:
    """A logger keeping the lines (the drivers' output)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def _add(self, msg: str, *args: Any) -> None:
        self.lines.append(msg % args if args else msg)
        print(self.lines[-1])

    info = warning = error = _add
