"""Shared fixtures: the real broker (on first use), a real Airflow home for ``dag.test()``, unique names.

Nothing here starts a broker: unit tests need none. The fixtures every suite shares (``unique``,
``make_topic``, ``control``, ``controller``, ...) live in one plugin, :mod:`kstate_support.fixtures`,
registered here once (``pytest_plugins``). The broker of the session is started by the first
test that asks for ``bootstrap``, ``kafka_config``, ``admin``, ``make_topic`` or ``run_dag``; the
integration and e2e conftests ask for it up front (``kstate_support.session_broker``). It is the one named by
``KSTATE_BOOTSTRAP_SERVERS`` (a real cluster; extra librdkafka settings such as SASL go in
``KSTATE_KAFKA_CONFIG`` as JSON), else the embedded one, started on a free port.
Airflow's environment is set here (``pytest_configure``), before anything imports airflow: a fresh ``AIRFLOW_HOME`` under
``.kstate/``, the project's ``dags/`` folder, and the connections ``kafka_default`` (pointed at the broker
when it starts) and ``spark_default``. Without Airflow installed (``make compat``'s Spark cells) that step is
skipped.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kstate_support import airflow_env, quiet, session_broker

ROOT = Path(__file__).resolve().parent.parent
quiet.filter_known_warnings()  # before anything imports Airflow

#: The shared fixtures (``unique``, ``make_topic``, ``control`` ...): one home for every suite.
pytest_plugins = ("kstate_support.fixtures",)

_STATE = ROOT / ".kstate"
_AIRFLOW_HOME = _STATE / f"airflow-test-{os.getpid()}"
_SIGTERM = signal.getsignal(signal.SIGTERM)


def pytest_configure(config: pytest.Config) -> None:
    """Point Airflow at a fresh home and the project's DAGs before anything imports it (collection does).

    A ``--collect-only`` run needs no metadata database: the environment is set, ``db migrate`` skipped.
    """
    if "airflow" in sys.modules or importlib.util.find_spec("airflow") is None:
        return
    if config.option.collectonly:
        _AIRFLOW_HOME.mkdir(parents=True, exist_ok=True)
        os.environ.update(airflow_env.environ(_AIRFLOW_HOME, session_broker.initial_config()))
        return
    airflow_env.prepare(_AIRFLOW_HOME, session_broker.initial_config(), fresh=False)


#: Markers of the suites outside ``make test``, each run by its own target: the marker is deselected unless
#: ``-m`` names it or its variable is ``1`` (``make chaos``, ``make e2e-prod``, ``make compat``).
SEPARATE_SUITES = {
    "chaos": "KSTATE_CHAOS",
    "prod": "KSTATE_PROD",
    "compat": "KSTATE_COMPAT",
    "cluster": "KSTATE_CLUSTER",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the tests of the separate suites (:data:`SEPARATE_SUITES`) unless asked for."""
    markexpr = config.getoption("markexpr") or ""
    skipped = {m for m, var in SEPARATE_SUITES.items() if os.environ.get(var) != "1" and m not in markexpr}
    out = [item for item in items if any(item.get_closest_marker(m) for m in skipped)]
    if out:
        config.hook.pytest_deselected(items=out)
        items[:] = [item for item in items if not any(item.get_closest_marker(m) for m in skipped)]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # pytest keeps the last failed test's traceback (sys.last_exc and friends, for post-mortem debugging):
    # its frames hold that test's fixtures (the session's AdminClient), which were then destroyed only after
    # the broker stopped, and destroying a client with no broker blocked the process for over 10 minutes.
    for name in ("last_exc", "last_value", "last_type", "last_traceback"):
        if hasattr(sys, name):
            delattr(sys, name)
    # Destroy the Kafka clients of finished fixtures and dag.test() runs while the broker still answers.
    session_broker.close(_SIGTERM)
    shutil.rmtree(_AIRFLOW_HOME, ignore_errors=True)
    # py4j's ClientServer (an in-process SparkSession's gateway) closes its connections in __del__ at
    # interpreter exit and logs that at INFO, after pytest closed the stream the log handler writes to:
    # "--- Logging error ---" and a traceback after the summary. Nothing py4j says at exit is needed.
    logging.getLogger("py4j").setLevel(logging.WARNING)


@pytest.fixture(scope="session")
def bootstrap(kafka_config: dict[str, Any]) -> str:
    """The bootstrap address of the broker under test."""
    return str(kafka_config["bootstrap.servers"])


@pytest.fixture(scope="session")
def kafka_config() -> dict[str, Any]:
    """librdkafka settings for the broker under test (bootstrap plus any SASL/SSL extras); starts it."""
    return session_broker.ensure()


@pytest.fixture(scope="session")
def admin(kafka_config: dict[str, Any]) -> Iterator[Any]:
    from confluent_kafka.admin import AdminClient

    client = AdminClient(kafka_config)
    yield client
    del client  # AdminClient has no close(): the last reference goes, sessionfinish collects the rest


@pytest.fixture(scope="session")
def run_dag(kafka_config: dict[str, Any]) -> Callable[..., Any]:  # noqa: C901 - fixture with nested helpers
    """Run a DAG of the project's ``dags/`` folder with ``dag.test()`` and return the DagRun.

    A failed task does not raise in ``dag.test()``: callers assert ``dr.state``.
    """
    from kstate_support import spark_kafka
    from kstate_support.airflow_compat import dag_bag

    spark_kafka.export()  # the example pipeline ships Spark's Kafka source with --jars (fetched once)
    bag = dag_bag(str(ROOT / "dags"))
    assert not bag.import_errors, bag.import_errors

    def _run(dag_id: str, conf: dict[str, Any], overrides: dict[str, dict[str, Any]] | None = None) -> Any:
        """Run ``dag_id`` with ``conf``; ``overrides`` sets task attributes (e.g. a shorter sensor timeout)
        for this run only: ``{"group.task_id": {"timeout": 5}}``."""
        dag = bag.get_dag(dag_id)
        # A run resolves each Param against its conf in place (airflow.sdk ParamsDict.__setitem__ ->
        # Param.resolve sets .value on the DAG's own Param): without a restore a later run of the same DAG in
        # this process inherits the conf of an earlier one (a dry_run=True that sticks).
        params = {
            id(p): (p, p.value)
            for ps in [dag.params, *(t.params for t in dag.tasks)]
            for p in (ps.get_param(k) for k in ps)
        }
        saved = {}
        for task_id, attrs in (overrides or {}).items():
            task = dag.get_task(task_id)
            saved[task_id] = {name: getattr(task, name) for name in attrs}
            for name, value in attrs.items():
                setattr(task, name, value)
        try:
            return dag.test(run_conf=conf)
        finally:
            for param, value in params.values():
                param.value = value
            for task_id, attrs in saved.items():
                for name, value in attrs.items():
                    setattr(dag.get_task(task_id), name, value)

    return _run
