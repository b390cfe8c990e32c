"""Spark applications of airflow-provider-kstate: rebuild and deep-check state snapshots.

Nothing here imports Airflow: the applications run under ``spark-submit`` on any cluster. Modules:

* :mod:`.kafka_io`: per-partition changelog reading with confluent-kafka ``assign()`` and the fold.
* :mod:`.runtime`: the session, files and manifests through Hadoop, one-line errors (every app uses it).
* :mod:`.snapshot_data`: a snapshot's rows, its files checked one by one, per-partition digests.
* :mod:`.changelog`: changelog partitions read in parallel and folded, as DataFrames or per-partition stats.
* :mod:`.read_progress`: the driver's ``PROGRESS`` lines of a changelog read, fed live by the executors' tasks.
* :mod:`.rebuild`: ``spark-submit rebuild.py``: changelog -> Parquet snapshot, published atomically.
* :mod:`.deep_check`: ``spark-submit deep_check.py``: snapshot vs changelog vs manifest, per partition.
* :mod:`.reader`: :func:`~.reader.load_snapshot` for jobs that resume from a snapshot.

The manifest and the digest, the layout and the apps' command-line contract are in
:mod:`airflow_provider_kstate.store` (shipped to executors with this package, see :mod:`~.store.pack`).
"""

from __future__ import annotations

from pathlib import Path

from airflow_provider_kstate.errors import KStateConfigError

APP_VERSION = "0.1.0"


def app_file(name: str) -> str:
    """Return where the package's Spark application ``name`` lives (this folder)."""
    return str(Path(__file__).resolve().parent / name)


def spark_app_path(name: str) -> str:
    """Return the path of one of the package's Spark applications (``rebuild.py``, ``deep_check.py``).

    :param name: the application's file name in ``airflow_provider_kstate/spark_apps``.
    :raises KStateConfigError: when it is missing.
    """
    path = Path(app_file(name))
    if not path.is_file():
        raise KStateConfigError(f"the package's Spark application {name!r} is missing at {path}")
    return str(path)


def package_app(application: str | None, name: str) -> str:
    """Return the application to submit: the package's ``name`` (checked to exist) when ``application`` is
    its default, else ``application`` as given."""
    return spark_app_path(name) if application == app_file(name) else str(application)
