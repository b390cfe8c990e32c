"""The per-topic lease: two runs on one topic never interleave."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from airflow_provider_kstate.errors import LeaseHeldError
from airflow_provider_kstate.hooks.lease import KStateLeaseHook

pytestmark = pytest.mark.integration


def test_concurrent_acquirers_exactly_one_wins(unique: Any) -> None:
    topic = unique("contended")
    lease_topic = unique("leases")
    winners: list[str] = []
    losers: list[str] = []
    start = threading.Barrier(6)

    def contend(owner: str) -> None:
        hook = KStateLeaseHook(lease_topic=lease_topic)
        assert hook.get_conn is not None  # connect before the start line
        start.wait(30)
        try:
            hook.acquire(topic, owner, ttl_seconds=60)
            winners.append(owner)
        except LeaseHeldError as exc:
            assert "another run" in str(exc)
            losers.append(owner)

    threads = [threading.Thread(target=contend, args=(f"dag/run-{i}",)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(90)
    assert len(winners) == 1 and len(losers) == 5, (winners, losers)
    assert KStateLeaseHook(lease_topic=lease_topic).current(topic).owner == winners[0]


def test_lease_renewal_release_and_expiry(unique: Any) -> None:
    topic = unique("renew")
    hook = KStateLeaseHook(lease_topic=unique("leases"))
    first = hook.acquire(topic, "dag/a", ttl_seconds=60, plan={"target_partitions": 4})
    again = hook.acquire(topic, "dag/a", ttl_seconds=120)
    assert (
        again.plan == {"target_partitions": 4}
        and again.expires > first.expires
        and again.since == first.since
    )
    with pytest.raises(LeaseHeldError):
        hook.acquire(topic, "dag/b", ttl_seconds=60)
    hook.release(topic, "dag/a")
    assert hook.current(topic) is None
    assert hook.acquire(topic, "dag/b", ttl_seconds=0.5).owner == "dag/b"
    time.sleep(1.0)
    assert hook.current(topic) is None
    assert hook.acquire(topic, "dag/c", ttl_seconds=60).owner == "dag/c"


def test_second_run_on_a_leased_topic_fails_and_changes_nothing(
    admin: Any, make_topic: Any, run_dag: Any
) -> None:
    topic = make_topic("leased", partitions=1)
    other = KStateLeaseHook()
    other.acquire(topic, "other_dag/manual__busy", ttl_seconds=300)
    try:
        dr = run_dag(
            "kstate_partition_increase",
            {"topic": topic, "partitions": 2, "consumer_groups": [], "dry_run": False},
        )
        assert dr.state == "failed"
        states = {ti.task_id.split(".")[-1]: ti.state for ti in dr.get_task_instances()}
        assert states["plan"] == "failed" and states["pause_window"] == "upstream_failed"
        assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 1
        assert other.current(topic).owner == "other_dag/manual__busy"
    finally:
        other.release(topic, "other_dag/manual__busy")
    dr = run_dag(
        "kstate_partition_increase",
        {"topic": topic, "partitions": 2, "consumer_groups": [], "dry_run": False},
    )
    assert dr.state == "success"
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 2
    assert other.current(topic) is None
