"""The state side on a broker that lies (issue 17): Tansu returns aborted records to read_committed readers
and its ListOffsets lags its fetches. Before, ``kstate_state_maintenance`` rebuilt a snapshot holding the
aborted ``acct-020 = 999999`` and reported success. Now the rebuild is refused before Spark starts and
nothing is published; the Spark-side bound check refuses a read whose bounds disagree with its fetch.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from airflow_provider_kstate.spark_apps import kafka_io

MAINTENANCE = "kstate_state_maintenance"
ACCOUNTS = [f"acct-{i:03d}".encode() for i in range(30)]


def _changelog(config: dict[str, Any], topic: str, txn_id: str) -> None:
    """Write every account's total in one committed transaction, then ``acct-020 = 999999`` in an aborted one."""
    producer = Producer({**config, "transactional.id": txn_id, "partitioner": "murmur2_random"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i, key in enumerate(ACCOUNTS):
        producer.produce(topic, key=key, value=str(100 + i).encode())
    producer.commit_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, key=b"acct-020", value=b"999999")
    producer.flush(30)
    producer.abort_transaction(30)


def _snapshot_values(uri: Path) -> dict[bytes, bytes]:
    import pyarrow.parquet as pq

    from airflow_provider_kstate.store.layout import resolve

    table = pq.read_table(resolve(str(uri)).uri)
    return dict(zip(table["key"].to_pylist(), table["value"].to_pylist(), strict=True))


def _states(dr: Any) -> dict[str, str]:
    return {ti.task_id: str(ti.state) for ti in dr.get_task_instances()}


def test_a_read_bounded_by_lagging_end_offsets_is_refused(
    kafka_config: dict[str, Any], make_topic: Callable[..., str]
) -> None:
    topic = make_topic("bounds", partitions=2)
    producer = Producer({**kafka_config, "linger.ms": 200})
    for i in range(60):
        producer.produce(topic, partition=i % 2, key=b"k%d" % i, value=b"v")
    producer.flush(10)  # one batch per partition: offsets 0..29
    assert kafka_io.list_offsets(kafka_config, topic, [0, 1]) == {0: (0, 1), 1: (0, 1)}  # the lie
    with pytest.raises(kafka_io.OffsetBoundError) as refused:
        kafka_io.checked_offsets(kafka_config, topic, [0, 1])
    message = str(refused.value)
    assert message.startswith(kafka_io.OFFSET_BOUNDS)
    assert "partition 0: bound 1, a fetch reached 30 (past it) and ListOffsets still says 1" in message
    assert "partition 1: bound 1" in message and "Nothing was read or written" in message
    warnings: list[str] = []
    accepted = kafka_io.checked_offsets(
        kafka_config, topic, [0, 1], accept_fetch_ends=True, warnings=warnings
    )
    assert accepted == {0: (0, 30), 1: (0, 30)}
    assert len(warnings) == 1 and warnings[0].startswith("RISK ACCEPTED")
    with pytest.raises(
        kafka_io.OffsetBoundError,
        match=r"\[0\]: the read ended at the partition's end 30, short of its bound 35",
    ):
        for _ in kafka_io.read_batches(kafka_config, topic, 0, 0, 35, timeout=10):
            pass


def test_maintenance_refuses_to_publish_state_from_aborted_records(
    kafka_config: dict[str, Any],
    make_topic: Callable[..., str],
    unique: Callable[[str], str],
    run_dag: Callable[..., Any],
    tmp_path: Path,
) -> None:
    topic = make_topic("totals", partitions=3, config={"cleanup.policy": "compact"})
    _changelog(kafka_config, topic, unique("txn"))
    uri = tmp_path / "snapshot"
    dr = run_dag(MAINTENANCE, {"changelog_topic": topic, "snapshot_uri": str(uri), "rebuild": "auto"})
    states = _states(dr)
    assert str(dr.state) == "failed", states
    # The DAG's first step, the broker doctor, refuses: nothing is read, checked or rebuilt.
    assert states["check_broker"] == "failed" and states["rebuild"] == "upstream_failed", states
    assert not uri.exists(), sorted(p.name for p in uri.iterdir())  # nothing was published
    # Called on its own, past the DAG's doctor step, the rebuild refuses too (its own check, before Spark).
    from airflow_provider_kstate.errors import BrokerDeviationError
    from airflow_provider_kstate.operators.rebuild import KStateRebuildOperator

    rebuild = KStateRebuildOperator(task_id="rebuild", topic=topic, snapshot_uri=str(uri))
    with pytest.raises(BrokerDeviationError, match="read_committed"):
        rebuild.trust_broker()
    assert not uri.exists()

    from airflow_provider_kstate.hooks.doctor import KStateDoctorHook

    verdict = KStateDoctorHook("kafka_default").last_verdict()
    assert verdict is not None and "read_committed" in verdict.broken()


@pytest.mark.chaos  # 142 s (a rebuild and a deep re-check in Spark): make chaos; make test-tansu keeps the refusal
def test_accepting_the_deviations_would_publish_the_aborted_value(
    kafka_config: dict[str, Any],
    make_topic: Callable[..., str],
    unique: Callable[[str], str],
    run_dag: Callable[..., Any],
    tmp_path: Path,
) -> None:
    """What the refusal prevents: with every deviation accepted (RISK ACCEPTED), the rebuild runs and the
    snapshot holds the aborted value."""
    from airflow_provider_kstate.doctor.promises import STATE_NEEDS

    topic = make_topic("accepted", partitions=3, config={"cleanup.policy": "compact"})
    _changelog(kafka_config, topic, unique("txn"))
    uri = tmp_path / "snapshot"
    conf = {"changelog_topic": topic, "snapshot_uri": str(uri), "rebuild": "force"}
    dr = run_dag(MAINTENANCE, {**conf, "allow_broker_deviation": list(STATE_NEEDS)})
    states = _states(dr)
    assert states["rebuild"] == "success", states
    values = _snapshot_values(uri)
    assert len(values) == len(ACCOUNTS)
    assert values[b"acct-020"] == b"999999"  # the aborted write, published: Kafka would give b"120"
