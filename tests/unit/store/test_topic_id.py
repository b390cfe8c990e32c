"""A topic's identity (issue 39): stored offsets carry their topic's KIP-516 id, and the fast check refuses a
snapshot whose changelog was deleted and created again, even one that reached the same offsets.

The snapshot is written with pyarrow (no Spark); the cluster is a fake admin port (its ids and watermarks
given). The real broker's side is ``tests/integration/test_topic_identity.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_kstate.errors import (
    KStateError,
    SparkApplicationError,
    StoredOffsetsError,
    TopicRecreatedError,
)
from airflow_provider_kstate.store import contract, results
from airflow_provider_kstate.store import fast_check as checks
from airflow_provider_kstate.store.manifest import MANIFEST_NAME, Manifest, loads_manifest
from airflow_provider_kstate.store.results import CheckReport
from airflow_provider_kstate.store.topic_id import ZERO_ID, compare_ids, id_text, read_topic_ids

TOPIC = "ids-cl"
OLD_ID = "j4kd8RS7TDKKc8egVweyVw"
NEW_ID = "Q2x8mT0aR5Wb3s1Yv7nZpA"
N = 3
ROWS = 20


class Admin:
    """A changelog of ``N`` partitions at log start 0 and high watermark ``ROWS``, with topic id ``topic_id``."""

    def __init__(self, topic_id: str) -> None:
        self.topic_id = topic_id

    def partition_count(self, topic: str) -> int:
        return N

    def watermarks(self, topic: str, partitions: list[int]) -> dict[int, tuple[int, int]]:
        return {p: (0, ROWS) for p in partitions}

    def topic_ids(self, topics: list[str]) -> dict[str, str]:
        return dict.fromkeys(topics, self.topic_id)


def make_snapshot(root: Path, topic_id: str | None) -> Path:
    """A snapshot of ``N`` partitions whose manifest reaches the changelog's end (``ROWS``) everywhere."""
    from tests.unit.store.test_fast_check_faults import make_snapshot as faults_snapshot

    faults_snapshot(root, topic=TOPIC)
    doc = json.loads((root / MANIFEST_NAME).read_text())
    if topic_id is not None:
        doc["topic_id"] = topic_id
    (root / MANIFEST_NAME).write_text(json.dumps(doc))
    return root


def fast(root: Path, now: str) -> CheckReport:
    report = checks.fast_check(Admin(now), TOPIC, str(root))
    return CheckReport.read(json.loads(json.dumps(report.to_dict())), check="fast")  # as XCom carries it


# -- reading and comparing ids ---------------------------------------------------------------------------


def test_an_id_is_kafkas_text_and_the_zero_id_or_none_is_unknown() -> None:
    assert id_text(OLD_ID) == OLD_ID
    assert id_text(ZERO_ID) == id_text(None) == id_text("") == ""


class _Future:
    def __init__(self, answer: Any) -> None:
        self.answer = answer

    def result(self, timeout: float) -> Any:
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


class _Description:
    def __init__(self, topic_id: Any) -> None:
        self.topic_id = topic_id


class _Client:
    def __init__(self, answers: dict[str, Any] | Exception) -> None:
        self.answers = answers

    def describe_topics(self, collection: Any, request_timeout: float) -> dict[str, _Future]:
        if isinstance(self.answers, Exception):
            raise self.answers
        return {t: _Future(self.answers[t]) for t in collection.topic_names}


def test_read_topic_ids_never_raises_and_says_unknown_for_what_it_cannot_read() -> None:
    client = _Client(
        {
            "a": _Description(OLD_ID),
            "b": _Description(ZERO_ID),  # a broker without topic ids
            "c": RuntimeError("TOPIC_AUTHORIZATION_FAILED"),  # no DESCRIBE permission
        }
    )
    assert read_topic_ids(client, ["a", "b", "c", "a"]) == {"a": OLD_ID, "b": "", "c": ""}
    assert read_topic_ids(_Client(NotImplementedError("no DescribeTopics")), ["a"]) == {"a": ""}
    assert read_topic_ids(client, []) == {}


def test_compare_names_the_topic_both_ids_and_when_and_says_what_it_cannot_check() -> None:
    moved = compare_ids("t", OLD_ID, NEW_ID, "the snapshot's manifest", "2026-11-28T01:02:03Z")
    assert moved.recreated is True
    assert "'t' was deleted and created again after 2026-11-28T01:02:03Z" in moved.problem
    assert OLD_ID in moved.problem and NEW_ID in moved.problem and moved.warnings == []
    same = compare_ids("t", OLD_ID, OLD_ID, "the manifest")
    assert same.recreated is False and not same.problem and not same.warnings
    legacy = compare_ids("t", None, NEW_ID, "the snapshot's manifest")
    assert legacy.recreated is None and not legacy.problem
    assert legacy.warnings == [
        "the snapshot's manifest records no topic id of 't' (written before topic ids were recorded): whether "
        "the topic was deleted and created again since is not checked, only its offsets are; the next write "
        "records the id"
    ]
    blind = compare_ids("t", OLD_ID, "", "the manifest")
    assert blind.recreated is None and not blind.problem
    assert "the topic id of 't' cannot be read" in blind.warnings[0] and "DESCRIBE" in blind.warnings[0]


# -- the manifest --------------------------------------------------------------------------------------


def test_the_manifest_carries_the_id_and_an_older_one_without_it_still_reads(tmp_path: Path) -> None:
    with_id = json.loads((make_snapshot(tmp_path / "a", OLD_ID) / MANIFEST_NAME).read_text())
    assert loads_manifest(json.dumps(with_id)).topic_id == OLD_ID
    assert Manifest.from_dict(with_id).to_dict()["topic_id"] == OLD_ID
    older = json.loads((make_snapshot(tmp_path / "b", None) / MANIFEST_NAME).read_text())
    assert "topic_id" not in older
    manifest = Manifest.from_dict(older)
    assert manifest.topic_id is None and "topic_id" not in manifest.to_dict()


# -- the fast check ------------------------------------------------------------------------------------


def test_a_recreated_changelog_at_the_same_offsets_fails_the_fast_check_alone(tmp_path: Path) -> None:
    root = make_snapshot(tmp_path / "s", OLD_ID)
    # the scenario: by offsets alone the snapshot fits the changelog (the recreated one reached them)
    blind = fast(root, "")
    assert blind.ok and blind.failed_partitions == [] and blind.topic_recreated is None
    assert blind.warnings and "cannot be read" in blind.warnings[0]

    report = fast(root, NEW_ID)
    assert not report.ok
    assert all(report.entry(p).ok for p in range(N))  # every offset still fits
    assert report.topic_recreated is True
    assert (report.topic_id, report.snapshot_topic_id) == (NEW_ID, OLD_ID)
    (problem,) = report.problems
    assert f"topic {TOPIC!r} was deleted and created again after " in problem
    assert OLD_ID in problem and NEW_ID in problem
    assert checks.partial_scope(report) is None  # a full rebuild, never a partial one
    lines = [text for _warn, text in results.fast_lines(report)]
    assert any("store: topic" in line and "created again" in line for line in lines)
    assert "next: rebuild the snapshot" in lines[-1]


def test_the_same_topic_passes_with_both_ids_reported(tmp_path: Path) -> None:
    report = fast(make_snapshot(tmp_path / "s", OLD_ID), OLD_ID)
    assert report.ok and report.topic_recreated is False and report.warnings == []
    assert (report.topic_id, report.snapshot_topic_id) == (OLD_ID, OLD_ID)


def test_an_older_manifest_without_an_id_is_checked_by_offsets_and_said_so(tmp_path: Path) -> None:
    report = fast(make_snapshot(tmp_path / "s", None), NEW_ID)
    assert report.ok and report.topic_recreated is None and report.snapshot_topic_id is None
    (warning,) = report.warnings or []
    assert warning.startswith(f"the snapshot's manifest records no topic id of {TOPIC!r}")
    assert ("  warning: " + warning) in [text for _w, text in results.fast_lines(report)]


def test_a_missing_snapshot_reports_the_topic_id_now(tmp_path: Path) -> None:
    report = fast(tmp_path / "none", NEW_ID)
    assert report.snapshot_missing and report.topic_id == NEW_ID and report.warnings == []


# -- a refused resume fails its task with the named error -------------------------------------------------


@pytest.mark.parametrize(
    ("error", "code", "task_error"),
    [
        (TopicRecreatedError("x"), "topic-recreated", TopicRecreatedError),
        (StoredOffsetsError("x"), "stored-offsets", StoredOffsetsError),
    ],
)
def test_a_refused_resume_is_reported_by_code_and_fails_the_task_without_retries(
    tmp_path: Path, error: KStateError, code: str, task_error: type
) -> None:
    from airflow_provider_kstate.store.submission import app_error

    path = str(tmp_path / "report.json")
    assert contract.fail(path, str(error), lambda line: None, "app", contract.error_code(error)) == 2
    failure = contract.reported_failure(path)
    assert failure is not None and failure.error_code == code
    raised = app_error(failure, "/x/running_totals.py", "running_totals")
    assert type(raised) is task_error and not raised.retryable
    assert not isinstance(raised, SparkApplicationError)
    assert str(raised) == "running_totals.py refused: x"
