"""Issue 32's leftovers, item 1: the ``kstate_streams_resize`` DAG run again continues a resize whose deep
check failed, on the real Kafka Streams 4.4 app under live keyed traffic (``replacer=local``): the ``count``
(a key-value store) on the classic protocol, the ``join`` (two window stores) on a KIP-1071 streams group.

The first run's re-placement is made to stop half-way: a replacer wrapper re-places partition 0 of the 2 old
partitions only (the real ``replace_local`` with ``--from-partitions 1``), so the real deep check fails on
the keys of partition 1 that belong to partition 3. The run fails with the application stopped, its
producers held, its topics grown to 4 and its changelogs half re-placed (asserted: live keys outside
``murmur2(record key) % 4``, counted here and by the run's own read-only deep check). The same DAG with the
same params then runs again: it recognizes the interrupted resize (sources at the target, the group EMPTY
without offsets on the new partitions), re-places the changelogs on all their partitions, deep-checks,
seeds, starts the app and the producers (``continued``). A third run on the now healthy app touches nothing
(``resized`` False, the app not restarted). Then: 0 input records lost, 0 lost and 0 wrong results against
the truth computed from every acknowledged record, every live changelog key at home.

With ``KSTATE_STREAMS_LIVE=FILE`` its numbers are merged into ``FILE`` (cells ``count/continued`` and
``join/continued/streams/local``). Chaos: ~1.5 min each.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_kstate.client_piece.murmur2 import partition_for
from airflow_provider_kstate.cluster import streams_resize
from airflow_provider_kstate.cluster.admin import ClusterAdmin
from airflow_provider_kstate.increase.streams_apps import StreamsChangelog
from tests.integration.test_streams_resize import (
    _live_keys,
    _results,
    _skip_unless_plain,
    topics,  # noqa: F401 - the fixture
)
from tests.integration.test_streams_resize_live import _inputs_lost, _save, _verdict, live_app

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

DAG_ID = "kstate_streams_resize"


def _misplaced(kafka_config: dict[str, Any], changelogs: list[StreamsChangelog], partitions: int) -> int:
    """Live changelog keys (less their window bytes) outside ``murmur2(record key) % partitions``, read
    here."""
    out = 0
    for changelog in changelogs:
        live = _live_keys(kafka_config, changelog.topic)
        assert live, changelog.topic
        cut = changelog.key_suffix
        out += sum(1 for key, p in live.items() if partition_for(key[: len(key) - cut], partitions) != p)
    return out


def _changelogs(admin: ClusterAdmin, app_id: str, shape: str) -> list[StreamsChangelog]:
    """The app's changelogs (a key-value store for the count, two window stores for the join)."""
    names = sorted(t for t in admin.list_topics() if t.startswith(f"{app_id}-") and t.endswith("-changelog"))
    kind = "key-value" if shape == "count" else "window"
    assert len(names) == (1 if shape == "count" else 2), names
    return [
        StreamsChangelog(topic=t, store="s", store_type=kind, cleanup_policy="", partitions=4) for t in names
    ]


def _down_s(events: list[dict[str, Any]], since_ms: float) -> float | None:
    """Seconds from the first stop signal after ``since_ms`` to the app's next RUNNING with tasks."""
    stop = next((e["t"] for e in events if e["ev"] == "signal" and e["t"] >= since_ms), None)
    if stop is None:
        return None
    up = next(
        (
            e["t"]
            for e in events
            if e["ev"] == "state" and e["to"] == "RUNNING" and e.get("tasks") and e["t"] > stop
        ),
        None,
    )
    return None if up is None else round((up - stop) / 1000, 3)


@pytest.mark.parametrize(
    ("shape", "protocol"),
    # the key-value store on the classic protocol; the join's window stores on a KIP-1071 streams group
    [("count", "classic"), ("join", "streams")],
)
def test_a_run_again_continues_a_resize_whose_check_failed(
    shape: str,
    protocol: str,
    kafka_config: dict[str, Any],
    topics: Any,  # noqa: F811 - the fixture imported above
    run_dag: Any,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    _skip_unless_plain(kafka_config)
    began = time.monotonic()
    app, app_id, inputs, output, pairs, driver, traffic = live_app(
        shape, protocol, kafka_config, topics, tmp_path, monkeypatch
    )
    request.addfinalizer(lambda: pairs.stop({app_id: driver}, "group"))

    # The first re-placement stops half-way: partition 0 re-placed, partition 1 not (its check fails).
    real = streams_resize.local_replacer
    calls: list[tuple[int, int]] = []

    def half_first(config: Any, workers: int = 4) -> streams_resize.Replacer:
        replacer = real(config, workers)

        def run(changelogs: list[StreamsChangelog], before: int, now: int) -> dict[str, dict[str, Any]]:
            calls.append((before, now))
            return replacer(changelogs, 1 if len(calls) == 1 else before, now)

        return run

    monkeypatch.setattr(streams_resize, "local_replacer", half_first)
    conf = {
        "topic": inputs[0],
        "partitions": 4,
        "application_id": app_id,
        "app_driver": "streams-app",
        "producer_drivers": ["traffic"],
        "replacer": "local",
    }
    admin = ClusterAdmin(kafka_config)
    check = streams_resize.local_checker(kafka_config)  # the run's read-only deep check
    assert not pairs.start({app_id: driver}, "group")
    try:
        traffic.start()
        time.sleep(6)  # state in the changelog, offsets committed
        first_from = time.time() * 1000
        first = run_dag(DAG_ID, conf)
        # The interrupted state the first run leaves.
        stores = _changelogs(admin, app_id, shape)
        after_first = {
            "state": str(getattr(first.state, "value", first.state)),
            "partitions": {t: admin.partition_count(t) for t in [*inputs, *(c.topic for c in stores)]},
            "group": streams_resize.group_state(admin, kafka_config, app_id),
            "misplaced_keys": _misplaced(kafka_config, stores, 4),
            "deep_check_misplaced": sum(check(stores, 4).values()),
            "producer_held": (tmp_path / "traffic" / "held").exists(),
            "app_starts": sum(1 for e in app.events() if e["ev"] == "start"),
        }
        print(json.dumps({"after_first_run": after_first}, indent=1))
        assert after_first["state"] == "failed", after_first
        assert set(after_first["partitions"].values()) == {4}, after_first
        assert after_first["group"] in ("EMPTY", "DEAD") and after_first["producer_held"], after_first
        assert after_first["misplaced_keys"] > 0, "the first re-placement stopped half-way"
        assert after_first["deep_check_misplaced"] == after_first["misplaced_keys"], after_first
        time.sleep(3)  # the app stays down a while, as it would until someone runs the DAG again
        started = time.monotonic()
        second = run_dag(DAG_ID, conf)
        second_s = round(time.monotonic() - started, 1)
        report = second.get_task_instance("resize").xcom_pull(task_ids="resize") or {}
        time.sleep(8)  # traffic on the new layout
        starts = sum(1 for e in app.events() if e["ev"] == "start")
        third = run_dag(DAG_ID, conf)
        healthy = third.get_task_instance("resize").xcom_pull(task_ids="resize") or {}
        time.sleep(4)
        restarted = sum(1 for e in app.events() if e["ev"] == "start") - starts
    finally:
        traffic.stop()
    records, out = _results(traffic, app, kafka_config, output, lambda: pairs.stop({app_id: driver}, "group"))
    verdict = _verdict(shape, records, out, inputs)
    cell = {
        "shape": shape,
        "protocol": protocol,
        "replacer": "local",
        "scenario": "the first run's re-placement stopped half-way (partition 0 of 2), its deep check failed; "
        "the same DAG run again continued it",
        "after_first_run": after_first,
        "state": str(getattr(second.state, "value", second.state)),
        "continued": report.get("continued"),
        "continued_because": report.get("continued_because"),
        "replacer_calls": calls,
        "records_written": len(records),
        "records_in_new_partitions": sum(1 for r in records if r.partition >= 2),
        "inputs_lost": _inputs_lost(kafka_config, records, inputs),
        "lost": verdict["lost"],
        "wrong": verdict["wrong"],
        "continue_downtime_s": report.get("downtime_s"),
        "app_down_total_s": _down_s(app.events(), first_from),
        "second_run_s": second_s,
        "moved_keys_on_continue": report.get("moved_keys"),
        "changelogs": report.get("changelogs"),
        "timings": report.get("timings"),
        "third_run": {k: healthy.get(k) for k in ("resized", "continued", "partitions")},
        "app_restarted_by_third_run": restarted,
        "misplaced_after": _misplaced(kafka_config, stores, 4),
        "deep_check_misplaced_after": sum(check(stores, 4).values()),
        "verdict": verdict,
        "test_s": round(time.monotonic() - began, 1),
        "load_average_1m": round(os.getloadavg()[0], 1),  # the machine is shared: its load, at the end
    }
    print(json.dumps(cell, indent=1))
    _save({**cell, "shape": f"{shape}/continued"})
    assert cell["state"] == "success" and report.get("resized") and report.get("continued"), cell
    assert report["deep_check_passed"] and report["moved_keys"] > 0, report
    assert calls == [(2, 4), (4, 4)], "the continue re-places the grown changelog on all its partitions"
    assert str(getattr(third.state, "value", third.state)) == "success", healthy
    assert healthy.get("resized") is False and not healthy.get("continued") and restarted == 0, healthy
    assert cell["misplaced_after"] == cell["deep_check_misplaced_after"] == 0, cell
    assert cell["records_in_new_partitions"] > 0, cell
    assert (cell["inputs_lost"], cell["lost"], cell["wrong"]) == (0, 0, 0), cell
