"""KAFKA-12261: a partition increase under live latest-reset consumers loses messages; the safe order does not.

The traffic runs inside ``live_traffic``: its producer and consumers stop whatever fails (a consumer thread
left polling when the broker stops crashed the whole pytest process, rc 139, on Tansu: issue 17).
"""

from __future__ import annotations

from typing import Any

import pytest
from kstate_support.increase_runs import grow
from kstate_support.statsd_listener import (
    INCREASE,
    StatsdListener,
    airflow_statsd,
    received_increase,
    recorded_increase,
    run_progress,
)
from kstate_support.traffic import live_traffic, loss, wait_until, warm_up

pytestmark = pytest.mark.integration

DAG_ID = "kstate_partition_increase"


def test_naive_increase_loses_messages(kafka_config: dict[str, Any], admin: Any, make_topic: Any) -> None:
    """The scenario is real: growing 1 -> 2 under live latest-reset consumers skips new-partition messages."""
    topic = make_topic("naive", partitions=1)
    with live_traffic(kafka_config, topic, f"{topic}-g", n=2) as (producer, fleet):
        since = warm_up(producer, fleet)
        grow(admin, topic, 2)
        wait_until(lambda: len({p for s, p in producer.placed.items() if s >= since and p == 1}) > 0, 15)
        wait_until(lambda: False, 6)  # keep producing while the consumers have not seen partition 1 yet
        producer.stop()
        lost = loss(producer, fleet, since, drain_timeout=20)
    assert len(lost) > 0, "the naive increase lost nothing: the scenario did not reproduce"
    assert set(lost.values()) == {1}, f"only the new partition should lose messages, got {lost}"


@pytest.mark.parametrize(
    "dag_id",
    [
        DAG_ID,
        # 19 s; make test runs the per-step DAG in test_fleet_drivers (preserve, drained) and test_faults
        pytest.param("kstate_partition_increase_per_step", marks=pytest.mark.chaos),
    ],
)
def test_safe_increase_loses_nothing_over_rounds(
    kafka_config: dict[str, Any], admin: Any, make_topic: Any, run_dag: Any, dag_id: str
) -> None:
    """The DAG's safe order, 1 -> 2 -> 4 -> 8 under the same live traffic, loses no message: in one pause
    window (the default) and with one task per step.

    Each run's metrics go through Airflow's own metrics path (``[metrics] statsd_on``, Airflow's ``Stats``)
    to a StatsD server here, and must equal what the run recorded: partitions created, offsets seeded, the
    group's downtime (``progress.json``), the barrier's hold, verify passed."""
    topic = make_topic("safe", partitions=1)
    group = f"{topic}-g"
    with (
        live_traffic(kafka_config, topic, group, n=2, controlled=True) as (producer, fleet),
        StatsdListener() as listener,
        airflow_statsd(listener),
    ):
        since = warm_up(producer, fleet)
        for target in (2, 4, 8):
            listener.clear()
            dr = run_dag(
                dag_id, {"topic": topic, "partitions": target, "consumer_groups": [group], "dry_run": False}
            )
            assert dr.state == "success", {ti.task_id: ti.state for ti in dr.get_task_instances()}
            assert admin.list_topics(topic, timeout=10).topics[topic].partitions.keys() == set(range(target))
            assert listener.wait(lambda got: bool(got.named(f"{INCREASE}verify.ok")))
            assert received_increase(listener, topic, group) == recorded_increase(dr, group), target
            progress = run_progress(dr, topic)["groups"][group]  # the service's way back, from the broker
            assert progress["held_at"] >= progress["back_at"] > progress["out_since"], progress
        wait_until(lambda: set(producer.placed.values()) == set(range(8)), 15)
        producer.stop()
        lost = loss(producer, fleet, since, drain_timeout=30)
    assert set(producer.placed.values()) == set(range(8)), "producers never wrote to every new partition"
    assert fleet.transitions.count("paused") >= 3 * 2, (
        f"consumers did not pause each round: {fleet.transitions}"
    )
    assert lost == {}, f"{len(lost)} messages lost: {dict(list(lost.items())[:20])}"
