"""Support for the tests, the benchmarks and the demo of airflow-provider-kstate (not shipped in the wheel).

Installed in the development virtualenv by ``make venv`` (``uv pip install -e ./support``), so the tests,
``bench/`` and ``scripts/`` import it like any package, without ``sys.path`` inserts.

* :mod:`kstate_support.broker` — the one broker helper: :func:`~kstate_support.broker.cluster` honours
  ``KSTATE_BOOTSTRAP_SERVERS`` / ``KSTATE_KAFKA_CONFIG``, else starts the embedded broker;
* :mod:`kstate_support.airflow_env` — the one Airflow environment: a fresh ``AIRFLOW_HOME``, the project's
  ``dags/``, ``db migrate``, the ``kafka_default`` and ``spark_default`` connections;
* :mod:`kstate_support.topics` — create (uniquely named) and delete topics;
* :mod:`kstate_support.kafka` — offsets, group states and message counts for assertions;
* :mod:`kstate_support.traffic` — live traffic: a sequenced producer, fleets of ControlledConsumers, loss;
* :mod:`kstate_support.spark_standalone` — a real standalone Spark cluster and a bare Python;
* :mod:`kstate_support.quiet` — the known third-party warnings, filtered.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

#: The project's checkout (``dags/``, ``.kstate/`` ...): this package is installed editable from it.
ROOT = Path(__file__).resolve().parents[2]


def load_file(path: Path, name: str) -> ModuleType:
    """Import the Python file ``path`` as module ``name`` (a DAG's pipeline, a script of ``scripts/``): the
    tests load files that are not packages this way, never by a ``sys.path`` insert. The module is registered
    under ``name`` (a dataclass of it looks its module up) unless one is already."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module
