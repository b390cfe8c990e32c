"""Spark applications of airflow-provider-kstate: rebuild and deep-check state snapshots.

Nothing here imports Airflow: the applications run under ``spark-submit`` on any cluster. Modules:

* :mod:`.manifest`: the snapshot manifest (``_kstate_manifest.json``) and the row digest, no Spark needed.
* :mod:`.kafka_io`: per-partition changelog reading with confluent-kafka ``assign()`` and the fold.
* :mod:`.rebuild`: ``spark-submit rebuild.py``: changelog -> Parquet snapshot, published atomically.
* :mod:`.deep_check`: ``spark-submit deep_check.py``: snapshot vs changelog vs manifest, per partition.
* :mod:`.reader`: :func:`~.reader.load_snapshot` for jobs that resume from a snapshot.
"""

from __future__ import annotations

APP_VERSION = "0.1.0"
