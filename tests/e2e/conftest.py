"""One real Airflow deployment (``airflow standalone``) per pytest session, for the deployment/browser tests.

It runs the project's ``dags/`` (or ``KSTATE_E2E_DAGS_FOLDER``) against the session's broker: the
connections ``kafka_default`` and ``spark_default`` set by ``tests/conftest.py`` (the broker starts before the
first e2e test, ``session_broker``) are passed to it as
``AIRFLOW_CONN_*`` variables. ``KSTATE_MAINTENANCE_SCHEDULE`` is empty so that only the runs a test triggers
exist (``kstate_state_maintenance`` is ``@daily`` and would otherwise start a scheduled run with its
defaults as soon as it is unpaused); the scheduler still creates asset-triggered runs. The standalone log is copied to ``artifacts/e2e-standalone.log``.

The deployment stops after the last e2e test of the session, not at the session's end: idle, its scheduler,
DAG processor, triggerer and API server took CPU from every later test on a 2-core machine.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.deployment import AirflowDeployment, airflow_deployment

ROOT = Path(__file__).resolve().parents[2]
E2E = Path(__file__).resolve().parent
#: The session's deployment while it runs (stopped early by :func:`pytest_runtest_teardown`).
RUNNING: list[AirflowDeployment] = []
ARTIFACTS = ROOT / "artifacts"
EXAMPLE_DAGS = ("kstate_partition_increase", "kstate_state_maintenance")
#: The crash tests (``test_crash.py``) arm failpoints by writing names here; absent, failpoints cost nothing.
FAILPOINT_FILE = ROOT / ".kstate" / f"failpoints-{os.getpid()}"


@pytest.fixture(scope="session", autouse=True)
def session_broker(kafka_config: dict[str, Any]) -> dict[str, Any]:
    """The session's broker, started before the first e2e test (the top-level conftest starts none)."""
    return kafka_config


@pytest.fixture(scope="session")
def failpoint_file() -> Iterator[Path]:
    """The deployment's ``KSTATE_FAILPOINT_FILE`` (the file exists only while a crash test arms it)."""
    yield FAILPOINT_FILE
    FAILPOINT_FILE.unlink(missing_ok=True)


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="session")
def deployment(bootstrap: str, artifacts_dir: Path) -> Iterator[AirflowDeployment]:
    """A started deployment with both example DAGs parsed and unpaused; stopped (SIGINT) at session end."""
    env = {
        "AIRFLOW_CONN_KAFKA_DEFAULT": os.environ["AIRFLOW_CONN_KAFKA_DEFAULT"],
        "AIRFLOW_CONN_SPARK_DEFAULT": os.environ["AIRFLOW_CONN_SPARK_DEFAULT"],
        # Triggered runs only, without turning the scheduler's run creation off: `use_job_schedule=False`
        # would also stop every asset-triggered run (kstate_snapshot_consumer never ran under it).
        "KSTATE_MAINTENANCE_SCHEDULE": "",
        "KSTATE_FAILPOINT_FILE": str(FAILPOINT_FILE),
        # How often the scheduler ends the human-in-the-loop requests past their deadline (Airflow 3.3; 15 s
        # by default): test_approval's deadline of a few seconds is then seen within 3 s.
        "AIRFLOW__SCHEDULER__TRIGGER_TIMEOUT_CHECK_INTERVAL": "3",
    }
    dags = os.environ.get("KSTATE_E2E_DAGS_FOLDER", str(ROOT / "dags"))
    with airflow_deployment(dags, env=env, save_log_to=artifacts_dir / "e2e-standalone.log") as dep:
        dep.wait_for_dags(EXAMPLE_DAGS, timeout=120)
        for dag_id in EXAMPLE_DAGS:
            dep.unpause(dag_id)
        RUNNING.append(dep)
        yield dep
        RUNNING.clear()
    # stop() raised if anything was left running; a stop that needed SIGTERM/SIGKILL is worth a warning.
    if dep.unclean_stop:
        warnings.warn(
            f"airflow standalone needed SIGTERM/SIGKILL to stop ({dep.stopped_in:.1f}s)", stacklevel=1
        )


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """After the last e2e test (the next test lies outside ``tests/e2e``), stop the deployment: ``stop()``
    is idempotent, so the fixture's own stop at the session's end then does nothing."""
    if RUNNING and (nextitem is None or E2E not in Path(str(nextitem.path)).parents):
        RUNNING[0].stop()
