"""ClusterAdmin.metadata: a broker that does not answer costs an attempt, not the request timeout (issue 41,
item 5). Fake clients: ``list_topics`` answers, or raises what confluent-kafka raises, after the time asked."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from airflow_provider_kstate.cluster import admin as admin_module
from airflow_provider_kstate.cluster.admin import ClusterAdmin
from airflow_provider_kstate.errors import BrokerUnavailableError


def cluster(answered_by: int) -> Any:
    """A metadata answer as confluent-kafka gives it (the fields the admin reads)."""
    brokers = {i: SimpleNamespace(id=i, host="127.0.0.1", port=9090 + i) for i in (1, 2, 3)}
    return SimpleNamespace(topics={"orders": object()}, brokers=brokers, orig_broker_id=answered_by)


class Client:
    """A client whose metadata reads go to one broker: ``answer`` it, or fail with ``error`` after the whole
    timeout asked (a request held by a broker that died with it in flight, or hangs)."""

    def __init__(self, answer: Any = None, error: int | None = None, waits: bool = False) -> None:
        self.answer, self.error, self.waits = answer, error, waits
        self.timeouts: list[float] = []

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        self.timeouts.append(timeout)
        if self.error is None:
            return self.answer
        if self.waits:
            time.sleep(timeout)
        raise KafkaException(KafkaError(self.error))


def admin_with(
    first: Client, second: Client, timeout: float = 30.0
) -> tuple[ClusterAdmin, list[dict[str, Any]]]:
    made: list[dict[str, Any]] = []

    def second_client(config: dict[str, Any]) -> Client:
        made.append(config)
        return second

    config = {"bootstrap.servers": "kafka:9092", "sasl.password": "s"}
    admin = ClusterAdmin(config, timeout=timeout, client=first, second_client=second_client)  # type: ignore[arg-type]
    return admin, made


def test_a_normal_read_is_one_request_and_no_second_client() -> None:
    first = Client(cluster(2))
    admin, made = admin_with(first, Client())
    assert admin.metadata().orig_broker_id == 2
    assert first.timeouts == [admin_module.METADATA_ATTEMPT_S] and made == []


def test_a_broker_that_holds_the_request_costs_one_attempt_not_the_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first client's broker holds the request (its attempt times out): the read is asked through a
    second client, bootstrapped at every broker the cluster listed (and the configured address), with the
    connection's settings; it answers, and is asked first next time."""
    monkeypatch.setattr(admin_module, "METADATA_ATTEMPT_S", 0.05)
    first = Client(cluster(1))
    admin, made = admin_with(first, Client(cluster(3)))
    admin.metadata()  # the brokers' addresses learned
    first.error, first.waits = KafkaError._TIMED_OUT, True
    assert admin.metadata().orig_broker_id == 3
    assert first.timeouts[1:] == [0.05], (
        "one attempt of 0.05 s through the first client, not the 30 s timeout"
    )
    [config] = made
    assert config["bootstrap.servers"] == "127.0.0.1:9091,127.0.0.1:9092,127.0.0.1:9093,kafka:9092"
    assert config["sasl.password"] == "s"
    assert admin.metadata().orig_broker_id == 3
    assert len(first.timeouts) == 2, "the client that answered is asked first"


def test_attempts_grow_and_every_broker_down_still_fails_naming_cause_and_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No broker answers: attempts of 0.05, 0.1, 0.2 s ... through both clients, within the request timeout,
    then the same named error as a single request's (the timeout and librdkafka's cause)."""
    monkeypatch.setattr(admin_module, "METADATA_ATTEMPT_S", 0.05)
    first = Client(error=KafkaError._TRANSPORT, waits=True)
    second = Client(error=KafkaError._TIMED_OUT, waits=True)
    admin, _ = admin_with(first, second, timeout=0.6)
    started = time.monotonic()
    with pytest.raises(
        BrokerUnavailableError, match=r"cluster unreachable within 0\.6s \(Local: Timed out\)"
    ):
        admin.metadata()
    # timeout contract: fails once the request timeout (0.6 s) is spent, not before (2x + 3 s of margin)
    assert 0.55 <= time.monotonic() - started < 0.6 * 2 + 3
    assert first.timeouts[:2] == [0.05, pytest.approx(0.2, abs=0.01)]
    assert second.timeouts[0] == pytest.approx(0.1, abs=0.01)


def test_an_error_another_broker_would_not_change_is_not_asked_again() -> None:
    """A refused handshake or any error but a missed answer or a lost connection: raised at once."""
    first = Client(error=KafkaError._AUTHENTICATION)
    admin, made = admin_with(first, Client(cluster(1)))
    with pytest.raises(BrokerUnavailableError, match="cluster unreachable"):
        admin.metadata()
    assert len(first.timeouts) == 1 and made == []


def test_admin_clients_refresh_their_controller_every_two_seconds_unless_the_connection_says() -> None:
    """librdkafka waits for the broker the last Metadata named as controller: a refresh every 2 s moves a
    create off a dead one within seconds, not the request timeout; a connection's own value wins."""
    assert admin_module.admin_settings({"bootstrap.servers": "b:1"}) == {
        "bootstrap.servers": "b:1",
        "topic.metadata.refresh.interval.ms": 2000,
        "allow.auto.create.topics": False,  # always (test_admin_attempts)
    }
    own = {"bootstrap.servers": "b:1", "topic.metadata.refresh.interval.ms": 60000}
    assert admin_module.admin_settings(own) == {**own, "allow.auto.create.topics": False}
