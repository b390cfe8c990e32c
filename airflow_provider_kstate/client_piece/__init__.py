"""The client piece: wrappers that make a confluent-kafka service honour kstate control signals.

Nothing here imports Airflow; a service depends only on confluent-kafka.
"""

from __future__ import annotations
