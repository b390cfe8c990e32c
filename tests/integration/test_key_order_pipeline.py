"""The example pipeline's running totals (with CLOSE events) across an increase of its input topic (issue 21),
through ``dag.test()`` of ``kstate_example_pipeline`` (real local Spark) and ``kstate_partition_increase``.

The pipeline is a Structured Streaming query on Spark's own Kafka source (issue 30): each run processes what
the topic holds (``availableNow``), its offsets in the query's checkpoint; each micro-batch reduces every input
partition's records per account and writes the new totals with the batch's input offsets (for its group) in
one transaction. The group has committed offsets and no members, so the increase seeds it as an offline
group. A keyed ControlledProducer writes deposits and CLOSEs while the increase runs; the pipeline runs only
afterwards, so its next batch holds records from both sides of the producers' switch.

- ``preserve``: the barrier names the group; the pipeline splits each partition's records at the barrier's
  offset and applies an account's changes in that order: every total is exact after that one run, and a
  further run finds nothing to do.
- ``relax``: no barrier, so one batch spans the switch: an account that moved has older events on its old
  partition and newer ones on its new partition, and the per-partition fold cannot order them (one
  partition's change replaces the other's): totals end wrong. The scenario proves itself there.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from airflow_provider_kstate.client_piece.channel import ControlChannel
from airflow_provider_kstate.client_piece.producer import ControlledProducer
from airflow_provider_kstate.client_piece.protocol import Barrier, barrier_key
from tests.integration.test_state_maintenance import (
    PIPELINE,
    changelog_truth,
    create_topic,
    expected_totals,
    produce,
    xcom,
)

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.chaos]

INCREASE = "kstate_partition_increase"
ACCOUNTS = 40


def event(rnd: random.Random) -> tuple[bytes, bytes]:
    account = f"acct-{rnd.randrange(ACCOUNTS):03d}".encode()
    return account, b"CLOSE" if rnd.random() < 0.08 else str(rnd.randrange(-20, 100)).encode()


class Payments(threading.Thread):
    """A keyed ControlledProducer of deposits and CLOSEs at ``rate`` per second; ``sent`` keeps every event
    in write order with where it landed (partition, offset)."""

    def __init__(self, config: dict[str, Any], topic: str, seed: int, rate: float = 100.0) -> None:
        super().__init__(daemon=True)
        self.topic, self.rate, self.rnd = topic, rate, random.Random(seed)
        self.sent: list[list[Any]] = []  # [account, value, partition, offset]
        self.errors: list[str] = []
        self._halt = threading.Event()
        self.producer = ControlledProducer(
            {**config, "linger.ms": 5}, [topic], check_interval=0.1, client_id=f"{topic}-payments"
        )

    def run(self) -> None:
        start, n = time.monotonic(), 0
        while not self._halt.is_set():
            entry: list[Any] = [*event(self.rnd), -1, -1]
            self.sent.append(entry)

            def landed(err: Any, msg: Any, entry: list[Any] = entry) -> None:
                if err is not None:
                    self.errors.append(str(err))
                else:
                    entry[2], entry[3] = msg.partition(), msg.offset()

            self.producer.produce(self.topic, key=entry[0], value=entry[1], on_delivery=landed)
            self.producer.poll(0)
            n += 1
            delay = start + n / self.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        self.producer.flush(30)
        self.producer.close()

    def stop(self) -> None:
        self._halt.set()
        self.join(60)


@pytest.fixture
def topics(admin: AdminClient) -> Iterator[dict[str, str]]:
    tag = uuid.uuid4().hex[:8]
    names = {"input": f"kstate-totals-in-{tag}", "log": f"kstate-totals-log-{tag}", "group": f"totals-{tag}"}
    create_topic(admin, names["input"], 4)
    create_topic(admin, names["log"], 4, {"cleanup.policy": "compact"})
    yield names
    for f in admin.delete_topics([names["input"], names["log"]]).values():
        try:
            f.result(timeout=30)
        except Exception:  # noqa: BLE001 - best-effort clean-up
            pass


def run_pipeline(run_dag: Any, names: dict[str, str]) -> dict[str, Any]:
    conf = {"input_topic": names["input"], "changelog_topic": names["log"], "group": names["group"]}
    dr = run_dag(PIPELINE, conf)
    assert str(dr.state) == "success", {ti.task_id: ti.state for ti in dr.get_task_instances()}
    return xcom(dr, "running_totals")


def wrong(kafka_config: dict[str, Any], log: str, events: list[tuple[bytes, bytes]]) -> list[bytes]:
    """The accounts whose total in the changelog differs from the truth of ``events``."""
    got, want = changelog_truth(kafka_config, log), expected_totals(events)
    return sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))


@pytest.mark.parametrize("key_order", ["preserve", "relax"])
def test_running_totals_with_close_across_an_increase(
    key_order: str, kafka_config: dict[str, Any], topics: dict[str, str], run_dag: Any
) -> None:
    rnd = random.Random(7)
    first = [event(rnd) for _ in range(150)]
    produce(kafka_config, topics["input"], first)  # type: ignore[arg-type]
    assert run_pipeline(run_dag, topics)["ok"]
    assert not wrong(kafka_config, topics["log"], first)

    payments = Payments(kafka_config, topics["input"], seed=11)
    payments.start()
    try:
        time.sleep(2.0)
        conf = {"topic": topics["input"], "partitions": 6, "consumer_groups": [topics["group"]]}
        dr = run_dag(INCREASE, {**conf, "key_order": key_order, "dry_run": False})
        assert dr.state == "success", {ti.task_id: ti.state for ti in dr.get_task_instances()}
        time.sleep(3.0)
    finally:
        payments.stop()
    assert not payments.errors, payments.errors[:5]
    events = first + [(a, v) for a, v, _p, _o in payments.sent]
    moved = {a for a, _v, p, _o in payments.sent if p >= 4}
    assert moved, "no payment reached a new partition: the producers never switched"

    batch = run_pipeline(run_dag, topics)
    assert batch["ok"], batch
    if key_order == "relax":
        bad = wrong(kafka_config, topics["log"], events)
        print(f"relax: one batch across the switch: {len(bad)} of {ACCOUNTS} totals wrong ({batch})")
        assert not batch["ordered_at_barrier"]
        assert bad, "the scenario did not break a total under relax"
        return
    barrier = ControlChannel(kafka_config).snapshot(barrier_key(topics["input"]))[
        barrier_key(topics["input"])
    ]
    assert isinstance(barrier, Barrier) and topics["group"] in barrier.groups
    assert batch["ordered_at_barrier"] == barrier.epoch, batch
    assert batch["payments_read"] == len(payments.sent), batch  # the new partitions read from offset 0
    bad = wrong(kafka_config, topics["log"], events)
    rest = run_pipeline(run_dag, topics)
    assert rest["ok"] and rest["offsets_consumed"] == 0 and rest["payments_read"] == 0, rest
    print(
        f"preserve: one batch across the switch ordered at the barrier ({batch['offsets_consumed']} offsets, "
        f"{batch['payments_read']} payments); {len(bad)} of {ACCOUNTS} totals wrong; moved accounts {len(moved)}"
    )
    got, want = changelog_truth(kafka_config, topics["log"]), expected_totals(events)
    detail = {
        a: (got.get(a), want.get(a), [(v, p, o) for k, v, p, o in payments.sent if k == a]) for a in bad[:3]
    }
    assert not bad, f"totals wrong after the increase: {bad}; barrier {barrier.offsets}; {detail}"
