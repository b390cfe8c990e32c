"""The integration tests run on the real broker: it starts before the first of them (unit tests start none).

The fixtures (``bootstrap``, ``kafka_config``, ``admin``, ``make_topic``, ``unique``, ``run_dag``) are the
top-level conftest's; this only asks for the broker up front, so that a test which reads
``AIRFLOW_CONN_KAFKA_DEFAULT`` or ``KSTATE_BOOTSTRAP_SERVERS`` itself (a subprocess's environment) sees it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kstate_support.fleet import Fleet
from kstate_support.java_services import JavaFleet


@pytest.fixture(scope="session", autouse=True)
def session_broker(kafka_config: dict[str, Any]) -> dict[str, Any]:
    """The session's broker, started before the first integration test."""
    return kafka_config


@pytest.fixture
def fleet(kafka_config: dict[str, Any], tmp_path: Path) -> Iterator[Fleet]:
    """Foreign services (plain KafkaJS, ``support/node``) in this test's run directory; every service it
    defined is stopped afterwards."""
    extra = set(kafka_config) - {"bootstrap.servers"}
    if extra:
        pytest.skip(f"the KafkaJS services take a bootstrap address only, the cluster needs {sorted(extra)}")
    with Fleet(tmp_path / "fleet", kafka_config["bootstrap.servers"]) as out:
        yield out


@pytest.fixture
def java_fleet(kafka_config: dict[str, Any], tmp_path: Path) -> Iterator[JavaFleet]:
    """Java services (``support/java``, built once into ``.kstate/java-build``) in this test's run
    directory; every service it defined is stopped afterwards."""
    extra = set(kafka_config) - {"bootstrap.servers"}
    if extra:
        pytest.skip(f"the Java services take a bootstrap address only, the cluster needs {sorted(extra)}")
    out = JavaFleet(tmp_path / "java-fleet", kafka_config["bootstrap.servers"])
    try:
        yield out
    finally:
        out.close()
