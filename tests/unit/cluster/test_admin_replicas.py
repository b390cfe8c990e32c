"""``ClusterAdmin.topic_replicas`` when the topic's DescribeConfigs gets no answer (issue 33): librdkafka sends it
to the controller the metadata names, a dead one on a cluster that lost its controller quorum. With brokers
of the topic down it returns the replicas with ``min.insync.replicas`` unknown (the plan then refuses, naming
the partitions); with every broker answering the error stays (the cluster is unreachable, unnamed)."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from airflow_provider_kstate.cluster import admin as admin_module
from airflow_provider_kstate.cluster.admin import ClusterAdmin
from airflow_provider_kstate.errors import BrokerUnavailableError
from airflow_provider_kstate.increase.replicas import MIN_ISR_UNKNOWN


class Client:
    """An AdminClient whose metadata names brokers 1-3 (frozen: every one in every ISR) and whose
    DescribeConfigs times out waiting for the controller."""

    def list_topics(self, topic: Any = None, timeout: float = 0) -> Any:
        parts = {p: SimpleNamespace(leader=p % 3 + 1, replicas=[1, 2, 3], isrs=[1, 2, 3]) for p in range(3)}
        brokers = {b: SimpleNamespace(id=b, host="127.0.0.1", port=9000 + b) for b in (1, 2, 3)}
        return SimpleNamespace(
            topics={"orders": SimpleNamespace(error=None, partitions=parts)}, brokers=brokers
        )

    def describe_configs(self, resources: Any, request_timeout: float = 0) -> Any:
        future: Future[Any] = Future()
        future.set_exception(
            KafkaException(KafkaError(KafkaError._TIMED_OUT, "Timed out waiting for controller"))
        )
        return {resources[0]: future}


def test_no_answer_from_the_controller_with_brokers_down_gives_min_isr_unknown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(admin_module.wire, "answering", lambda *_a, **_k: {1})
    replicas = ClusterAdmin({"bootstrap.servers": "x:1"}, timeout=1, client=Client()).topic_replicas("orders")  # type: ignore[arg-type]
    assert replicas.min_isr == MIN_ISR_UNKNOWN and replicas.down == frozenset({2, 3})
    assert [p.leader for p in replicas.partitions] == [1, 2, 3]


def test_no_answer_with_every_broker_answering_is_still_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(admin_module.wire, "answering", lambda *_a, **_k: {1, 2, 3})
    admin = ClusterAdmin({"bootstrap.servers": "x:1"}, timeout=1, client=Client())  # type: ignore[arg-type]
    with pytest.raises(BrokerUnavailableError, match="describe configs of 'orders': cluster unreachable"):
        admin.topic_replicas("orders")


def test_a_create_whose_broker_died_is_retryable_and_says_it_may_have_happened() -> None:
    class Dying:
        def create_partitions(self, new: Any, validate_only: bool = False, request_timeout: float = 0) -> Any:
            future: Future[Any] = Future()
            future.set_exception(
                KafkaException(KafkaError(KafkaError._TRANSPORT, "Broker transport failure"))
            )
            return {"orders": future}

    admin = ClusterAdmin({"bootstrap.servers": "x:1"}, timeout=1, client=Dying())  # type: ignore[arg-type]
    with pytest.raises(BrokerUnavailableError, match="may or may not have been created") as caught:
        admin.increase_partitions("orders", 8)
    assert caught.value.retryable
