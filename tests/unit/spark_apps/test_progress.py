"""Progress of the changelog reads (airflow_provider_kstate.spark_apps.read_progress): the arithmetic and the line,
the throttle, and the driver's listener fed by real task reporters over a real socket (no Spark)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from airflow_provider_kstate.spark_apps.changelog import ReadContext
from airflow_provider_kstate.spark_apps.read_progress import (
    DOC_FORMAT,
    DriverProgress,
    Reading,
    TaskReporter,
    Throttle,
    Tracker,
    format_count,
    format_duration,
)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.4, "under 1 s"),
        (1.2, "1 s"),
        (59.4, "59 s"),
        (59.6, "1 min 0 s"),
        (195, "3 min 15 s"),
        (7500, "2 h 5 min"),
    ],
)
def test_durations_read_like_a_person_would_say_them(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def test_rate_percent_and_time_left() -> None:
    now = Reading(
        "rebuild",
        "orders",
        read=1_234_567,
        total=10_000_000,
        elapsed=31.4,  # 4 s of the Spark job's start-up before the first offsets came in ...
        reading=27.4,  # ... do not count in the rate
        partitions=16,
        partitions_read=3,
    )
    assert now.rate == pytest.approx(45_057.2, abs=0.1)
    assert now.percent == pytest.approx(12.34567)
    assert now.eta == pytest.approx((10_000_000 - 1_234_567) / now.rate)  # 194.5 s at the average rate
    assert now.line() == (
        "PROGRESS rebuild orders: 1,234,567 of 10,000,000 offsets (12.3%), 45,057 offsets/s, "
        "3 of 16 partitions read, about 3 min 15 s left"
    )
    assert format_count(10_000_000) == "10,000,000"
    unknown_start = Reading("rebuild", "orders", read=1_000, total=2_000, elapsed=4.0)  # no first-data time
    assert unknown_start.rate == 250.0 and unknown_start.eta == 4.0
    writing = Reading(
        "rebuild", "orders", read=700, total=700, elapsed=9.0, reading=5.0, partitions=6, partitions_read=6
    )
    assert writing.line().endswith("140 offsets/s, 6 of 6 partitions read, all read, finishing")


def test_first_unknown_and_last_lines() -> None:
    first = Reading("deep check", "orders", read=0, total=700, elapsed=0.0, partitions=6)
    assert first.line() == "PROGRESS deep check orders: 0 of 700 offsets (0.0%) in 6 partitions, starting"
    waiting = Reading(
        "rebuild", "orders", read=0, total=700, elapsed=12.0, partitions=6, label="resolving strays"
    )
    assert waiting.eta is None and waiting.line().endswith("0 of 6 partitions read, time left unknown")
    assert "(resolving strays)" in waiting.line()
    last = Reading(
        "rebuild", "orders", read=700, total=700, elapsed=3.5, partitions=6, final=True, records=651
    )
    assert last.eta == 0 and last.percent == 100.0
    assert (
        last.line()
        == "PROGRESS rebuild orders: 700 of 700 offsets (100.0%), 200 offsets/s, done in 4 s: 651 records"
    )
    nearly = Reading("rebuild", "orders", read=699, total=700, elapsed=7.0, partitions=6, partitions_read=5)
    assert nearly.line().endswith("100 offsets/s, 5 of 6 partitions read, under 1 s left")
    empty = Reading("rebuild", "orders", read=0, total=0, elapsed=1.0)
    assert empty.percent == 100.0 and empty.eta == 0
    doc = last.to_dict()
    assert (doc["read"], doc["total"], doc["percent"], doc["eta_seconds"], doc["line"]) == (
        700,
        700,
        100.0,
        0.0,
        last.line(),
    )


def test_throttle_lets_one_through_every_n_seconds() -> None:
    clock = [100.0]
    throttle = Throttle(10.0, clock=lambda: clock[0])
    seen = []
    for step in range(0, 31):  # a call every second for 30 s
        clock[0] = 100.0 + step
        if throttle.due():
            seen.append(step)
    assert seen == [0, 10, 20, 30]
    clock[0] = 130.5
    assert not throttle.due()


def test_tracker_counts_positions_within_each_range_and_never_goes_back() -> None:
    tracker = Tracker({0: (0, 100), 1: (50, 60), 2: (7, 7)})
    assert tracker.total == 110
    assert tracker.progress(set()) == (0, 1)  # the empty range is read already
    tracker.update(0, 40)
    tracker.update(1, 500)  # past its end (an EOF event's position): the range's size at most
    tracker.update(0, 10)  # a retried task starting over: the furthest position stays
    tracker.update(9, 5)  # not a partition of this read: ignored
    assert tracker.progress(set()) == (50, 2)
    assert tracker.progress({0}) == (110, 3)  # a finished task's partition counts whole
    assert tracker.reports == 3


def _wait_for(condition: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_driver_reports_live_positions_sent_by_task_reporters_over_its_listener() -> None:
    lines: list[str] = []
    docs: list[dict[str, Any]] = []
    progress = DriverProgress(
        "rebuild", "orders", interval=0.05, publish=lambda doc: docs.append(doc.to_dict()), echo=lines.append
    )
    ctx = ReadContext({}, "orders", [0, 1], {0: (0, 100), 1: (10, 30), 5: (0, 999)}, 2)
    try:
        with progress.reading():
            progress.attach(ctx)
            assert ctx.progress is not None and ctx.progress.host == "127.0.0.1"
            first = TaskReporter(ctx.progress, 0)
            first(50)
            _wait_for(lambda: any(line.startswith("PROGRESS rebuild orders: 50 of 120") for line in lines))
            second = TaskReporter(ctx.progress, 1)
            second(30)
            first(100)  # within the reporter's throttle: sent by close()
            first.close()
            second.close()
            _wait_for(lambda: "2 of 2 partitions read" in lines[-1])
        progress.finish("done", version="v-x")
    finally:
        progress.close()
    assert lines[0] == "PROGRESS rebuild orders: 0 of 120 offsets (0.0%) in 2 partitions, starting"
    assert (
        lines[-1].startswith("PROGRESS rebuild orders: 120 of 120 offsets (100.0%)")
        and "done in" in lines[-1]
    )
    assert len(lines) >= 4  # a line every interval while the read ran
    assert docs[0]["format"] == DOC_FORMAT and docs[0]["state"] == "running" and docs[0]["total"] == 120
    assert docs[-2]["line"] == lines[-1] and docs[-2]["live_reports"] >= 2
    assert docs[-1]["state"] == "done" and docs[-1]["version"] == "v-x" and docs[-1]["read"] == 120


def test_a_report_with_another_token_is_dropped_and_off_reports_nothing() -> None:
    lines: list[str] = []
    progress = DriverProgress("deep check", "orders", interval=60, echo=lines.append)
    ctx = ReadContext({}, "orders", [0], {0: (0, 10)}, 1)
    try:
        with progress.reading():
            progress.attach(ctx)
            assert ctx.progress is not None
            forged = TaskReporter(type(ctx.progress)(ctx.progress.host, ctx.progress.port, "forged"), 0)
            forged(10)
            forged.close()
            time.sleep(0.2)
            assert progress.reading_of(progress._reads[ctx.progress.token]).read == 0
    finally:
        progress.close()
    early: list[dict[str, Any]] = []  # a rebuild that fails before it reads: its document says so
    DriverProgress("rebuild", "orders", publish=lambda doc: early.append(doc.to_dict())).finish(
        "failed", error="no such topic"
    )
    assert [(d["state"], d["error"], d["format"], d.get("line")) for d in early] == [
        ("failed", "no such topic", DOC_FORMAT, None)
    ]
    off = DriverProgress.off()
    quiet = ReadContext({}, "orders", [0], {0: (0, 10)}, 1)
    with off.reading():
        off.attach(quiet)
    assert quiet.progress is None and not off.enabled


def test_operators_pass_the_interval_and_refuse_a_negative_one() -> None:
    from airflow_provider_kstate.errors import KStateConfigError
    from airflow_provider_kstate.operators.deep_check import KStateDeepCheckOperator
    from airflow_provider_kstate.operators.rebuild import KStateRebuildOperator
    from airflow_provider_kstate.store import tasks

    common = {"topic": "orders", "snapshot_uri": "/tmp/kstate-progress-unit"}
    deep = KStateDeepCheckOperator(task_id="d", **common)
    assert deep.app_args()[deep.app_args().index("--progress-interval") + 1] == "10"
    rebuild = KStateRebuildOperator(task_id="r", progress_interval=2.5, **common)
    args = tasks.rebuild_args(tasks.read_args(rebuild, None, rebuild.log), 3, None)
    assert args[args.index("--progress-interval") + 1] == "2.5"
    with pytest.raises(KStateConfigError, match="progress_interval"):
        KStateRebuildOperator(task_id="n", progress_interval=-1, **common)
