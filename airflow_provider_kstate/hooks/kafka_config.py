"""The librdkafka config of a ``kafka`` connection (the Kafka provider's connection type), built here.

The config is the connection's extra, read with ``BaseHook.get_connection``, plus what the Kafka provider's
hooks add to it, with the same rules:

* a callback setting (``oauth_cb``, ``error_cb`` ...) given as a dotted path is imported only when that
  path is listed in ``[apache_kafka] callback_allowlist``; otherwise the config is refused;
* a Google Managed Kafka cluster gets the Google provider's token callback;
* an Amazon MSK cluster with ``sasl.mechanism=OAUTHBEARER`` and no ``oauth_cb`` gets an MSK IAM token
  callback (``aws-msk-iam-sasl-signer``, the Kafka provider's ``msk`` extra).

Only public names of the Kafka provider are used (its constants); the config holds secrets and is never
logged: errors name the connection and the setting, never a value of the extra but the callback's path.
"""

from __future__ import annotations

import importlib
from functools import partial
from typing import Any

from airflow.providers.apache.kafka.hooks.base import (
    CALLBACK_ALLOWLIST_CONFIG_OPTION,
    CALLBACK_CONFIG_KEYS,
    KAFKA_COMMON_CONFIG_SECTION,
    MSK_BOOTSTRAP_SERVERS_REGEX,
)
from airflow.sdk import BaseHook

from airflow_provider_kstate.compat import conf
from airflow_provider_kstate.errors import KStateConfigError

__all__ = ["connection_config", "msk_iam_token"]


def connection_config(conn_id: str) -> dict[str, Any]:
    """Return the librdkafka config of the ``kafka`` connection ``conn_id`` (holds secrets: never log it).

    :param conn_id: the Airflow connection id.
    :raises KStateConfigError: no ``bootstrap.servers``, or a callback that is not allowlisted or not
        importable.
    """
    config = dict(BaseHook.get_connection(conn_id).extra_dejson)
    servers = str(config.get("bootstrap.servers") or "")
    if not servers:
        raise KStateConfigError(
            f"Kafka connection {conn_id!r}: config['bootstrap.servers'] must be provided in its extra."
        )
    _resolve_callbacks(conn_id, config)
    if "cloud.goog" in servers and "managedkafka" in servers:
        config["oauth_cb"] = _google_token_callback(conn_id)
    else:
        _add_msk_iam_callback(config, servers)
    return config


def callback_allowlist() -> frozenset[str]:
    """Return the dotted paths ``[apache_kafka] callback_allowlist`` allows (comma-separated)."""
    value = conf.get(KAFKA_COMMON_CONFIG_SECTION, CALLBACK_ALLOWLIST_CONFIG_OPTION, fallback="") or ""
    return frozenset(path.strip() for path in value.split(",") if path.strip())


def _resolve_callbacks(conn_id: str, config: dict[str, Any]) -> None:
    """Replace each callback setting given as a dotted path by the callable, if the allowlist lists it."""
    named = {key: config[key] for key in CALLBACK_CONFIG_KEYS if isinstance(config.get(key), str)}
    if not named:
        return
    allowlist = callback_allowlist()
    where = f"[{KAFKA_COMMON_CONFIG_SECTION}] {CALLBACK_ALLOWLIST_CONFIG_OPTION}"
    for key, path in named.items():
        if path not in allowlist:
            listed = f"({', '.join(sorted(allowlist))})" if allowlist else "is empty"
            raise KStateConfigError(
                f"Kafka connection {conn_id!r}: refusing to resolve callback {key}={path!r}: {where} {listed}. "
                "Add the full importable path of each callback you trust to it."
            )
        config[key] = _import_path(conn_id, key, path)


def _import_path(conn_id: str, key: str, path: str) -> Any:
    module, _, name = path.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise KStateConfigError(
            f"Kafka connection {conn_id!r}: callback {key}={path!r} cannot be imported ({type(exc).__name__})"
        ) from exc


def _google_token_callback(conn_id: str) -> Any:
    try:
        from airflow.providers.google.cloud.hooks.managed_kafka import ManagedKafkaHook
    except ImportError as exc:
        raise KStateConfigError(
            f"Kafka connection {conn_id!r} names a Google Managed Kafka cluster: install "
            "apache-airflow-providers-google>=14.1.0 for its token callback."
        ) from exc
    return ManagedKafkaHook().get_confluent_token


def _add_msk_iam_callback(config: dict[str, Any], servers: str) -> None:
    mechanism = config.get("sasl.mechanism") or config.get("sasl.mechanisms")
    match = MSK_BOOTSTRAP_SERVERS_REGEX.search(servers)
    if mechanism != "OAUTHBEARER" or match is None or "oauth_cb" in config:
        return
    try:
        import aws_msk_iam_sasl_signer  # noqa: F401
    except ImportError as exc:
        raise KStateConfigError(
            "Amazon MSK IAM authentication needs aws-msk-iam-sasl-signer: "
            "pip install apache-airflow-providers-apache-kafka[msk]"
        ) from exc
    config["oauth_cb"] = partial(msk_iam_token, match.group("region").lower())


def msk_iam_token(region: str, config_str: str) -> tuple[str, float]:
    """Return an OAUTHBEARER token for Amazon MSK IAM and its expiry (epoch seconds): an ``oauth_cb``.

    :param region: the MSK cluster's AWS region.
    :param config_str: ``sasl.oauthbearer.config`` (passed by librdkafka; not needed to sign the token).
    """
    from aws_msk_iam_sasl_signer import MSKAuthTokenProvider

    token, expiry_ms = MSKAuthTokenProvider.generate_auth_token(region)
    return token, expiry_ms / 1000
