"""The wheel, as a user gets it: built, installed into a fresh virtualenv, its example DAG run from there.

``uv build`` builds the checkout's sdist and the wheel from it; ``uv venv`` + ``uv pip install
--compile-bytecode`` install the wheel (base requirements only, no ``[spark-local]`` extra: the base
install must not force a Spark) into a new environment under pytest's temporary folder, from PyPI
through uv's cache. Then, with only that
environment's ``airflow`` on the PATH, ``python -m airflow_provider_kstate.example_dags`` names the DAGs
folder inside the installed package, and ``airflow dags test kstate_partition_increase`` runs a dry-run
increase plan against the session's broker. The run must succeed and must have planned the topic.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
UV = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
DAG_ID = "kstate_partition_increase"

pytestmark = [
    pytest.mark.wheel,
    pytest.mark.integration,
    pytest.mark.timeout(900),
    pytest.mark.skipif(UV is None, reason="uv is not installed (make venv installs it)"),
]


def _run(cmd: list[str], env: dict[str, str] | None = None, timeout: float = 600) -> str:
    """Run ``cmd`` outside the checkout (``python -m`` would import the checkout's package from the
    current folder); return its stdout+stderr, failing the test with the tail of it on a non-zero exit."""
    proc = subprocess.run(cmd, env=env, cwd="/", capture_output=True, text=True, timeout=timeout, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{' '.join(cmd[:4])} ... exited {proc.returncode}:\n{out[-4000:]}"
    return out


def _fresh_env(venv: Path, home: Path, dags: Path | None = None) -> dict[str, str]:
    """The environment of a user's shell: the fresh venv's bin first, a fresh AIRFLOW_HOME, the connections."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "VIRTUAL_ENV", "PYTHON"))}
    env = {
        **keep,
        "PATH": f"{venv / 'bin'}{os.pathsep}/usr/bin:/bin",
        "VIRTUAL_ENV": str(venv),
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",  # the task logs: the PLAN line
        "AIRFLOW_CONN_KAFKA_DEFAULT": os.environ["AIRFLOW_CONN_KAFKA_DEFAULT"],
    }
    if dags is not None:
        env["AIRFLOW__CORE__DAGS_FOLDER"] = str(dags)
    return env


def _install(tmp: Path) -> tuple[Path, dict[str, float]]:
    """Build the wheel and install it into a new venv; return the venv and the seconds each step took."""
    assert UV is not None
    timings: dict[str, float] = {}
    started = time.monotonic()
    # sdist, then the wheel from the unpacked sdist: checks that the sdist carries dags/ and setup.py,
    # and leaves no build/ folder in the shared checkout (a stale one could leak files into wheels).
    _run([UV, "build", "--quiet", "-o", str(tmp / "dist"), str(ROOT)])
    timings["build"] = time.monotonic() - started
    wheels = list((tmp / "dist").glob("airflow_provider_kstate-*.whl"))
    assert len(wheels) == 1, wheels
    venv = tmp / "venv"
    started = time.monotonic()
    _run([UV, "venv", "--quiet", "-p", sys.executable, str(venv)])
    _run(
        [
            UV,
            "pip",
            "install",
            "--quiet",
            "--compile-bytecode",
            "-p",
            str(venv / "bin" / "python"),
            str(wheels[0]),
        ]
    )
    timings["install"] = time.monotonic() - started
    return venv, timings


def _last_run(env: dict[str, str]) -> dict[str, Any]:
    out = _run(["airflow", "dags", "list-runs", DAG_ID, "-o", "json"], env=env)
    runs = json.loads(out[out.index('[{"') :].splitlines()[0])  # log lines may come before the JSON
    assert runs, out
    return dict(runs[0])


def test_wheel_installs_into_a_fresh_venv_and_runs_an_example_dag(
    tmp_path: Path, make_topic: Callable[..., str], admin: Any
) -> None:
    venv, timings = _install(tmp_path)
    python = str(venv / "bin" / "python")
    home = tmp_path / "airflow-home"

    # Base install: the Spark provider's pyspark-client comes along, the full pyspark does not.
    probe = "import importlib.metadata as m, sys; sys.exit(0 if 'pyspark' not in {d.metadata['Name'] for d in m.distributions()} else 1)"
    _run([python, "-c", probe])

    env = _fresh_env(venv, home)
    dags = Path(
        _run([python, "-m", "airflow_provider_kstate.example_dags"], env=env).strip().splitlines()[-1]
    )
    assert dags.is_relative_to(venv), dags
    assert (dags / f"{DAG_ID}.py").is_file()
    env = _fresh_env(venv, home, dags)

    topic = make_topic("wheel", partitions=1)
    started = time.monotonic()
    _run(["airflow", "db", "migrate"], env=env)
    conf = {"topic": topic, "partitions": 2, "consumer_groups": [], "dry_run": True}
    out = _run(["airflow", "dags", "test", DAG_ID, "-c", json.dumps(conf)], env=env)
    timings["airflow"] = time.monotonic() - started

    run = _last_run(env)
    assert run["state"] == "success", out[-4000:]
    assert "PLAN" in out and topic in out, out[-4000:]
    # A dry run changes nothing on the cluster.
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 1
    print("wheel test seconds:", {k: round(v, 1) for k, v in timings.items()})
