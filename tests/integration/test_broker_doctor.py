"""The broker doctor on the session's broker (Apache Kafka 4.4.0 by default; ``KSTATE_KAFKA_VERSION`` or
``make compat``'s broker cells for other releases; ``KSTATE_BROKER=noida`` for the emulator), which keeps the
promises the provider relies on: every check passes, the verdict is cached per cluster id, and the CLI exits
0 (on Tansu, tests/tansu/test_tansu_increase.py shows the opposite).

The share group promise is measured too: not applicable where the broker has no share groups (Kafka 4.0, the
emulator), broken on Apache Kafka 4.2 and 4.3 (a partition added while a share group reads starts at
latest), kept from 4.4.0.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from kstate_support import ROOT, apache_kafka

from airflow_provider_kstate.doctor.diagnosis import diagnose, last_verdict
from airflow_provider_kstate.doctor.promises import ALL_PROMISES, BEHAVIOUR_PROMISES, SHARE_NEW_PARTITIONS
from airflow_provider_kstate.doctor.verdict import Verdict

pytestmark = pytest.mark.integration

#: The first Apache Kafka release whose share groups read a partition added meanwhile from its start
#: (measured: 4.2.2 and 4.3.1 skip what is written before the group's next heartbeat, 4.4.0 delivers it).
SHARE_START_FIXED = (4, 4, 0)
#: The promises besides the share group's, kept by every broker these tests start.
CORE_PROMISES = tuple(p for p in ALL_PROMISES if p != SHARE_NEW_PARTITIONS)


def helper_release(bootstrap: str) -> tuple[int, ...] | None:
    """The Apache Kafka release of the cluster at ``bootstrap`` when ``kstate_support`` started it (its
    layout under ``.kstate`` names it), else None (an external cluster, or the emulator)."""
    for layout_file in (ROOT / ".kstate").glob(f"*/{apache_kafka.CLUSTER_FILE}"):
        layout = apache_kafka.read_layout(layout_file.parent)
        nodes = apache_kafka.nodes_of(layout) if layout else []
        if (
            nodes
            and apache_kafka.bootstrap_of(nodes) == bootstrap
            and all(apache_kafka.alive(n.pid) for n in nodes)
        ):
            return tuple(int(x) for x in str(layout["release"]).split(".")[:3]) if layout else None
    return None


def expected_broken(config: dict[str, Any]) -> list[str] | None:
    """The promises the session's broker is known to break: none, or the share group's on Apache Kafka
    4.2 and 4.3; None when its release is not known here."""
    release = helper_release(config["bootstrap.servers"])
    if release is None:
        return None
    return [SHARE_NEW_PARTITIONS] if (4, 2, 0) <= release < SHARE_START_FIXED else []


def test_the_broker_keeps_every_promise_and_the_verdict_is_cached(kafka_config: dict[str, Any]) -> None:
    verdict, cached = diagnose(kafka_config, refresh=True)
    assert not cached
    assert not [p for p in verdict.broken() if p in CORE_PROMISES], verdict.lines()
    assert verdict.unchecked(ALL_PROMISES) == [], verdict.lines()
    share = verdict.results[SHARE_NEW_PARTITIONS]
    expected = expected_broken(kafka_config)
    if expected is not None:
        assert verdict.broken() == expected, verdict.lines()
    if not share.applies:  # no share groups: Kafka 4.0, the emulator, share.version off on Kafka 4.1
        assert "ApiVersions lacks" in share.detail or "share.version" in share.detail, share.detail
    # from the cache, not probed again (how much faster: bench/bench_doctor.py, not a bound here)
    again, cached = diagnose(kafka_config)
    assert cached and again.checked_at == verdict.checked_at
    assert last_verdict(kafka_config) == _behaviour_only(verdict)


def test_the_verdict_is_keyed_by_the_cluster_id_apache_kafka_reports(kafka_config: dict[str, Any]) -> None:
    """The id, not the bootstrap address: two spellings of one cluster share a verdict, and a new cluster on
    an old address does not inherit one (the admin client used to be collected before DescribeCluster
    answered, so every verdict was keyed by its bootstrap address)."""
    release = helper_release(kafka_config["bootstrap.servers"])
    if release is None:
        pytest.skip("the cluster id of a cluster kstate_support did not start is not known here")
    layouts = [
        apache_kafka.read_layout(f.parent) for f in (ROOT / ".kstate").glob(f"*/{apache_kafka.CLUSTER_FILE}")
    ]
    ids = {
        str(layout["cluster_id"])
        for layout in layouts
        if layout
        and apache_kafka.bootstrap_of(apache_kafka.nodes_of(layout)) == kafka_config["bootstrap.servers"]
    }
    verdict, _cached = diagnose(kafka_config)
    assert verdict.cluster in ids, (verdict.cluster, ids)


def _behaviour_only(verdict: Verdict) -> Verdict:
    """The cached copy holds only the behavioural results (the cheap ones run every time)."""
    return Verdict(verdict.cluster, verdict.checked_at, {p: verdict.results[p] for p in BEHAVIOUR_PROMISES})


def test_the_cli_says_ok_and_never_prints_the_config(kafka_config: dict[str, Any]) -> None:
    extra = {**kafka_config, "sasl.password": "never-printed-4711", "client.id": "doctor-cli"}
    extra.pop("bootstrap.servers")
    cmd = [
        sys.executable,
        "-m",
        "airflow_provider_kstate.doctor",
        "--bootstrap-servers",
        kafka_config["bootstrap.servers"],
        "--config",
        json.dumps(extra),
        "--json",
    ]
    out = subprocess.run([*cmd, "--needs", "increase"], capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    broken = json.loads(out.stdout)["broken"]
    expected = expected_broken(kafka_config)
    assert broken == expected if expected is not None else set(broken) <= {SHARE_NEW_PARTITIONS}, broken
    assert "never-printed-4711" not in out.stdout + out.stderr
    everything = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert everything.returncode == (3 if broken else 0), everything.stderr[-2000:]
    bad = subprocess.run([*cmd, "--allow", "latest_ofset"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "latest_ofset" in bad.stderr
