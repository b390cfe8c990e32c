"""Airflow 3.1 support: the task exceptions the provider raises, from where this Airflow keeps them.

Task SDK 1.2 (Airflow 3.2) moved ``AirflowFailException``, ``AirflowSkipException`` and
``AirflowSensorTimeout`` to ``airflow.sdk.exceptions``; Airflow 3.1 (task SDK 1.1) has them only in
``airflow.exceptions``. ``conf`` (Airflow's configuration) is ``airflow.sdk.conf`` where the task SDK has
it, else ``airflow.configuration.conf``. Airflow's ``Stats`` (the metrics path) is
``airflow.sdk.observability.stats.Stats`` from task SDK 1.2 on, and ``airflow.stats.Stats`` on 3.1 (3.2+
keep that module only as a deprecated shim): :func:`airflow_stats`. These are the only shims the provider
needs for 3.1 (``make compat`` proves it).

Human-in-the-loop (the approval step): on Airflow 3.3 the standard provider's HITL operators park the task
in the ``awaiting_input`` state (``TaskAwaitingInput``: no trigger; the scheduler's timeout sweep, every
``[scheduler] trigger_timeout_check_interval``, ends an unanswered request); on 3.1 and 3.2 they defer to
``HITLTrigger`` in the triggerer (polling every 5 s). ``HITL_AWAITS_INPUT`` says which.
"""

from __future__ import annotations

from typing import Any

try:
    from airflow.sdk.exceptions import AirflowFailException, AirflowSensorTimeout, AirflowSkipException
except ImportError:  # Airflow 3.1
    from airflow.exceptions import (  # type: ignore[no-redef]
        AirflowFailException,
        AirflowSensorTimeout,
        AirflowSkipException,
    )

try:
    from airflow.sdk import conf
except ImportError:  # Airflow 3.1
    from airflow.configuration import conf  # type: ignore[no-redef,assignment]


def airflow_stats() -> Any:
    """Return Airflow's ``Stats``: the metrics path the deployment's ``[metrics]`` section configures
    (StatsD, DogStatsD, OpenTelemetry, or nothing). Imported when first used, not when a DAG is parsed."""
    try:
        from airflow.sdk.observability.stats import Stats
    except ImportError:  # Airflow 3.1
        from airflow.stats import Stats  # type: ignore[no-redef]
    return Stats


try:
    # What the installed standard provider decides on (its HITLOperator.execute tests the same flag).
    from airflow.providers.standard.version_compat import AIRFLOW_V_3_3_PLUS as HITL_AWAITS_INPUT
except ImportError:  # a standard provider from before the awaiting_input state: it always defers
    HITL_AWAITS_INPUT = False

__all__ = [
    "HITL_AWAITS_INPUT",
    "AirflowFailException",
    "AirflowSensorTimeout",
    "AirflowSkipException",
    "airflow_stats",
    "conf",
]
