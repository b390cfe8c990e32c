"""A rebuild's progress for the kstate page: the document the rebuild's Spark driver keeps beside the snapshot.

While a rebuild reads the changelog, its driver replaces ``<snapshot uri>/_kstate_progress.json`` with each
``PROGRESS`` line it logs (offsets read of the total, percent, rate, time left; see
:mod:`airflow_provider_kstate.spark_apps.read_progress`), and once more when the run ends: ``done`` (with the
version it committed) or ``failed`` (with the error). The document stays after the run, so the page shows
the last rebuild's outcome until the next one replaces it.

:func:`snapshot_progress` reads it for the Snapshots tab and ``/kstate/api/snapshots`` and says when a
``running`` document is *stale*: not replaced for three progress intervals (a minute at least), so the
rebuild was killed or its driver cannot write there. Read-only; no Airflow import.
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Mapping
from typing import Any

from airflow_provider_kstate.spark_apps.read_progress import PROGRESS_NAME, ProgressDocument
from airflow_provider_kstate.store.uri import filesystem

#: A running document not replaced for this many progress intervals is stale ...
STALE_INTERVALS = 3
#: ... and never before this many seconds.
STALE_AFTER = 60.0


def _age(doc: ProgressDocument, now: float) -> float | None:
    """Return the seconds since the document was written, None when it says no time."""
    try:
        updated = calendar.timegm(time.strptime(doc.updated_at, "%Y-%m-%dT%H:%M:%SZ"))
    except ValueError:
        return None
    return max(0.0, now - updated)


def read_document(uri: str, storage_options: Mapping[str, Any] | None = None) -> ProgressDocument | None:
    """Return the progress document of the snapshot at ``uri``, None when there is none.

    :param uri: the snapshot root (a local path or a filesystem URI).
    :param storage_options: credentials of a remote filesystem (see :func:`~.store.uri.filesystem`).
    :raises OSError: it cannot be read; :raises ProgressError: it is not a valid progress document.
    """
    from pyarrow import fs as pafs

    fs, root = filesystem(uri, storage_options)
    path = root.rstrip("/") + "/" + PROGRESS_NAME
    if fs.get_file_info(path).type == pafs.FileType.NotFound:
        return None
    with fs.open_input_stream(path) as stream:
        return ProgressDocument.from_json(stream.read())


def snapshot_progress(
    uri: str, storage_options: Mapping[str, Any] | None = None, now: float | None = None
) -> dict[str, Any] | None:
    """Return the last rebuild's progress at ``uri``: the document plus ``age_seconds`` and ``stale``; None
    when no rebuild wrote one; ``{"state": "unreadable", "problem": ...}`` when it cannot be read.

    :param uri: the snapshot root.
    :param storage_options: credentials of a remote filesystem.
    :param now: the time (epoch seconds; default now).
    """
    try:
        doc = read_document(uri, storage_options)
    except Exception as exc:  # noqa: BLE001 - an unreadable or invalid document must not break the page
        return {"state": "unreadable", "problem": f"{PROGRESS_NAME}: {exc}"}
    if doc is None:
        return None
    age = _age(doc, time.time() if now is None else now)
    limit = max(STALE_INTERVALS * doc.interval, STALE_AFTER)
    stale = doc.state == "running" and (age is None or age > limit)
    return {**doc.to_dict(), "age_seconds": None if age is None else round(age, 1), "stale": stale}
