"""Why a cluster refuses a connection: SASL authentication or TLS, named before anything changes.

librdkafka retries a refused handshake forever and reports it only through its ``error_cb``
(``_AUTHENTICATION``, ``_SSL``); a request then times out as ``_TRANSPORT``, indistinguishable from a
cluster that is down. :func:`refused_connection` connects once with a probe client that listens to those
errors and, for a certificate librdkafka only calls "verify failed", asks Python's TLS for the reason
(expired, unknown CA, wrong host name). The answer is a
:class:`~airflow_provider_kstate.errors.KafkaAuthenticationError` (not retryable: a retry sends the same
credentials) that names the listener (bootstrap address, ``security.protocol``) and the cause; it never
holds a secret (librdkafka's messages name the mechanism, never the user's password).
"""

from __future__ import annotations

import logging
import socket
import ssl
import time
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from confluent_kafka import KafkaException

from airflow_provider_kstate.admin_client import AdminClient
from airflow_provider_kstate.errors import KafkaAuthenticationError

__all__ = [
    "REFUSALS",
    "client_certificate_expiry",
    "raise_if_refused",
    "refused_connection",
    "security_of",
    "tls_verify_failure",
]

#: librdkafka's error names of a refused handshake (``error_cb``).
REFUSALS = frozenset({"_AUTHENTICATION", "_SSL", "SASL_AUTHENTICATION_FAILED"})
#: The settings of a probe client that are not the connection's: no logs (the caller names the cause).
_QUIET: dict[str, Any] = {"log_level": 0, "log.connection.close": False}
#: Settings a probe must not take over from the caller's config (callbacks and client roles).
_SKIP = ("error_cb", "logger", "stats_cb", "throttle_cb", "group.id", "transactional.id")

log = logging.getLogger(__name__)


def security_of(config: Mapping[str, Any]) -> str:
    """The connection's ``security.protocol`` (``PLAINTEXT`` when unset), upper case."""
    return str(config.get("security.protocol") or "PLAINTEXT").upper()


def refused_connection(
    config: Mapping[str, Any], timeout: float = 5.0, name: str = ""
) -> KafkaAuthenticationError | None:
    """Connect with ``config`` once (a probe client) and return the error naming why the cluster refused
    the connection, or None when it did not (it answered, or did not answer at all: unreachable).

    :param config: the librdkafka settings of the connection (holds secrets: never logged).
    :param timeout: seconds to wait for the handshake's outcome.
    :param name: how the message names the connection (a connection id); the bootstrap address is added.
    """
    errors: list[Any] = []
    settings: dict[str, Any] = {k: v for k, v in config.items() if k not in _SKIP}
    settings.update(_QUIET, error_cb=errors.append)
    probe = AdminClient(settings)
    deadline = time.monotonic() + timeout
    refused = None
    while time.monotonic() < deadline and refused is None:
        try:
            probe.list_topics(timeout=min(1.0, max(deadline - time.monotonic(), 0.1)))
            return None
        except KafkaException:
            pass
        probe.poll(0)
        refused = next((e for e in errors if _is_refusal(e.name(), e.str())), None)
    if refused is None:
        return None
    return KafkaAuthenticationError(describe_refusal(config, refused.name(), refused.str(), name))


def raise_if_refused(config: Mapping[str, Any], timeout: float = 5.0, name: str = "") -> None:
    """Raise :class:`KafkaAuthenticationError` when the cluster refuses the connection's handshake (see
    :func:`refused_connection`); return when it answers, or does not answer at all."""
    refused = refused_connection(config, timeout, name)
    if refused is not None:
        raise refused


def _is_refusal(code: str, detail: str) -> bool:
    """A handshake error, or a TLS alert the broker sent (it refused the client's certificate: librdkafka
    reports that as a transport error)."""
    return code in REFUSALS or (code == "_TRANSPORT" and "tls alert" in detail.lower())


def describe_refusal(config: Mapping[str, Any], code: str, detail: str, name: str = "") -> str:
    """The message of a refused connection: the listener, the cause and what to check (no secret)."""
    protocol = security_of(config)
    servers = str(config.get("bootstrap.servers", ""))
    mechanism = str(config.get("sasl.mechanisms") or config.get("sasl.mechanism") or "GSSAPI")
    where = f"Kafka {name + ' ' if name else ''}({protocol} listener at {servers})"
    lowered = detail.lower()
    if "tls alert" in lowered:
        alert = lowered.split("tls alert", 1)[1].split(":")[0].strip() or "handshake failure"
        expiry = client_certificate_expiry(config)
        if expiry:
            # A broker on the JDK answers any client certificate it cannot validate with the same alert
            # ("certificate unknown"): the client's own certificate, read here, tells the expired one apart.
            what = "certificate expired" if "expired" in expiry else "certificate not yet valid"
            cause = (
                f"{what}: the client's certificate ({expiry}) was refused by the broker (TLS "
                f"alert {alert!r}). Renew the certificate of ssl.certificate.location (or fix this machine's "
                "clock)"
            )
        else:
            what = "certificate expired" if "expired" in alert else "TLS client certificate refused"
            cause = (
                f"{what}: the broker refused the client's certificate (TLS alert {alert!r}). The certificate "
                "of ssl.certificate.location must be signed by a CA the broker trusts, not expired, and match "
                "ssl.key.location"
            )
    elif "certificate verify failed" in lowered or ("certificate" in lowered and code == "_SSL"):
        reason = tls_verify_failure(config)
        if reason and "expired" in reason:
            cause = (
                f"certificate expired: the broker's certificate failed verification ({reason}). Renew the "
                "broker's certificate (or fix this machine's clock)"
            )
        elif reason:
            cause = (
                f"certificate verify failed: {reason}. The broker's certificate is not signed by a CA in "
                "ssl.ca.location (an unknown CA), or does not name the host connected to"
            )
        else:
            cause = (
                "TLS handshake failed: the broker refused the client's certificate or the client refused the "
                "broker's (check ssl.certificate.location and ssl.key.location against the broker's "
                "truststore, and ssl.ca.location)"
            )
    elif code in ("_AUTHENTICATION", "SASL_AUTHENTICATION_FAILED") and "sasl" in lowered:
        cause = (
            f"authentication failed: SASL {mechanism} rejected the credentials (a wrong sasl.username or "
            "sasl.password, or a user without credentials of this mechanism on the cluster)"
        )
    elif code == "_SSL":
        cause = "TLS handshake failed"
    else:
        cause = "authentication failed"
    return f"{where} refused the connection: {cause}. librdkafka: {detail}. Nothing was changed."


def tls_verify_failure(config: Mapping[str, Any], timeout: float = 5.0) -> str:
    """Why the first bootstrap broker's certificate fails verification with the connection's CA (Python's
    ``ssl``: "certificate has expired", "self-signed certificate in certificate chain" ...); "" when it
    verifies, or when it cannot be asked (not TLS, no answer, a handshake failing for another reason)."""
    if security_of(config) not in ("SSL", "SASL_SSL"):
        return ""
    first = str(config.get("bootstrap.servers", "")).split(",")[0].strip()
    host, _, port = first.rpartition(":")
    if not host or not port.isdigit():
        return ""
    host = host.split("://")[-1].strip("[]")
    try:
        context = ssl.create_default_context(cafile=config.get("ssl.ca.location") or None)
    except (OSError, ssl.SSLError):
        return ""
    if str(config.get("ssl.endpoint.identification.algorithm", "https")).lower() == "none":
        context.check_hostname = False
    try:
        with (
            socket.create_connection((host, int(port)), timeout=timeout) as raw,
            context.wrap_socket(raw, server_hostname=host),
        ):
            return ""
    except ssl.SSLCertVerificationError as exc:
        return str(exc.verify_message or exc.reason or exc)
    except (OSError, ssl.SSLError, ValueError):
        return ""


def client_certificate_expiry(config: Mapping[str, Any], now: datetime | None = None) -> str:
    """Why the connection's own client certificate (``ssl.certificate.location``, or the inline
    ``ssl.certificate.pem``) is out of its validity period: ``"ssl.certificate.location expired on
    2020-02-01 00:00 UTC"``, ``"... not valid before ..."``; "" when it is valid, absent or unreadable.

    The first certificate of the PEM is the client's (a chain follows it). Only its dates are read: the
    file holds no secret (the key is ``ssl.key.location``).
    """
    if security_of(config) not in ("SSL", "SASL_SSL"):
        return ""
    where, pem = "ssl.certificate.pem", config.get("ssl.certificate.pem")
    if not pem and config.get("ssl.certificate.location"):
        where = "ssl.certificate.location"
        try:
            with open(str(config["ssl.certificate.location"]), "rb") as handle:
                pem = handle.read()
        except OSError:
            return ""
    if not pem:
        return ""
    try:
        from cryptography import x509

        cert = x509.load_pem_x509_certificate(pem.encode() if isinstance(pem, str) else pem)
    except (ImportError, ValueError):
        return ""
    now = now or datetime.now(timezone.utc)
    if cert.not_valid_after_utc < now:
        return f"{where} expired on {cert.not_valid_after_utc:%Y-%m-%d %H:%M} UTC"
    if cert.not_valid_before_utc > now:
        return f"{where} is not valid before {cert.not_valid_before_utc:%Y-%m-%d %H:%M} UTC"
    return ""
