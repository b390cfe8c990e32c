"""Unit tests of the lease keeper (lease.py) on an in-memory lease log: acquire, take over, renew, hold."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from airflow_provider_kstate.errors import LeaseHeldError, SnapshotLeaseHeldError
from airflow_provider_kstate.lease_rules import Lease, LeaseKeeper, replay


class MemoryLeaseLog:
    """The lease log's verbs as KStateLeaseHook has them, on a list: append, then replay up to it."""

    def __init__(self) -> None:
        self.records: list[tuple[int, dict[str, Any]]] = []
        self.now = 1_000_000

    def _append(self, record: dict[str, Any]) -> Lease | None:
        self.now += 1
        self.records.append((self.now, record))
        return replay([(ts, r) for ts, r in self.records if r["topic"] == record["topic"]])

    def current(self, topic: str) -> Lease | None:
        holder = replay([(ts, r) for ts, r in self.records if r["topic"] == topic])
        return None if holder is None or holder.expires <= self.now else holder

    def acquire(self, topic: str, owner: str, ttl_seconds: float, plan: Any = None) -> Lease:
        rec = {"op": "acquire", "topic": topic, "owner": owner, "ttl_ms": int(ttl_seconds * 1000)}
        holder = self._append({**rec, "plan": plan or {}})
        if holder is None or holder.owner != owner:
            raise LeaseHeldError(f"topic {topic!r} is being changed by another run")
        return holder

    def take_over(
        self, topic: str, owner: str, from_owner: str, ttl_seconds: float, plan: Any = None
    ) -> Lease:
        rec = {"op": "takeover", "topic": topic, "owner": owner, "from_owner": from_owner}
        holder = self._append({**rec, "ttl_ms": int(ttl_seconds * 1000), "plan": plan or {}})
        if holder is None or holder.owner != owner:
            raise LeaseHeldError(f"topic {topic!r}: could not take the lease over from {from_owner}")
        return holder

    def release(self, topic: str, owner: str) -> None:
        self._append({"op": "release", "topic": topic, "owner": owner})


class Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, msg: str, *args: Any) -> None:
        self.lines.append(msg % args)

    warning = info


def context(run: str, try_number: int = 1, states: dict[str, str] | None = None) -> dict[str, Any]:
    """A task context of DAG ``d``'s run ``run``; ``states``: the Airflow state of other runs."""

    def get_dagrun_state(dag_id: str, run_id: str) -> str:
        return (states or {})[f"{dag_id}/{run_id}"]  # KeyError: a run unknown here

    ti = SimpleNamespace(dag_id="d", run_id=run, try_number=try_number, get_dagrun_state=get_dagrun_state)
    return {"ti": ti}


def test_a_topic_lease_is_refused_while_its_holder_runs_and_taken_over_once_it_has_ended() -> None:
    lease_log, log = MemoryLeaseLog(), Log()
    first = LeaseKeeper.for_topic(lease_log, "orders", context("a"), 60, log)
    assert first.acquire({"target_partitions": 4}).owner == "d/a" and first.held() is not None
    for states in ({"d/a": "running"}, {}):  # still running, or unknown here (another deployment)
        second = LeaseKeeper.for_topic(lease_log, "orders", context("b", states=states), 60, log)
        with pytest.raises(LeaseHeldError, match="topic 'orders' is being changed by another run") as info:
            second.acquire()
        assert "this run changed nothing" in str(info.value) and second.held() is None
    assert not [line for line in log.lines if "taking the lease over" in line]
    second = LeaseKeeper.for_topic(lease_log, "orders", context("b", states={"d/a": "failed"}), 60, log)
    taken = second.acquire({"target_partitions": 4})
    assert taken.owner == "d/b" and lease_log.current("orders") == taken
    assert any("taking the lease over from d/a" in line and "seeds every gap" in line for line in log.lines)
    # the rerun of the first run no longer holds it
    assert LeaseKeeper.for_topic(lease_log, "orders", context("a"), 60, log).held() is None


def test_a_snapshot_lease_is_held_while_the_body_runs_and_released_after() -> None:
    lease_log, log = MemoryLeaseLog(), Log()
    writer = LeaseKeeper.for_snapshot(lease_log, "/s", context("a", 1), 60, log)
    with writer.holding() as lease:
        assert lease.owner == writer.owner and writer.owner.startswith("d/a#try1@")
        # the same run id and try in another deployment is another writer
        twin = LeaseKeeper.for_snapshot(lease_log, "/s", context("a", 1), 60, log)
        with pytest.raises(SnapshotLeaseHeldError, match=r"snapshot '/s' is being written by another run"):
            twin.acquire()
        # a retry of this task takes the lease of its own earlier try over
        retry = LeaseKeeper.for_snapshot(lease_log, "/s", context("a", 2), 60, log)
        assert retry.acquire().owner == retry.owner
        assert any("(an earlier try of this task)" in line for line in log.lines)
        retry.release()
    assert lease_log.current("snapshot:/s") is None
    assert "LEASE snapshot:/s released" in log.lines


def test_a_lost_race_fails_with_the_error_of_the_lease_kind() -> None:
    lease_log, log = MemoryLeaseLog(), Log()
    keeper = LeaseKeeper.for_snapshot(lease_log, "/s", context("b"), 60, log)
    # a winner holds the lease at every look but the first
    lease_log.acquire("snapshot:/s", "d/winner#try1", 60)
    real_current = lease_log.current
    lease_log.current = lambda topic: None  # type: ignore[method-assign]  # "free" when the keeper looks
    with pytest.raises(SnapshotLeaseHeldError, match="snapshot '/s': topic 'snapshot:/s' is being changed"):
        keeper.acquire()
    assert real_current("snapshot:/s").owner == "d/winner#try1"  # type: ignore[union-attr]


def test_steps_renew_the_topic_lease_once_a_third_of_its_ttl_has_passed() -> None:
    lease_log, log = MemoryLeaseLog(), Log()
    keeper = LeaseKeeper.for_topic(lease_log, "orders", context("a"), 30, log)
    keeper.renew({"target_partitions": 4})  # the first check renews
    written = len(lease_log.records)
    keeper.renew()  # within a third of the TTL: trusted, no round trip
    assert len(lease_log.records) == written
    keeper._renewed_at = (keeper._renewed_at or 0) - 11  # more than 30 / 3 seconds ago
    keeper.renew()
    assert (
        len(lease_log.records) == written + 1 and "LEASE topic orders renewed: held by d/a" in log.lines[-1]
    )
    # another run took it over meanwhile: the next renewal fails, so the step changes nothing
    lease_log.take_over("orders", "d/b", "d/a", 30)
    keeper._renewed_at -= 11
    with pytest.raises(LeaseHeldError, match="another run"):
        keeper.renew()


def _set(log: MemoryLeaseLog, run: str, topics: list[str], states: dict[str, str] | None = None) -> Any:
    from airflow_provider_kstate.lease_rules import LeaseSet

    return LeaseSet.for_topics(log, topics, context(run, states=states), 60.0, Log())  # type: ignore[arg-type]


def test_a_set_of_topics_is_leased_as_one_in_name_order_and_any_holder_refuses_it() -> None:
    log = MemoryLeaseLog()
    first = _set(log, "r1", ["payments", "orders"])
    first.acquire({"topic": "payments"})
    acquired = [r["topic"] for _, r in log.records if r["op"] == "acquire"]
    assert acquired == ["orders", "payments"], "name order: two runs whose sets overlap cannot deadlock"
    assert first.key == "orders,payments" and first.held() is not None
    # a run on ONE topic of the set is refused at once, naming the holder
    with pytest.raises(LeaseHeldError, match="d/r1"):
        LeaseKeeper.for_topic(
            log, "payments", context("r2", states={"d/r1": "running"}), 60.0, Log()
        ).acquire()  # type: ignore[arg-type]
    # a set overlapping on one topic is refused too, and gives back what it took meanwhile
    other = _set(log, "r3", ["refunds", "payments", "aaa"], {"d/r1": "running"})
    with pytest.raises(LeaseHeldError, match="d/r1"):
        other.acquire()
    assert log.current("aaa") is None and log.current("refunds") is None
    assert log.current("orders").owner == "d/r1"  # type: ignore[union-attr]
    held = other.current()
    assert held is not None and held.owner == "d/r1", "current() names the foreign holder first"
    first.renew()
    first.release()
    assert log.current("orders") is None and log.current("payments") is None


def test_a_set_is_taken_over_from_an_ended_run_topic_by_topic() -> None:
    log = MemoryLeaseLog()
    _set(log, "r1", ["orders", "payments"]).acquire()
    lines = Log()
    from airflow_provider_kstate.lease_rules import LeaseSet

    later = LeaseSet.for_topics(
        log, ["orders", "payments"], context("r2", states={"d/r1": "failed"}), 60.0, lines
    )  # type: ignore[arg-type]
    later.acquire()
    assert log.current("orders").owner == "d/r2" and log.current("payments").owner == "d/r2"  # type: ignore[union-attr]
    assert sum("taking the lease over" in line for line in lines.lines) == 2
