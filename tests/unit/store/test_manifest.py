"""The manifest format, its validation errors and the order-independent digest (no Spark, no broker)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from airflow_provider_kstate.client_piece.murmur2 import partition_for, partitions_for
from airflow_provider_kstate.store.digest import (
    DIGEST_ALGORITHM,
    combine,
    digest_from_halves,
    digest_hex,
    digest_rows,
    digest_sum,
    row_digest,
    xxh64,
)
from airflow_provider_kstate.store.manifest import (
    MANIFEST_NAME,
    Manifest,
    ManifestError,
    PartitionStats,
    read_manifest,
    write_manifest,
)

ROWS = [(b"k%d" % i, b"value-%d" % (i * 7)) for i in range(200)]


def _manifest(partitions: int = 2) -> Manifest:
    stats = {p: PartitionStats(0, 10 + p, p, digest_rows(ROWS[:p])) for p in range(partitions)}
    writer = {"app": "airflow_provider_kstate.spark_apps.rebuild", "version": "0.1.0", "spark": "4.2.0"}
    return Manifest(topic="t", partitions=partitions, partition_stats=stats, writer=writer)


def test_xxh64_reference_vectors() -> None:
    # Published XXH64 test vectors.
    assert xxh64(b"") == 0xEF46DB3751D8E999
    assert xxh64(b"a") == 0xD24EC4F1A98C6E5B
    assert xxh64(b"abc") == 0x44BC2CF5AD770999
    assert xxh64(b"Nobody inspects the spammish repetition") == 0xFBCEA83C8A378BF1


def test_digest_is_order_independent() -> None:
    shuffled = ROWS[:]
    random.Random(7).shuffle(shuffled)
    assert digest_rows(ROWS) == digest_rows(shuffled)


def test_digest_is_sensitive_to_duplicates_and_changes() -> None:
    base = digest_rows(ROWS)
    assert digest_rows(ROWS + [ROWS[0]]) != base  # xor would cancel a pair; a sum does not
    assert digest_rows(ROWS + [ROWS[0], ROWS[0]]) != base
    assert digest_rows(ROWS[1:]) != base
    assert digest_rows([(ROWS[0][0], b"other"), *ROWS[1:]]) != base


def test_digest_separates_key_from_value() -> None:
    assert row_digest(b"ab", b"c") != row_digest(b"a", b"bc")
    assert row_digest(b"", b"x") != row_digest(b"x", b"")


def test_digest_combines_partials_and_halves() -> None:
    hashes = [row_digest(k, v) for k, v in ROWS]
    assert digest_hex(combine([combine(hashes[:50]), combine(hashes[50:])])) == digest_rows(ROWS)
    low = sum(h & 0xFFFFFFFF for h in hashes)
    high = sum(h >> 32 for h in hashes)
    assert digest_from_halves(low, high) == digest_rows(ROWS)
    signed = [h - (1 << 64) if h >= 1 << 63 else h for h in hashes]
    assert digest_hex(combine(signed)) == digest_rows(ROWS)
    assert digest_rows([]) == "0" * 16


def test_fast_digest_equals_the_reference() -> None:
    rng = random.Random(5)
    rows = [(rng.randbytes(rng.randint(0, 70)), rng.randbytes(rng.randint(0, 90))) for _ in range(500)]
    keys, values = [k for k, _ in rows], [v for _, v in rows]
    assert digest_hex(digest_sum(keys, values)) == digest_rows(rows)
    assert digest_hex(digest_sum([], [])) == "0" * 16


def test_vectorized_partitioner_equals_kafka_default() -> None:
    rng = random.Random(3)
    keys = [rng.randbytes(rng.randint(0, 40)) for _ in range(3000)]
    for n in (1, 6, 16, 1000):
        assert partitions_for(keys, n).tolist() == [partition_for(k, n) for k in keys]


def test_roundtrip(tmp_path: Path) -> None:
    manifest = _manifest(3)
    write_manifest(str(tmp_path), manifest)
    doc = json.loads((tmp_path / MANIFEST_NAME).read_text())
    assert doc["format"] == "kstate-snapshot/1"
    assert doc["partitioner"] == "murmur2"
    assert doc["digest_algorithm"] == DIGEST_ALGORITHM
    assert set(doc["partition_stats"]) == {"0", "1", "2"}
    assert set(doc["writer"]) == {"app", "version", "spark"}
    back = read_manifest(str(tmp_path))
    assert back.partition_stats == manifest.partition_stats
    assert back.end_offsets == {0: 10, 1: 11, 2: 12}
    assert read_manifest(tmp_path.as_uri()).partitions == 3


def test_missing(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="manifest is missing"):
        read_manifest(str(tmp_path / "nothing"))


def test_unreadable(tmp_path: Path) -> None:
    (tmp_path / MANIFEST_NAME).mkdir()  # a directory where the file should be
    with pytest.raises(ManifestError, match="unreadable"):
        read_manifest(str(tmp_path))


def test_bad_uri() -> None:
    with pytest.raises(ManifestError, match="cannot open the snapshot location"):
        read_manifest("nosuchscheme://bucket/snap")


def test_corrupt_json(tmp_path: Path) -> None:
    (tmp_path / MANIFEST_NAME).write_text('{"format": "kstate-snapshot/1", ')
    with pytest.raises(ManifestError, match="corrupt"):
        read_manifest(str(tmp_path))


def _write(tmp_path: Path, doc: object) -> None:
    (tmp_path / MANIFEST_NAME).write_text(json.dumps(doc))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(format="kstate-snapshot/2"), "format is 'kstate-snapshot/2'"),
        (lambda d: d.pop("topic"), "field 'topic' is missing"),
        (lambda d: d.update(partitions="2"), "field 'partitions' has the wrong type"),
        (lambda d: d.update(partitions=0), "partitions must be positive"),
        (lambda d: d.update(partitioner="crc32"), "only 'murmur2'"),
        (lambda d: d.update(digest_algorithm="xor"), "digest_algorithm is 'xor'"),
        (lambda d: d["partition_stats"].pop("1"), r"missing \[1\]"),
        (lambda d: d["partition_stats"].update({"7": d["partition_stats"]["0"]}), r"extra \[7\]"),
        (
            lambda d: d["partition_stats"]["0"].pop("end_offset"),
            r"partition_stats\['0'\]: field 'end_offset'",
        ),
        (lambda d: d["partition_stats"]["0"].update(end_offset=-1), "start_offset <= end_offset"),
        (lambda d: d["partition_stats"]["0"].update(digest="XYZ"), "16 lower-case hex"),
        (lambda d: d["partition_stats"]["0"].update(rows=True), "wrong type"),
        (lambda d: d.update(writer=[]), "'writer' must be an object"),
    ],
)
def test_invalid_fields(tmp_path: Path, change: object, message: str) -> None:
    doc = _manifest(2).to_dict()
    change(doc)  # type: ignore[operator]
    _write(tmp_path, doc)
    with pytest.raises(ManifestError, match=message):
        read_manifest(str(tmp_path))


def test_not_an_object(tmp_path: Path) -> None:
    _write(tmp_path, [1, 2])
    with pytest.raises(ManifestError, match="must be a JSON object"):
        read_manifest(str(tmp_path))


def test_manifest_error_is_value_error() -> None:
    assert issubclass(ManifestError, ValueError)
