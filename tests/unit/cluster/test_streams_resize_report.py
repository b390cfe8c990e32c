"""Issue 40 item 2: the report of a Kafka Streams application's resize, and its log lines, are the domain's
(:func:`~airflow_provider_kstate.cluster.streams_resize.resize_report`,
:func:`~airflow_provider_kstate.cluster.streams_resize.report_lines`), as is the choice of the replacer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_provider_kstate.cluster import streams_resize
from airflow_provider_kstate.cluster.streams_resize import (
    replacer_for,
    report_lines,
    resize_report,
)
from airflow_provider_kstate.increase.streams_apps import StreamsAppPlan

APP = "orders-streams"
CHANGELOG = f"{APP}-KSTREAM-AGGREGATE-STATE-STORE-0000000001-changelog"
APP_PLAN = StreamsAppPlan(application_id=APP, protocol="streams", sources=["orders"], partitions=2, target=4)
RESULT: dict[str, Any] = {
    "resized": True,
    "partitions": 4,
    "grown": ["orders", CHANGELOG],
    "timings": {"drain": 0.5, "downtime_s": 3.25, "producer_downtime_s": 4.0},
    "replaced": {
        CHANGELOG: {
            "ok": True,
            "replace": {
                "records_read": 80,
                "live_keys": 40,
                "moved": 19,
                "seconds": 0.4,
                "records_per_s": 200.0,
            },
            "check": {"ok": True, "live_keys": 40, "misplaced": 0, "digest": "d"},
        }
    },
    "others": {"billing": {"seeded": 2}},
    "start_failures": [],
}


def test_the_report_names_what_grew_the_downtime_the_moved_keys_and_every_reader() -> None:
    report = resize_report("orders", APP_PLAN, RESULT, "spark", {"billing": "consumer: seeded"})
    assert list(report) == [
        "topic",
        "application_id",
        "protocol",
        "resized",
        "continued",
        "continued_because",
        "partitions",
        "grown",
        "replacer",
        "downtime_s",
        "producer_downtime_s",
        "moved_keys",
        "changelogs",
        "deep_check_passed",
        "timings",
        "others",
        "start_failures",
        "readers",
    ]
    assert report["partitions"] == {"before": 2, "after": 4} and report["protocol"] == "streams"
    assert report["moved_keys"] == 19 and report["deep_check_passed"] and report["downtime_s"] == 3.25
    assert report["changelogs"][CHANGELOG] == {
        "ok": True,
        "moved_keys": 19,
        "live_keys": 40,
        "records_read": 80,
        "records_per_s": 200.0,
        "seconds": 0.4,
        "deep_check": {"ok": True, "live_keys": 40, "misplaced": 0},
    }
    assert report["others"] == {"billing": {"seeded": 2}}
    assert report["readers"] == {"billing": "consumer: seeded"}
    assert report_lines(report) == [
        f"{APP} resized 2 -> 4: downtime 3.25 s, 19 keys moved, deep check passed",
        f"changelog {CHANGELOG}: 19 of 40 live keys moved, 200.0 records/s (spark), deep check "
        "{'ok': True, 'live_keys': 40, 'misplaced': 0}",
        f"steps (s): {RESULT['timings']}",
    ]


def test_a_misplaced_key_fails_the_deep_check() -> None:
    bad = {CHANGELOG: {**RESULT["replaced"][CHANGELOG], "check": {"ok": True, "misplaced": 3}}}
    report = resize_report("orders", APP_PLAN, {**RESULT, "replaced": bad}, "local")
    assert not report["deep_check_passed"] and report["readers"] == {}
    assert "deep check FAILED" in report_lines(report)[0]


def test_a_run_again_reports_nothing_changed_or_the_continued_resize() -> None:
    again = StreamsAppPlan(application_id=APP, protocol="classic", sources=["orders"], partitions=4, target=4)
    report = resize_report("orders", again, {"resized": False, "partitions": 4}, "local")
    assert report["moved_keys"] == 0 and report["deep_check_passed"] and not report["continued"]
    assert report_lines(report) == [
        f"{APP} not resized: its sources are at 4 partitions and no interrupted resize was found "
        "(nothing changed)"
    ]
    report = resize_report(
        "orders", again, {**RESULT, "continued": True, "continued_because": ["a", "b"]}, "local"
    )
    assert report_lines(report)[0].startswith(f"{APP} continued the interrupted resize to 4 (a; b): downtime")


def test_the_replacer_of_each_kind(monkeypatch: Any, tmp_path: Path) -> None:
    made: list[tuple[str, Any]] = []
    monkeypatch.setattr(streams_resize, "local_replacer", lambda config: made.append(("local", config)))
    monkeypatch.setattr(
        streams_resize, "spark_submit_replacer", lambda config, workdir, **kw: made.append(("spark", kw))
    )
    replacer_for("local", {"a": 1}, tmp_path, "ignored")
    replacer_for("spark", {"a": 1}, tmp_path, "/bin/spark-submit", ("--master", "local[1]"))
    with pytest.raises(ValueError, match="replacer 'gpu' is none of"):
        replacer_for("gpu", {}, tmp_path)
    assert made == [
        ("local", {"a": 1}),
        ("spark", {"spark_submit": "/bin/spark-submit", "spark_args": ("--master", "local[1]")}),
    ]
