"""Snapshot URIs: the one implementation of URI -> local path / filesystem / Spark path.

A snapshot lives at a local path, a ``file://`` URI or a URI of a filesystem both pyarrow (the worker
reads manifests) and Spark/Hadoop (the applications read rows) understand.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

#: URI schemes of snapshot locations (for ``s3://`` Spark needs ``spark.hadoop.fs.s3.impl``, e.g. S3A).
SCHEMES = ("file", "s3", "s3a", "gs", "hdfs", "abfs", "abfss")


def scheme(uri: str) -> str:
    """Return the URI's scheme in lower case; ``""`` for a plain path (a Windows drive letter is none)."""
    found = urlparse(uri).scheme.lower()
    return found if len(found) > 1 else ""


def uri_problem(uri: Any) -> str | None:
    """Return why ``uri`` cannot be a snapshot location, or None when it can.

    :param uri: the snapshot URI.
    """
    if not isinstance(uri, str) or not uri.strip():
        return "snapshot_uri is empty: give a directory path or a file://, s3://, gs:// or hdfs:// URI"
    found = scheme(uri)
    if found and found not in SCHEMES:
        return (
            f"snapshot_uri {uri!r}: unsupported scheme {found!r}; use a local path or one of "
            f"{', '.join(s + '://' for s in SCHEMES)}"
        )
    return None


def local_path(uri: str) -> Path | None:
    """Return the local directory of a plain path or ``file:`` URI, None for a remote URI."""
    found = scheme(uri)
    if not found:
        return Path(uri)
    if found == "file":
        return Path(urlparse(uri).path)
    return None


def is_local(uri: str) -> bool:
    """Whether ``uri`` is a local path or a ``file:`` URI."""
    return local_path(uri) is not None


def join(uri: str, name: str) -> str:
    """Return ``uri/name`` (a child of a snapshot root)."""
    return uri.rstrip("/") + "/" + name


def spark_path(uri: str) -> str:
    """Return a path Spark and Hadoop understand: URIs as given, local paths absolute with ``file://``."""
    root = local_path(uri)
    if root is None:
        return uri.rstrip("/")
    return "file://" + os.path.abspath(str(root)).rstrip("/")


def filesystem(uri: str, options: Mapping[str, Any] | None = None) -> tuple[Any, str]:
    """Return ``(pyarrow FileSystem, path)`` for a snapshot URI.

    :param uri: a local path or a filesystem URI.
    :param options: credentials and settings for a remote filesystem (e.g. an Airflow connection's, as
        fsspec storage options); with them the filesystem is fsspec's, wrapped for pyarrow. Without them
        pyarrow's own filesystem with the machine's ambient credentials.
    """
    from pyarrow import fs as pafs

    root = local_path(uri)
    if root is not None:
        return pafs.LocalFileSystem(), os.path.abspath(str(root))
    if options:
        import fsspec

        fs, path = fsspec.core.url_to_fs(uri, **dict(options))
        return pafs.PyFileSystem(pafs.FSSpecHandler(fs)), path
    return pafs.FileSystem.from_uri(uri)
