"""The demo's state story: the example pipeline builds a store, it is corrupted, the maintenance DAG repairs it."""

from __future__ import annotations

import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from confluent_kafka import Producer
from kstate_support.topics import create_topic, unique_name

from airflow_provider_kstate.store.layout import resolve

PIPELINE = "kstate_example_pipeline"
MAINTENANCE = "kstate_state_maintenance"
PARTITIONS = 6


def _topics(config: dict[str, Any], names: dict[str, tuple[int, dict[str, str]]]) -> None:
    """Create each topic of ``{name: (partitions, topic config)}``."""
    for name, (partitions, topic_config) in names.items():
        create_topic(config, name, partitions, topic_config)


def _payments(config: dict[str, Any], topic: str, n: int) -> None:
    rnd = random.Random(7)
    producer = Producer({**config, "partitioner": "murmur2_random"})
    for _ in range(n):
        account = f"acct-{rnd.randrange(60):03d}".encode()
        producer.produce(topic, key=account, value=str(rnd.randrange(-20, 100)).encode())
    producer.flush(30)


def _xcom(dr: Any, task_id: str) -> Any:
    return dr.get_task_instance(task_id).xcom_pull(task_ids=task_id)


def _rewrite(uri: Path, partition: int, change: Any) -> list[bytes]:
    """Replace one partition's Parquet files by ``change(table)``; return the keys in it before."""
    folder = Path(resolve(str(uri)).uri) / f"partition={partition}"  # the pointer's current version
    files = sorted(folder.glob("*.parquet"))
    table = pa.concat_tables([pq.read_table(f, partitioning=None) for f in files])
    for f in files:
        f.unlink()
        (folder / f".{f.name}.crc").unlink(missing_ok=True)  # Hadoop's checksum of the file we replace
    pq.write_table(change(table), folder / "part-00000-corrupted.parquet")
    return sorted(table["key"].to_pylist())


def _corrupt(config: dict[str, Any], uri: Path, log: str) -> dict[str, Any]:
    """Drop a row from partition 0 (KAFKA-7672) and put an aborted-transaction value into partition 1."""
    dropped = _rewrite(uri, 0, lambda t: t.slice(1))[0]
    victim: list[bytes] = []

    def take_aborted(table: pa.Table) -> pa.Table:
        victim.append(table["key"][0].as_py())
        values = pc.if_else(
            pc.equal(table["key"], victim[0]), pa.scalar(b"999999", pa.binary()), table["value"]
        )
        return table.set_column(table.schema.get_field_index("value"), "value", values)

    _rewrite(uri, 1, take_aborted)
    producer = Producer(
        {**config, "transactional.id": "kstate-demo-aborter", "partitioner": "murmur2_random"}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(log, key=victim[0], value=b"999999")
    producer.flush(30)
    producer.abort_transaction(30)
    return {"dropped_row": dropped.decode(), "aborted_value_for": victim[0].decode()}


def _failed_tasks(dr: Any) -> list[str]:
    return sorted(ti.task_id for ti in dr.get_task_instances() if str(ti.state) == "failed")


def refused(
    config: dict[str, Any], bag: Any, uri: Path, pipeline: Any, first: Any, say: Callable[[str], None]
) -> dict[str, Any]:
    """The story on a broker that breaks the promises the state side relies on: report what was refused,
    and that nothing was published (no corruption and repair: there is no snapshot to corrupt)."""
    published = uri.exists() and any(uri.iterdir())
    say(
        f"    the broker breaks promises the state side relies on: pipeline {pipeline.state} "
        f"(failed {_failed_tasks(pipeline)}), maintenance {first.state} (failed {_failed_tasks(first)}); "
        f"snapshot published: {published}"
    )
    report = (_xcom(pipeline, "running_totals") or {}) if str(pipeline.state) == "success" else {}
    return {
        "pipeline": f"`{PIPELINE}`: {pipeline.state}"
        + (
            f", folded {report.get('payments_read')} payments"
            if report
            else " (refused: see the broker doctor above)"
        ),
        "first snapshot": f"`{MAINTENANCE}` (rebuild=auto): {first.state}, failed tasks {_failed_tasks(first)}; "
        f"snapshot published: {published}",
        "why": "the broker doctor found broken promises the reads need (read_committed, end offsets; see above): "
        "the rebuild refused with BrokerDeviationError before Spark started, so no state from aborted or "
        "unread records was published",
        **({"failed": True} if published or str(first.state) == "success" else {}),
    }


def story_folder(state_dir: Path) -> Path:
    """Return the folder that holds everything the story writes (the snapshot, the pipeline's checkpoint),
    emptied first: under the demo's own state, so a run never resumes what an earlier run left (issue 39).

    :param state_dir: the demo's state folder (``.kstate/demo`` of the checkout).
    """
    folder = state_dir / "state-story"
    shutil.rmtree(folder, ignore_errors=True)
    shutil.rmtree(state_dir / "snapshots", ignore_errors=True)  # where earlier versions kept the snapshot
    folder.mkdir(parents=True)
    return folder


def run(
    config: dict[str, Any],
    bag: Any,
    state_dir: Path,
    say: Callable[[str], None] = print,
    trusted: bool = True,
) -> dict[str, Any]:
    """Run the story; return the report lines (``failed`` set when something did not go as it must).

    :param say: prints one progress line.
    :param trusted: the broker doctor found the promises of the state side kept; when not, the story
        checks that the maintenance refuses and publishes nothing (:func:`refused`).
    """
    folder = story_folder(state_dir)
    uri, checkpoint = folder / "snapshots" / "account-totals", folder / "checkpoints" / "totals"
    uri.parent.mkdir(parents=True)
    # names of this run: a broker shared by runs (KSTATE_BOOTSTRAP_SERVERS, a test session) keeps the last
    payments, log, group = (
        unique_name("demo-payments"),
        unique_name("demo-account-totals"),
        unique_name("demo"),
    )
    _topics(config, {payments: (3, {}), log: (PARTITIONS, {"cleanup.policy": "compact"})})
    _payments(config, payments, 2000)
    say("    running kstate_example_pipeline (spark-submit) ...")
    conf = {"changelog_topic": log, "snapshot_uri": str(uri)}
    pipeline = bag.get_dag(PIPELINE).test(
        run_conf={
            "input_topic": payments,
            "changelog_topic": log,
            "group": group,
            "checkpoint": str(checkpoint),  # the run's own: a checkpoint never outlives its demo
        }
    )
    folded = (
        (_xcom(pipeline, "running_totals") or {}).get("payments_read")
        if str(pipeline.state) == "success"
        else None
    )
    say(
        f"    pipeline run: {pipeline.state} (folded {folded} payments); first kstate_state_maintenance run (no snapshot yet) ..."
    )
    first = bag.get_dag(MAINTENANCE).test(run_conf={**conf, "deep": False, "rebuild": "auto"})
    say(f"    snapshot built: {first.state}")
    if not trusted:
        return refused(config, bag, uri, pipeline, first, say)
    damage = _corrupt(config, uri, log)
    say(f"    corrupted the snapshot: {damage}; maintenance run with the deep check ...")
    repair = bag.get_dag(MAINTENANCE).test(run_conf={**conf, "deep": True, "rebuild": "auto"})
    deep = _xcom(repair, "deep_check") or {}
    recheck = _xcom(repair, "recheck_deep") or {}
    found = deep.get("failed_partitions")
    say(f"    deep check found partitions {found}; rebuilt; re-check ok={recheck.get('ok')}")
    ok = (
        pipeline.state == "success"
        and folded == 2000
        and first.state == "success"
        and repair.state == "success"
        and found == [0, 1]
        and bool(recheck.get("ok"))
    )
    return {
        "pipeline": f"`{PIPELINE}` folded {folded} of 2000 payments into `{log}` ({PARTITIONS} partitions): "
        f"{pipeline.state}",
        "first snapshot": f"missing -> built by `{MAINTENANCE}` (rebuild=auto): {first.state}",
        "damage": f"dropped the row of `{damage['dropped_row']}` (KAFKA-7672 class); gave "
        f"`{damage['aborted_value_for']}` a value from an aborted transaction (KAFKA-20685 class)",
        "detected": f"deep check failed partitions {found} with sample keys",
        "repaired": f"rebuild of partitions {found}, re-check ok={recheck.get('ok')}; run {repair.state}",
        **({} if ok else {"failed": True}),
    }
