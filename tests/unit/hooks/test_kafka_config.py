"""The ``kafka`` connection's librdkafka config, built by the provider from public APIs (no broker)."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.sdk import BaseHook

from airflow_provider_kstate.errors import KStateConfigError
from airflow_provider_kstate.hooks import kafka_config
from airflow_provider_kstate.hooks.admin import KStateAdminHook
from airflow_provider_kstate.hooks.kafka_config import connection_config, msk_iam_token

SECRET = "s3cret-password"


def oauth_token(config_str: str) -> tuple[str, float]:
    """A module-level token callback for the allowlist tests."""
    return "token", 0.0


@pytest.fixture
def extra(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The extra of every connection looked up in the test (edit it in place)."""
    doc: dict[str, Any] = {"bootstrap.servers": "b:9092", "sasl.password": SECRET}

    def get_connection(cls: Any, conn_id: str) -> Any:
        return SimpleNamespace(conn_id=conn_id, extra_dejson=json.loads(json.dumps(doc)))

    monkeypatch.setattr(BaseHook, "get_connection", classmethod(get_connection))
    return doc


def allow(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setattr(kafka_config, "callback_allowlist", lambda: frozenset(value.split(",")) - {""})


def test_the_config_is_the_connections_extra(extra: dict[str, Any]) -> None:
    assert connection_config("kafka_default") == extra
    assert KStateAdminHook(kafka_config_id="k").client_config() == extra


def test_no_bootstrap_servers_is_a_config_error_naming_the_connection(extra: dict[str, Any]) -> None:
    del extra["bootstrap.servers"]
    with pytest.raises(KStateConfigError, match="'k'.*bootstrap.servers") as info:
        connection_config("k")
    assert SECRET not in str(info.value)


def test_a_callback_path_needs_the_allowlist(extra: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    path = f"{__name__}.oauth_token"
    extra["oauth_cb"] = path
    allow(monkeypatch, "")
    with pytest.raises(KStateConfigError, match="callback_allowlist is empty") as info:
        connection_config("k")
    assert SECRET not in str(info.value)
    allow(monkeypatch, "other.module.fn")
    with pytest.raises(KStateConfigError, match=r"callback_allowlist \(other\.module\.fn\)"):
        connection_config("k")
    allow(monkeypatch, path)
    assert connection_config("k")["oauth_cb"] is oauth_token


def test_an_allowlisted_callback_that_does_not_import_is_a_config_error(
    extra: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    extra["error_cb"] = "no.such.module.fn"
    allow(monkeypatch, "no.such.module.fn")
    with pytest.raises(KStateConfigError, match="error_cb='no.such.module.fn' cannot be imported"):
        connection_config("k")


def test_the_allowlist_is_read_from_the_kafka_providers_section(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__APACHE_KAFKA__CALLBACK_ALLOWLIST", " a.b.c , d.e ,")
    assert kafka_config.callback_allowlist() == frozenset({"a.b.c", "d.e"})


def test_msk_iam_gets_a_token_callback_unless_one_is_given(
    extra: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(__import__("sys").modules, "aws_msk_iam_sasl_signer", SimpleNamespace())
    extra["bootstrap.servers"] = "b-1.demo.abcde1.c2.kafka.eu-west-1.amazonaws.com:9098"
    extra["sasl.mechanism"] = "OAUTHBEARER"
    callback = connection_config("k")["oauth_cb"]
    assert callback.func is msk_iam_token and callback.args == ("eu-west-1",)
    extra["sasl.mechanism"] = "PLAIN"
    assert "oauth_cb" not in connection_config("k")


def test_the_config_is_never_logged(extra: dict[str, Any], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    connection_config("k")
    KStateAdminHook(kafka_config_id="k").client_config()
    assert SECRET not in caplog.text
