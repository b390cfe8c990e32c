"""The plan's ACL check (increase/access.py): what the authorizer answers becomes a named refusal (no broker)."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from airflow_provider_kstate.errors import KafkaAuthorizationError, KafkaRequestRefusedError
from airflow_provider_kstate.increase.access import (
    GROUP_NEEDS,
    INTERNAL_NEEDS,
    TOPIC_NEEDS,
    check_access,
    grant_commands,
    missing_access,
    principal_of,
)

ALL_TOPIC = frozenset({*TOPIC_NEEDS, "WRITE", "DELETE"})
ALL_INTERNAL = frozenset(INTERNAL_NEEDS)
ALL_GROUP = frozenset(GROUP_NEEDS)


class Authorizer:
    """Answers ``authorized_operations`` from a table; records what was asked."""

    def __init__(self, answers: dict[tuple[str, str], frozenset[str] | None]) -> None:
        self.answers = answers
        self.asked: list[tuple[list[str], list[str]]] = []

    def authorized_operations(
        self, topics: Iterable[str] = (), groups: Iterable[str] = ()
    ) -> dict[tuple[str, str], frozenset[str] | None]:
        topics, groups = list(topics), list(groups)
        self.asked.append((topics, groups))
        wanted = [("topic", t) for t in topics] + [("group", g) for g in groups]
        return {key: self.answers.get(key, frozenset()) for key in wanted}


def full() -> dict[tuple[str, str], frozenset[str] | None]:
    return {
        ("topic", "orders"): ALL_TOPIC,
        ("topic", "_kstate_leases"): ALL_INTERNAL,
        ("topic", "_kstate_control"): ALL_INTERNAL,
        ("group", "app"): ALL_GROUP,
    }


INTERNAL = ["_kstate_leases", "_kstate_control"]


def test_a_principal_with_every_acl_passes_and_each_resource_is_asked_once() -> None:
    admin = Authorizer(full())
    check_access(admin, "orders", [*INTERNAL, "orders"], ["app", "app"])
    assert admin.asked == [(["orders", *INTERNAL], ["app"])]


def test_read_without_alter_is_refused_naming_the_operation_the_resource_and_the_grant() -> None:
    answers = full()
    answers[("topic", "orders")] = frozenset({"READ", "DESCRIBE", "DESCRIBE_CONFIGS"})
    config = {"bootstrap.servers": "b1:9093", "sasl.username": "kstate", "sasl.password": "pw-SECRET"}
    with pytest.raises(KafkaAuthorizationError) as caught:
        check_access(Authorizer(answers), "orders", INTERNAL, ["app"], config=config, name="connection 'k':")
    message = str(caught.value)
    assert "principal User:kstate lacks ACLs the run needs: Alter on topic 'orders' (increase" in message
    assert (
        "kafka-acls.sh --bootstrap-server b1:9093 --command-config <admin.properties> --add "
        "--allow-principal User:kstate --operation Alter --topic orders"
    ) in message
    assert "pw-SECRET" not in message
    assert not caught.value.retryable and isinstance(caught.value, KafkaRequestRefusedError)


def test_a_repair_needs_no_alter() -> None:
    answers = full()
    answers[("topic", "orders")] = frozenset({"READ", "DESCRIBE", "DESCRIBE_CONFIGS"})
    assert missing_access(Authorizer(answers), "orders", INTERNAL, ["app"], increase=False) == []
    assert [m.operation for m in missing_access(Authorizer(answers), "orders", INTERNAL, ["app"])] == [
        "ALTER"
    ]


def test_a_group_the_principal_may_not_describe_and_an_unwritable_control_topic_are_named() -> None:
    answers = full()
    answers[("group", "app")] = frozenset()  # GROUP_AUTHORIZATION_FAILED
    answers[("topic", "_kstate_control")] = frozenset({"READ", "DESCRIBE"})
    missing = missing_access(Authorizer(answers), "orders", INTERNAL, ["app"])
    assert [(m.resource, m.name, m.operation) for m in missing] == [
        ("topic", "_kstate_control", "WRITE"),
        ("group", "app", "DESCRIBE"),
        ("group", "app", "READ"),
    ]
    commands = grant_commands(missing, "User:x")
    assert commands[0].endswith("--allow-principal User:x --operation Write --topic _kstate_control")
    assert commands[1].endswith("--operation Describe --operation Read --group app")


def test_resources_the_broker_does_not_answer_for_are_not_judged() -> None:
    answers = full()
    answers[("topic", "_kstate_leases")] = None  # does not exist yet: created by the plan (needs Create)
    assert missing_access(Authorizer(answers), "orders", INTERNAL, ["app"]) == []


def test_the_principal_is_the_sasl_user_or_a_placeholder() -> None:
    assert principal_of({"sasl.username": "alice"}) == "User:alice"
    assert principal_of({"security.protocol": "SSL"}) == "User:<principal>"
