"""The one Airflow environment of the tests, the benchmarks and the demo.

Set before anything imports Airflow: a fresh ``AIRFLOW_HOME``, the project's ``dags/`` folder, a SQLite
metadata database (``airflow db migrate``), and the connections ``kafka_default`` (the cluster's librdkafka
settings) and ``spark_default`` (``local[2]``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from kstate_support import ROOT


def environ(home: Path, kafka_config: dict[str, Any], log_level: str = "INFO") -> dict[str, str]:
    """Return the environment variables of an Airflow home for this project (nothing is changed).

    :param home: the ``AIRFLOW_HOME``.
    :param kafka_config: the librdkafka settings of ``kafka_default``.
    :param log_level: Airflow's logging level.
    """
    return {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": log_level,
        "AIRFLOW_CONN_KAFKA_DEFAULT": json.dumps({"conn_type": "kafka", "extra": kafka_config}),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1"),
        "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }


def prepare(home: Path, kafka_config: dict[str, Any], log_level: str = "INFO", fresh: bool = True) -> None:
    """Point this process at a migrated Airflow home (before Airflow is imported).

    :param fresh: start from an empty home (its database and logs removed).
    """
    if "airflow" in sys.modules:
        raise RuntimeError("airflow_env.prepare() must run before anything imports airflow")
    if fresh:
        shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True, exist_ok=True)
    os.environ.update(environ(home, kafka_config, log_level))
    migrate()


def migrate(env: dict[str, str] | None = None) -> None:
    """Run ``airflow db migrate`` for the environment ``env`` (default: this process's)."""
    subprocess.run(
        [str(Path(sys.executable).with_name("airflow")), "db", "migrate"],
        check=True,
        capture_output=True,
        env=env,
    )


def python_without(
    code: str,
    hidden: tuple[str, ...] = ("airflow", "pyspark"),
    args: tuple[str, ...] = (),
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh Python where the packages ``hidden`` cannot be imported (as where they are not
    installed): a meta path finder refuses them before ``code`` runs.

    :param code: the script (``python -c``); ``sys`` is imported.
    :param hidden: top-level package names to refuse.
    :param args: the script's arguments (``sys.argv[1:]``).
    """
    prelude = (
        "import sys\n"
        "class Missing:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name.split('.')[0] in {tuple(hidden)!r}:\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, Missing())\n"
    )
    cmd = [sys.executable, "-c", prelude + code, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
