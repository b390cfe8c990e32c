"""Issue 32, item 1: the naive partition increase (a plain ``CreatePartitions`` of a source topic, nothing
else) under real Kafka Streams 4.4.0 applications, measured.

Three topologies of one app (``support/streams``, :mod:`kstate_support.streams`), each under live keyed
traffic placed as the Java client's default partitioner places it (murmur2 of the key over the partition
count the producer knows, which it refreshes every 0.5 s):

* ``count``: ``groupByKey().count()``, a key-value store with a changelog topic of as many partitions as the
  source had when the app first ran;
* ``join``: an inner stream-stream join of two co-partitioned inputs within a 2 s
  ``JoinWindows.ofTimeDifferenceWithNoGrace`` (two window stores, two changelogs), one input grown, or both;
* ``filter``: stateless.

Each under ``group.protocol=classic`` (the client-side ``StreamsPartitionAssignor``) and ``streams``
(KIP-1071's streams groups: the broker assigns; Apache Kafka 4.4 enables them by default), with
``processing.guarantee=exactly_once_v2``, a 200 ms commit interval and the app's clients refreshing metadata
every second. The inputs go 2 -> 4 partitions 6 s into the traffic, which runs 20 s more; then the app has
up to 45 s to finish what it can. The truth is computed here from every record the broker acknowledged (the
count per key, the join pairs within the window, the even records) and compared with the app's output read
``read_committed``.

Each cell asserts what it measured (:data:`EXPECTED`), so a change in Kafka's behaviour fails it. These are
measurements: marked ``chaos`` (``make chaos``). With ``KSTATE_STREAMS_RESULTS=DIR`` each cell also writes
its numbers to ``DIR/<cell>.json``; ``python -m kstate_support.streams merge DIR`` makes
``docs/measurements/issue32/naive.json`` of them.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kstate_support import streams
from kstate_support.increase_runs import grow
from kstate_support.streams import KeyedTraffic, StreamsApp

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

#: Seconds of traffic before the increase, and after it.
WARM_S = 6.0
OBSERVE_S = 20.0
#: The most the app gets, after the traffic stops, to write what it will (its output stops growing).
SETTLE_S = 45.0
WINDOW_MS = 2000
#: Seconds before the increase after which records may still be in the app's open transaction when it stops.
SETTLED_S = 2.0
RATE = 50.0  # records per second and input topic
KEYS = 40

#: What a changelog check says when a source grew and the store's changelog did not: the client's assignor
#: (classic) and the broker's streams group (KIP-1071).
CHANGELOG_CLASSIC = "changelog has invalid partitions: expected: 4; actual: 2"
CHANGELOG_STREAMS = "changelog has different number of partitions: expected 4, found 2"
STREAMS_EXC = "org.apache.kafka.streams.errors.StreamsException"
TOPOLOGY_EXC = "org.apache.kafka.streams.errors.TopologyException"

#: (shape, which inputs grow, protocol) -> what was measured: the app stops (``stopped``: the class and a
#: part of the message of its uncaught exception, and of the same app's restart) or keeps running with four
#: tasks (``running``), and whether its results end wrong.
EXPECTED: dict[tuple[str, str, str], dict[str, Any]] = {
    ("count", "one", "classic"): {"stopped": (STREAMS_EXC, CHANGELOG_CLASSIC)},
    ("count", "one", "streams"): {"stopped": (TOPOLOGY_EXC, CHANGELOG_STREAMS)},
    # the classic assignor checks the window stores' changelogs before the inputs' co-partitioning
    ("join", "one", "classic"): {"stopped": (STREAMS_EXC, CHANGELOG_CLASSIC)},
    # the broker checks the co-partitioning first
    ("join", "one", "streams"): {
        "stopped": (TOPOLOGY_EXC, "Following topics do not have the same number of partitions")
    },
    ("join", "both", "classic"): {"stopped": (STREAMS_EXC, CHANGELOG_CLASSIC)},
    ("join", "both", "streams"): {"stopped": (TOPOLOGY_EXC, CHANGELOG_STREAMS)},
    ("filter", "one", "classic"): {"running": True},
    ("filter", "one", "streams"): {"running": True},
}


@pytest.fixture
def topics(admin: Any, make_topic: Any, unique: Any) -> Iterator[dict[str, Any]]:
    """A maker of the cell's topics; the app's internal topics (its application id's prefix) are deleted
    afterwards too."""
    app_ids: list[str] = []
    yield {"make": make_topic, "app_id": lambda name: app_ids.append(unique(name)) or app_ids[-1]}
    internal = [t for t in admin.list_topics(timeout=10).topics if any(t.startswith(a) for a in app_ids)]
    if internal:
        for future in admin.delete_topics(internal).values():
            try:
                future.result(timeout=30)
            except Exception:  # noqa: BLE001 - best-effort clean-up
                pass


def _first_failure(app: StreamsApp, since: float) -> dict[str, Any] | None:
    """The first uncaught exception (or ERROR state) after ``since`` (epoch s), with its seconds."""
    for event in app.events():
        if event["t"] / 1000 < since:
            continue
        if event["ev"] == "error":
            return {
                "seconds": round(event["t"] / 1000 - since, 2),
                "class": event["class"],
                "message": event["message"],
                "causes": event["causes"],
            }
        if event["ev"] == "state" and event["to"] in ("PENDING_ERROR", "ERROR"):
            return {"seconds": round(event["t"] / 1000 - since, 2), "class": None, "message": event["to"]}
    return None


def _settle(read: Any, app: StreamsApp) -> int:
    """Wait (at most :data:`SETTLE_S`) until the app's output stops growing for 5 s; return its size."""
    deadline = time.monotonic() + SETTLE_S
    size, since = len(read()), time.monotonic()
    while time.monotonic() < deadline and app.alive():
        time.sleep(2.5)
        now = len(read())
        if now != size:
            size, since = now, time.monotonic()
        elif time.monotonic() - since >= 5.0:
            break
    return size


def _restart(failed: StreamsApp, tmp_path: Path) -> dict[str, Any]:
    """Start the app again as its operator would (same application id, a fresh state dir, no more traffic)
    and report how it ends within 60 s: it fails again (its first error) or runs."""
    app = failed.again(tmp_path / "restart")
    started = time.time()
    app.start()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and app.alive() and app.state() != "RUNNING":
            time.sleep(0.5)
        failure = _first_failure(app, started)
        return {"state": app.state(), "failure": failure}
    finally:
        app.stop()


def _before(
    shape: str,
    records: list[streams.Record],
    out: list[tuple[str, bytes, int]],
    created: float,
    inputs: list[str],
) -> dict[str, Any]:
    """What the app had right before the increase: the records written until :data:`SETTLED_S` before it,
    and how many results of those alone it is missing (0: it was exact until the increase). The last moments
    before the increase are left out: under exactly-once their results sit in the app's open transaction
    (committed every 200 ms, behind its processing lag), aborted when the rebalance the increase starts stops
    the app (a chaos run once: 13 join results of the last records missing)."""
    early = [r for r in records if r.ts / 1000 < created - SETTLED_S]
    if shape == "count":
        last: dict[str, int] = {}
        for key, value, _ in out:
            last[key] = int.from_bytes(value, "big", signed=True)
        truth = streams.count_truth(early)
        return {
            "records_before_increase": len(early),
            "keys_short_of_their_count_before_increase": sum(
                1 for k, n in truth.items() if last.get(k, 0) < n
            ),
        }
    if shape == "join":
        expected = streams.join_truth(early, inputs[0], inputs[1], WINDOW_MS)
    else:
        expected = Counter(str(r.seq) for r in early if r.seq % 2 == 0)
    got = Counter(value.decode() for _, value, _ in out)
    return {"records_before_increase": len(early), "missing_before_increase": sum((expected - got).values())}


def _measure(
    shape: str,
    grown: str,
    protocol: str,
    kafka_config: dict[str, Any],
    admin: Any,
    topics: Any,
    tmp_path: Path,
) -> dict[str, Any]:
    """Run one cell; return what it measured."""
    make = topics["make"]
    inputs = [make(f"st-{shape}-in{i}", partitions=2) for i in range(2 if shape == "join" else 1)]
    output = make(f"st-{shape}-out", partitions=2)
    app = StreamsApp(
        shape,
        kafka_config["bootstrap.servers"],
        topics["app_id"](f"st-{shape}-{protocol}"),
        inputs,
        output,
        tmp_path / "app",
        protocol=protocol,
        window_ms=WINDOW_MS,
    )

    def read() -> list[tuple[str, bytes, int]]:
        return streams.read_topic(kafka_config, output, timeout=60)

    app.start()
    traffic = KeyedTraffic(kafka_config, inputs, rate=RATE, keys=KEYS)
    try:
        app.wait_running(timeout=90)
        tasks_before = next(e["tasks"] for e in app.events() if e["ev"] == "state" and e.get("tasks"))
        traffic.start()
        time.sleep(WARM_S)
        grown_topics = inputs if grown == "both" else inputs[:1]
        created = time.time()
        for topic in grown_topics:
            grow(admin, topic, 4)
        deadline = time.monotonic() + OBSERVE_S
        while time.monotonic() < deadline:
            time.sleep(0.5)
        traffic.stop()
        assert not traffic.errors, traffic.errors[:3]
        _settle(read, app)
        alive_at_end = app.alive()
        state_at_end = app.state()
    finally:
        if traffic.is_alive():
            traffic.stop()
        rc = app.stop()
    restart = _restart(app, tmp_path) if not alive_at_end else None
    records = traffic.records()
    out = read()
    if shape == "count":
        verdict = streams.count_verdict(records, out)
    elif shape == "join":
        verdict = streams.join_verdict(records, out, inputs[0], inputs[1], WINDOW_MS)
    else:
        verdict = streams.filter_verdict(records, out)
    after = [e for e in app.events() if e["ev"] == "state" and e.get("tasks") and e["t"] / 1000 >= created]
    cell = {
        "shape": shape,
        "grown": grown,
        "protocol": protocol,
        "guarantee": "exactly_once_v2",
        "inputs": "2 -> 4" if grown == "both" or shape != "join" else "left 2 -> 4, right 2",
        "failure": _first_failure(app, created),
        "alive_at_end": alive_at_end,
        "state_at_end": state_at_end,
        "exit_code": rc,
        "tasks_before": tasks_before,
        "tasks_after": after[-1]["tasks"] if after else None,
        "states_after": [s for t, s in app.states() if t >= created],
        "restart": restart,
        "records_after_increase": sum(1 for r in records if r.ts / 1000 >= created),
        "records_in_new_partitions": sum(1 for r in records if r.partition >= 2),
        **verdict,
        **_before(shape, records, out, created, inputs),
    }
    print(json.dumps(cell, indent=1))
    if not alive_at_end or cell["failure"]:
        print(app.log_tail(4000))
    results = os.environ.get("KSTATE_STREAMS_RESULTS")
    if results:
        Path(results).mkdir(parents=True, exist_ok=True)
        (Path(results) / f"{shape}-{grown}-{protocol}.json").write_text(json.dumps(cell, indent=1) + "\n")
    return cell


CELLS = [
    ("count", "one", "classic"),
    ("count", "one", "streams"),
    ("join", "one", "classic"),
    ("join", "one", "streams"),
    ("join", "both", "classic"),
    ("join", "both", "streams"),
    ("filter", "one", "classic"),
    ("filter", "one", "streams"),
]


@pytest.mark.parametrize(("shape", "grown", "protocol"), CELLS, ids=["-".join(c) for c in CELLS])
def test_naive_increase_under_kafka_streams(
    shape: str,
    grown: str,
    protocol: str,
    kafka_config: dict[str, Any],
    admin: Any,
    topics: Any,
    tmp_path: Path,
) -> None:
    extra = set(kafka_config) - {"bootstrap.servers"}
    if extra:
        pytest.skip(f"the Streams app takes a bootstrap address only, the cluster needs {sorted(extra)}")
    cell = _measure(shape, grown, protocol, kafka_config, admin, topics, tmp_path)
    expected = EXPECTED[(shape, grown, protocol)]
    summary = {k: v for k, v in cell.items() if k not in ("examples",)}
    if "stopped" in expected:
        cls, text = expected["stopped"]
        failure = cell["failure"]
        assert failure is not None and not cell["alive_at_end"], f"the app did not stop: {summary}"
        assert failure["class"] == cls and text in failure["message"], f"it stopped otherwise: {failure}"
        assert failure["seconds"] < OBSERVE_S, summary
        assert cell["state_at_end"] == "ERROR" and cell["exit_code"] == 1, summary
        # until the increase it was exact; after it, it computed nothing more
        if shape == "count":
            assert cell["keys_short_of_their_count_before_increase"] == 0, summary
            assert cell["keys_wrong"] > 0 and cell["lost"] > 0 and cell["over"] == 0, summary
        else:
            assert cell["missing_before_increase"] == 0, summary
            assert cell["missing"] > 0 and cell["duplicated"] == 0 and cell["extra"] == 0, summary
        # and the same app, started again, stops again with the same check: it needs its internal topics reset
        again = cell["restart"]["failure"]
        assert again is not None and again["class"] == cls, (
            f"the restart did not fail alike: {cell['restart']}"
        )
    else:
        assert cell["failure"] is None and cell["alive_at_end"], f"the app stopped: {summary}"
        assert cell["tasks_after"] == ["0_0", "0_1", "0_2", "0_3"], summary
        # the new partitions' tasks start at their beginning (Streams' auto.offset.reset is earliest): exact
        assert cell["missing"] == 0 and cell["duplicated"] == 0 and cell["extra"] == 0, summary
