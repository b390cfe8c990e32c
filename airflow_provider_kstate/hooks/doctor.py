"""The broker doctor on an Airflow connection: the cluster's verdict, and refusing a run it cannot trust."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from airflow.sdk import BaseHook

from airflow_provider_kstate.doctor.cache import DEFAULT_CACHE_TOPIC, DEFAULT_TTL
from airflow_provider_kstate.doctor.diagnosis import ClusterUnreachable, diagnose, last_verdict
from airflow_provider_kstate.doctor.verdict import BrokerDeviation, Verdict
from airflow_provider_kstate.errors import BrokerDeviationError, BrokerUnavailableError
from airflow_provider_kstate.hooks.admin import KStateAdminHook
from airflow_provider_kstate.increase.model import DEFAULT_CONN_ID


class KStateDoctorHook(BaseHook):
    """Check that the cluster of a ``kafka`` connection keeps the promises the provider relies on.

    The cheap checks (ApiVersions) run on every call; the behavioural checks (a private probe topic, a
    transaction, probe groups; ~7 s on Kafka) are cached per cluster in ``cache_topic`` for ``ttl``
    seconds, shared by every worker.

    :param kafka_config_id: the Airflow connection id.
    :param request_timeout: seconds each request may take.
    :param cache_topic: the topic that caches verdicts.
    """

    hook_name = "Kafka State broker doctor (kstate)"

    def __init__(
        self,
        kafka_config_id: str = DEFAULT_CONN_ID,
        request_timeout: float = 20.0,
        cache_topic: str = DEFAULT_CACHE_TOPIC,
    ) -> None:
        super().__init__()
        self.admin = KStateAdminHook(kafka_config_id=kafka_config_id, request_timeout=request_timeout)
        self.kafka_config_id = kafka_config_id
        self.request_timeout = request_timeout
        self.cache_topic = cache_topic

    def client_config(self) -> dict[str, Any]:
        """The librdkafka config of the connection (holds secrets: never log it)."""
        return self.admin.client_config()

    def verdict(self, refresh: bool = False, ttl: float = DEFAULT_TTL) -> Verdict:
        """Return the cluster's verdict (behavioural checks from the cache unless ``refresh`` or expired)."""
        try:
            verdict, cached = diagnose(
                self.client_config(), refresh, ttl, self.request_timeout, self.cache_topic
            )
        except ClusterUnreachable as exc:
            raise BrokerUnavailableError(f"Kafka connection {self.kafka_config_id!r}: {exc}") from exc
        self.log.info(
            "DOCTOR %s", "behavioural checks from the cache" if cached else "behavioural checks run now"
        )
        for line in verdict.lines():
            self.log.info("DOCTOR %s", line)
        return verdict

    def last_verdict(self) -> Verdict | None:
        """Return the cached verdict without probing (None when the cluster was never checked)."""
        return last_verdict(self.client_config(), self.request_timeout, self.cache_topic)

    def require(
        self,
        needed: Iterable[str],
        allow: Iterable[str] = (),
        what: str = "this run",
        refresh: bool = False,
        ttl: float = DEFAULT_TTL,
    ) -> Verdict:
        """Return the verdict; raise :class:`BrokerDeviationError` when a needed promise is broken and not
        allowed (each allowed one is logged as ``RISK ACCEPTED``)."""
        verdict = self.verdict(refresh, ttl)
        for promise in refuse(verdict, needed, allow, what):
            self.log.warning("DOCTOR %s", verdict.risk_line(promise, what))
        return verdict


def refuse(verdict: Verdict, needed: Iterable[str], allow: Iterable[str], what: str) -> list[str]:
    """Apply :meth:`Verdict.refuse` (return the accepted deviations), translating the domain error into
    :class:`BrokerDeviationError`."""
    try:
        return verdict.refuse(needed, allow, what)
    except BrokerDeviation as exc:
        raise BrokerDeviationError(str(exc)) from exc
