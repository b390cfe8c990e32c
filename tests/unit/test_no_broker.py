"""Unit tests need no Kafka: ``python -m pytest tests/unit`` starts no broker (issue 18).

The unit suite runs again in a subprocess under ``KSTATE_NO_BROKER=1``, with no cluster named: a conftest
that started a broker at import, or a unit test that asked for one (``kafka_config``, ``bootstrap``,
``admin``, ``make_topic``, ``run_dag``), makes it fail.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from kstate_support import session_broker

ROOT = Path(__file__).resolve().parents[2]


def test_the_unit_suite_starts_no_broker() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KSTATE_", "AIRFLOW"))}
    env["KSTATE_NO_BROKER"] = "1"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/unit"]
    cmd += ["--ignore", "tests/unit/test_no_broker.py", "-o", "addopts="]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout.splitlines()[-1]
    assert "BrokerForbidden" not in proc.stdout + proc.stderr


def test_asking_for_the_broker_under_no_broker_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """The guard the test above relies on: under ``KSTATE_NO_BROKER=1`` the first ask raises."""
    if session_broker.started():
        pytest.skip("this process already has its broker (the whole suite runs in it)")
    monkeypatch.setenv("KSTATE_NO_BROKER", "1")
    monkeypatch.delenv("KSTATE_BOOTSTRAP_SERVERS", raising=False)
    with pytest.raises(session_broker.BrokerForbidden, match="unit tests need none"):
        session_broker.ensure()
