"""On Tansu, the broker that breaks promises: the doctor names each broken promise, and the increase refuses
at plan time and pauses no one (issue 17).

A consumer with the client piece runs through every test; it must never be asked to pause, never lose its
assignment, and the topic must keep its partition count.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from kstate_support.kafka import partition_count, task_states

from airflow_provider_kstate.client_piece.consumer import ControlledConsumer
from airflow_provider_kstate.compat import AirflowFailException
from airflow_provider_kstate.errors import BrokerDeviationError, BrokerUnsupportedError
from airflow_provider_kstate.operators.doctor import KStateBrokerDoctorOperator
from airflow_provider_kstate.operators.plan import KStatePlanOperator

#: What Tansu 0.6.0 breaks (measured; tansu-findings): the doctor must name every one of them.
TANSU_BREAKS = {
    "api.create_partitions",
    "latest_offset",
    "read_committed",
    "last_stable_offset",
    "unknown_group",
    "group_members",
    "log_append_time",
    "config_defaults",
}


def _doctor(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "airflow_provider_kstate.doctor", "--bootstrap-servers", bootstrap, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=240)


def test_the_doctor_names_each_promise_tansu_breaks(bootstrap: str) -> None:
    out = _doctor(bootstrap, "--refresh", "--json")
    assert out.returncode == 3, out.stderr[-2000:]
    verdict = json.loads(out.stdout)
    assert set(verdict["broken"]) == TANSU_BREAKS, verdict
    assert verdict["results"]["offset_readback"]["ok"] is True  # what Tansu keeps is not reported broken
    assert "REFUSED" in out.stderr and "Nothing was changed" in out.stderr
    # The same verdict comes from the cache the second time (its seconds: bench/bench_doctor.py).
    again = _doctor(bootstrap, "--json", "--needs", "increase")
    assert again.returncode == 3 and json.loads(again.stdout)["cached"] is True


class Held:
    """A ControlledConsumer polled in a thread; records every revocation and pause."""

    def __init__(self, config: dict[str, Any], topic: str, group: str) -> None:
        self.events: list[str] = []
        self.assigned = threading.Event()
        self.stop = threading.Event()
        self.consumer = ControlledConsumer(
            {**config, "group.id": group, "auto.offset.reset": "earliest"},
            [topic],
            client_id=f"{group}-m0",
            check_interval=0.2,
            on_assign=lambda _c, parts: (self.assigned.set(), self.events.append(f"assign {len(parts)}")),
            on_revoke=lambda _c, parts: self.events.append(f"revoke {len(parts)}"),
            on_state_change=lambda state: self.events.append(state),
        )
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            self.consumer.poll(0.2)


@pytest.fixture
def held_consumer(
    kafka_config: dict[str, Any], make_topic: Callable[..., str]
) -> Iterator[tuple[str, str, Held]]:
    topic = make_topic("grow", partitions=1)
    group = f"{topic}-g"
    held = Held(kafka_config, topic, group)
    held.thread.start()
    try:
        # Tansu delays a new group's first assignment (~23 s measured).
        assert held.assigned.wait(90), "the consumer never got its assignment on Tansu"
        yield topic, group, held
    finally:
        held.stop.set()
        held.thread.join(30)
        held.consumer.close()


def _assert_nobody_paused(admin: Any, topic: str, held: Held) -> None:
    assert partition_count(admin, topic) == 1
    assert not [e for e in held.events if e.startswith("revoke") or e == "paused"], held.events


def test_the_increase_refuses_at_plan_time_and_pauses_no_one(
    run_dag: Callable[..., Any],
    admin: Any,
    held_consumer: tuple[str, str, Held],
    capfd: pytest.CaptureFixture[str],
) -> None:
    topic, group, held = held_consumer
    dr = run_dag("kstate_partition_increase", {"topic": topic, "partitions": 2, "consumer_groups": [group]})
    assert dr.state == "failed"
    states = task_states(dr)
    assert states["check_broker"] == "failed"
    assert states["plan"] == "upstream_failed"
    assert states["pause_window"] == "upstream_failed"
    _assert_nobody_paused(admin, topic, held)
    # The same check, called directly, names the promises and says nothing was changed.
    with pytest.raises(AirflowFailException) as info:
        KStateBrokerDoctorOperator(task_id="doctor", needs="increase").execute({})
    assert isinstance(info.value.__cause__, BrokerDeviationError)
    for promise in ("api.create_partitions", "latest_offset", "unknown_group", "group_members"):
        assert promise in str(info.value)
    assert "Nothing was changed" in str(info.value)


def test_with_every_behaviour_accepted_the_plan_still_refuses_a_broker_that_cannot_create(
    run_dag: Callable[..., Any],
    admin: Any,
    held_consumer: tuple[str, str, Held],
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Even with every broken behaviour accepted as a risk (and the API check among them), the plan asks the
    broker to validate the increase, and Tansu cannot: the run fails at plan with BrokerUnsupportedError."""
    topic, group, held = held_consumer
    conf = {
        "topic": topic,
        "partitions": 2,
        "consumer_groups": [group],
        "allow_broker_deviation": sorted(TANSU_BREAKS),
    }
    dr = run_dag("kstate_partition_increase", conf)
    assert dr.state == "failed"
    states = task_states(dr)
    assert states["check_broker"] == "success"
    assert states["plan"] == "failed"
    assert states["pause_window"] == "upstream_failed"
    _assert_nobody_paused(admin, topic, held)
    plan = KStatePlanOperator(
        task_id="plan",
        topic=topic,
        partitions=2,
        consumer_groups=[group],
        allow_broker_deviation=sorted(TANSU_BREAKS),
        dry_run=True,
    )
    with pytest.raises(AirflowFailException, match="CreatePartitions") as refused:
        plan.execute({"ti": SimpleNamespace(dag_id="direct", run_id="r1")})
    assert isinstance(refused.value.__cause__, BrokerUnsupportedError)
    _assert_nobody_paused(admin, topic, held)
