"""Unit tests need no Kafka: ``python -m pytest tests/unit`` starts no broker (issue 18).

Two cheap checks instead of running the unit suite twice in ``make test``: collecting ``tests/unit`` in a
subprocess under ``KSTATE_NO_BROKER=1`` with no cluster named (a conftest or a test module that started a
broker at import fails it), and no test or fixture under ``tests/unit`` asks for a broker fixture.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest
from kstate_support import session_broker

ROOT = Path(__file__).resolve().parents[2]
#: The fixtures of tests/conftest.py that start the session's broker.
BROKER_FIXTURES = {"kafka_config", "bootstrap", "admin", "make_topic", "run_dag", "session_broker"}


def test_collecting_the_unit_suite_starts_no_broker() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KSTATE_", "AIRFLOW"))}
    env["KSTATE_NO_BROKER"] = "1"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only", "tests/unit"]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "tests collected" in proc.stdout and "BrokerForbidden" not in proc.stdout + proc.stderr


def test_no_unit_test_or_fixture_asks_for_the_broker() -> None:
    askers = []
    for path in sorted((ROOT / "tests" / "unit").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                wanted = {a.arg for a in node.args.args + node.args.kwonlyargs} & BROKER_FIXTURES
                if wanted:
                    askers.append(f"{path.relative_to(ROOT)}::{node.name} {sorted(wanted)}")
    assert askers == []


def test_asking_for_the_broker_under_no_broker_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """The guard the first test relies on: under ``KSTATE_NO_BROKER=1`` the first ask raises."""
    if session_broker.started():
        pytest.skip("this process already has its broker (the whole suite runs in it)")
    monkeypatch.setenv("KSTATE_NO_BROKER", "1")
    monkeypatch.delenv("KSTATE_BOOTSTRAP_SERVERS", raising=False)
    with pytest.raises(session_broker.BrokerForbidden, match="unit tests need none"):
        session_broker.ensure()
