"""Build hook: the example DAGs (``dags/``) ship inside the wheel as ``airflow_provider_kstate/example_dags/``.

The DAG sources stay in the checkout's ``dags/`` folder (the tests, the demo and the deployment run them
from there); building a wheel copies them into the package, so that after a ``pip install``
``python -m airflow_provider_kstate.example_dags --copy-to DIR`` can put them into a DAGs folder. An
editable install copies nothing: there :func:`airflow_provider_kstate.example_dags.path` is ``dags/``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
DAGS = HERE / "dags"
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc")


class BuildPyWithExampleDags(build_py):
    """``build_py`` that also copies ``dags/`` into ``airflow_provider_kstate/example_dags/``."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False) or not DAGS.is_dir():
            return
        target = Path(self.build_lib) / "airflow_provider_kstate" / "example_dags"
        target.mkdir(parents=True, exist_ok=True)
        shutil.copytree(DAGS, target, ignore=IGNORE, dirs_exist_ok=True)


setup(cmdclass={"build_py": BuildPyWithExampleDags})
