"""A refused handshake named (doctor/handshake.py): librdkafka's errors become KafkaAuthenticationError."""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_kstate.doctor import handshake as connection
from airflow_provider_kstate.doctor.handshake import (
    client_certificate_expiry,
    describe_refusal,
    refused_connection,
    tls_verify_failure,
)
from airflow_provider_kstate.errors import KafkaAuthenticationError

SASL = {
    "bootstrap.servers": "127.0.0.1:9093",
    "security.protocol": "SASL_SSL",
    "sasl.mechanisms": "SCRAM-SHA-512",
    "sasl.username": "kstate",
    "sasl.password": "pw-SECRET",
}


def test_a_sasl_refusal_names_the_listener_the_mechanism_and_no_secret() -> None:
    detail = (
        "sasl_ssl://127.0.0.1:9093/bootstrap: SASL authentication error: Authentication failed during "
        "authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"
    )
    message = describe_refusal(SASL, "_AUTHENTICATION", detail, "connection 'k'")
    assert message.startswith(
        "Kafka connection 'k' (SASL_SSL listener at 127.0.0.1:9093) refused the connection:"
    )
    assert "authentication failed: SASL SCRAM-SHA-512 rejected the credentials" in message
    assert "pw-SECRET" not in message and message.endswith("Nothing was changed.")


def test_a_tls_alert_from_the_broker_names_the_client_certificate() -> None:
    detail = (
        "ssl://h:9094/bootstrap: Receive failed: error:0A000412:SSL routines::ssl/tls alert bad certificate"
    )
    message = describe_refusal(
        {"security.protocol": "SSL", "bootstrap.servers": "h:9094"}, "_TRANSPORT", detail
    )
    assert "TLS client certificate refused" in message and "'bad certificate'" in message


def test_certificate_verify_failures_take_their_reason_from_python_ssl(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    detail = (
        "ssl://h:9094/bootstrap: SSL handshake failed: error:0A000086:SSL routines::certificate verify failed"
    )
    config = {"security.protocol": "SSL", "bootstrap.servers": "h:9094"}
    monkeypatch.setattr(connection, "tls_verify_failure", lambda cfg: "certificate has expired")
    assert "certificate expired: the broker's certificate failed verification" in describe_refusal(
        config, "_SSL", detail
    )
    monkeypatch.setattr(
        connection, "tls_verify_failure", lambda cfg: "unable to get local issuer certificate"
    )
    message = describe_refusal(config, "_SSL", detail)
    assert "certificate verify failed: unable to get local issuer certificate" in message
    assert "not signed by a CA in ssl.ca.location" in message


def test_plaintext_and_unreachable_listeners_have_no_tls_reason() -> None:
    assert tls_verify_failure({"bootstrap.servers": "127.0.0.1:1"}) == ""
    assert (
        tls_verify_failure({"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SSL"}, timeout=1) == ""
    )


@pytest.fixture
def self_signed_server(tmp_path: Path) -> Iterator[str]:
    """A TLS server on 127.0.0.1 whose certificate nobody trusts (made by openssl); yields its address."""
    import subprocess

    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "k.pem", "-out", "c.pem",
         "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1"],
        cwd=tmp_path, check=True, capture_output=True,
    )  # fmt: skip
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "c.pem", tmp_path / "k.pem")
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            try:
                with context.wrap_socket(conn, server_side=True):
                    pass
            except (OSError, ssl.SSLError):
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join(2)
    server.close()


def test_an_untrusted_broker_certificate_is_refused_by_name(self_signed_server: str) -> None:
    """A real librdkafka handshake against a certificate no CA of the config signed: refused within
    seconds, not retryable, naming the listener and "certificate verify failed"."""
    config: dict[str, Any] = {"bootstrap.servers": self_signed_server, "security.protocol": "SSL"}
    assert tls_verify_failure(config) == "self-signed certificate"
    started = time.monotonic()
    refused = refused_connection(config, timeout=8, name="connection 'k'")
    assert isinstance(refused, KafkaAuthenticationError) and not refused.retryable
    # timeout contract: the probe gives up at its 8 s timeout (and the refusal above proves it came before);
    # the bound only catches a probe that overstays it, with 2x + 3 s for a loaded 2-core machine
    assert time.monotonic() - started < 2 * 8 + 3
    message = str(refused)
    assert (
        f"(SSL listener at {self_signed_server}) refused the connection: certificate verify failed" in message
    )


def _client_cert(path: Path, not_before: Any, not_after: Any) -> Path:
    """A self-signed client certificate valid from ``not_before`` to ``not_after`` (PEM)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kstate")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .sign(key, hashes.SHA256())
    )
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path


def test_an_expired_client_certificate_is_named_when_the_broker_refuses_it(tmp_path: Path) -> None:
    """The broker (on the JDK) answers an expired client certificate with "certificate unknown", as it does
    an unknown CA's: the client's own certificate, read locally, names the cause and its date."""
    from datetime import datetime, timezone

    expired = _client_cert(
        tmp_path / "expired.pem",
        datetime(2020, 1, 1, tzinfo=timezone.utc),
        datetime(2020, 2, 1, tzinfo=timezone.utc),
    )
    config = {
        "security.protocol": "SSL",
        "bootstrap.servers": "h:9094",
        "ssl.certificate.location": str(expired),
        "ssl.key.location": str(tmp_path / "key.pem"),
    }
    detail = "ssl://h:9094/bootstrap: Receive failed: error:0A000416:SSL routines::ssl/tls alert certificate unknown"
    message = describe_refusal(config, "_TRANSPORT", detail, "connection 'k'")
    assert "(SSL listener at h:9094) refused the connection: certificate expired:" in message
    assert "ssl.certificate.location expired on 2020-02-01 00:00 UTC" in message
    assert "'certificate unknown'" in message
    # inline PEM too; a valid certificate keeps the generic cause; not TLS: not read
    inline = {**config, "ssl.certificate.pem": expired.read_text()}
    del inline["ssl.certificate.location"]
    assert client_certificate_expiry(inline) == "ssl.certificate.pem expired on 2020-02-01 00:00 UTC"
    now = datetime.now(timezone.utc)
    valid = _client_cert(
        tmp_path / "valid.pem", datetime(2020, 1, 1, tzinfo=timezone.utc), now.replace(year=now.year + 1)
    )
    ok = {**config, "ssl.certificate.location": str(valid)}
    assert client_certificate_expiry(ok) == ""
    assert "TLS client certificate refused" in describe_refusal(ok, "_TRANSPORT", detail)
    assert client_certificate_expiry({**config, "security.protocol": "PLAINTEXT"}) == ""
    assert client_certificate_expiry({**config, "ssl.certificate.location": str(tmp_path / "none.pem")}) == ""
    future = _client_cert(
        tmp_path / "future.pem", now.replace(year=now.year + 1), now.replace(year=now.year + 2)
    )
    assert "is not valid before" in client_certificate_expiry(
        {**config, "ssl.certificate.location": str(future)}
    )
