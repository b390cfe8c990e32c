"""The example pipeline resumes a checkpoint only against the log it was taken from (issue 39): the rule, with
the checkpoint's contents given. The real query, broker and recreated topic: ``tests/integration/test_topic_identity.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kstate_support import load_file

from airflow_provider_kstate.errors import StoredOffsetsError, TopicRecreatedError

ROOT = Path(__file__).resolve().parents[3]
OLD_ID = "j4kd8RS7TDKKc8egVweyVw"
NEW_ID = "Q2x8mT0aR5Wb3s1Yv7nZpA"
ENDS = {0: 628, 1: 579, 2: 793}  # the issue's: a new topic that reached the old checkpoint's offsets


def pipeline() -> Any:
    return load_file(ROOT / "dags" / "pipelines" / "running_totals.py", "running_totals")


def checkpoint(rt: Any, offsets: dict[int, int], topic_id: str | None, written: bool = True) -> Any:
    recorded = {"topic": "pay", "topic_id": topic_id, "written_at": "2026-11-28T01:00:00Z"} if written else {}
    return rt.Checkpoint("/state/ckpt", exists=True, offsets=offsets, recorded=recorded)


def test_a_checkpoint_of_a_recreated_topic_at_the_same_offsets_is_refused_with_the_ways_out() -> None:
    rt = pipeline()
    problem, kind, warnings = rt.resume_problem("pay", checkpoint(rt, ENDS, OLD_ID), NEW_ID, ENDS, {})
    assert kind == "recreated" and warnings == []
    assert "'pay' was deleted and created again after 2026-11-28T01:00:00Z" in problem
    assert OLD_ID in problem and NEW_ID in problem
    error = rt.refusal(problem, kind, "/state/ckpt")
    assert isinstance(error, TopicRecreatedError) and not error.retryable
    text = str(error)
    assert text.startswith("refused to resume the checkpoint at /state/ckpt: topic 'pay'")
    assert "new checkpoint location" in text and "start_over=true" in text and "Nothing was read" in text


def test_the_same_topic_resumes_and_a_fresh_checkpoint_needs_nothing() -> None:
    rt = pipeline()
    assert rt.resume_problem("pay", checkpoint(rt, ENDS, OLD_ID), OLD_ID, ENDS, ENDS) == ("", "", [])
    fresh = rt.Checkpoint("/state/new")
    assert rt.resume_problem("pay", fresh, NEW_ID, ENDS, {}) == ("", "", [])


@pytest.mark.parametrize("recorded", ["legacy", "unreadable"])
def test_offsets_beyond_the_end_are_refused_when_the_id_cannot_tell(recorded: str) -> None:
    rt = pipeline()
    if recorded == "legacy":  # a checkpoint from before the record was kept
        ckpt, now = checkpoint(rt, ENDS, None, written=False), NEW_ID
    else:  # the broker does not say (no DESCRIBE permission, no topic ids)
        ckpt, now = checkpoint(rt, ENDS, OLD_ID), ""
    shorter = {0: 100, 1: 579, 2: 793}
    problem, kind, warnings = rt.resume_problem("pay", ckpt, now, shorter, {})
    assert kind == "beyond"
    assert "the checkpoint's partition 0: offset 628, the topic ends at 100" in problem
    assert len(warnings) == 1 and "'pay'" in warnings[0]  # what could not be checked is named
    assert isinstance(rt.refusal(problem, kind, "/state/ckpt"), StoredOffsetsError)
    # within the end, the same checkpoint resumes with the warning only
    assert rt.resume_problem("pay", ckpt, now, ENDS, {}) == ("", "", warnings)


def test_a_group_commit_beyond_the_end_or_a_lost_partition_is_refused_too() -> None:
    rt = pipeline()
    fresh = rt.Checkpoint("/state/new")
    problem, kind, _ = rt.resume_problem("pay", fresh, NEW_ID, {0: 5}, {0: 9})
    assert kind == "beyond" and "the group's commit on partition 0: offset 9, the topic ends at 5" in problem
    problem, kind, _ = rt.resume_problem("pay", checkpoint(rt, {3: 1}, NEW_ID), NEW_ID, ENDS, {})
    assert kind == "beyond" and "partition 3: offset 1, the partition does not exist" in problem


def test_start_over_is_a_parameter_of_the_dag_and_the_application() -> None:
    rt = pipeline()
    base = ["--kafka-config-file", "c", "--report-file", "r", "--input-topic", "i"]
    base += ["--changelog-topic", "l", "--group", "g"]
    assert rt.parse_args(base).start_over is False
    assert rt.parse_args([*base, "--start-over", "true"]).start_over is True
    assert rt.parse_args([*base, "--start-over", "false"]).start_over is False
    text = (ROOT / "dags" / "kstate_example_pipeline.py").read_text()
    assert '"--start-over",\n            "{{ params.start_over | string | lower }}"' in text
