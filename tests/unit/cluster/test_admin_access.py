"""ClusterAdmin.authorized_operations: the authorizer's answers read from DescribeTopics/DescribeGroups (fake
client: futures that hold what confluent-kafka returns or raises)."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from airflow_provider_kstate.cluster.admin import ClusterAdmin


def done(value: Any = None, error: int | None = None) -> Future[Any]:
    future: Future[Any] = Future()
    if error is None:
        future.set_result(value)
    else:
        future.set_exception(KafkaException(KafkaError(error)))
    return future


def described(*ops: str) -> Any:
    return SimpleNamespace(authorized_operations=[SimpleNamespace(name=op) for op in ops])


class FakeClient:
    def __init__(self) -> None:
        self.group_calls = 0

    def describe_topics(
        self, topics: Any, request_timeout: float, include_authorized_operations: bool
    ) -> Any:
        assert include_authorized_operations
        answers = {
            "orders": done(described("READ", "DESCRIBE")),
            "secret": done(error=KafkaError.TOPIC_AUTHORIZATION_FAILED),
            "absent": done(error=KafkaError.UNKNOWN_TOPIC_OR_PART),
        }
        return {name: answers[name] for name in topics.topic_names}

    def describe_consumer_groups(
        self, groups: list[str], request_timeout: float, include_authorized_operations: bool
    ) -> Any:
        self.group_calls += 1
        first = self.group_calls == 1
        answers = {
            "app": done(error=KafkaError.NOT_COORDINATOR) if first else done(described("READ", "DESCRIBE")),
            "hidden": done(error=KafkaError.GROUP_AUTHORIZATION_FAILED),
        }
        return {g: answers[g] for g in groups}


def test_operations_denials_unknowns_and_a_loading_coordinator() -> None:
    client = FakeClient()
    admin = ClusterAdmin({"bootstrap.servers": "b:1"}, timeout=1, client=client)  # type: ignore[arg-type]
    answers = admin.authorized_operations(["orders", "secret", "absent"], ["app", "hidden"])
    assert answers == {
        ("topic", "orders"): frozenset({"READ", "DESCRIBE"}),
        ("topic", "secret"): frozenset(),
        ("topic", "absent"): None,
        ("group", "app"): frozenset({"READ", "DESCRIBE"}),
        ("group", "hidden"): frozenset(),
    }
    assert client.group_calls == 2  # NOT_COORDINATOR asked again, the denied group not
