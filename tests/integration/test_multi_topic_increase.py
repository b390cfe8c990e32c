"""Several co-partitioned topics in one run (issue 32, item 4), on the real broker through ``dag.test()``.

Two topics of equal count (a join's inputs) under live keyed traffic on both, read by one latest-reset
consumer group. First the scenario: growing both naively loses what producers write to the new partitions
of each. Then ``kstate_partition_increase`` with ``topics``: both grown in one run, nothing lost on either,
one lease set (a run on one of the topics meanwhile is refused), the group paused once. The same set
through ``kstate_partition_increase_per_step`` (one task per step), with ``require_approval`` (answered
through the HITL API's own handler; a topic changed while it waits fails the run before anyone is paused)
and with ``key_order=drain`` (each topic's producers held, then started once the group drained), in both
DAGs: nothing lost on either topic.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from kstate_support.increase_runs import DAG_ID, grow, states, xcom
from kstate_support.traffic import ConsumerFleet, SeqProducer, loss, wait_until, warm_up

from airflow_provider_kstate.errors import LeaseHeldError
from airflow_provider_kstate.hooks.lease import KStateLeaseHook
from airflow_provider_kstate.increase.run import switch_of

pytestmark = pytest.mark.integration

RATE = 100.0


@contextlib.contextmanager
def join_traffic(
    config: dict[str, Any], topics: list[str], group: str, controlled: bool, metadata_ms: int = 4000
) -> Iterator[tuple[dict[str, SeqProducer], ConsumerFleet]]:
    """A keyed producer per topic and one group of two latest-reset consumers reading every topic; all
    stopped on the way out (a client left polling when the broker stops takes the process down)."""
    fleet = ConsumerFleet(
        config, topics[0], group, n=2, controlled=controlled, topics=topics, metadata_ms=metadata_ms
    )
    producers: dict[str, SeqProducer] = {}
    try:
        for topic in topics:
            producers[topic] = SeqProducer(config, topic, rate=RATE, controlled=controlled)
            producers[topic].start()
        yield producers, fleet
    finally:
        for producer in producers.values():
            if producer.is_alive():
                producer.stop()
        fleet.stop()


def _reader(fleet: ConsumerFleet, topic: str) -> Any:
    """What ``loss``/``warm_up`` read of a fleet, for one topic of the several it reads."""
    return SimpleNamespace(received=fleet.by_topic[topic], _lock=fleet._lock, group=f"{fleet.group}/{topic}")


def _losses(
    producers: dict[str, SeqProducer], fleet: ConsumerFleet, since: dict[str, int], drain: float = 20.0
) -> dict[str, dict[int, int]]:
    for producer in producers.values():
        producer.stop()
    return {t: loss(p, _reader(fleet, t), since[t], drain_timeout=drain) for t, p in producers.items()}


# make chaos: the loss it shows on each topic is KAFKA-12261's, which make test proves on one topic
# (test_kafka_12261.py's naive test); this one shows it on two at once (37 s in make test's time).
@pytest.mark.chaos
def test_growing_co_partitioned_topics_naively_loses_records_on_each(
    kafka_config: dict[str, Any], admin: Any, make_topic: Any
) -> None:
    """The scenario: 2 -> 4 on both topics under live traffic, nobody paused: new partitions lose records.

    The consumers refresh metadata every 15 s (the producers every 0.5 s): on a loaded 2-core machine the
    4 s of the other tests let them see the new partitions before the producers wrote there, now and then
    (0 lost, twice in four runs). 15 s is a plain consumer's default-sized gap (librdkafka: 5 minutes)."""
    topics = [make_topic("join-a", partitions=2), make_topic("join-b", partitions=2)]
    started = time.monotonic()
    with join_traffic(kafka_config, topics, f"{topics[0]}-g", controlled=False, metadata_ms=15000) as (
        producers,
        fleet,
    ):
        since = {t: warm_up(p, _reader(fleet, t)) for t, p in producers.items()}
        for topic in topics:
            grow(admin, topic, 4)
        wait_until(lambda: all({2, 3} <= set(p.placed.values()) for p in producers.values()), 15)
        time.sleep(3)  # keep producing while the consumers have not seen the new partitions yet
        lost = _losses(producers, fleet, since, drain=15.0)
    print(
        f"NAIVE lost per topic: { {t: len(v) for t, v in lost.items()} } in {time.monotonic() - started:.1f} s"
    )
    for topic in topics:
        assert lost[topic], f"{topic}: the naive increase lost nothing: the scenario did not reproduce"
        assert set(lost[topic].values()) <= {2, 3}, (
            f"{topic}: only new partitions lose records: {lost[topic]}"
        )


def test_one_run_grows_both_topics_with_one_lease_set_and_one_pause(
    kafka_config: dict[str, Any], admin: Any, make_topic: Any, run_dag: Any
) -> None:
    topics = [make_topic("join-a", partitions=2), make_topic("join-b", partitions=2)]
    group = f"{topics[0]}-g"
    leases = KStateLeaseHook()
    seen: dict[str, Any] = {}
    halt = threading.Event()

    def second_run() -> None:
        """While the run holds its leases: a run on ONE topic of the set is refused at once."""
        while not halt.is_set():
            held = [leases.current(t) for t in topics]
            if all(h is not None and h.owner.startswith(DAG_ID) for h in held):
                seen["owners"] = {h.owner for h in held if h is not None}
                try:
                    leases.acquire(topics[1], "other_dag/manual__second", ttl_seconds=60)
                    seen["second"] = "acquired"
                    leases.release(topics[1], "other_dag/manual__second")
                except LeaseHeldError as exc:
                    seen["second"] = str(exc)
                return
            time.sleep(0.05)

    watcher = threading.Thread(target=second_run, daemon=True)
    with join_traffic(kafka_config, topics, group, controlled=True) as (producers, fleet):
        since = {t: warm_up(p, _reader(fleet, t)) for t, p in producers.items()}
        watcher.start()
        started = time.monotonic()
        dr = run_dag(
            DAG_ID,
            {
                "topic": topics[0],
                "topics": [topics[1]],
                "partitions": 4,
                "consumer_groups": [],
                "dry_run": False,
            },
        )
        took = time.monotonic() - started
        halt.set()
        watcher.join(10)
        assert dr.state == "success", states(dr)
        wait_until(lambda: all({2, 3} <= set(p.placed.values()) for p in producers.values()), 15)
        lost = _losses(producers, fleet, since)
    window, verify = xcom(dr, "pause_window"), xcom(dr, "verify")
    print(
        f"SAFE run {took:.1f} s; window {window['timings']}; lost per topic "
        f"{ {t: len(v) for t, v in lost.items()} }; transitions {fleet.transitions}"
    )
    for topic in topics:
        assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 4, topic
        assert lost[topic] == {}, f"{topic}: {len(lost[topic])} records lost"
        assert window["topics"][topic]["groups"][group]["seeded"] == 2, window["topics"][topic]
        assert verify["topics"][topic]["ok"] and verify["topics"][topic]["partitions"] == 4
        assert {2, 3} <= {p for s, p in producers[topic].placed.items() if s >= since[topic]}
    # one pause of the group: each of its two members left once and came back once
    assert fleet.transitions.count("paused") == 2, fleet.transitions
    # one lease set: both topics held by this run during it, a run on one of them refused, both released
    assert seen.get("owners") == {f"{DAG_ID}/{dr.run_id}"}, seen
    assert "being changed by another run" in seen.get("second", "") or "held" in seen.get("second", ""), seen
    assert all(leases.current(t) is None for t in topics)


def test_a_set_with_unequal_counts_or_a_leased_topic_is_refused_and_nothing_changes(
    admin: Any, make_topic: Any, run_dag: Any
) -> None:
    a, b, c = (
        make_topic("join-a", partitions=2),
        make_topic("join-b", partitions=2),
        make_topic("odd", partitions=3),
    )
    dr = run_dag(
        DAG_ID, {"topic": a, "topics": [c], "partitions": 4, "consumer_groups": [], "dry_run": False}
    )
    assert (
        dr.state == "failed"
        and states(dr)["plan"] == "failed"
        and states(dr)["pause_window"] == "upstream_failed"
    )
    other = KStateLeaseHook()
    other.acquire(b, "other_dag/manual__busy", ttl_seconds=300)
    try:
        dr = run_dag(
            DAG_ID, {"topic": a, "topics": [b], "partitions": 4, "consumer_groups": [], "dry_run": False}
        )
        assert dr.state == "failed" and states(dr)["plan"] == "failed"
        assert other.current(a) is None, "the lease taken on the free topic was given back"
        assert other.current(b).owner == "other_dag/manual__busy"  # type: ignore[union-attr]
    finally:
        other.release(b, "other_dag/manual__busy")
    for topic, count in ((a, 2), (b, 2), (c, 3)):
        assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == count


PER_STEP = "kstate_partition_increase_per_step"


def test_the_per_step_dag_grows_both_topics_one_task_per_step_and_loses_nothing(
    kafka_config: dict[str, Any], admin: Any, make_topic: Any, run_dag: Any
) -> None:
    """``kstate_partition_increase_per_step`` with ``topics``: each step over the set (one pause, every
    topic created, each group seeded on both, each topic's producers switched, one resume), under live
    keyed traffic on both topics: nothing lost on either, verify judges both."""
    topics = [make_topic("join-a", partitions=2), make_topic("join-b", partitions=2)]
    group = f"{topics[0]}-g"
    with join_traffic(kafka_config, topics, group, controlled=True) as (producers, fleet):
        since = {t: warm_up(p, _reader(fleet, t)) for t, p in producers.items()}
        started = time.monotonic()
        dr = run_dag(
            PER_STEP,
            {
                "topic": topics[0],
                "topics": [topics[1]],
                "partitions": 4,
                "consumer_groups": [],
                "dry_run": False,
            },
        )
        took = time.monotonic() - started
        assert dr.state == "success", states(dr)
        wait_until(lambda: all({2, 3} <= set(p.placed.values()) for p in producers.values()), 15)
        lost = _losses(producers, fleet, since)
    seed, verify, created = xcom(dr, "seed_offsets"), xcom(dr, "verify"), xcom(dr, "increase_partitions")
    print(
        f"PER-STEP run {took:.1f} s; lost per topic { {t: len(v) for t, v in lost.items()} }; "
        f"transitions {fleet.transitions}"
    )
    assert set(states(dr)) >= {"pause_consumers", "increase_partitions", "seed_offsets", "resume_consumers"}
    assert "pause_window" not in states(dr)
    for topic in topics:
        assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 4, topic
        assert lost[topic] == {}, f"{topic}: {len(lost[topic])} records lost"
        assert created["topics"][topic]["created"] is True, created
        assert seed["topics"][topic]["groups"][group]["seeded"] == 2, seed["topics"][topic]
        assert seed["topics"][topic]["report_rows"] == 4  # 2 kept + 2 seeded rows for the one group
        assert verify["topics"][topic]["ok"] and verify["topics"][topic]["partitions"] == 4
        assert {2, 3} <= {p for s, p in producers[topic].placed.items() if s >= since[topic]}
    assert fleet.transitions.count("paused") == 2, fleet.transitions  # each member paused once
    leases = KStateLeaseHook()
    assert all(leases.current(t) is None for t in topics)


def _answer_approval(dag_id: str, seen: dict[str, Any], halt: threading.Event, before: Any = None) -> None:
    """See :func:`_answer`; an error is kept in ``seen["error"]`` (the test names it)."""
    try:
        _answer(dag_id, seen, halt, before)
    except Exception as exc:  # noqa: BLE001 - reported by the test
        import traceback

        seen["error"] = "".join(traceback.format_exception(exc))
        print(f"HUMAN failed: {seen['error']}", flush=True)


def _answer(dag_id: str, seen: dict[str, Any], halt: threading.Event, before: Any = None) -> None:
    """A human answering the approval: once ``approve_plan`` of a run of ``dag_id`` is parked for input,
    record what it asks (subject, body, the leases held), run ``before`` (a change behind the run's back),
    then choose Approve through the HITL API's own handler (the code behind ``PATCH .../hitlDetails``,
    on the metadata DB ``dag.test()`` uses: it flips the task back to SCHEDULED with the answer)."""
    from airflow.api_fastapi.core_api.datamodels.hitl import UpdateHITLDetailPayload
    from airflow.api_fastapi.core_api.routes.public.hitl import update_hitl_detail
    from airflow.models.hitl import HITLDetail
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from airflow.utils.state import TaskInstanceState
    from sqlalchemy import select

    task_id = "safe_partition_increase.approve_plan"
    while not halt.is_set():
        with create_session() as session:
            ti = session.scalars(
                select(TaskInstance).where(
                    TaskInstance.dag_id == dag_id,
                    TaskInstance.task_id == task_id,
                    TaskInstance.state == TaskInstanceState.AWAITING_INPUT,
                )
            ).first()
            if ti is None:
                time.sleep(0.2)
                continue
            print(f"HUMAN found {ti.task_id} of {ti.run_id} waiting for input", flush=True)
            detail = session.scalars(select(HITLDetail).where(HITLDetail.ti_id == ti.id)).one()
            seen.update(subject=detail.subject, body=detail.body, run_id=ti.run_id)
            leases = seen["lease_hook"]  # made before the run: a hook made in this thread during it blocks
            seen["leases"] = {t: getattr(leases.current(t), "owner", None) for t in seen["topics"]}
            if before is not None:
                before()
            update_hitl_detail(
                dag_id=dag_id,
                dag_run_id=ti.run_id,
                task_id=task_id,
                update_hitl_detail_payload=UpdateHITLDetailPayload(chosen_options=["Approve"]),
                user=SimpleNamespace(get_id=lambda: "tester", get_name=lambda: "tester"),
                session=session,
            )
            seen["answered"] = True
            print("HUMAN approved", flush=True)
            return


@pytest.mark.parametrize(
    "dag_id",
    [
        DAG_ID,
        pytest.param(PER_STEP, marks=pytest.mark.chaos),
    ],  # per step: 14 s, make chaos (make test's time)
)
def test_an_approved_run_of_several_topics_shows_every_topic_and_grows_them_all(
    dag_id: str, kafka_config: dict[str, Any], admin: Any, make_topic: Any, run_dag: Any
) -> None:
    """``require_approval`` with ``topics``: the prompt names every topic with its count now and after,
    every topic's lease is held by the run while it waits, and once approved (the cluster checked again on
    each topic) both grow, nothing lost under live traffic."""
    topics = [make_topic("join-a", partitions=2), make_topic("join-b", partitions=2)]
    group = f"{topics[0]}-g"
    seen: dict[str, Any] = {"topics": topics, "lease_hook": KStateLeaseHook()}
    halt = threading.Event()
    human = threading.Thread(target=_answer_approval, args=(dag_id, seen, halt), daemon=True)
    with join_traffic(kafka_config, topics, group, controlled=True) as (producers, fleet):
        since = {t: warm_up(p, _reader(fleet, t)) for t, p in producers.items()}
        human.start()
        conf = {"topic": topics[0], "topics": [topics[1]], "partitions": 4, "consumer_groups": []}
        dr = run_dag(dag_id, {**conf, "dry_run": False, "require_approval": True, "approval_timeout": 300})
        halt.set()
        human.join(10)
        assert dr.state == "success", states(dr)
        wait_until(lambda: all({2, 3} <= set(p.placed.values()) for p in producers.values()), 15)
        lost = _losses(producers, fleet, since)
    print(
        f"APPROVED {dag_id}: lost per topic { {t: len(v) for t, v in lost.items()} }; subject {seen['subject']!r}"
    )
    assert seen.get("answered"), seen.get("error", seen)
    assert all(t in seen["subject"] for t in topics) and "2 -> 4" in seen["subject"], seen["subject"]
    for topic in topics:
        assert f"| `{topic}` | 2 | 4 |" in seen["body"], seen["body"]
        assert seen["leases"][topic] == f"{dag_id}/{dr.run_id}", seen["leases"]
        assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 4, topic
        assert lost[topic] == {}, f"{topic}: {len(lost[topic])} records lost"
    assert xcom(dr, "approve_plan")["approved"] is True
    assert all(KStateLeaseHook().current(t) is None for t in topics)


def test_an_approved_run_of_several_topics_fails_when_one_topic_changed_and_changes_nothing(
    admin: Any, make_topic: Any, run_dag: Any
) -> None:
    """A partition added to the SECOND topic while the approval waits: on Approve the run fails before
    pausing anyone, naming that topic; neither topic is grown further and every lease is released."""
    topics = [make_topic("join-a", partitions=2), make_topic("join-b", partitions=2)]
    seen: dict[str, Any] = {"topics": topics, "lease_hook": KStateLeaseHook()}
    halt = threading.Event()
    human = threading.Thread(
        target=_answer_approval, args=(DAG_ID, seen, halt, lambda: grow(admin, topics[1], 3)), daemon=True
    )
    human.start()
    conf = {"topic": topics[0], "topics": [topics[1]], "partitions": 4, "consumer_groups": []}
    dr = run_dag(DAG_ID, {**conf, "dry_run": False, "require_approval": True, "approval_timeout": 300})
    halt.set()
    human.join(10)
    assert seen.get("answered"), seen.get("error", seen)
    assert dr.state == "failed" and states(dr)["approve_plan"] == "failed", states(dr)
    assert states(dr)["pause_window"] == "upstream_failed", states(dr)
    for topic, count in ((topics[0], 2), (topics[1], 3)):
        assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == count, topic
    assert all(KStateLeaseHook().current(t) is None for t in topics)


@pytest.mark.parametrize(
    ("dag_id", "switched"),
    [
        (DAG_ID, "pause_window"),
        pytest.param(PER_STEP, "scale_producers", marks=pytest.mark.chaos),  # 13 s: make chaos
    ],
)
def test_a_drain_of_several_topics_stops_each_topic_s_producers_and_starts_them_once_drained(
    dag_id: str, switched: str, kafka_config: dict[str, Any], admin: Any, make_topic: Any, run_dag: Any
) -> None:
    """``key_order=drain`` with ``topics`` (the ControlledProducers of both topics as the producers to stop):
    each topic's producers are held before the create, the group drains each topic's old partitions to
    where its producers stopped, then both start on the new layout: nothing lost on either topic, the cost
    reported per topic, verify names the group drained on each."""
    topics = [make_topic("join-a", partitions=2), make_topic("join-b", partitions=2)]
    group = f"{topics[0]}-g"
    with join_traffic(kafka_config, topics, group, controlled=True) as (producers, fleet):
        since = {t: warm_up(p, _reader(fleet, t)) for t, p in producers.items()}
        conf = {"topic": topics[0], "topics": [topics[1]], "partitions": 4, "consumer_groups": []}
        dr = run_dag(
            dag_id, {**conf, "dry_run": False, "key_order": "drain", "producer_drivers": ["control"]}
        )
        assert dr.state == "success", states(dr)
        wait_until(lambda: all({2, 3} <= set(p.placed.values()) for p in producers.values()), 15)
        lost = _losses(producers, fleet, since)
    switch, started, verify = xcom(dr, switched), xcom(dr, "start_producers"), xcom(dr, "verify")
    each = {t: switch_of(switch, t) for t in topics}
    print(
        f"DRAIN {dag_id}: lost per topic { {t: len(v) for t, v in lost.items()} }; started "
        f"{ {t: (c['producer_downtime_s'], c['backlog_at_switch']) for t, c in started['topics'].items()} }"
    )
    assert started["drained_groups"] == [group], started
    for topic in topics:
        assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 4, topic
        assert lost[topic] == {}, f"{topic}: {len(lost[topic])} records lost"
        assert each[topic]["drain"]["groups"] == [group], each[topic]
        assert started["topics"][topic]["producer_downtime_s"] > 0, started
        assert verify["topics"][topic]["key_order"]["groups"][group]["plan"] == "drained", verify["topics"][
            topic
        ]
        assert {2, 3} <= {p for s, p in producers[topic].placed.items() if s >= since[topic]}
    assert fleet.transitions.count("paused") == 2, fleet.transitions
    assert all(KStateLeaseHook().current(t) is None for t in topics)
