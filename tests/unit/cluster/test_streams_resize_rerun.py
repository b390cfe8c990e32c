"""Issue 32's leftovers, item 1: a run again continues an interrupted Kafka Streams resize.

A failure after the first grow (a failed deep check, a refused seed, a lost worker) leaves the application
stopped with its topics grown, fully or in part. A run again with the same target plans "no resize" (its
sources are at the target); :meth:`StreamsResize.interrupted` tells the interrupted resize from a finished
one (the group stopped, and a topic below the target, an offset gap, or a misplaced changelog key) and the
run continues it. A running application, or a stopped one without those marks, is left untouched.
(On the real broker, through the DAG: tests/integration/test_streams_resize_continue.py.)
"""

from __future__ import annotations

import pytest
from kstate_support.fakes import plan_request

from airflow_provider_kstate.cluster.streams_resize import StreamsResize
from airflow_provider_kstate.errors import StreamsResizeError
from airflow_provider_kstate.increase.plan import build_plan
from airflow_provider_kstate.increase.streams_apps import StreamsChangelog
from tests.unit.cluster.test_streams_resize_steps import (
    APP,
    CHANGELOG,
    REPARTITION,
    Cluster,
    app_plan,
    reads,  # noqa: F401 - the autouse fixture (the drain's count on the fake)
    resize,
)
from tests.unit.increase.test_streams_apps import COUNT_STORE, count_app


def interrupted_cluster(events: list[str]) -> tuple[Cluster, StreamsResize]:
    """A first run whose deep check failed: everything grown to 4, nothing seeded, the app stopped."""
    cluster = Cluster(events)
    first = resize(cluster, events, ok=False)
    with pytest.raises(StreamsResizeError, match="did not pass its check"):
        first.run()
    assert first.state_of is not None and first.state_of(APP) == "EMPTY"
    events.clear()
    return cluster, first


def resized_cluster(events: list[str]) -> Cluster:
    """A cluster where every topic of the app has 4 partitions and the group holds offsets on all of them
    (a finished resize's layout); the set-up's events are cleared."""
    cluster = Cluster(events)
    for topic in list(cluster.counts):
        cluster.increase_partitions(topic, 4)
    for topic in ("words", REPARTITION):
        cluster.committed[topic].update({2: 0, 3: 0})
    events.clear()
    return cluster


def run_again(cluster: Cluster, events: list[str], first: StreamsResize, ok: bool = True) -> StreamsResize:
    """The same DAG run again: it plans from the current counts (4 -> 4), on the app stopped by the first."""
    again = resize(cluster, events, ok=ok, checker=lambda cs, n: {c.topic: 0 for c in cs})
    again.app = app_plan().model_copy(update={"partitions": 4, "target": 4})
    again.state_of = first.state_of
    return again


def test_a_run_again_after_a_failed_check_continues_the_resize() -> None:
    events: list[str] = []
    cluster, first = interrupted_cluster(events)
    again = run_again(cluster, events, first)
    assert any("no offsets on partitions" in r for r in again.interrupted())
    result = again.run()
    assert result["resized"] and result["continued"] and result["partitions"] == 4
    assert result["grown"] == [] and not result["start_failures"]
    assert events == [
        "stop traffic",
        # every changelog re-placed on all its partitions (it was grown by the first run): idempotent
        f"replace ['{CHANGELOG}'] 4->4",
        "seed words [2, 3]",
        f"seed {REPARTITION} [2, 3]",
        f"start {APP}",
        "start traffic",
    ]
    assert {"replace", "seed", "start_app", "downtime_s"} <= set(result["timings"])
    # and then it is resized and healthy: a third run touches nothing
    events.clear()
    assert again.run() == {"application_id": APP, "resized": False, "partitions": 4} and events == []


def test_a_run_again_grows_what_an_interrupted_grow_left() -> None:
    events: list[str] = []
    cluster = Cluster(events)
    cluster.increase_partitions("words", 4)  # the first run grew the source, then its worker died
    state = {APP: "EMPTY"}
    events.clear()
    again = run_again(cluster, events, resize(cluster, events))
    again.state_of = lambda g: state[g]
    reasons = again.interrupted()
    assert any(f"'{CHANGELOG}': 2" in r and f"'{REPARTITION}': 2" in r for r in reasons), reasons
    result = again.run()
    assert result["continued"] and result["grown"] == [REPARTITION, CHANGELOG]
    assert events[:4] == [
        "stop traffic",
        f"grow {REPARTITION} 4",
        f"grow {CHANGELOG} 4",
        # a changelog not grown before this run is re-placed from its old count, as a first run would
        f"replace ['{CHANGELOG}'] 2->4",
    ]
    assert events[-2:] == [f"start {APP}", "start traffic"]


def test_a_changelog_misplaced_alone_is_continued_by_the_deep_check() -> None:
    events: list[str] = []
    cluster = resized_cluster(events)
    state = {APP: "EMPTY"}
    again = run_again(cluster, events, resize(cluster, events))
    again.state_of = lambda g: state[g]
    checked: list[int] = []

    def checker(changelogs: list[StreamsChangelog], n: int) -> dict[str, int]:
        checked.append(n)
        return {c.topic: 7 for c in changelogs}

    again.checker = checker
    assert again.interrupted() == [f"changelog keys outside murmur2(key) % 4: {{'{CHANGELOG}': 7}}"]
    assert checked == [4] and events == [], "the check reads only"
    assert again.run()["continued"]


@pytest.mark.parametrize("state", ["STABLE", "PREPARING_REBALANCE", "ASSIGNING"])
def test_a_running_application_is_never_continued(state: str) -> None:
    events: list[str] = []
    cluster, first = interrupted_cluster(events)  # even with every mark of an interrupted resize
    again = run_again(cluster, events, first)
    again.state_of = lambda g: state

    def checker(changelogs: list[StreamsChangelog], n: int) -> dict[str, int]:
        raise AssertionError("a running application's changelogs are not even read")

    again.checker = checker
    assert again.run() == {"application_id": APP, "resized": False, "partitions": 4} and events == []


def test_a_stopped_healthy_application_is_left_alone() -> None:
    events: list[str] = []
    cluster = resized_cluster(events)
    again = run_again(cluster, events, resize(cluster, events))
    again.state_of = lambda g: "EMPTY"
    assert again.interrupted() == []
    assert again.run()["resized"] is False and events == []


def test_a_failed_check_again_leaves_it_stopped_and_a_third_run_continues() -> None:
    events: list[str] = []
    cluster, first = interrupted_cluster(events)
    with pytest.raises(StreamsResizeError, match="did not pass its check"):
        run_again(cluster, events, first, ok=False).run()
    assert f"start {APP}" not in events and "start traffic" not in events
    events.clear()
    assert run_again(cluster, events, first).run()["continued"]
    assert events[-2:] == [f"start {APP}", "start traffic"]


def test_records_in_flight_on_a_topic_not_grown_refuse_the_continue() -> None:
    events: list[str] = []
    cluster = Cluster(events)
    cluster.increase_partitions("words", 4)
    cluster.ends[REPARTITION][0] = 15  # 5 records of the old layout wait in the repartition topic
    events.clear()
    again = run_again(cluster, events, resize(cluster, events))
    again.state_of = lambda g: "EMPTY"
    with pytest.raises(StreamsResizeError, match="records in flight"):
        again.run()
    assert events == [], "refused before anything, the producers included"


def test_the_plan_of_a_run_again_accepts_the_layout_an_interrupted_resize_leaves() -> None:
    """Sources at the target, a changelog still below it: a plan (no refusal), whose actions say the run
    continues an interrupted resize."""
    cluster = count_app(topics={"words": (4, "delete"), "counts": (4, "delete"), COUNT_STORE: (2, "compact")})
    plan = build_plan(cluster, "words", plan_request("words", 4, acknowledge_streams_groups=[APP]))
    entry = plan.streams_apps[APP]
    assert (entry.partitions, entry.target) == (4, 4)
    assert [c.partitions for c in entry.changelogs] == [2]
    text = " ".join(entry.actions)
    assert f"changelogs below them: {{'{COUNT_STORE}': 2}}" in text and "continues it" in text


def test_the_plan_still_refuses_a_changelog_out_of_step_on_a_fresh_resize() -> None:
    """A changelog below the sources while the sources are not at the target is no interrupted resize."""
    from airflow_provider_kstate.errors import UnsupportedStreamsTopologyError

    cluster = count_app(topics={"words": (3, "delete"), COUNT_STORE: (2, "compact")})
    with pytest.raises(UnsupportedStreamsTopologyError, match="changelog"):
        build_plan(cluster, "words", plan_request("words", 4, acknowledge_streams_groups=[APP]))


def test_a_changelog_already_grown_is_accepted_when_the_sources_are_not() -> None:
    """The first run grew a changelog, then stopped before the sources grew (a source grown last)."""
    cluster = count_app(topics={COUNT_STORE: (4, "compact")})
    plan = build_plan(cluster, "words", plan_request("words", 4, acknowledge_streams_groups=[APP]))
    assert [c.partitions for c in plan.streams_apps[APP].changelogs] == [4]
