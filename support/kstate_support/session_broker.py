"""The broker of one pytest session, started on first use (the integration and e2e conftests ask for it).

Unit tests never ask, so ``python -m pytest tests/unit`` starts no broker. The first :func:`ensure` uses the
cluster named by ``KSTATE_BOOTSTRAP_SERVERS`` / ``KSTATE_KAFKA_CONFIG`` (see :mod:`kstate_support.broker`),
else starts the embedded broker on a free port with its data under ``.kstate/broker-test-<pid>``; either
way it points ``kafka_default`` (``AIRFLOW_CONN_KAFKA_DEFAULT``, read by Airflow at lookup time, so this
may run after Airflow was imported) and ``KSTATE_BOOTSTRAP_SERVERS`` at it. :func:`close` stops only a
broker it started.

``KSTATE_NO_BROKER=1`` makes :func:`ensure` raise: the unit test that pins "unit tests need no broker" runs
the unit suite under it.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from kstate_support import ROOT
from kstate_support import broker as broker_helper

#: ``kafka_default`` before a broker is asked for: a unit test that reached Kafka through it fails clearly.
NO_BROKER_CONFIG: dict[str, Any] = {"bootstrap.servers": "kstate-no-broker-in-unit-tests.invalid:9092"}

_config: dict[str, Any] | None = None
_own_dir: Path | None = None


class BrokerForbidden(RuntimeError):
    """``KSTATE_NO_BROKER=1`` is set and a test asked for the broker."""


def data_dir() -> Path:
    """Where this process's embedded broker keeps its data."""
    return ROOT / ".kstate" / f"broker-test-{os.getpid()}"


def kafka_connection(config: dict[str, Any]) -> str:
    """The ``AIRFLOW_CONN_KAFKA_DEFAULT`` value for librdkafka settings ``config``."""
    return json.dumps({"conn_type": "kafka", "extra": config})


def initial_config() -> dict[str, Any]:
    """The settings to prepare Airflow with before any broker runs: the named cluster's, else a placeholder."""
    return broker_helper.external_config() or dict(NO_BROKER_CONFIG)


def started() -> bool:
    """True once :func:`ensure` has given this process a broker."""
    return _config is not None


def ensure() -> dict[str, Any]:
    """Return the librdkafka settings of the session's broker, starting the embedded one on first use."""
    global _config, _own_dir
    if _config is None:
        if os.environ.get("KSTATE_NO_BROKER") == "1":
            raise BrokerForbidden(
                "a test asked for the Kafka broker under KSTATE_NO_BROKER=1 (unit tests need none)"
            )
        if broker_helper.external_config() is None:
            _own_dir = data_dir()
            os.environ["KSTATE_BOOTSTRAP_SERVERS"] = broker_helper.up(_own_dir)
        config = broker_helper.external_config()
        assert config is not None
        os.environ["AIRFLOW_CONN_KAFKA_DEFAULT"] = kafka_connection(config)
        _config = config
    return dict(_config)


def close(sigterm: Any) -> None:
    """Release finished Kafka clients while the broker answers, then stop the broker :func:`ensure` started.

    :param sigterm: the SIGTERM handler from before the session (see ``broker.release_kafka_clients``).
    """
    global _config, _own_dir
    if _config is None:
        return
    broker_helper.release_kafka_clients(sigterm)
    if _own_dir is not None:
        broker_helper.down(_own_dir)
        shutil.rmtree(_own_dir, ignore_errors=True)
        os.environ.pop("KSTATE_BOOTSTRAP_SERVERS", None)
    _config, _own_dir = None, None
