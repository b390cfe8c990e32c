"""The plan on a cluster that lost its controller quorum (issue 33): the topic's ``min.insync.replicas`` got
no answer (its DescribeConfigs goes to a dead controller), so every partition not fully in sync is refused,
named, before anyone is paused (unit fakes; the cluster's side is tests/integration/test_replication.py)."""

from __future__ import annotations

import pytest

from airflow_provider_kstate.errors import PartitionsUnavailableError
from airflow_provider_kstate.increase.model import PartitionReplicas, TopicReplicas
from airflow_provider_kstate.increase.replicas import MIN_ISR_UNKNOWN, check_replication, judge


class Admin:
    def __init__(self, replicas: TopicReplicas) -> None:
        self.replicas = replicas

    def topic_replicas(self, topic: str, leaders_only: bool = False) -> TopicReplicas:
        return self.replicas


def _frozen(min_isr: int) -> TopicReplicas:
    """RF 3 on brokers 1-3, 2 and 3 down, the metadata frozen with them in every ISR; leaders 1, 2, 3."""
    parts = tuple(PartitionReplicas(p, p % 3 + 1, (1, 2, 3), (1, 2, 3)) for p in range(6))
    return TopicReplicas("orders", parts, min_isr, frozenset({2, 3}))


def test_unknown_min_isr_refuses_every_partition_out_of_sync_naming_them() -> None:
    verdict = judge(_frozen(MIN_ISR_UNKNOWN))
    assert verdict.offline == [1, 2, 4, 5] and verdict.under_replicated == [0, 3] and verdict.refused
    with pytest.raises(PartitionsUnavailableError) as caught:
        check_replication(Admin(_frozen(MIN_ISR_UNKNOWN)), "orders")  # type: ignore[arg-type]
    message = str(caught.value)
    assert (
        "partitions 1-2,4-5 (4) are offline" in message and "partitions 0,3 are under-replicated" in message
    )
    assert "min.insync.replicas is unknown" in message and "Brokers not answering: 2, 3." in message
    assert "Nothing was changed; nobody was paused." in message


def test_unknown_min_isr_with_one_broker_down_refuses_what_a_known_one_would_only_warn_of() -> None:
    parts = tuple(PartitionReplicas(p, 1, (1, 2, 3), (1, 2, 3)) for p in range(2))
    known = TopicReplicas("orders", parts, 2, frozenset({3}))
    assert not judge(known).refused and judge(known).under_replicated == [0, 1]  # a warning
    unknown = TopicReplicas("orders", parts, MIN_ISR_UNKNOWN, frozenset({3}))
    assert judge(unknown).refused
