"""The broker doctor on the embedded broker, which keeps Kafka's promises: every check passes, the verdict is
cached per cluster, and the CLI exits 0 (on Tansu, tests/tansu/test_tansu_increase.py shows the opposite)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import pytest

from airflow_provider_kstate.doctor.doctor import diagnose, last_verdict
from airflow_provider_kstate.doctor.promises import ALL_PROMISES

pytestmark = pytest.mark.integration


def test_the_embedded_broker_keeps_every_promise_and_the_verdict_is_cached(
    kafka_config: dict[str, Any],
) -> None:
    verdict, cached = diagnose(kafka_config, refresh=True)
    assert not cached
    assert verdict.broken() == [] and verdict.unchecked(ALL_PROMISES) == [], verdict.lines()
    started = time.monotonic()
    again, cached = diagnose(kafka_config)
    assert cached and again.checked_at == verdict.checked_at
    assert time.monotonic() - started < 5
    assert last_verdict(kafka_config) == _behaviour_only(verdict)


def _behaviour_only(verdict: Any) -> Any:
    """The cached copy holds only the behavioural results (the cheap ones run every time)."""
    from airflow_provider_kstate.doctor.promises import BEHAVIOUR_PROMISES
    from airflow_provider_kstate.doctor.verdict import Verdict

    return Verdict(verdict.cluster, verdict.checked_at, {p: verdict.results[p] for p in BEHAVIOUR_PROMISES})


def test_the_cli_says_ok_and_never_prints_the_config(kafka_config: dict[str, Any]) -> None:
    extra = {**kafka_config, "sasl.password": "never-printed-4711", "client.id": "doctor-cli"}
    extra.pop("bootstrap.servers")
    cmd = [
        sys.executable,
        "-m",
        "airflow_provider_kstate.doctor",
        "--bootstrap-servers",
        kafka_config["bootstrap.servers"],
        "--config",
        json.dumps(extra),
        "--json",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout)["broken"] == []
    assert "never-printed-4711" not in out.stdout + out.stderr
    bad = subprocess.run([*cmd, "--allow", "latest_ofset"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "latest_ofset" in bad.stderr
