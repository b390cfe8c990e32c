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
