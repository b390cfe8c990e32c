"""Compatibility alias: the manifest and digest live in :mod:`airflow_provider_kstate.store.manifest`."""

from __future__ import annotations

from airflow_provider_kstate.store.manifest import (  # noqa: F401 - re-exported names
    DIGEST_ALGORITHM,
    FORMAT,
    MANIFEST_NAME,
    PARTITIONER,
    SPARK_SEED,
    Manifest,
    ManifestError,
    PartitionStats,
    combine,
    digest_from_halves,
    digest_hex,
    digest_rows,
    digest_sum,
    digest_sum_nullable,
    loads_manifest,
    manifest_uri,
    parse_manifest,
    read_manifest,
    row_digest,
    utc_now,
    write_manifest,
    xxh64,
)
