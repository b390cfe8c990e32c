"""Provider metadata for Airflow's provider manager. Imports nothing heavy."""

from __future__ import annotations

from typing import Any

from airflow_provider_kstate import __version__

#: The project's address (a placeholder until it is published; setup.cfg's project_urls use the same).
PROJECT_URL = "https://github.com/example-org/airflow-provider-kstate"
#: Where the documentation site (``make docs``: docs/_build/html) is served; setup.cfg's Documentation URL.
DOCS_URL = "https://example-org.github.io/airflow-provider-kstate/"
#: The released versions, newest first: CHANGELOG.md's release headings (tests/docs/test_metadata.py checks
#: them). While changes are unreleased, ``__version__`` is the next release's ``.devN`` and comes first.
RELEASES = ("0.1.0",)


def get_provider_info() -> dict[str, Any]:
    """Return the provider's metadata: its hooks, operators, sensors and triggers (every public module of
    ``hooks/``, ``operators/``, ``sensors/`` and ``triggers/``: a unit test checks the lists are complete).

    No connection type of its own: the hooks use the ``kafka`` connection type of
    apache-airflow-providers-apache-kafka (librdkafka settings in the extras), which stays that
    provider's in the UI's connection form.
    """
    pkg = "airflow_provider_kstate"
    docs = DOCS_URL
    return {
        "package-name": "airflow-provider-kstate",
        "name": "Kafka State (kstate)",
        "description": "Safe Kafka partition increases and state-store integrity checks with a Spark rebuild.",
        "documentation-url": docs,
        "versions": list(dict.fromkeys([__version__, *RELEASES])),
        "integrations": [
            {
                "integration-name": "Kafka State",
                "external-doc-url": docs,
                "tags": ["service"],
            }
        ],
        "hooks": [
            {
                "integration-name": "Kafka State",
                "python-modules": [
                    f"{pkg}.hooks.admin",
                    f"{pkg}.hooks.control",
                    f"{pkg}.hooks.lease",
                    f"{pkg}.hooks.snapshot",
                    f"{pkg}.hooks.doctor",
                    f"{pkg}.hooks.reports",
                    f"{pkg}.hooks.kafka_config",
                ],
            }
        ],
        "operators": [
            {
                "integration-name": "Kafka State",
                "python-modules": [
                    f"{pkg}.operators.base",
                    f"{pkg}.operators.step",
                    f"{pkg}.operators.kafka",
                    f"{pkg}.operators.plan",
                    f"{pkg}.operators.dry_run_gate",
                    f"{pkg}.operators.approval",
                    f"{pkg}.operators.consumers",
                    f"{pkg}.operators.partitions",
                    f"{pkg}.operators.seed",
                    f"{pkg}.operators.producers",
                    f"{pkg}.operators.verify",
                    f"{pkg}.operators.guard",
                    f"{pkg}.operators.window",
                    f"{pkg}.operators.store_task",
                    f"{pkg}.operators.fast_check",
                    f"{pkg}.operators.spark_app",
                    f"{pkg}.operators.store_spark",
                    f"{pkg}.operators.deep_check",
                    f"{pkg}.operators.rebuild",
                    f"{pkg}.operators.maintenance",
                    f"{pkg}.operators.doctor",
                    f"{pkg}.operators.streams_resize",
                    f"{pkg}.operators.assets",
                ],
            }
        ],
        "sensors": [
            {
                "integration-name": "Kafka State",
                "python-modules": [
                    f"{pkg}.sensors.base",
                    f"{pkg}.sensors.groups",
                    f"{pkg}.sensors.partitions",
                ],
            }
        ],
        "triggers": [
            {
                "integration-name": "Kafka State",
                "python-modules": [f"{pkg}.triggers.groups"],
            }
        ],
        # The kstate page in the UI (also the `airflow.plugins` entry point in setup.cfg).
        "plugins": [{"name": "kstate", "plugin-class": f"{pkg}.plugins.kstate.KStatePlugin"}],
    }
