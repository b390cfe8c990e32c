"""Report files wherever Airflow's ``ObjectStoragePath`` reaches, with a connection's credentials.

The increase domain writes and reads its reports through the
:class:`~airflow_provider_kstate.increase.ports.ReportStorage` port; this is its Airflow implementation.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO

from airflow.sdk import ObjectStoragePath

from airflow_provider_kstate.increase.report import LOCAL, is_local


class ObjectStorageReports:
    """Report files on the worker's disk (a path or ``file://``), or under any URI ``ObjectStoragePath``
    reaches (``s3://``, ``gs://`` ...).

    :param conn_id: the Airflow connection whose credentials reach the object store; None: the URI's default.
    """

    def __init__(self, conn_id: str | None = None) -> None:
        self.conn_id = conn_id

    def path(self, uri: str) -> ObjectStoragePath:
        """The object-store path of ``uri`` with this storage's credentials."""
        return ObjectStoragePath(uri, conn_id=self.conn_id) if self.conn_id else ObjectStoragePath(uri)

    @contextmanager
    def open(self, uri: str, mode: str) -> Iterator[IO[bytes]]:
        """Open the report at ``uri`` in binary ``mode`` (``"r"`` or ``"w"``, creating its folder)."""
        if is_local(uri):
            with LOCAL.open(uri, mode) as handle:
                yield handle
            return
        target = self.path(uri)
        if "w" in mode:
            target.parent.mkdir(parents=True, exist_ok=True)
        with target.open(mode + "b") as handle:
            yield handle

    def remove(self, uri: str) -> None:
        """Remove the report at ``uri`` if there is one."""
        if is_local(uri):
            LOCAL.remove(uri)
            return
        target = self.path(uri)
        if target.exists():
            target.unlink()
