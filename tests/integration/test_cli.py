"""The command the issue names: `airflow dags test kstate_partition_increase -c '{...}'` runs the whole safe order."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from kstate_support.airflow_env import python_without

pytestmark = pytest.mark.integration


def test_airflow_dags_test_cli(kafka_config: dict[str, Any], admin: Any, make_topic: Any) -> None:
    topic = make_topic("cli", partitions=1)
    group = f"{topic}-g"
    producer = Producer(kafka_config)
    producer.produce(topic, value=b"x")
    producer.flush(30)
    consumer = Consumer({**kafka_config, "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and consumer.poll(0.5) is None:
        pass
    consumer.commit(asynchronous=False)
    consumer.close()

    conf = json.dumps({"topic": topic, "partitions": 3, "consumer_groups": [group]})
    airflow = str(Path(sys.executable).with_name("airflow"))
    out = subprocess.run(
        [airflow, "dags", "test", "kstate_partition_increase", "-c", conf],
        capture_output=True,
        text=True,
        timeout=300,
    )
    log = out.stdout + out.stderr
    assert "DagRun Finished" in log and "state=success" in log, log[-3000:]
    assert "VERIFY" in log and "no group skips a message" in log
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 3
    from airflow_provider_kstate.hooks.admin import KStateAdminHook

    assert KStateAdminHook().committed_offsets(group, topic) == {0: 1, 1: 0, 2: 0}


def test_kstate_plan_prints_the_page_s_plan_takes_no_lease_and_imports_no_airflow(
    kafka_config: dict[str, Any], admin: Any, make_topic: Any
) -> None:
    """Issue 27, item 5: ``kstate plan TOPIC --partitions N`` prints the plan the kstate page shows (each
    group's class, driver, key-order mark, lag; the broker check's verdict), in a Python where Airflow
    cannot be imported, takes no lease and changes nothing; a group it could not drive makes it exit 3."""
    import threading

    from airflow_provider_kstate.client_piece.consumer import ControlledConsumer
    from airflow_provider_kstate.hooks.admin import KStateAdminHook
    from airflow_provider_kstate.hooks.lease import KStateLeaseHook
    from airflow_provider_kstate.plugins.views import topic_view

    topic = make_topic("cli-plan", partitions=2)
    held, plain = f"{topic}-held", f"{topic}-plain"
    settings = {**kafka_config, "auto.offset.reset": "earliest"}
    members = [
        ControlledConsumer(
            {**settings, "group.id": held, "client.id": f"{held}-0"}, [topic], check_interval=0.1
        ),
        Consumer({**settings, "group.id": plain, "client.id": f"{plain}-0"}),
    ]
    members[1].subscribe([topic])
    halt = threading.Event()
    threads = [threading.Thread(target=_poll, args=(m, halt), daemon=True) for m in members]
    for thread in threads:
        thread.start()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not _both_assigned(admin, [held, plain]):
            time.sleep(0.2)
        code = (
            "from airflow_provider_kstate.cli import main\n"
            "code = main(sys.argv[1:])\n"
            "assert not [m for m in sys.modules if m.split('.')[0] == 'airflow'], 'airflow imported'\n"
            "sys.exit(code)\n"
        )
        servers = ["--bootstrap-servers", kafka_config["bootstrap.servers"]]
        cmd = ("plan", topic, "--partitions", "4", *servers)
        as_json = python_without(code, ("airflow",), (*cmd, "--json"))
        as_text = python_without(code, ("airflow",), cmd)
        stay = ("--consumers-stay", "auto", "--controlled-producers", "--json")
        staying = python_without(code, ("airflow",), (*cmd, *stay))
        page = topic_view(KStateAdminHook(), "kafka_default", topic, 4)
    finally:
        halt.set()
        for thread in threads:
            thread.join(30)
    assert as_json.returncode == 3, as_json.stderr[-2000:]  # the plain group cannot be driven
    document = json.loads(as_json.stdout)
    groups = {g["group"]: g for g in document["groups"]}
    assert groups[held]["driver"] == "control" and groups[held]["key_order"] == "barrier"
    assert plain in document["cannot_drive"] and f"{plain}-0" in document["cannot_drive"][plain]
    assert document["partitions"] == 2 and document["target"] == 4 and document["new_partitions"] == "2-3"
    same = ("groups", "would_pause", "would_seed", "would_wait", "left_alone", "cannot_drive", "target")
    assert {k: document[k] for k in same} == {k: page[k] for k in same}, "the page shows another plan"
    assert as_text.returncode == 3 and f"REFUSED: group {plain}" in as_text.stdout, as_text.stdout
    assert f"group {held}: active" in as_text.stdout and "driver: control" in as_text.stdout
    # issue 41: the same plan with consumers staying: the client-piece group stays, the plain one cannot
    stays = {g["group"]: g for g in json.loads(staying.stdout)["groups"]}
    assert (stays[held]["stay"], stays[plain]["stay"]) == ("client-piece", ""), stays
    assert stays[plain]["stay_reason"].startswith("paused: no evidence"), stays[plain]
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 2, (
        "the plan changed the topic"
    )
    assert KStateLeaseHook().current(topic) is None, "the plan took a lease"


def _poll(consumer: Any, halt: Any) -> None:
    while not halt.is_set():
        consumer.poll(0.05)
    consumer.close()


def _both_assigned(admin: Any, groups: list[str]) -> bool:
    described = admin.describe_consumer_groups(groups)
    return all(
        f.result(30).members and all(m.assignment.topic_partitions for m in f.result(30).members)
        for f in described.values()
    )


def test_kstate_plan_and_the_page_show_several_topics_as_one_run(
    kafka_config: dict[str, Any], admin: Any, make_topic: Any, run_dag: Any
) -> None:
    """Issue 32, item 4 on the command line and the kstate page: ``kstate plan A B`` (and the page's plan
    with ``topics``) print ONE plan of the co-partitioned set: each topic with its count now and after, the
    group once with both topics it reads; unequal counts are refused naming each count (exit 3). After a
    run of the set, the page shows it as one run from either topic: the run list names the other topic,
    the proof has each topic's verdict and the group once, proved on both."""
    from airflow_provider_kstate.hooks.admin import KStateAdminHook
    from airflow_provider_kstate.hooks.lease import KStateLeaseHook
    from airflow_provider_kstate.plugins import views, watch

    a, b, odd = (make_topic(n, partitions=p) for n, p in (("cli-set-a", 2), ("cli-set-b", 2), ("cli-odd", 3)))
    group = f"{a}-g"
    _commit_each(kafka_config, group, [a, b])
    code = (
        "from airflow_provider_kstate.cli import main\n"
        "code = main(sys.argv[1:])\n"
        "assert not [m for m in sys.modules if m.split('.')[0] == 'airflow'], 'airflow imported'\n"
        "sys.exit(code)\n"
    )
    servers = ["--bootstrap-servers", kafka_config["bootstrap.servers"]]
    as_json = python_without(code, ("airflow",), ("plan", a, b, "--partitions", "4", *servers, "--json"))
    as_text = python_without(code, ("airflow",), ("plan", a, b, "--partitions", "4", *servers))
    unequal = python_without(code, ("airflow",), ("plan", a, odd, "--partitions", "4", *servers))
    twice = python_without(code, ("airflow",), ("plan", a, a, "--partitions", "4", *servers))
    assert as_json.returncode == 0, as_json.stderr[-2000:]
    document = json.loads(as_json.stdout)
    assert document["topics"] == [
        {"topic": a, "partitions": 2, "target": 4, "new_partitions": "2-3"},
        {"topic": b, "partitions": 2, "target": 4, "new_partitions": "2-3"},
    ], document["topics"]
    rows = {g["group"]: g for g in document["groups"]}
    assert rows[group]["topics"] == [a, b] and document["would_seed"] == [group], document
    assert rows[group]["without_offset"] == 0  # one offset on each partition of each topic
    assert as_text.returncode == 0 and f"co-partitioned topics {a}, {b}" in as_text.stdout, as_text.stdout
    assert unequal.returncode == 3 and f"{a}: 2, {odd}: 3" in unequal.stderr, unequal.stderr
    assert twice.returncode == 3 and "named twice" in twice.stderr, twice.stderr
    page = views.topic_view(KStateAdminHook(), "kafka_default", a, 4, [b])
    same = ("topics", "groups", "would_pause", "would_seed", "would_wait", "left_alone", "target")
    assert {k: page[k] for k in same} == {k: document[k] for k in same}, "the page shows another plan"
    for topic, count in ((a, 2), (b, 2), (odd, 3)):
        assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == count
        assert KStateLeaseHook().current(topic) is None, "the plan took a lease"

    dr = run_dag(
        "kstate_partition_increase",
        {"topic": a, "topics": [b], "partitions": 4, "consumer_groups": [group], "dry_run": False},
    )
    assert dr.state == "success"
    base, folder = views.report_base(), views.owner_folder(dr.dag_id, dr.run_id)
    for topic in (a, b):
        listed = {r["run"]: r for r in views.list_runs(base, topic)["runs"]}
        assert folder in listed, listed
        status = watch.run_status(base, topic, folder, "success")
        assert status is not None and status["topics"] == [a, b], status
        proof = views.run_proof(base, topic, folder)
        assert proof["topics"] == [a, b] and proof["verified"] and proof["ok"], proof
        assert [(t["topic"], t["ok"], t["partitions"]) for t in proof["per_topic"]] == [
            (a, True, 4),
            (b, True, 4),
        ]
        (entry,) = [g for g in proof["groups"] if g["group"] == group]
        assert entry["topics"] == [a, b] and entry["ok"] and entry["partitions"] == 4, entry
        assert entry["seeded"] == 4, entry  # partitions 2 and 3 of each topic seeded by the run


def _commit_each(kafka_config: dict[str, Any], group: str, topics: list[str]) -> None:
    """One record on each partition of each topic, consumed and committed by ``group`` (offsets 1 each)."""
    producer = Producer(kafka_config)
    for topic in topics:
        for p in (0, 1):
            producer.produce(topic, value=b"x", partition=p)
    producer.flush(30)
    consumer = Consumer({**kafka_config, "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe(topics)
    seen: set[tuple[str, int]] = set()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(seen) < 2 * len(topics):
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            seen.add((msg.topic(), msg.partition()))
    consumer.commit(asynchronous=False)
    consumer.close()
