"""The state side refuses a broker that lies (issue 17), without a broker: the doctor's verdict is faked.

The live proofs are in ``tests/tansu/test_tansu_state.py`` (Tansu) and the state tests on the embedded broker.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_kstate.compat import AirflowFailException
from airflow_provider_kstate.doctor.verdict import CheckResult, Verdict
from airflow_provider_kstate.errors import BrokerDeviationError, KStateConfigError, SparkApplicationError
from airflow_provider_kstate.hooks.doctor import KStateDoctorHook
from airflow_provider_kstate.hooks.snapshot import KStateSnapshotHook
from airflow_provider_kstate.operators import spark_app
from airflow_provider_kstate.operators.deep_check import KStateDeepCheckOperator
from airflow_provider_kstate.operators.rebuild import KStateRebuildOperator
from airflow_provider_kstate.spark_apps import deep_check, kafka_io, rebuild
from airflow_provider_kstate.store import contract

TOPIC = "totals"


class Admin:
    def partition_count(self, topic: str) -> int:
        return 3


def _verdict(*broken: str) -> Verdict:
    results = {
        p: CheckResult(p not in broken, "seen on Tansu" if p in broken else "")
        for p in (
            "api.list_offsets",
            "latest_offset",
            "read_committed",
            "last_stable_offset",
            "config_defaults",
        )
    }
    return Verdict("tansu_cluster", 0.0, results)


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Record what reaches Spark (``submit``) and the snapshot lease; fake the admin hook."""
    seen: list[Any] = []
    monkeypatch.setattr(KStateSnapshotHook, "admin", property(lambda self: Admin()))
    monkeypatch.setattr(KStateSnapshotHook, "manifest", lambda self, uri: None)

    def submit(self: Any, hook: Any, context: Any = None, args: list[str] | None = None) -> dict[str, Any]:
        seen.append(("submit", list(args or [])))
        return {  # what the applications report (read typed: a rebuild's names what it committed)
            "ok": True,
            "topic": TOPIC,
            "snapshot_uri": "/s",
            "snapshot_version": "v-20260101T000000-abcdef",
            "records_read": 0,
            "rows": 0,
            "layout": 3,
            "partitions": {},
        }

    monkeypatch.setattr(spark_app.KStateSparkApplicationOperator, "submit", submit)

    import contextlib

    @contextlib.contextmanager
    def lease(self: Any, context: Any, root: str) -> Any:
        seen.append(("lease", root))
        yield root

    monkeypatch.setattr(KStateRebuildOperator, "snapshot_lease", lease)
    return seen


def _doctor(monkeypatch: pytest.MonkeyPatch, verdict: Verdict) -> None:
    monkeypatch.setattr(KStateDoctorHook, "verdict", lambda self, refresh=False, ttl=0.0: verdict)


def test_the_rebuild_is_refused_before_the_lease_and_spark_when_read_committed_is_broken(
    calls: list[Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _doctor(monkeypatch, _verdict("read_committed"))
    op = KStateRebuildOperator(task_id="rebuild", topic=TOPIC, snapshot_uri=str(tmp_path / "snap"))
    with pytest.raises(AirflowFailException, match=r"read_committed.*Nothing was changed") as refused:
        op.execute({})
    assert isinstance(refused.value.__cause__, BrokerDeviationError)
    assert "allow_broker_deviation=['read_committed']" in str(refused.value)
    assert calls == []  # no lease taken, nothing submitted, nothing published


def test_the_deep_check_is_refused_before_spark(
    calls: list[Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _doctor(monkeypatch, _verdict("latest_offset", "last_stable_offset"))
    op = KStateDeepCheckOperator(task_id="deep", topic=TOPIC, snapshot_uri=str(tmp_path / "snap"))
    with pytest.raises(AirflowFailException, match="latest_offset.*last_stable_offset") as refused:
        op.execute({})
    assert isinstance(refused.value.__cause__, BrokerDeviationError)
    assert calls == []


def test_accepted_deviations_run_and_only_the_bound_ones_reach_the_app(
    calls: list[Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _doctor(monkeypatch, _verdict("read_committed", "latest_offset"))
    allow = "['read_committed', 'latest_offset', 'last_stable_offset']"  # as the DAG's template renders it
    op = KStateRebuildOperator(
        task_id="rebuild", topic=TOPIC, snapshot_uri=str(tmp_path / "snap"), allow_broker_deviation=allow
    )
    assert op.trust_broker() == ["latest_offset", "read_committed"]  # accepted: the hook logs RISK ACCEPTED
    op.execute({})
    ((kind, args),) = [c for c in calls if c[0] == "submit"]
    assert args[args.index("--allow-broker-deviation") + 1] == "latest_offset"  # only what the app can use
    deep = KStateDeepCheckOperator(task_id="deep", topic=TOPIC, snapshot_uri=str(tmp_path / "snap"))
    assert "--allow-broker-deviation" not in deep.app_args()


def test_an_unknown_deviation_name_is_a_config_error() -> None:
    from airflow_provider_kstate.operators.doctor import allowed_deviations

    op = KStateRebuildOperator(
        task_id="r", topic=TOPIC, snapshot_uri="/s", allow_broker_deviation="read_comitted"
    )
    with pytest.raises(KStateConfigError, match="read_comitted"):
        op.trust_broker()  # refused before the broker is asked
    with pytest.raises(KStateConfigError, match="read_comitted"):
        allowed_deviations(op.allow_broker_deviation)
    assert allowed_deviations("[]") == ()


def test_an_app_that_found_lagging_offsets_fails_with_a_broker_deviation(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    line = (
        f"{kafka_io.OFFSET_BOUNDS}: topic 'totals' on h:1: partition 0: bound 1, a fetch reached 30 (past it)"
    )
    reported: dict[str, Any] = {}

    def failing(self: Any, context: Any = None) -> None:
        """spark-submit exiting 2 after the application wrote its failure report: its code decides."""
        report = self.application_args[self.application_args.index("--report-file") + 1]
        contract.fail(report, reported["error"], lambda text: None, "kstate-rebuild", reported["code"])
        raise RuntimeError("Cannot execute: spark-submit ... Error code is: 2.")

    @contextlib.contextmanager
    def no_config(self: Any) -> Iterator[str]:
        yield "/dev/null"

    monkeypatch.setattr(SparkSubmitOperator, "execute", failing)
    monkeypatch.setattr(KStateSnapshotHook, "kafka_config_file", no_config)
    reported.update(error=line, code=contract.ErrorCode.OFFSET_BOUNDS)
    op = KStateRebuildOperator(task_id="rebuild", topic=TOPIC, snapshot_uri=str(tmp_path / "snap"))
    with pytest.raises(
        BrokerDeviationError, match=r"partition 0: bound 1, a fetch reached 30.*nothing was published"
    ):
        op.submit(KStateSnapshotHook(), {}, [])

    reported.update(error="topic 'x' does not exist", code=contract.ErrorCode.CHANGELOG_UNREADABLE)
    with pytest.raises(SparkApplicationError, match="does not exist"):
        op.submit(KStateSnapshotHook(), {}, [])


@pytest.mark.parametrize(
    ("value", "accepts"),
    [
        ("", False),
        ("read_committed", False),
        ("read_committed,latest_offset", True),
        ("last_stable_offset", True),
    ],
)
def test_the_apps_parse_the_accepted_deviations(value: str, accepts: bool) -> None:
    base = ["--kafka-config-file", "c", "--topic", "t", "--snapshot-uri", "/s", "--report-file", "r"]
    for parse in (rebuild.parse_args, deep_check.parse_args):
        args = parse([*base, "--allow-broker-deviation", value])
        assert kafka_io.accepts_fetch_ends(args) is accepts
    assert kafka_io.accepts_fetch_ends(argparse.Namespace()) is False


class _Msg:
    def __init__(self, offset: int, eof: bool) -> None:
        self._offset, self._eof = offset, eof

    def offset(self) -> int:
        return self._offset

    def error(self) -> Any:
        if not self._eof:
            return None
        from confluent_kafka import KafkaError

        return KafkaError(KafkaError._PARTITION_EOF)


def test_a_read_that_hits_the_partition_end_below_its_bound_is_refused() -> None:
    kafka_io._check_short(_Msg(30, eof=True), TOPIC, 0, 30)  # EOF at the bound: fine
    kafka_io._check_short(_Msg(12, eof=False), TOPIC, 0, 30)  # a record: the read goes on
    with pytest.raises(
        kafka_io.OffsetBoundError,
        match=r"totals\[0\]: the read ended at the partition's end 12, short of its bound 30",
    ):
        kafka_io._check_short(_Msg(12, eof=True), TOPIC, 0, 30)
