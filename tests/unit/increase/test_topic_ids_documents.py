"""The increase's documents name each topic's KIP-516 id next to its name (issue 39): the run's progress
document and the seed report's index take them from the plan (``Plan.topic_ids``); a plan without them
(planned before ids were recorded) keeps the documents' bytes."""

from __future__ import annotations

import json
from pathlib import Path

from airflow_provider_kstate.increase.events import RunProgress
from airflow_provider_kstate.increase.plan import GroupClass, GroupPlan, Plan
from airflow_provider_kstate.increase.report import read_evidence, write_report

ID = "j4kd8RS7TDKKc8egVweyVw"


def _plan() -> Plan:
    live = GroupPlan(cls=GroupClass.ACTIVE, state="STABLE", pause=True, seed=True, wait=True)
    return Plan("orders", 2, 4, {"billing": live})


def test_the_progress_document_carries_the_plans_topic_ids_and_reads_back() -> None:
    plan = _plan()
    without = RunProgress.of_plan(plan, "dag/run-1")
    assert "topic_ids" not in without.to_dict()  # a plan without ids: the document's bytes as before
    plan = plan.replace(topic_ids={"orders": ID})  # as the planner fills them
    assert plan.ids_of("orders", "payments") == {"orders": ID}, "a topic whose id is unknown is left out"
    progress = RunProgress.of_plan(plan, "dag/run-1")
    assert progress.to_dict()["topic_ids"] == {"orders": ID}
    again = RunProgress.from_json(progress.to_json())
    assert again.topic_ids == {"orders": ID}
    older = json.loads(without.to_json())
    assert RunProgress.from_json(json.dumps(older)).topic_ids == {}  # an older document still reads


def test_the_seed_reports_index_names_the_topic_ids_when_given(tmp_path: Path) -> None:
    uri = str(tmp_path / "seed.jsonl.gz")
    with write_report(uri, evidence=True, topic_ids={"orders": ID}) as report:
        report.note_seeded("g", [0, 1])
    index = read_evidence(uri)
    assert index is not None and index["topic_ids"] == {"orders": ID} and index["seeded"] == {"g": "0-1"}
    with write_report(uri, evidence=True) as report:
        report.note_seeded("g", [0])
    index = read_evidence(uri)
    assert index is not None and "topic_ids" not in index
