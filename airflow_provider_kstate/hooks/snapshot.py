"""The state-store hook: a store's changelog on the ``kafka`` connection, and its snapshot.

The store's logic (manifest, URIs, the fast check, the applications' contract) lives in
:mod:`airflow_provider_kstate.store`, which knows nothing of Airflow; this hook binds it to Airflow
connections and turns its errors into the provider's named errors.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from typing import Any

from airflow.sdk import BaseHook

from airflow_provider_kstate.errors import KStateConfigError, SnapshotError, SnapshotMissingError
from airflow_provider_kstate.store import contract
from airflow_provider_kstate.store import fast_check as checks
from airflow_provider_kstate.store.layout import LEGACY_MESSAGE
from airflow_provider_kstate.store.manifest import Manifest
from airflow_provider_kstate.store.results import CheckReport
from airflow_provider_kstate.store.uri import local_path, uri_problem

__all__ = ["KStateSnapshotHook", "check_uri", "load_manifest"]


def check_uri(uri: str) -> str:
    """Validate a snapshot URI and return it: a local path, or a URI of a filesystem pyarrow and Spark read.

    :param uri: the snapshot URI.
    :raises KStateConfigError: when the URI is empty or its scheme is not one the package reads.
    :raises SnapshotError: when a local URI names a file instead of a snapshot directory.
    """
    problem = uri_problem(uri)
    if problem:
        raise KStateConfigError(problem)
    root = local_path(uri)
    if root is not None and root.exists() and not root.is_dir():
        raise SnapshotError(f"snapshot_uri {uri!r} is a file, not a snapshot directory")
    return uri


def load_manifest(uri: str, storage_options: dict[str, Any] | None = None) -> Manifest:
    """Read and validate the manifest of the snapshot at ``uri``.

    :param uri: the snapshot URI.
    :param storage_options: credentials of a remote filesystem (see :meth:`KStateSnapshotHook.storage_options`).
    :raises SnapshotMissingError: when there is no snapshot; :raises SnapshotError: when it is unusable.
    :raises KStateConfigError: when the URI itself is wrong.
    """
    check_uri(uri)
    try:
        return checks.load_manifest(uri, storage_options)
    except checks.SnapshotAbsent as exc:
        raise SnapshotMissingError(str(exc)) from exc
    except checks.SnapshotUnreadable as exc:
        raise SnapshotError(str(exc)) from exc


class KStateSnapshotHook(BaseHook):
    """A thin hook over a state store: its changelog on the ``kafka`` connection and its snapshot.

    :param kafka_config_id: the Airflow connection of the Kafka cluster (conn type ``kafka``).
    :param request_timeout: seconds to wait for each admin request.
    :param storage_conn_id: an Airflow connection whose credentials reach the snapshot's object store
        (e.g. ``aws_default`` for ``s3://``, ``google_cloud_default`` for ``gs://``); None: the machine's.
    """

    conn_name_attr = "kafka_config_id"
    default_conn_name = "kafka_default"
    conn_type = "kafka"
    hook_name = "Kafka State snapshot"

    def __init__(
        self,
        kafka_config_id: str = default_conn_name,
        request_timeout: float = 30.0,
        storage_conn_id: str | None = None,
    ) -> None:
        super().__init__()
        self.kafka_config_id = kafka_config_id
        self.request_timeout = request_timeout
        self.storage_conn_id = storage_conn_id
        self._admin: Any = None

    @property
    def admin(self) -> Any:
        """The :class:`~airflow_provider_kstate.hooks.admin.KStateAdminHook` of the connection."""
        if self._admin is None:
            from airflow_provider_kstate.hooks.admin import KStateAdminHook

            self._admin = KStateAdminHook(
                kafka_config_id=self.kafka_config_id, request_timeout=self.request_timeout
            )
        return self._admin

    def get_conn(self) -> Any:
        """Return the AdminClient of the connection."""
        return self.admin.get_conn

    def storage_options(self, snapshot_uri: str) -> dict[str, Any] | None:
        """Return fsspec storage options carrying ``storage_conn_id``'s credentials, None for ambient ones.

        Resolved as Airflow's ObjectStoragePath does: the filesystem registered for the URI's scheme is
        built from the connection, and its storage options are returned.
        """
        if not self.storage_conn_id or local_path(snapshot_uri) is not None:
            return None
        from airflow.sdk import ObjectStoragePath

        fs = ObjectStoragePath(snapshot_uri, conn_id=self.storage_conn_id).fs
        return dict(getattr(fs, "storage_options", {}) or {})

    def fast_check(self, topic: str, snapshot_uri: str) -> CheckReport:
        """Run the fast check (:func:`airflow_provider_kstate.store.fast_check.fast_check`) against the
        connection's cluster, on the pointer's current version of a validated URI; return its report
        (``to_dict()`` is the document the fast check operator pushes).

        :raises TopicNotFoundError: when the changelog topic does not exist.
        :raises KStateConfigError: when the URI is not one the worker can read.
        """
        check_uri(snapshot_uri)  # a wrong URI is bad input, not a bad store
        report = checks.fast_check(self.admin, topic, snapshot_uri, self.storage_options(snapshot_uri))
        self._log_version(snapshot_uri, report.snapshot_version, bool(report.snapshot_ok))
        return report

    def manifest(self, snapshot_uri: str) -> Manifest:
        """Return the validated manifest of the snapshot's current version; raise SnapshotError naming the problem."""
        found = load_manifest(snapshot_uri, self.storage_options(snapshot_uri))
        self._log_version(snapshot_uri, found.version, True)
        return found

    def _log_version(self, snapshot_uri: str, version: str | None, readable: bool) -> None:
        if not readable:
            return
        if version is None:
            self.log.info("Snapshot %s: %s", snapshot_uri, LEGACY_MESSAGE)
        else:
            self.log.info("Snapshot %s: current version %s", snapshot_uri, version)

    @contextlib.contextmanager
    def kafka_config_file(self) -> Iterator[str]:
        """Write the connection's librdkafka config to a 0600 JSON file in a 0700 directory; yield its path.

        This is how Spark applications get the config: it holds SASL secrets, so it never goes on a
        command line or in a log. Callbacks (``oauth_cb`` ...) that are module-level functions travel as
        ``"module:function"`` and are imported where the client runs; other callables are dropped. The
        file is removed on exit.
        """
        config = contract.portable_config(self.admin.client_config())
        with tempfile.TemporaryDirectory(prefix="kstate-cfg-") as tmp:
            path = os.path.join(tmp, "kafka.json")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(config, out)
            yield path
