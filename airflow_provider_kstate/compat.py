"""Airflow 3.1 support: the task exceptions the provider raises, from where this Airflow keeps them.

Task SDK 1.2 (Airflow 3.2) moved ``AirflowFailException``, ``AirflowSkipException`` and
``AirflowSensorTimeout`` to ``airflow.sdk.exceptions``; Airflow 3.1 (task SDK 1.1) has them only in
``airflow.exceptions``. ``conf`` (Airflow's configuration) is ``airflow.sdk.conf`` where the task SDK has
it, else ``airflow.configuration.conf``. These are the only shims the provider needs for 3.1 (``make
compat`` proves it).
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

try:
    from airflow.sdk import conf
except ImportError:  # Airflow 3.1
    from airflow.configuration import conf  # type: ignore[no-redef,assignment]

__all__ = ["AirflowFailException", "AirflowSensorTimeout", "AirflowSkipException", "conf"]
