"""The share group promise without a broker: when it applies, how it is judged, how a verdict carries it."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_kstate.doctor import diagnosis, probe, share
from airflow_provider_kstate.doctor import promises as P
from airflow_provider_kstate.doctor.verdict import CheckResult, Verdict

# ApiVersions of Apache Kafka 4.0.0 (no share APIs) and 4.4.0 (share groups GA), cut to the keys judged,
# measured on the brokers started by kstate_support.broker.
KAFKA_400 = {1: (4, 17), 2: (1, 10), 8: (2, 9), 9: (1, 9), 15: (0, 6), 16: (0, 5), 37: (0, 3), 69: (0, 1)}
KAFKA_440 = {**KAFKA_400, 76: (1, 1), 77: (1, 1), 78: (1, 2), 79: (1, 2)}


def test_a_broker_without_share_apis_gets_not_applicable_naming_what_it_lacks() -> None:
    result = share.applicability(KAFKA_400)
    assert result is not None and result.applies is False and result.ok is None
    assert "ShareGroupHeartbeat (76)" in result.detail and "ShareFetch (78)" in result.detail
    assert share.applicability(KAFKA_440) is None
    half = {k: v for k, v in KAFKA_440.items() if k != 79}  # all three or no share groups
    assert share.applicability(half) is not None


def test_early_records_delivered_keep_the_promise_and_skipped_ones_break_it() -> None:
    kept = share.judge([0, 1, 2, 3, 4], {0, 1, 2, 3, 4}, 10.2)
    assert kept.ok is True and "5 records" in kept.detail
    broken = share.judge([0, 1, 2, 3, 4], set(), 12.0)
    assert broken.ok is False and "5 of the 5" in broken.detail and "offsets 0-4" in broken.detail
    partly = share.judge([0, 1, 2, 3, 4], {3, 4}, 12.0)
    assert partly.ok is False and "3 of the 5" in partly.detail and "offsets 0-2" in partly.detail


def test_the_share_promise_is_known_and_no_increase_needs_it() -> None:
    assert P.SHARE_NEW_PARTITIONS in P.ALL_PROMISES and P.SHARE_NEW_PARTITIONS in P.BEHAVIOUR_PROMISES
    assert P.SHARE_NEW_PARTITIONS not in P.INCREASE_NEEDS + P.STATE_NEEDS
    assert P.SHARE_GROUP_NEEDS == (P.SHARE_NEW_PARTITIONS,)
    assert P.check_names("share_new_partitions") == (P.SHARE_NEW_PARTITIONS,)


def _verdict(share_result: CheckResult) -> Verdict:
    results = {p: CheckResult(True) for p in P.ALL_PROMISES}
    results[P.SHARE_NEW_PARTITIONS] = share_result
    return Verdict("cluster-1", 1_700_000_000.0, results)


def test_not_applicable_is_neither_broken_nor_unchecked_and_reads_back() -> None:
    verdict = _verdict(CheckResult.not_applicable("no share groups here"))
    assert verdict.broken() == [] and verdict.unchecked(P.ALL_PROMISES) == []
    assert verdict.not_applicable() == [P.SHARE_NEW_PARTITIONS]
    assert any(line.startswith("  n/a    share_new_partitions") for line in verdict.lines())
    assert Verdict.from_dict(verdict.to_dict()) == verdict
    unprobed = _verdict(CheckResult(None, "not probed: ApiVersions not read"))
    assert unprobed.unchecked(P.ALL_PROMISES) == [P.SHARE_NEW_PARTITIONS]
    assert any(line.startswith("  ?      share_new_partitions") for line in unprobed.lines())


def test_a_verdict_cached_before_applies_existed_reads_as_applying() -> None:
    old = {"cluster": "c", "checked_at": 1.0, "results": {"latest_offset": {"ok": True, "detail": ""}}}
    assert Verdict.from_dict(old).results[P.LATEST_OFFSET].applies is True


def test_the_cheap_checks_say_not_applicable_from_api_versions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probe.wire, "api_versions", lambda config, timeout: KAFKA_400)
    assert probe.cheap_checks({"bootstrap.servers": "b:9092"})[P.SHARE_NEW_PARTITIONS].applies is False
    monkeypatch.setattr(probe.wire, "api_versions", lambda config, timeout: KAFKA_440)
    assert P.SHARE_NEW_PARTITIONS not in probe.cheap_checks({"bootstrap.servers": "b:9092"})


def test_a_cached_not_applicable_is_probed_again_once_the_broker_serves_share_groups(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Cached on Kafka 4.0 (not applicable), asked again after an upgrade to 4.4: the cache is outgrown."""
    cached = _verdict(CheckResult.not_applicable("no share groups here"))
    probed: list[bool] = []
    fresh = _verdict(CheckResult(True, "delivered"))

    class FakeCache:
        def __init__(self, *args: Any) -> None:
            pass

        def load(self, cluster: str, max_age: float | None = None) -> Verdict:
            return cached

        def save(self, verdict: Verdict) -> None:
            pass

    class FakeProbe:
        def __init__(self, *args: Any) -> None:
            pass

        def run(self) -> Verdict:
            probed.append(True)
            return fresh

    monkeypatch.setattr(diagnosis, "VerdictCache", FakeCache)
    monkeypatch.setattr(diagnosis, "Probe", FakeProbe)
    monkeypatch.setattr(diagnosis, "cluster_id", lambda config, timeout: "cluster-1")
    monkeypatch.setattr(probe.wire, "api_versions", lambda config, timeout: KAFKA_400)
    monkeypatch.setattr(diagnosis, "cheap_checks", probe.cheap_checks)
    verdict, from_cache = diagnosis.diagnose({"bootstrap.servers": "b:9092"})
    assert from_cache and probed == [] and verdict.not_applicable() == [P.SHARE_NEW_PARTITIONS]
    monkeypatch.setattr(probe.wire, "api_versions", lambda config, timeout: KAFKA_440)
    verdict, from_cache = diagnosis.diagnose({"bootstrap.servers": "b:9092"})
    assert not from_cache and probed == [True]
    assert verdict.results[P.SHARE_NEW_PARTITIONS].ok is True


def test_share_groups_refused_by_the_broker_do_not_apply_and_other_failures_stay_unchecked() -> None:
    """Kafka 4.1.2 lists the share APIs but refuses a share group's heartbeat (measured: UNSUPPORTED_VERSION)
    until the share.version feature is enabled."""
    from confluent_kafka import KafkaError, KafkaException

    disabled = share.refused(
        KafkaException(KafkaError(KafkaError.UNSUPPORTED_VERSION, "ShareGroupHeartbeat"))
    )
    assert disabled.applies is False and "share.version" in disabled.detail
    other = share.refused(KafkaException(KafkaError(KafkaError._TRANSPORT, "down")))
    assert other.applies is True and other.ok is None and "not probed" in other.detail


def test_a_verdict_cached_by_a_doctor_without_the_share_promise_is_probed_again() -> None:
    from airflow_provider_kstate.doctor.diagnosis import _outgrown

    older = Verdict(
        "c", 1.0, {p: CheckResult(True) for p in P.BEHAVIOUR_PROMISES if p != P.SHARE_NEW_PARTITIONS}
    )
    cheap = probe.api_checks(KAFKA_440)
    assert _outgrown(older, cheap)
    assert not _outgrown(_verdict(CheckResult(True, "delivered")), cheap)


def test_the_plan_reads_the_share_promise_as_kept_only_when_checked_and_kept() -> None:
    from airflow_provider_kstate.doctor.promises import SHARE_NEW_PARTITIONS
    from airflow_provider_kstate.doctor.verdict import CheckResult, Verdict

    def verdict(result: CheckResult | None) -> Verdict:
        return Verdict(
            cluster="c", checked_at=0.0, results={} if result is None else {SHARE_NEW_PARTITIONS: result}
        )

    assert verdict(CheckResult(True, "5 of 5 delivered")).kept(SHARE_NEW_PARTITIONS)
    assert not verdict(CheckResult(False, "0 of 5 delivered")).kept(SHARE_NEW_PARTITIONS)
    assert not verdict(CheckResult(None, "no share groups", applies=False)).kept(SHARE_NEW_PARTITIONS)
    assert not verdict(None).kept(SHARE_NEW_PARTITIONS)
