"""The broker doctor: checks that a cluster keeps the Kafka promises the provider's safety depends on.

Imports neither Airflow nor Spark: the CLI (``python -m airflow_provider_kstate.doctor``) runs anywhere
confluent-kafka does. :mod:`~airflow_provider_kstate.hooks.doctor` is the Airflow side.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_kstate.doctor.promises import (
    ALL_PROMISES,
    INCREASE_NEEDS,
    NEEDS,
    STATE_NEEDS,
    Needs,
    check_names,
)

__all__ = [
    "ALL_PROMISES",
    "INCREASE_NEEDS",
    "NEEDS",
    "Needs",
    "STATE_NEEDS",
    "BrokerDeviation",
    "CheckResult",
    "Verdict",
    "check_names",
]


def __getattr__(name: str) -> Any:
    """The verdict's models, loaded on first use: a DAG file that imports a promise name at parse time does
    not build the pydantic models (PEP 562)."""
    if name in ("BrokerDeviation", "CheckResult", "Verdict"):
        from airflow_provider_kstate.doctor import verdict

        return getattr(verdict, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
