"""Airflow 3.1 support: the task exceptions the provider raises, from where this Airflow keeps them.

Task SDK 1.2 (Airflow 3.2) moved ``AirflowFailException``, ``AirflowSkipException`` and
``AirflowSensorTimeout`` to ``airflow.sdk.exceptions``; Airflow 3.1 (task SDK 1.1) has them only in
``airflow.exceptions``. This is the only shim the provider needs for 3.1 (``make compat`` proves it).
"""

from __future__ import annotations

try:
    from airflow.sdk.exceptions import AirflowFailException, AirflowSensorTimeout, AirflowSkipException
except ImportError:  # Airflow 3.1
    from airflow.exceptions import (  # type: ignore[no-redef]
        AirflowFailException,
        AirflowSensorTimeout,
        AirflowSkipException,
    )

__all__ = ["AirflowFailException", "AirflowSensorTimeout", "AirflowSkipException"]
