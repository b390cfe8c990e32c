"""Issue 32, item 3: the resize of a Kafka Streams application runs its steps in a safe order, and stops
safely: nothing grows before the application drained and stopped; a failed re-placement leaves it stopped.
(On the real application: tests/integration/test_streams_resize.py.)"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from airflow_provider_kstate.cluster import streams_resize
from airflow_provider_kstate.cluster.streams_resize import StreamsResize
from airflow_provider_kstate.errors import StreamsResizeError
from airflow_provider_kstate.increase.drivers import CommandDriver, CommandPairs
from airflow_provider_kstate.increase.streams_apps import StreamsAppPlan, StreamsChangelog

APP = "wordcount"
CHANGELOG = f"{APP}-KSTREAM-AGGREGATE-STATE-STORE-0000000001-changelog"
REPARTITION = f"{APP}-KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition"


class Cluster:
    """Partition counts, ends and the app's committed offsets; every change is logged in ``events``."""

    def __init__(self, events: list[str], lag: int = 0) -> None:
        self.events = events
        self.counts = {"words": 2, REPARTITION: 2, CHANGELOG: 2}
        self.ends = {t: {p: 10 for p in range(n)} for t, n in self.counts.items()}
        self.committed = {
            t: {p: 10 - lag for p in range(n)} for t, n in self.counts.items() if t != CHANGELOG
        }

    def partition_count(self, topic: str) -> int:
        return self.counts[topic]

    def increase_partitions(self, topic: str, total: int, validate_only: bool = False) -> None:
        self.events.append(f"grow {topic} {total}")
        for p in range(self.counts[topic], total):
            self.ends[topic][p] = 0
        self.counts[topic] = total

    def watermarks(self, topic: str, partitions: Any) -> dict[int, tuple[int, int]]:
        return {p: (0, self.ends[topic][p]) for p in partitions}

    def committed_offsets_many(self, groups: Any, topic: str, partitions: int | None = None) -> Iterator[Any]:
        for g in groups:
            yield g, dict(self.committed.get(topic, {}))

    def seed_offsets_many(self, topic: str, offsets: Mapping[str, Mapping[int, int]]) -> None:
        self.events.append(f"seed {topic} {sorted(offsets[APP])}")
        self.committed[topic].update(offsets[APP])


class Runner:
    """Runs the drivers' commands: ``ACTION:NAME``; a stop of the app makes its group EMPTY."""

    def __init__(self, events: list[str], state: dict[str, str]) -> None:
        self.events = events
        self.state = state

    def run(self, command: str, timeout: float, env: Any) -> tuple[int | None, str]:
        action, name = command.split(":")
        self.events.append(f"{action} {name}")
        if name == APP and action == "stop":
            self.state[APP] = "EMPTY"
        if name == APP and action == "start":
            self.state[APP] = "STABLE"
        return 0, ""


def app_plan() -> StreamsAppPlan:
    return StreamsAppPlan(
        application_id=APP,
        protocol="classic",
        sources=["words"],
        changelogs=[
            StreamsChangelog(
                topic=CHANGELOG,
                store="KSTREAM-AGGREGATE-STATE-STORE-0000000001",
                store_type="key-value",
                cleanup_policy="compact",
                partitions=2,
            )
        ],
        repartitions=[REPARTITION],
        partitions=2,
        target=4,
    )


def resize(cluster: Cluster, events: list[str], ok: bool = True, **kw: Any) -> StreamsResize:
    state = {APP: "STABLE"}

    def replacer(changelogs: list[StreamsChangelog], before: int, now: int) -> dict[str, dict[str, Any]]:
        events.append(f"replace {[c.topic for c in changelogs]} {before}->{now}")
        return {c.topic: {"ok": ok, "check": {"misplaced": 0 if ok else 3}} for c in changelogs}

    def driver(name: str) -> CommandDriver:
        return CommandDriver(name=name, stop=f"stop:{name}", start=f"start:{name}")

    return StreamsResize(
        app=app_plan(),
        admin=cluster,
        kafka_config={"bootstrap.servers": "x:9092"},
        driver=driver(APP),
        replacer=replacer,
        producers={"traffic": driver("traffic")},
        pairs=CommandPairs("words", _Log(), Runner(events, state)),
        state_of=lambda g: state[g],
        log=_Log(),
        **kw,
    )


class _Log:
    def info(self, *args: Any) -> None: ...

    warning = error = info


@pytest.fixture(autouse=True)
def reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """The drain's read_committed count: the offset gap (no transaction markers in the fake)."""
    monkeypatch.setattr(
        streams_resize,
        "pending_records",
        lambda _c, _t, ranges: sum(max(0, e - s) for s, e in ranges.values()),
    )


def test_the_resize_runs_its_steps_in_a_safe_order() -> None:
    events: list[str] = []
    cluster = Cluster(events)
    result = resize(cluster, events).run()
    assert events == [
        "stop traffic",
        f"stop {APP}",
        "grow words 4",
        f"grow {REPARTITION} 4",
        f"grow {CHANGELOG} 4",
        f"replace ['{CHANGELOG}'] 2->4",
        "seed words [2, 3]",
        f"seed {REPARTITION} [2, 3]",
        f"start {APP}",
        "start traffic",
    ]
    assert result["resized"] and result["grown"] == ["words", REPARTITION, CHANGELOG]
    assert {"drain", "stop_app", "grow", "replace", "seed", "start_app", "downtime_s"} <= set(
        result["timings"]
    )


def test_an_application_that_does_not_drain_is_started_again_and_nothing_grows() -> None:
    events: list[str] = []
    cluster = Cluster(events, lag=3)
    with pytest.raises(StreamsResizeError, match="did not consume its sources and repartition topics"):
        resize(cluster, events, drain_timeout=0.2).run()
    assert not [e for e in events if e.startswith(("grow", "seed", "replace"))]
    assert events[0] == "stop traffic" and events[-1] == "start traffic"


def test_a_failed_re_placement_leaves_the_application_stopped() -> None:
    events: list[str] = []
    with pytest.raises(StreamsResizeError, match="run the re-placement again"):
        resize(Cluster(events), events, ok=False).run()
    assert events[-1].startswith("replace") and f"start {APP}" not in events


def test_a_resize_to_the_same_count_does_nothing() -> None:
    events: list[str] = []
    plan = app_plan().model_copy(update={"target": 2})
    run = resize(Cluster(events), events)
    run.app = plan
    assert run.run() == {"application_id": APP, "resized": False, "partitions": 2} and events == []


class Others:
    """The other readers of the sources (an IncreaseRun in the operator): their steps land in ``events``."""

    def __init__(self, events: list[str], fail_leave: bool = False) -> None:
        self.events = events
        self.fail_leave = fail_leave

    def leave_for_grow(self) -> dict[str, Any]:
        self.events.append("others leave")
        if self.fail_leave:
            raise StreamsResizeError("a member never left")
        return {"groups": 1}

    def back_after_grow(self) -> dict[str, Any]:
        self.events.append("others seeded and back")
        return {"seeded": 2}

    def wait_drained(self, timeout: float) -> dict[str, Any]:
        self.events.append("others drained")
        return {"drained": True}


def test_the_other_readers_are_out_only_while_the_topics_grow_and_drain_before_the_producers_start() -> None:
    """One run for every reader of the sources: the others leave once the application stopped, before any
    grow; they are seeded and back once the application is seeded, before it starts; the producers start
    only once they consumed the old partitions (nothing is written to a new partition before every reader
    holds an offset there)."""
    events: list[str] = []
    result = resize(Cluster(events), events, others=Others(events)).run()
    assert events == [
        "stop traffic",
        f"stop {APP}",
        "others leave",
        "grow words 4",
        f"grow {REPARTITION} 4",
        f"grow {CHANGELOG} 4",
        f"replace ['{CHANGELOG}'] 2->4",
        "seed words [2, 3]",
        f"seed {REPARTITION} [2, 3]",
        "others seeded and back",
        f"start {APP}",
        "others drained",
        "start traffic",
    ]
    assert result["others"]["seeded"] == 2 and result["others"]["drain"] == {"drained": True}
    assert {"others_leave", "others_out_s", "others_drain"} <= set(result["timings"])


def test_other_readers_that_do_not_leave_change_nothing_and_everyone_starts_again() -> None:
    events: list[str] = []
    with pytest.raises(StreamsResizeError, match="never left"):
        resize(Cluster(events), events, others=Others(events, fail_leave=True)).run()
    assert not [e for e in events if e.startswith(("grow", "seed", "replace"))]
    assert events[-2:] == [f"start {APP}", "start traffic"]
