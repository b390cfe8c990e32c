"""What differs between the Airflow versions the project supports (3.1 to 3.3), for the tests and scripts."""

from __future__ import annotations

from typing import Any


def dag_bag(folder: str) -> Any:
    """Return a ``DagBag`` of ``folder`` (``airflow.dag_processing.dagbag`` from 3.2, ``airflow.models`` in 3.1).

    :param folder: the DAGs folder to parse.
    """
    try:
        from airflow.dag_processing.dagbag import DagBag
    except ImportError:  # Airflow 3.1
        from airflow.models.dagbag import DagBag  # type: ignore[no-redef]
    return DagBag(dag_folder=folder)
