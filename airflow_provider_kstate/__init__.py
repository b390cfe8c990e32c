"""airflow-provider-kstate: safe Kafka partition increases and provable state stores.

This module imports nothing heavy: Airflow reads it while parsing DAGs.
"""

from __future__ import annotations

__version__ = "0.1.0"
