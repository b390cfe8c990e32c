"""One entry point for callers: the verdict of a cluster, cached behavioural checks plus fresh cheap ones."""

from __future__ import annotations

import logging
from typing import Any

from airflow_provider_kstate.doctor.cache import DEFAULT_CACHE_TOPIC, DEFAULT_TTL, VerdictCache
from airflow_provider_kstate.doctor.handshake import raise_if_refused
from airflow_provider_kstate.doctor.probe import Probe, cheap_checks, cluster_id
from airflow_provider_kstate.doctor.promises import BEHAVIOUR_PROMISES
from airflow_provider_kstate.doctor.verdict import CheckResult, Verdict
from airflow_provider_kstate.errors import BrokerUnavailableError

log = logging.getLogger(__name__)


def diagnose(
    config: dict[str, Any],
    refresh: bool = False,
    ttl: float = DEFAULT_TTL,
    timeout: float = 20.0,
    cache_topic: str = DEFAULT_CACHE_TOPIC,
) -> tuple[Verdict, bool]:
    """Return ``(verdict, from_cache)``: the cheap ApiVersions checks run every time; the behavioural checks
    come from the cache unless it is older than ``ttl``, missing or ``refresh`` is set, or it is outgrown: it
    lacks a promise this version checks (cached by an older doctor), or holds one as not applicable that
    the broker now serves (an upgrade brought share groups).

    :param config: librdkafka settings of the cluster (never logged).
    """
    # A refused SASL or TLS handshake is named at once (not retryable), not after every check timed out.
    raise_if_refused(config, min(timeout, 5.0))
    cheap = cheap_checks(config, min(timeout, 10.0))
    cache = VerdictCache(config, cache_topic, timeout)
    cached = None if refresh else cache.load(cluster_id(config, timeout), max_age=ttl)
    if cached is not None and _outgrown(cached, cheap):
        cached = None
    if cached is None:
        behaviour = Probe(config, timeout).run()
        if all(r.ok is None for r in behaviour.results.values()):
            if all(r.ok is None for r in cheap.values()):
                raise ClusterUnreachable(
                    f"the cluster at {config.get('bootstrap.servers', '')} could not be checked: "
                    f"{next(iter(behaviour.results.values())).detail}"
                )
            log.warning("doctor: the behavioural checks could not run; the verdict is not cached")
        else:
            cache.save(behaviour)
    else:
        behaviour = cached
    return behaviour.merged(Verdict(behaviour.cluster, 0.0, cheap)), cached is not None


def _outgrown(cached: Verdict, cheap: dict[str, CheckResult]) -> bool:
    """True when ``cached`` lacks a behavioural promise (an older doctor cached it), or holds one as not
    applicable that the fresh ApiVersions (``cheap``) no longer does (the broker was upgraded since)."""
    if any(p not in cached.results for p in BEHAVIOUR_PROMISES):
        return True
    answered = any(r.ok is not None for r in cheap.values())
    return answered and any(p not in cheap for p in cached.not_applicable())


class ClusterUnreachable(BrokerUnavailableError):
    """Neither the cheap nor the behavioural checks reached the cluster (domain error)."""


def last_verdict(
    config: dict[str, Any], timeout: float = 20.0, cache_topic: str = DEFAULT_CACHE_TOPIC
) -> Verdict | None:
    """Return the cached verdict of the cluster without probing (None when it was never checked)."""
    return VerdictCache(config, cache_topic, timeout).load(cluster_id(config, timeout))
