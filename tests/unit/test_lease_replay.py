"""Unit tests of the lease (lease.py): the replay of the lease log decides the owner."""

from __future__ import annotations

from airflow_provider_kstate.lease_rules import replay


def test_lease_replay_orders_contenders_and_honours_expiry() -> None:
    acq = lambda owner, ttl=1000: {"op": "acquire", "owner": owner, "ttl_ms": ttl, "topic": "t"}  # noqa: E731
    assert replay([(0, acq("a")), (1, acq("b"))]).owner == "a"
    assert replay([(0, acq("a")), (1, acq("b")), (2, {"op": "release", "owner": "b"})]).owner == "a"
    assert replay([(0, acq("a")), (1, {"op": "release", "owner": "a"}), (2, acq("b"))]).owner == "b"
    assert replay([(0, acq("a", 10)), (20, acq("b"))]).owner == "b"
    renewed = replay([(0, acq("a", 10)), (5, acq("a", 100)), (50, acq("b"))])
    assert renewed.owner == "a" and renewed.expires == 105 and renewed.since == 0
    assert replay([]) is None
