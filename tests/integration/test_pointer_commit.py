"""Issue 10: the rebuild's Hadoop commits of the pointer, run through the real JVM of a local Spark session.

No HDFS or object store can run here, so the two Hadoop branches of ``rebuild.write_pointer`` run against
Hadoop's local filesystem (``file://``): ``rename_into_place`` (the HDFS commit: a temporary file, then
``FileContext.rename`` with ``OVERWRITE``) and ``write_bytes`` (the object-store commit: one ``create``
whose object appears on ``close``). What this proves is that the gateway calls are right (the
``Options.Rename`` array, ``FileContext`` on the filesystem's URI), that the rename replaces an existing
pointer in one step and leaves no temporary file, and that a first commit works too; the atomicity itself is
the filesystem's (docs/snapshot-layout.md).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_kstate.spark_apps import rebuild
from airflow_provider_kstate.spark_apps.runtime import read_bytes, write_bytes
from airflow_provider_kstate.store import layout

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = (
        SparkSession.builder.master("local[1]")
        .appName("kstate-test-pointer-commit")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    yield session
    session.stop()


V1, V2 = layout.new_version_name(1_700_000_000), layout.new_version_name(1_700_000_100)


def pointer(version: str) -> bytes:
    return layout.pointer_bytes(version, [], writer="test")


def test_hdfs_commit_renames_over_the_pointer_and_leaves_no_temp(spark: Any, tmp_path: Path) -> None:
    target = f"file://{tmp_path / layout.POINTER_NAME}"
    rebuild.rename_into_place(spark, target, pointer(V1))  # the first commit: no pointer yet
    assert json.loads((tmp_path / layout.POINTER_NAME).read_bytes())["version"] == V1
    rebuild.rename_into_place(spark, target, pointer(V2))  # replaces the existing pointer
    assert json.loads((tmp_path / layout.POINTER_NAME).read_bytes())["version"] == V2
    left = sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("."))
    assert left == [layout.POINTER_NAME], left  # the temporary file was renamed, not copied


def test_object_store_commit_is_one_write_replacing_the_pointer(spark: Any, tmp_path: Path) -> None:
    target = f"file://{tmp_path / layout.POINTER_NAME}"
    write_bytes(spark, target, pointer(V1))
    write_bytes(spark, target, pointer(V2))
    assert json.loads(read_bytes(spark, target) or b"{}")["version"] == V2
    assert [p.name for p in tmp_path.iterdir()] == [layout.POINTER_NAME]
