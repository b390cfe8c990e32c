"""The development support package: one broker helper honouring the cluster variables; no sys.path inserts."""

from __future__ import annotations

import re
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


def test_without_a_named_cluster_the_embedded_broker_is_used(monkeypatch: Any, tmp_path: Path) -> None:
    started: list[Path] = []

    class Running:
        def __init__(self, data_dir: Path) -> None:
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
