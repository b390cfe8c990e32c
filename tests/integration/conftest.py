"""The integration tests run on the real broker: it starts before the first of them (unit tests start none).

The fixtures (``bootstrap``, ``kafka_config``, ``admin``, ``make_topic``, ``unique``, ``run_dag``) are the
top-level conftest's; this only asks for the broker up front, so that a test which reads
``AIRFLOW_CONN_KAFKA_DEFAULT`` or ``KSTATE_BOOTSTRAP_SERVERS`` itself (a subprocess's environment) sees it.
"""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="session", autouse=True)
def session_broker(kafka_config: dict[str, Any]) -> dict[str, Any]:
    """The session's broker, started before the first integration test."""
    return kafka_config
