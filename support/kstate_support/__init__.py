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

from pathlib import Path

#: The project's checkout (``dags/``, ``.kstate/`` ...): this package is installed editable from it.
ROOT = Path(__file__).resolve().parents[2]
