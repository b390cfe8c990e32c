"""The development support package: one broker helper honouring the cluster variables; no sys.path inserts."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from kstate_support import ROOT, broker

INSERT = re.compile(r"sys\.path\.(insert|append)\(")


def test_no_sys_path_inserts_in_tests_benchmarks_or_scripts() -> None:
    files = [f for folder in ("tests", "bench", "scripts", "support") for f in (ROOT / folder).rglob("*.py")]
    assert len(files) > 40
    offenders = [str(f.relative_to(ROOT)) for f in files if INSERT.search(f.read_text())]
    assert offenders == []


def test_the_broker_helper_uses_the_named_cluster_and_starts_none(monkeypatch: Any, tmp_path: Path) -> None:
    def no_embedded(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError(
            "an embedded broker was started although KSTATE_BOOTSTRAP_SERVERS names a cluster"
        )

    monkeypatch.setattr(broker, "running", no_embedded)
    monkeypatch.setattr(broker, "up", no_embedded)
    monkeypatch.setenv("KSTATE_BOOTSTRAP_SERVERS", "kafka-1.example:9093")
    monkeypatch.setenv("KSTATE_KAFKA_CONFIG", '{"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}')
    with broker.cluster(tmp_path / "broker") as config:
        assert config == {
            "bootstrap.servers": "kafka-1.example:9093",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
        }
    assert not (tmp_path / "broker").exists()
    monkeypatch.setenv("KSTATE_KAFKA_CONFIG", "[1, 2]")
    with pytest.raises(SystemExit, match="KSTATE_KAFKA_CONFIG must be a JSON object"):
        broker.external_config()


def test_without_a_named_cluster_a_broker_is_started_here(monkeypatch: Any, tmp_path: Path) -> None:
    started: list[Path] = []

    class Running:
        def __init__(self, data_dir: Path, nodes: int = 1) -> None:
            started.append(data_dir)

        def __enter__(self) -> str:
            return "127.0.0.1:1"

        def __exit__(self, *exc: Any) -> None:
            return None

    monkeypatch.delenv("KSTATE_BOOTSTRAP_SERVERS", raising=False)
    monkeypatch.setattr(broker, "running", Running)
    with broker.cluster(tmp_path / "b") as config:
        assert config == {"bootstrap.servers": "127.0.0.1:1"}
    assert started == [tmp_path / "b"]


def test_apache_kafka_is_the_default_broker_and_an_unknown_one_is_refused(monkeypatch: Any) -> None:
    monkeypatch.delenv("KSTATE_BROKER", raising=False)
    monkeypatch.delenv("KSTATE_KAFKA_VERSION", raising=False)
    assert broker.kind() == "kafka"
    assert broker.describe() == "Apache Kafka 4.4.0 (KRaft)"
    monkeypatch.setenv("KSTATE_BROKER", "noida")
    assert "emulator" in broker.describe()
    monkeypatch.setenv("KSTATE_BROKER", "redpanda")
    with pytest.raises(SystemExit, match="'redpanda' is not a broker this helper starts"):
        broker.kind()


def test_three_nodes_replicate_three_times_with_two_in_sync(tmp_path: Path) -> None:
    from kstate_support import apache_kafka

    nodes = [apache_kafka.Node(i, 9000 + i, 9100 + i) for i in (1, 2, 3)]
    props = dict(
        line.split("=", 1) for line in apache_kafka.server_properties(nodes[1], nodes, tmp_path).splitlines()
    )
    assert props["node.id"] == "2"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:9101,2@127.0.0.1:9102,3@127.0.0.1:9103"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:9002,CONTROLLER://127.0.0.1:9102"
    for key in ("default.replication.factor", "offsets.topic.replication.factor"):
        assert props[key] == "3"
    assert props["min.insync.replicas"] == props["transaction.state.log.min.isr"] == "2"
    single = apache_kafka.server_properties(nodes[0], nodes[:1], tmp_path)
    assert "min.insync.replicas=1\n" in single and "default.replication.factor=1\n" in single


def test_every_entry_point_gets_its_broker_from_the_one_helper() -> None:
    """Tests, the demo and each benchmark that needs a broker go through kstate_support.broker; none reads
    the cluster's librdkafka extras (KSTATE_KAFKA_CONFIG) itself, which is where the copies drifted."""
    users = ["tests/conftest.py", "scripts/demo.py", "scripts/run_tests.py", "bench/bench_state.py"]
    users += [
        "bench/bench_partition_increase.py",
        "bench/bench_increase_scale.py",
        "bench/bench_client_throughput.py",
    ]
    for path in users:
        assert "kstate_support" in (ROOT / path).read_text(), path
    files = [f for folder in ("tests", "bench", "scripts") for f in (ROOT / folder).rglob("*.py")]
    readers = [
        str(f.relative_to(ROOT))
        for f in files
        if f.name != "test_support.py" and 'environ.get("KSTATE_KAFKA_CONFIG"' in f.read_text()
    ]
    assert readers == []


def test_test_modules_have_unique_basenames() -> None:
    """pytest imports test modules by basename (no __init__.py): two of one name stop the whole run."""
    names = [f.name for f in (ROOT / "tests").rglob("test_*.py")]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


def test_a_kraft_cluster_id_never_starts_with_a_dash(monkeypatch: Any) -> None:
    # `kafka-storage format -t -abc...` reads the id as an option: the broker failed to start 1 time in 64.
    from kstate_support import apache_kafka

    dashed = uuid.UUID(bytes=b"\xf8" + bytes(15))  # base64url "-A..."
    ids = iter([dashed, uuid.UUID(int=1)])
    monkeypatch.setattr(apache_kafka.uuid, "uuid4", lambda: next(ids))
    cid = apache_kafka.cluster_id()
    assert not cid.startswith("-") and len(cid) == 22
