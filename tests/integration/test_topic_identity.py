"""State bound to its topic (issue 39), on Apache Kafka: a topic deleted and created again under its name,
written to until it reaches the very offsets the stored state holds, is caught by its topic id (KIP-516).

* The changelog of a snapshot is recreated between two ``kstate_state_maintenance`` runs with the same
  records per partition: the offsets match (proved, and an id-blind fast check passes), yet the fast check
  fails naming both ids, the deep check reports the same, ``rebuild=never`` fails the run and leaves the
  snapshot, ``rebuild=auto`` rebuilds it in full from the new log and records the new id.
* The example pipeline's input is recreated between two runs the same way: the pipeline refuses to resume
  its checkpoint (``TopicRecreatedError``, the two ways out named) and writes nothing; ``start_over=true``
  reads the new input from its earliest offset and says so. A checkpoint without the id (from before it was
  kept) whose offsets lie beyond the recreated topic's end is refused by its offsets
  (``StoredOffsetsError``), the unknown id named.
* The demo's state story runs twice in a row in one state folder and passes both times.

Real parts only: the session's Apache Kafka broker, ``dag.test()`` runs, local Spark via spark-submit.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from kstate_support import load_file

from airflow_provider_kstate.cluster.admin import ClusterAdmin
from airflow_provider_kstate.store import fast_check as checks
from airflow_provider_kstate.store import layout
from airflow_provider_kstate.store.contract import portable_config
from tests.integration.test_spark_apps import submit
from tests.integration.test_state_maintenance import (
    assert_snapshot_is_truth,
    changelog_truth,
    create_topic,
    delete_topic,
    expected_totals,
    manifest,
    produce,
    snapshot_rows,
    ti_state,
    xcom,
)

pytestmark = [pytest.mark.integration, pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[2]
MAINTENANCE = "kstate_state_maintenance"
PIPELINE = "kstate_example_pipeline"
PARTITIONS = 3


class IdBlindAdmin(ClusterAdmin):
    """The cluster as the fast check saw it before topic ids: offsets and layout only."""

    def topic_ids(self, topics: Any) -> dict[str, str]:
        return dict.fromkeys(topics, "")


def ends(admin: ClusterAdmin, topic: str) -> dict[int, int]:
    return {p: hi for p, (_lo, hi) in admin.watermarks(topic, range(PARTITIONS)).items()}


def recreate(admin: AdminClient, topic: str, config: dict[str, str] | None = None) -> None:
    delete_topic(admin, topic)
    create_topic(admin, topic, PARTITIONS, config)


def records(tag: str, n: int = 45) -> list[tuple[bytes, bytes]]:
    """``n`` records over 15 keys (placed by murmur2 on the key: the same keys fill the same partitions)."""
    return [(f"acct-{i % 15:03d}".encode(), f"{tag}{i}".encode()) for i in range(n)]


# -- the changelog recreated under a snapshot --------------------------------------------------------------


@pytest.fixture
def changelog(admin: AdminClient, tmp_path: Path) -> Iterator[tuple[str, str]]:
    topic = f"kstate-test-ids-cl-{uuid.uuid4().hex[:8]}"
    create_topic(admin, topic, PARTITIONS, {"cleanup.policy": "compact"})
    yield topic, str(tmp_path / "snapshot")
    admin.delete_topics([topic])


@pytest.mark.chaos  # 124 s of Spark; make test keeps the ids' unit tests (tests/unit/store, tests/unit/increase)
def test_a_recreated_changelog_at_the_same_offsets_is_caught_and_rebuilt(
    changelog: tuple[str, str], admin: AdminClient, kafka_config: dict[str, Any], run_dag: Any, tmp_path: Path
) -> None:
    topic, uri = changelog
    cluster = ClusterAdmin(kafka_config)
    produce(kafka_config, topic, records("old"))  # type: ignore[arg-type]
    conf = {"changelog_topic": topic, "snapshot_uri": uri}
    dr = run_dag(MAINTENANCE, {**conf, "deep": False, "rebuild": "auto"})  # the first snapshot
    assert str(dr.state) == "success"
    old_id = cluster.topic_ids([topic])[topic]
    before = manifest(uri)
    assert old_id and before["topic_id"] == old_id  # the manifest carries the id it was built from
    pointer = json.loads((Path(uri) / layout.POINTER_NAME).read_text())
    assert (pointer["topic"], pointer["topic_id"]) == (topic, old_id)
    assert xcom(dr, "rebuild")["topic_id"] == old_id and xcom(dr, "recheck_deep")["topic_id"] == old_id

    recreate(admin, topic, {"cleanup.policy": "compact"})
    fresh = records("new")
    produce(kafka_config, topic, fresh)  # type: ignore[arg-type]
    new_id = cluster.topic_ids([topic])[topic]
    # the scenario: another log, at exactly the offsets the snapshot holds, so offsets alone pass
    assert new_id and new_id != old_id
    assert ends(cluster, topic) == {int(p): s["end_offset"] for p, s in before["partition_stats"].items()}
    assert checks.fast_check(IdBlindAdmin(kafka_config), topic, uri).ok
    assert changelog_truth(kafka_config, topic) != {
        k: v for rows in snapshot_rows(uri).values() for k, v in rows.items()
    }

    fast = checks.fast_check(cluster, topic, uri)
    assert not fast.ok and fast.topic_recreated is True and fast.failed_partitions == []
    assert (fast.snapshot_topic_id, fast.topic_id) == (old_id, new_id)
    assert "was deleted and created again after" in fast.problems[0] and new_id in fast.problems[0]
    assert checks.partial_scope(fast) is None

    cfg = tmp_path / "kafka.json"
    cfg.write_text(json.dumps(portable_config(kafka_config)))
    report = str(tmp_path / "deep.json")
    args = ["--kafka-config-file", str(cfg), "--topic", topic, "--snapshot-uri", uri, "--report-file", report]
    proc, deep = submit("deep_check.py", *args)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not deep["ok"] and deep["topic_recreated"] is True and deep["records_read"] == 0
    assert (deep["snapshot_topic_id"], deep["topic_id"]) == (old_id, new_id)
    assert deep["problems"] == fast.problems

    dr = run_dag(MAINTENANCE, {**conf, "deep": False, "rebuild": "never"})
    assert str(dr.state) == "failed" and ti_state(dr, "rebuild") == "skipped"
    assert xcom(dr, "fast_check")["topic_recreated"] is True
    assert manifest(uri) == before  # rebuild=never leaves the snapshot alone

    dr = run_dag(MAINTENANCE, {**conf, "deep": False, "rebuild": "auto"})
    assert str(dr.state) == "success" and ti_state(dr, "recheck_deep") == "success"
    assert xcom(dr, "decide", "only_partitions") == ""  # in full: every partition held the old log
    rebuilt = xcom(dr, "rebuild")
    assert rebuilt["only_partitions"] is None and rebuilt["topic_id"] == new_id
    assert manifest(uri)["topic_id"] == new_id
    assert json.loads((Path(uri) / layout.POINTER_NAME).read_text())["topic_id"] == new_id
    assert xcom(dr, "recheck_fast")["topic_recreated"] is False
    assert_snapshot_is_truth(uri, kafka_config, topic)
    latest = dict(fresh)  # the last value of each key of the new log
    assert {k: v for rows in snapshot_rows(uri).values() for k, v in rows.items()} == latest


# -- the pipeline's input recreated under its checkpoint ---------------------------------------------------


@pytest.fixture
def pipeline(admin: AdminClient, tmp_path: Path) -> Iterator[dict[str, Any]]:
    tag = uuid.uuid4().hex[:8]
    conf = {
        "input_topic": f"kstate-test-ids-in-{tag}",
        "changelog_topic": f"kstate-test-ids-totals-{tag}",
        "group": f"kstate-test-ids-{tag}",
        "checkpoint": str(tmp_path / "checkpoint"),
    }
    create_topic(admin, conf["input_topic"], PARTITIONS)
    create_topic(admin, conf["changelog_topic"], PARTITIONS, {"cleanup.policy": "compact"})
    yield conf
    admin.delete_topics([conf["input_topic"], conf["changelog_topic"]])


def payments(seed: int, n: int = 60) -> list[tuple[bytes, bytes]]:
    return [(f"acct-{i % 12:03d}".encode(), str((i * seed) % 50 + 1).encode()) for i in range(n)]


@pytest.mark.chaos  # 82 s of Spark; make test: the refusal's rules in tests/unit/example_dags
def test_the_pipeline_refuses_a_checkpoint_whose_input_was_recreated(
    pipeline: dict[str, Any],
    admin: AdminClient,
    kafka_config: dict[str, Any],
    run_dag: Any,
    capfd: pytest.CaptureFixture[str],
) -> None:
    cluster = ClusterAdmin(kafka_config)
    topic, log, checkpoint = (
        pipeline["input_topic"],
        pipeline["changelog_topic"],
        Path(pipeline["checkpoint"]),
    )
    first = payments(3)
    produce(kafka_config, topic, first)  # type: ignore[arg-type]
    dr = run_dag(PIPELINE, pipeline)
    assert str(dr.state) == "success"
    report = xcom(dr, "running_totals")
    old_id = cluster.topic_ids([topic])[topic]
    assert report["payments_read"] == 60 and report["input_topic_id"] == old_id and old_id
    record = json.loads((checkpoint / "_kstate_input.json").read_text())
    assert (record["topic"], record["topic_id"]) == (topic, old_id)
    totals = changelog_truth(kafka_config, log)
    assert totals == expected_totals(first)

    recreate(admin, topic)
    second = payments(7)
    produce(kafka_config, topic, second)  # type: ignore[arg-type]
    new_id = cluster.topic_ids([topic])[topic]
    # the scenario: the new input reached the very offsets the checkpoint resumes from (issue 39's demo)
    assert new_id != old_id
    assert {str(p): e for p, e in ends(cluster, topic).items()} == report["input_offsets"]

    capfd.readouterr()
    dr = run_dag(PIPELINE, pipeline)
    assert str(dr.state) == "failed"
    out = "".join(capfd.readouterr())
    assert "TopicRecreatedError" in out, out[-3000:]
    assert (
        f"refused to resume the checkpoint at {checkpoint}: topic {topic!r} was deleted and created again"
        in out
    )
    assert old_id in out and new_id in out
    assert "new checkpoint location" in out and "start_over=true" in out
    assert changelog_truth(kafka_config, log) == totals  # nothing was written

    dr = run_dag(PIPELINE, {**pipeline, "start_over": True})
    assert str(dr.state) == "success"
    report = xcom(dr, "running_totals")
    assert report["payments_read"] == 60 and report["input_topic_id"] == new_id
    assert new_id in report["started_over"]["reason"]
    assert Path(report["started_over"]["checkpoint_set_aside"]).is_dir()
    assert json.loads((checkpoint / "_kstate_input.json").read_text())["topic_id"] == new_id
    assert changelog_truth(kafka_config, log) == expected_totals(first + second)  # added to, as it says

    # a checkpoint from before the record was kept, its input recreated shorter: refused by its offsets
    (checkpoint / "_kstate_input.json").unlink()
    recreate(admin, topic)
    produce(kafka_config, topic, payments(5, n=6))  # type: ignore[arg-type]
    capfd.readouterr()
    dr = run_dag(PIPELINE, pipeline)
    assert str(dr.state) == "failed"
    out = "".join(capfd.readouterr())
    assert "StoredOffsetsError" in out and "lie beyond the end of topic" in out, out[-3000:]
    assert f"records no topic id of {topic!r}" in out  # the unknown id, named
    assert changelog_truth(kafka_config, log) == expected_totals(first + second)


# -- the demo's state story, twice ----------------------------------------------------------------------


@pytest.mark.chaos  # 12 min 8 s on 2 shared cores (load ~11): 12 Spark applications; make chaos runs it
def test_the_demos_state_story_runs_twice_in_one_state_folder(
    kafka_config: dict[str, Any], run_dag: Any, tmp_path: Path
) -> None:
    from kstate_support.airflow_compat import dag_bag

    demo_state = load_file(ROOT / "scripts" / "demo_state.py", "demo_state")
    bag = dag_bag(str(ROOT / "dags"))
    state = tmp_path / "demo"
    said: list[str] = []
    for _run in range(2):
        result = demo_state.run(kafka_config, bag, state, say=said.append)
        assert "failed" not in result and "error" not in result, (result, said)
        assert "folded 2000 of 2000 payments" in result["pipeline"], result
        checkpoints = list((state / "state-story" / "checkpoints").iterdir())
        assert [c.name for c in checkpoints] == ["totals"]  # the run's checkpoint, in the demo's own state
        assert json.loads((checkpoints[0] / "_kstate_input.json").read_text())["topic_id"]
