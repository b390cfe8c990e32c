"""The provider's metrics (metrics.py): names, tags, the downtime sink, and Airflow's own Stats carrying them."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kstate_support.statsd_listener import StatsdListener, airflow_statsd

from airflow_provider_kstate import metrics
from airflow_provider_kstate.increase.events import Events, GroupProgress, GroupState, ProgressFile
from airflow_provider_kstate.increase.plan import GroupClass, GroupPlan, Plan
from airflow_provider_kstate.metrics import METRICS, Metrics, RunMetrics, id_name, metric_rows, name_part

ROOT = Path(__file__).resolve().parents[2]
LOG = logging.getLogger("test_metrics")


class Recorder:
    """An emitter that keeps what it is given (Airflow's Stats has the same three methods)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, Any, Any]] = []

    def incr(self, stat: str, count: int = 1, rate: float = 1, *, tags: Any = None) -> None:
        self.sent.append(("incr", stat, count, tags))

    def gauge(
        self, stat: str, value: float, rate: float = 1, delta: bool = False, *, tags: Any = None
    ) -> None:
        self.sent.append(("gauge", stat, value, tags))

    def timing(self, stat: str, dt: Any, *, tags: Any = None) -> None:
        self.sent.append(("timing", stat, dt.total_seconds(), tags))


def _plan() -> Plan:
    live = GroupPlan(cls=GroupClass.ACTIVE, state="STABLE", pause=True, seed=True, wait=True)
    idle = GroupPlan(cls=GroupClass.EMPTY, state="EMPTY", pause=True, seed=True)
    return Plan("orders.eu", 2, 6, {"billing": live, "audit": idle})


def test_names_carrying_ids_follow_airflow_s_rules() -> None:
    assert name_part("orders.eu") == "orders__eu"  # a dot would add a level to the StatsD name
    assert name_part("team a/billing:v2") == "team_a_billing_v2"
    metric = metrics.GROUP_DOWNTIME
    assert id_name(metric, {"topic": "orders.eu", "group": "billing"}) == (
        "kstate.increase.group_downtime.orders__eu.billing"
    )
    assert id_name(metric, {"topic": "orders"}) is None  # an id is missing: only the tagged name
    assert id_name(metric, {"topic": "orders", "group": "g" * 300}) is None  # too long for StatsD
    for m in METRICS:  # Airflow's conventions: dotted lowercase, a type it knows
        assert m.name == m.name.lower() and m.name.startswith("kstate.") and " " not in m.name
        assert m.kind in (metrics.COUNTER, metrics.GAUGE, metrics.TIMER) and m.tags[0] == "topic"
        assert "uri" not in m.tags  # a snapshot URI may carry credentials and is unbounded


def test_each_metric_goes_tagged_and_under_its_name_with_ids() -> None:
    recorder = Recorder()
    out = Metrics(recorder, id_names=True)
    plan = _plan()
    out.window(plan, {"created": True, "seeded": 7, "switch": {"hold_to_switch_s": 0.25}})
    out.checked("totals", "deep", False, [1, 3])
    out.rebuilt("totals", {"rows": 120}, 4.5)
    topic = {"topic": "orders.eu"}
    assert recorder.sent == [
        ("incr", "kstate.increase.partitions_created", 4, topic),
        ("incr", "kstate.increase.partitions_created.orders__eu", 4, None),
        ("incr", "kstate.increase.partitions_seeded", 7, topic),
        ("incr", "kstate.increase.partitions_seeded.orders__eu", 7, None),
        ("timing", "kstate.increase.barrier_hold", 0.25, topic),
        ("timing", "kstate.increase.barrier_hold.orders__eu", 0.25, None),
        ("incr", "kstate.store.check.failed", 1, {"topic": "totals", "check": "deep"}),
        ("incr", "kstate.store.check.failed.totals.deep", 1, None),
        ("gauge", "kstate.store.damaged_partitions", 2, {"topic": "totals", "check": "deep"}),
        ("gauge", "kstate.store.damaged_partitions.totals.deep", 2, None),
        ("gauge", "kstate.store.rebuild.rows", 120, {"topic": "totals"}),
        ("gauge", "kstate.store.rebuild.rows.totals", 120, None),
        ("timing", "kstate.store.rebuild.duration", 4.5, {"topic": "totals"}),
        ("timing", "kstate.store.rebuild.duration.totals", 4.5, None),
    ]
    recorder.sent.clear()
    quiet = Metrics(recorder, id_names=False)  # [metrics] legacy_names_on = False: tagged names only
    quiet.window(plan, {"created": False, "seeded": 0, "switch": {"key_order": "relax"}})
    quiet.drained("orders", {"producer_downtime_s": 3.5})
    quiet.verified("orders", True)
    assert recorder.sent == [  # nothing created (a retry, a repair), no barrier: neither is sent
        ("incr", "kstate.increase.partitions_seeded", 0, topic),
        ("timing", "kstate.increase.drain_hold", 3.5, {"topic": "orders"}),
        ("incr", "kstate.increase.verify.ok", 1, {"topic": "orders"}),
    ]


def test_a_broken_emitter_is_logged_and_never_fails_the_task(caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        def incr(self, *args: Any, **kwargs: Any) -> None:
            raise OSError("no route to the StatsD host")

    with caplog.at_level(logging.WARNING, logger="airflow_provider_kstate.metrics"):
        Metrics(Broken(), id_names=True).verified("orders", False)  # type: ignore[arg-type]
        Metrics(Recorder(), id_names=True).switched("orders", "not a switch")  # type: ignore[arg-type]
    assert "METRICS kstate.increase.verify.failed not sent (OSError: no route" in caplog.text
    assert "METRICS switched not sent (AttributeError" in caplog.text


def test_a_live_group_s_downtime_is_sent_once_when_its_service_is_back_as_progress_json_has_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [1_000]
    monkeypatch.setattr("airflow_provider_kstate.increase.events.now_ms", lambda: clock[0])
    uri, plan = str(tmp_path / "progress.json"), _plan()
    recorder = Recorder()

    def task() -> Events:  # what KStateStepOperator.events() builds for each task of the run
        progress = ProgressFile(None, uri, plan, "dag/run-1")
        return Events([progress, RunMetrics(progress, plan, Metrics(recorder, id_names=False))], LOG)

    pause = task()  # the per-step layout: the pause in one task ...
    pause.groups(["billing"], GroupState.STOPPING)
    clock[0] = 1_400
    pause.groups(["billing", "audit"], GroupState.SEEDED)
    clock[0] = 2_750
    resume = task()  # ... the resume in a later one, which reads when the group left from the file
    resume.groups(["billing", "audit"], GroupState.RESUMED)
    assert recorder.sent == []  # asked back is not back: the service is
    back = {
        "billing": SimpleNamespace(held_at=3_100, processing_at=3_600),
        "audit": SimpleNamespace(held_at=None, processing_at=None),
    }
    resume.served(back)
    assert recorder.sent == [
        ("timing", "kstate.increase.group_downtime", 2.6, {"topic": "orders.eu", "group": "billing"})
    ]  # from the leave to processing again; the offline group "audit" had no consumer to be down
    clock[0] = 9_000
    task().served(back)  # a later task (the guard) reporting again: sent once per run
    resume.served(back)
    assert len(recorder.sent) == 1
    assert ProgressFile(None, uri, plan, "dag/run-1").progress.groups["billing"].downtime_s(9_000) == 2.6


def test_a_group_whose_service_was_not_seen_back_counts_to_its_resume() -> None:
    group = GroupProgress(out_since=1_000, back_at=1_800)
    assert group.downtime_s(5_000) == 0.8
    group.held_at = 2_300  # held again, no record processed seen: to the hold
    assert group.downtime_s(5_000) == 1.3


def test_airflow_s_own_stats_carries_them_to_statsd(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real path: Airflow's Stats with [metrics] statsd_on, a real StatsD client, a UDP socket."""
    with StatsdListener() as listener:
        with airflow_statsd(listener, prefix="af"):
            metrics.METRICS_OUT.verified("orders.eu", False)
            metrics.METRICS_OUT.checked("totals", "fast", True, [])
            assert listener.wait(lambda got: len(got.samples("af.kstate.")) >= 6)
        got = {(s.name, s.value, s.kind) for s in listener.samples("af.kstate.")}
        assert got == {
            ("af.kstate.increase.verify.failed", 1, "c"),
            ("af.kstate.increase.verify.failed.orders__eu", 1, "c"),  # legacy_names_on: Airflow's default
            ("af.kstate.store.check.ok", 1, "c"),
            ("af.kstate.store.check.ok.totals.fast", 1, "c"),
            ("af.kstate.store.damaged_partitions", 0, "g"),
            ("af.kstate.store.damaged_partitions.totals.fast", 0, "g"),
        }
        monkeypatch.setenv("AIRFLOW__METRICS__STATSD_INFLUXDB_ENABLED", "True")  # tags into the name
        monkeypatch.setenv("AIRFLOW__METRICS__LEGACY_NAMES_ON", "False")
        with airflow_statsd(listener, prefix="influx"):
            metrics.METRICS_OUT.group_downtime("orders", "billing", 0.5)
            assert listener.wait(lambda got: bool(got.samples("influx.")))
        (sample,) = listener.samples("influx.")
    assert sample.name == "influx.kstate.increase.group_downtime,topic=orders,group=billing"
    assert (sample.value, sample.kind) == (500.0, "ms")  # StatsD timers are milliseconds


def test_the_readme_lists_every_metric() -> None:
    readme = (ROOT / "README.md").read_text()
    missing = [row for row in metric_rows() if row not in readme]
    assert missing == []
