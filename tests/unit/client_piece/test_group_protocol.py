"""The client piece under ``group.protocol=consumer`` (KIP-848), without a broker: the settings librdkafka
refuses under it are refused first, naming where each moved; rebalances are incremental under it."""

from __future__ import annotations

import pytest

from airflow_provider_kstate.client_piece.consumer import ControlledConsumer
from airflow_provider_kstate.client_piece.helper_config import (
    check_group_protocol,
    connection_config,
    group_protocol,
    incremental_assignment,
)
from airflow_provider_kstate.errors import InvalidArgumentError

KIP848 = {"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "group.protocol": "consumer"}


def test_the_consumer_protocol_refuses_the_classic_timing_and_assignor_settings_naming_each() -> None:
    check_group_protocol(KIP848)  # nothing refused
    check_group_protocol({**KIP848, "group.protocol": "classic", "session.timeout.ms": 6000})
    bad = {**KIP848, "session.timeout.ms": 6000, "partition.assignment.strategy": "range"}
    with pytest.raises(InvalidArgumentError) as info:
        check_group_protocol(bad)
    message = str(info.value)
    assert "session.timeout.ms, partition.assignment.strategy" in message
    assert "consumer.session.timeout.ms" in message and "group.remote.assignor" in message
    assert "heartbeat.interval.ms ->" not in message  # only what the config sets


def test_a_controlled_consumer_refuses_them_before_it_creates_anything() -> None:
    # No broker answers on port 1: the refusal comes before any client (or the control topic) is made.
    with pytest.raises(ValueError, match="heartbeat.interval.ms"):
        ControlledConsumer({**KIP848, "heartbeat.interval.ms": 500}, ["t"], timeout=0.1)


def test_the_consumer_protocol_assigns_incrementally_and_helpers_do_not_inherit_it() -> None:
    assert group_protocol(KIP848) == "consumer" and group_protocol({}) == "classic"
    assert incremental_assignment(KIP848)
    assert incremental_assignment({"partition.assignment.strategy": "cooperative-sticky"})
    assert not incremental_assignment({"partition.assignment.strategy": "range"})
    assert "group.protocol" not in connection_config(KIP848)


def test_only_an_idle_classic_cooperative_member_unsubscribes_before_it_closes() -> None:
    """librdkafka 2.16 sends no LeaveGroup when a classic cooperative member owning nothing closes: such a
    member unsubscribes first; every other member just closes (mocks only here)."""
    from airflow_provider_kstate.client_piece.consumer import close_and_leave

    class Inner:
        def __init__(self, owned: list[int]) -> None:
            self.owned, self.calls = owned, []  # type: ignore[var-annotated]

        def assignment(self) -> list[int]:
            return self.owned

        def unsubscribe(self) -> None:
            self.calls.append("unsubscribe")

        def close(self) -> None:
            self.calls.append("close")

    cooperative = {"partition.assignment.strategy": "cooperative-sticky"}
    cases = [
        (cooperative, [], ["unsubscribe", "close"]),
        (cooperative, [0], ["close"]),
        ({"partition.assignment.strategy": "range,roundrobin"}, [], ["close"]),
        ({"group.protocol": "consumer"}, [], ["close"]),
    ]
    for config, owned, expected in cases:
        inner = Inner(owned)
        close_and_leave(inner, config)  # type: ignore[arg-type]
        assert inner.calls == expected, (config, owned)
