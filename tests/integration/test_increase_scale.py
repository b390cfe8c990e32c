"""The safe increase at scale on the real broker: 8 -> 512 partitions with 24 offline groups.

Every group ends with an offset at log start on every new partition, groups on other topics are
untouched, the report holds every group x partition row, and XCom and the task logs stay small.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from kstate_support import kafka as kk
from kstate_support.kafka import commit

from airflow_provider_kstate.increase.report import read_report

pytestmark = pytest.mark.integration

DAG_ID = "kstate_partition_increase"
G = "safe_partition_increase"
ORIGINAL, TARGET, GROUPS = 8, 512, 24
#: The issue's bounds at 4,096 x 100; at 512 x 24 the run must stay inside them with room to spare.
MAX_XCOM, MAX_LINES, MAX_BYTES = 64 * 1024, 2000, 1024 * 1024


def test_increase_512_partitions_24_groups(
    admin: Any, make_topic: Any, unique: Any, run_dag: Any, capfd: Any
) -> None:
    topic = make_topic("scale", partitions=ORIGINAL)
    other = make_topic("scale-other", partitions=4)
    groups = [f"{unique('scale')}-g{i:02d}" for i in range(GROUPS)]
    old = {p: 3 + p for p in range(ORIGINAL)}  # offsets past the log start: they must be kept as they are
    for group in groups:
        commit(admin, group, topic, old)
    bystander = f"{unique('scale')}-other"
    commit(admin, bystander, other, {0: 1, 1: 2, 2: 3, 3: 4})
    capfd.readouterr()

    dr = run_dag(DAG_ID, {"topic": topic, "partitions": TARGET, "consumer_groups": [], "dry_run": False})
    out, err = capfd.readouterr()
    states = {ti.task_id.split(".")[-1]: ti.state for ti in dr.get_task_instances()}
    assert dr.state == "success", states

    # Every group: an offset at log start (0) on every new partition, its old offsets kept.
    for group in groups:
        committed = kk.committed(admin, group, topic, TARGET)
        assert {p: committed.get(p) for p in range(ORIGINAL)} == old, group
        assert all(committed.get(p) == 0 for p in range(ORIGINAL, TARGET)), group
    # A group on another topic is untouched, and is not part of the plan.
    assert kk.committed(admin, bystander, other, 4) == {0: 1, 1: 2, 2: 3, 3: 4}
    plan = dr.get_task_instance(f"{G}.plan").xcom_pull(task_ids=f"{G}.plan")
    assert sorted(plan["groups"]) == sorted(groups)

    # XCom stays small: summaries and the reports' URIs.
    for ti in dr.get_task_instances():
        value = ti.xcom_pull(task_ids=ti.task_id)
        if value is not None:
            assert len(json.dumps(value)) <= MAX_XCOM, (ti.task_id, len(json.dumps(value)))
    window = dr.get_task_instance(f"{G}.pause_window").xcom_pull(task_ids=f"{G}.pause_window")
    verify = dr.get_task_instance(f"{G}.verify").xcom_pull(task_ids=f"{G}.verify")
    assert window["seeded"] == GROUPS * (TARGET - ORIGINAL) and window["kept"] == GROUPS * ORIGINAL
    assert verify["ok"] and verify["problems"] == 0 and verify["partitions"] == TARGET

    # The reports hold every group x partition row: the per-partition proof is kept, outside XCom.
    seed_rows = list(read_report(window["topics"][topic]["report_uri"]))
    verify_rows = list(read_report(verify["topics"][topic]["report_uri"]))
    assert len(seed_rows) == len(verify_rows) == GROUPS * TARGET
    assert {(r["group"], r["partition"]) for r in verify_rows} == {
        (g, p) for g in groups for p in range(TARGET)
    }
    assert all(r["seeded"] == (r["partition"] >= ORIGINAL) for r in seed_rows)
    assert all(r["problem"] is None and r["committed"] is not None for r in verify_rows)

    # Logs read as a runbook: one line per group, with ranges, not one per partition.
    text = out + err
    lines = text.splitlines()
    assert len(lines) <= MAX_LINES and len(text.encode()) <= MAX_BYTES, (len(lines), len(text.encode()))
    for group in groups:
        assert (
            f"SEED group {group}: partitions {ORIGINAL}-{TARGET - 1} ({TARGET - ORIGINAL:,}) seeded to log start; "
            f"{ORIGINAL} kept an existing offset" in text
        ), group
        assert f"VERIFY group {group}: {TARGET} partitions, every one holds an offset" in text, group
    assert sum(1 for line in lines if "SEED group" in line) == GROUPS
