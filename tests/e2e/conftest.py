"""One real Airflow deployment (``airflow standalone``) per pytest session, for the deployment/browser tests.

It runs the project's ``dags/`` (or ``KSTATE_E2E_DAGS_FOLDER``) against the session's broker: the
connections ``kafka_default`` and ``spark_default`` set by ``tests/conftest.py`` are passed to it as
``AIRFLOW_CONN_*`` variables. ``[scheduler] use_job_schedule`` is off so that only the runs a test triggers
exist (``kstate_state_maintenance`` is ``@daily`` and would otherwise start a scheduled run with its
defaults as soon as it is unpaused). The standalone log is copied to ``artifacts/e2e-standalone.log``.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.deployment import AirflowDeployment, airflow_deployment

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts"
EXAMPLE_DAGS = ("kstate_partition_increase", "kstate_state_maintenance")


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
        "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",
    }
    dags = os.environ.get("KSTATE_E2E_DAGS_FOLDER", str(ROOT / "dags"))
    with airflow_deployment(dags, env=env, save_log_to=artifacts_dir / "e2e-standalone.log") as dep:
        dep.wait_for_dags(EXAMPLE_DAGS, timeout=120)
        for dag_id in EXAMPLE_DAGS:
            dep.unpause(dag_id)
        yield dep
    # stop() raised if anything was left running; a stop that needed SIGTERM/SIGKILL is worth a warning.
    if dep.unclean_stop:
        warnings.warn(
            f"airflow standalone needed SIGTERM/SIGKILL to stop ({dep.stopped_in:.1f}s)", stacklevel=1
        )
