"""Issue 40, item 3: one run for every reader of a topic. The example DAG ``kstate_streams_resize`` resizes a
real Kafka Streams 4.4 application (``support/streams``, the ``count`` shape) whose input is also read, at the
same time, by a service group of two ControlledConsumers (the client piece, ``auto.offset.reset=latest``), a
Java service group of two ``KafkaConsumer``s on a command driver (latest), and a share group (confluent-kafka
``ShareConsumer``s at the default ``share.auto.offset.reset=latest``), under live keyed traffic, 2 -> 4
partitions, ``replacer=local``. Two variants: ``classic`` (the application and both consumer groups on the
classic protocol) and ``streams`` (the application on KIP-1071's streams protocol, ``group.protocol=streams``,
and both consumer groups on KIP-848's, ``group.protocol=consumer``); each group's protocol is checked on the
broker before the run.

Before, the resize refused the topic (``UnprotectedGroupError``: another group reads it), and the plain
increase left the application's state on the wrong partitions. Now the one run takes the consumer groups out
of their groups once the application is stopped (the control record; the Java group's stop command), grows
and re-places, seeds them on the new partitions, brings them back before the application starts, and starts
the producers once they consumed the old partitions; the share group, which Apache Kafka 4.4 starts on added
partitions at their first record (the broker doctor's verdict, read from its cache), is left alone. After the
run: success; the plan named every reader with what the run does to it; every key's count equals a
from-scratch count of every acknowledged input record (0 wrong, 0 lost, 0 over); each group processed every
record written while it was a member, the new partitions' too (0 lost); the client-piece group processed each
key's records in order. (That a latest-reset group loses what is written to a partition before it has a
position there is proven by tests/integration/test_kafka_12261.py and test_java_fleet.py.)
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from kstate_support import streams
from kstate_support.client_piece_group import ClientPieceGroup
from kstate_support.fleet import start_group
from kstate_support.java_services import JavaFleet
from kstate_support.traffic import wait_until

from airflow_provider_kstate.increase.drivers import CommandPairs
from tests.integration.test_share_groups import ShareReaders
from tests.integration.test_streams_resize import (
    KEYS,
    RATE,
    HeldTraffic,
    _app,
    _app_driver,
    _Log,
    _results,
    _skip_unless_plain,
    topics,  # noqa: F401 - the fixture
)

pytestmark = [pytest.mark.integration, pytest.mark.chaos]  # a Streams app, two JVM services, ~2 min

DAG_ID = "kstate_streams_resize"


def seqs(group: ClientPieceGroup) -> set[int]:
    return {int(v) for v in group.values()}


@pytest.mark.parametrize(
    ("protocol", "group_protocol"),
    # the classic protocol everywhere; KIP-1071's streams group beside KIP-848 consumer groups
    [("classic", "classic"), ("streams", "consumer")],
    ids=["classic", "streams"],
)
def test_one_run_resizes_the_streams_application_and_protects_the_other_readers_of_its_input(
    protocol: str,
    group_protocol: str,
    kafka_config: dict[str, Any],
    admin: Any,
    topics: Any,  # noqa: F811 - the fixture imported above
    java_fleet: JavaFleet,  # noqa: F811 - the fixture imported above
    run_dag: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    _skip_unless_plain(kafka_config)
    from airflow_provider_kstate.doctor.promises import SHARE_NEW_PARTITIONS
    from airflow_provider_kstate.hooks.doctor import KStateDoctorHook

    assert KStateDoctorHook("kafka_default").verdict().kept(SHARE_NEW_PARTITIONS), "Apache Kafka 4.4 keeps it"
    app = _app("count", protocol, kafka_config, topics, tmp_path / "app")
    app_id, inputs, output = app._args["app_id"], app._args["inputs"], app._args["output"]
    service, java, share = f"{app_id}-svc", f"{app_id}-java", f"{app_id}-share"
    log = _Log()
    pairs = CommandPairs(inputs[0], log)
    driver = _app_driver(app, tmp_path / "driver")
    traffic = HeldTraffic(kafka_config, inputs, tmp_path / "traffic", rate=RATE, keys=KEYS)
    for i in range(2):
        java_fleet.consumer(
            f"java-m{i}", inputs[0], java, group_protocol=group_protocol, metadata_max_age_ms=5000
        )
    registry = {
        "streams-app": driver.to_dict(),
        "traffic": traffic.driver().to_dict(),
        "java-svc": {"kind": "command", **asdict(java_fleet.group_commands(java))},
    }
    monkeypatch.setenv("AIRFLOW_VAR_KSTATE_DRIVERS", json.dumps(registry))
    assert not pairs.start({app_id: driver}, "group"), log.lines[-3:]
    group = ClientPieceGroup({**kafka_config, "group.protocol": group_protocol}, inputs[0], service, service)
    sharing = ShareReaders(kafka_config, inputs[0], share)
    start_group(java_fleet, admin, java)

    def described(name: str) -> Any:
        return admin.describe_consumer_groups([name])[name].result(timeout=10)

    def assigned() -> bool:
        desc = described(service)
        held = {tp.partition for m in desc.members for tp in m.assignment.topic_partitions}
        return desc.state.name == "STABLE" and held == {0, 1}

    try:
        assert wait_until(assigned, 60), "the service group never held both partitions"
        kinds = {g: described(g).type.name for g in (service, java)}
        assert kinds == {service: group_protocol.upper(), java: group_protocol.upper()}, kinds
        traffic.start()
        time.sleep(6)  # state in the changelog, offsets committed by every reader
        since = len(traffic.records())
        dr = run_dag(
            DAG_ID,
            {
                "topic": inputs[0],
                "partitions": 4,
                "application_id": app_id,
                "app_driver": "streams-app",
                "producer_drivers": ["traffic"],
                "replacer": "local",
                "group_drivers": {java: "java-svc"},
            },
        )
        time.sleep(8)  # traffic on the new layout, keys on their new partitions
    finally:
        traffic.stop()
    try:
        records, out = _results(
            traffic, app, kafka_config, output, lambda: pairs.stop({app_id: driver}, "group")
        )
        mine = [r for r in records[since:] if r.topic == inputs[0]]
        written, placed = {r.seq for r in mine}, {(r.partition, r.offset) for r in mine}

        def java_read() -> set[tuple[int, int]]:
            return {(line["p"], line["o"]) for line in java_fleet.lines(*java_fleet.groups[java])}

        wait_until(
            lambda: written <= seqs(group) and placed <= java_read() and written <= set(sharing.received), 60
        )
    finally:
        group.stop()
        sharing.stop()
    ti = dr.get_task_instance("resize")
    report = ti.xcom_pull(task_ids="resize")
    verdict = streams.count_verdict(records, out)
    lost = sorted(written - seqs(group))
    java_lost = sorted(placed - java_read())
    share_lost = sorted(written - set(sharing.received))
    on_new = sum(1 for _k, _s, p in group.seen if p >= 2)
    print(
        json.dumps(
            {
                "report": report,
                "verdict": verdict,
                "lost": {"client_piece": len(lost), "java": len(java_lost), "share": len(share_lost)},
            },
            indent=1,
            default=str,
        )
    )
    assert str(getattr(dr.state, "value", dr.state)) == "success", (dr.state, ti.state)
    assert report["resized"] and report["partitions"] == {"before": 2, "after": 4}, report
    assert report["protocol"] == protocol, "the plan saw the application on its protocol"
    assert report["deep_check_passed"] and report["moved_keys"] > 0, report
    named = report["readers"]
    assert set(named) == {app_id, service, java, share}, named
    assert named[app_id].startswith("streams application"), named
    assert named[service] == "active: pause record, seeded, resume", named
    assert named[java] == "active: stop command, seeded, start command", named
    assert named[share] == "share-safe: left alone", named
    others = report["others"]
    assert others["paused"]["groups"] == 2 and others["drain"]["drained"], others
    assert others["paused"]["stopped_groups"] == [java], "the Java service is stopped by its command"
    seeded = others["topics"][inputs[0]]["groups"]
    assert seeded[service]["seeded"] == 2 and seeded[java]["seeded"] == 2, seeded
    assert share not in seeded, "the share group is left alone: the broker starts it at the first record"
    assert others["resumed"]["started_groups"] == [java], others["resumed"]
    assert (verdict["keys_wrong"], verdict["lost"], verdict["over"]) == (0, 0, 0), verdict
    assert sum(1 for r in records if r.partition >= 2) > 0 and on_new > 0, (
        "traffic reached the new partitions"
    )
    assert lost == [], f"the service group lost {len(lost)} records: {lost[:20]}"
    assert java_lost == [], f"the Java group lost {len(java_lost)} records: {java_lost[:20]}"
    assert share_lost == [], f"the share group lost {len(share_lost)} records: {share_lost[:20]}"
    assert {p for p in sharing.received.values()} >= {2, 3}, "the share group read the new partitions"
    assert group.out_of_order() == 0, "a key's records were processed out of order"
