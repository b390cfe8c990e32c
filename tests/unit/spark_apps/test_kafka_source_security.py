"""Spark's Kafka source gets the secured connections too: mutual TLS and unsecured OAUTHBEARER (no broker)."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_provider_kstate.spark_apps.kafka_source import Untranslatable, java_options


def test_a_client_certificate_becomes_an_inline_pem_key_store(tmp_path: Path) -> None:
    (tmp_path / "c.pem").write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    (tmp_path / "c.key").write_text("-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n")
    options = java_options(
        {
            "bootstrap.servers": "b:9094",
            "security.protocol": "SSL",
            "ssl.ca.location": "/ca.pem",
            "ssl.certificate.location": str(tmp_path / "c.pem"),
            "ssl.key.location": str(tmp_path / "c.key"),
        }
    )
    assert options["kafka.ssl.keystore.type"] == "PEM" and options["kafka.ssl.truststore.type"] == "PEM"
    assert options["kafka.ssl.keystore.certificate.chain"].startswith("-----BEGIN CERTIFICATE-----")
    assert options["kafka.ssl.keystore.key"].startswith("-----BEGIN PRIVATE KEY-----")
    assert "kafka.ssl.certificate.location" not in options


def test_a_certificate_without_its_key_or_an_encrypted_key_is_untranslatable(tmp_path: Path) -> None:
    with pytest.raises(Untranslatable, match="go together"):
        java_options({"security.protocol": "SSL", "ssl.certificate.location": "/c.pem"})
    with pytest.raises(Untranslatable):
        java_options(
            {"ssl.certificate.location": "/c.pem", "ssl.key.location": "/k", "ssl.key.password": "x"}
        )


def test_an_unsecured_oauthbearer_token_becomes_the_java_clients_jaas_line() -> None:
    options = java_options(
        {
            "bootstrap.servers": "b:9095",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "OAUTHBEARER",
            "enable.sasl.oauthbearer.unsecure.jwt": True,
            "sasl.oauthbearer.config": "principal=kstate",
        }
    )
    assert options["kafka.sasl.mechanism"] == "OAUTHBEARER"
    assert options["kafka.sasl.jaas.config"] == (
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        'unsecuredLoginStringClaim_sub="kstate";'
    )


def test_oauth_from_an_identity_provider_is_untranslatable() -> None:
    with pytest.raises(Untranslatable, match="unsecure"):
        java_options({"sasl.mechanisms": "OAUTHBEARER", "sasl.oauthbearer.config": "principal=a"})
    with pytest.raises(Untranslatable, match="principal=<name>"):
        java_options(
            {
                "sasl.mechanisms": "OAUTHBEARER",
                "enable.sasl.oauthbearer.unsecure.jwt": "true",
                "sasl.oauthbearer.config": "principal=a scope=x",
            }
        )
