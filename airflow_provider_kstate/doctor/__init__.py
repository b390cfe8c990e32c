"""The broker doctor: checks that a cluster keeps the Kafka promises the provider's safety depends on.

Imports neither Airflow nor Spark: the CLI (``python -m airflow_provider_kstate.doctor``) runs anywhere
confluent-kafka does. :mod:`~airflow_provider_kstate.hooks.doctor` is the Airflow side.
"""

from __future__ import annotations

from airflow_provider_kstate.doctor.promises import (
    ALL_PROMISES,
    INCREASE_NEEDS,
    NEEDS,
    STATE_NEEDS,
    Needs,
    check_names,
)
from airflow_provider_kstate.doctor.verdict import BrokerDeviation, CheckResult, Verdict

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
