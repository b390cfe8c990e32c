"""Snapshots as Spark DataFrames for jobs that resume from them: :func:`load_snapshot`.

The applications' shared runtime lives in :mod:`.runtime` (session, Hadoop I/O, manifests),
:mod:`.snapshot_data` (the snapshot's rows and files) and :mod:`.changelog` (the changelog fold).

No Airflow import here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_provider_kstate.spark_apps.runtime import read_manifest_spark, resolve_spark
from airflow_provider_kstate.spark_apps.snapshot_data import snapshot_frame

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["load_snapshot"]


def load_snapshot(spark: SparkSession, uri: str) -> tuple[DataFrame, dict[int, int]]:
    """Return the snapshot at ``uri`` as a DataFrame and the changelog offsets to resume from.

    The manifest is read (through Hadoop, so any Spark filesystem works) and validated first
    (:class:`~airflow_provider_kstate.store.manifest.ManifestError` when it is missing, unreadable, corrupt
    or invalid); the offsets are its ``end_offset`` per partition.

    :param spark: the session.
    :param uri: the snapshot root: a local path or any filesystem URI Spark understands.
    """
    current = resolve_spark(spark, uri).uri
    manifest = read_manifest_spark(spark, current)
    return snapshot_frame(spark, current), manifest.end_offsets
