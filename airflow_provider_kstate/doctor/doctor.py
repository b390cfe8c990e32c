"""One entry point for callers: the verdict of a cluster, cached behavioural checks plus fresh cheap ones."""

from __future__ import annotations

import logging
from typing import Any

from airflow_provider_kstate.doctor.cache import DEFAULT_CACHE_TOPIC, DEFAULT_TTL, VerdictCache
from airflow_provider_kstate.doctor.probe import Probe, cheap_checks, cluster_id
from airflow_provider_kstate.doctor.verdict import Verdict
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
    come from the cache unless it is older than ``ttl``, missing or ``refresh`` is set.

    :param config: librdkafka settings of the cluster (never logged).
    """
    cheap = cheap_checks(config, min(timeout, 10.0))
    cache = VerdictCache(config, cache_topic, timeout)
    cached = None if refresh else cache.load(cluster_id(config, timeout), max_age=ttl)
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


class ClusterUnreachable(BrokerUnavailableError):
    """Neither the cheap nor the behavioural checks reached the cluster (domain error)."""


def last_verdict(
    config: dict[str, Any], timeout: float = 20.0, cache_topic: str = DEFAULT_CACHE_TOPIC
) -> Verdict | None:
    """Return the cached verdict of the cluster without probing (None when it was never checked)."""
    return VerdictCache(config, cache_topic, timeout).load(cluster_id(config, timeout))
