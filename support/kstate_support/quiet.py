"""Known third-party warnings, filtered where our entry points start (the demo, the benchmarks, the tests).

Each filter names one warning by its message and category; nothing else is hidden. Call
:func:`filter_known_warnings` before anything imports Airflow, and again once it is imported: unless Python
runs with ``-W``/``PYTHONWARNINGS``, Airflow's settings put ``default`` filters for warnings raised from
``airflow.*`` modules in front of the existing ones when they load (pathspec's warning is reported from
Airflow's file discovery, so only a filter inserted after those wins).

* pathspec 0.12+ deprecates the ``gitwildmatch`` pattern name that Airflow's ``.airflowignore`` handling
  still uses (one warning per DAG folder scan).
* starlette deprecates names and the ``httpx`` test client that Airflow's in-process execution API
  (``dag.test()``) uses; starlette's own category subclasses ``UserWarning``.
"""

from __future__ import annotations

import warnings

KNOWN: tuple[tuple[str, type[Warning]], ...] = (
    (r"GitWildMatchPattern \('gitwildmatch'\) is deprecated", DeprecationWarning),
    (r"Using `httpx` with `starlette\.testclient` is deprecated", UserWarning),
    (r"'HTTP_\d+_[A-Z_]+' is deprecated\. Use 'HTTP_\d+_[A-Z_]+' instead\.", UserWarning),
)


def filter_known_warnings() -> None:
    """Ignore the :data:`KNOWN` third-party warnings (by message and category), and only those."""
    for message, category in KNOWN:
        warnings.filterwarnings("ignore", message=message, category=category)
