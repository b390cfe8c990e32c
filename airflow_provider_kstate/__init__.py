"""airflow-provider-kstate: safe Kafka partition increases and provable state stores.

This module imports nothing heavy: Airflow reads it while parsing DAGs.
"""

from __future__ import annotations

#: PEP 440. Released: ``X.Y.Z`` (CHANGELOG.md's ``[X.Y.Z] - date``); while CHANGELOG.md has ``[Unreleased]``
#: changes, the next release's development version ``X.Y.Z.devN`` (docs/changelog.md says the convention).
__version__ = "0.2.0.dev0"
