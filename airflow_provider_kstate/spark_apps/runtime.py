"""What every Spark application runs on: its session, files and manifests through Hadoop, one-line errors.

* :func:`spark_session` - the application's SparkSession (``local[*]`` outside ``spark-submit``);
* :func:`hadoop_fs`, :func:`read_bytes`, :func:`write_bytes` - files on any filesystem Spark has;
* :func:`resolve_spark`, :func:`current_uri` - a snapshot's current version (the pointer, see
  :mod:`~airflow_provider_kstate.store.layout`), read through Hadoop;
* :func:`read_manifest_spark`, :func:`write_manifest_spark` - the manifest through Hadoop;
* :func:`first_line`, :func:`to_stderr` - errors as one line on the application's stderr.

No Airflow import here.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.store.layout import (
    LEGACY_MESSAGE,
    POINTER_NAME,
    SnapshotUnreadable,
    SnapshotVersion,
    resolve_with,
)
from airflow_provider_kstate.store.manifest import Manifest, ManifestError, loads_manifest, manifest_uri
from airflow_provider_kstate.store.uri import join, spark_path

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def spark_session(app_name: str) -> SparkSession:
    """Return the application's SparkSession (master from spark-submit, ``local[*]`` otherwise).

    :param app_name: the Spark application name.
    """
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if "PYSPARK_GATEWAY_PORT" not in os.environ:  # not under spark-submit: no master was given
        builder = builder.master(os.environ.get("KSTATE_SPARK_MASTER", "local[*]"))
    spark = builder.config("spark.ui.enabled", "false").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def resolve_spark(spark: SparkSession, uri: str) -> SnapshotVersion:
    """Resolve the snapshot's current version through Hadoop (the pointer, else the legacy layout).

    :param spark: the session.
    :param uri: the snapshot root.
    :raises ManifestError: no snapshot, a garbled pointer or one naming a missing version.
    """

    def exists(child: str) -> bool:
        fs, path = hadoop_fs(spark, child)
        return bool(fs.exists(path))

    try:
        found = resolve_with(uri, lambda child: read_bytes(spark, child), exists)
    except SnapshotUnreadable as exc:
        raise ManifestError(str(exc)) from exc
    if found.legacy:
        to_stderr(f"kstate: {uri}: {LEGACY_MESSAGE}")
    return found


def current_uri(spark: SparkSession, uri: str) -> str:
    """Return the directory holding the data: the pointer's version when ``uri`` has a pointer, else ``uri``.

    :param spark: the session.
    :param uri: a snapshot root or a version directory.
    """
    fs, path = hadoop_fs(spark, join(uri, POINTER_NAME))
    return resolve_spark(spark, uri).uri if fs.exists(path) else uri


def hadoop_fs(spark: SparkSession, uri: str) -> tuple[Any, Any]:
    """Return the Hadoop ``(FileSystem, Path)`` of ``uri`` through the JVM gateway (raw for local files).

    :param spark: the session.
    :param uri: a local path or filesystem URI.
    """
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    path = jvm.org.apache.hadoop.fs.Path(spark_path(uri))
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    fs = path.getFileSystem(conf)
    if fs.getScheme() == "file":
        fs = jvm.org.apache.hadoop.fs.FileSystem.getLocal(conf).getRawFileSystem()  # no .crc side files
    return fs, path


def read_bytes(spark: SparkSession, uri: str) -> bytes | None:
    """Return a file's bytes through Hadoop (any filesystem Spark has), or None when it does not exist.

    :param spark: the session.
    :param uri: the file's path or URI.
    """
    fs, path = hadoop_fs(spark, uri)
    if not fs.exists(path):
        return None
    stream = fs.open(path)
    try:
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        return bytes(jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
    finally:
        stream.close()


def write_bytes(spark: SparkSession, uri: str, data: bytes) -> None:
    """Write (replace) a file through Hadoop.

    :param spark: the session.
    :param uri: the file's path or URI.
    :param data: the content.
    """
    fs, path = hadoop_fs(spark, uri)
    out = fs.create(path, True)
    try:
        out.write(bytearray(data))
    finally:
        out.close()


def read_manifest_spark(spark: SparkSession, uri: str) -> Manifest:
    """Read and validate a snapshot's manifest through Hadoop (so every Spark filesystem works).

    :param spark: the session.
    :param uri: the snapshot root (its current version's manifest is read) or a version directory.
    :raises ManifestError: when it is missing, unreadable, corrupt or invalid, or the pointer is bad.
    """
    where = manifest_uri(current_uri(spark, uri))
    try:
        raw = read_bytes(spark, where)
    except Exception as exc:  # noqa: BLE001 - Py4J errors: report the first line only
        raise ManifestError(f"{where}: manifest is unreadable: {first_line(exc)}") from exc
    if raw is None:
        raise ManifestError(f"{where}: manifest is missing (no snapshot here, or an unfinished one)")
    return loads_manifest(raw, where)


def write_manifest_spark(spark: SparkSession, uri: str, manifest: Manifest) -> None:
    """Write the manifest into the snapshot root through Hadoop (call it LAST).

    :param spark: the session.
    :param uri: the snapshot root.
    :param manifest: the manifest.
    """
    write_bytes(spark, manifest_uri(uri), manifest.to_json(indent=2).encode())


def first_line(exc: BaseException) -> str:
    """Return a one-line description of an exception (Py4J errors carry whole Java stack traces).

    :param exc: the exception.
    """
    text = str(exc).strip()
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("An error occurred while calling"):
            return line[:500]
    return type(exc).__name__


def to_stderr(line: str) -> None:
    """Print one line on the application's stderr.

    Under ``spark-submit`` the Python driver's own stderr is merged into the launcher's stdout, so the line
    is printed by the driver JVM (``System.err``) through the already running Py4J gateway instead.

    :param line: the text (one line; never a secret).
    """
    import sys

    if os.environ.get("PYSPARK_GATEWAY_PORT"):
        try:
            from pyspark.java_gateway import launch_gateway  # connects to spark-submit's gateway

            err = launch_gateway().jvm.System.err
            err.println(line)
            err.flush()
            return
        except Exception:  # noqa: BLE001 - fall back to Python's stderr
            pass
    print(line, file=sys.stderr, flush=True)
