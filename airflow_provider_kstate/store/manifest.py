"""The snapshot manifest ``_kstate_manifest.json`` and the order-independent row digest.

No Spark and no Airflow here: the Airflow side reads manifests with this module, the Spark applications
write them. The manifest is written LAST into a snapshot, so a snapshot without one is incomplete.

Digest (``digest_algorithm`` = :data:`DIGEST_ALGORITHM`): for every live row, ``h`` = Spark's
``xxhash64(key, value)``, i.e. XXH64 of the key with seed 42, then XXH64 of the value seeded with that
result (the chaining separates key from value, so ``("ab", "c")`` and ``("a", "bc")`` differ). A
partition's digest is the sum of the rows' ``h`` modulo 2**64, as 16 hex digits: order-independent, and
(unlike xor) a duplicated row changes it. Spark computes it natively in the JVM over a DataFrame; the
Python workers that fold changelog partitions compute the same with the ``xxhash`` C library
(:func:`digest_sum`); :func:`row_digest` is the pure-Python reference (used by tests and small checks).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from airflow_provider_kstate.errors import SnapshotError
from airflow_provider_kstate.store.uri import filesystem as uri_filesystem
from airflow_provider_kstate.store.uri import join

MANIFEST_NAME = "_kstate_manifest.json"
FORMAT = "kstate-snapshot/1"
DIGEST_ALGORITHM = "sum64-xxh64-spark-seed42"
PARTITIONER = "murmur2"
SPARK_SEED = 42

_MASK64 = (1 << 64) - 1
_P1 = 11400714785074694791
_P2 = 14029467366897019727
_P3 = 1609587929392839161
_P4 = 9650029242287828579
_P5 = 2870177450012600261
_HEX16 = re.compile(r"^[0-9a-f]{16}$")


class ManifestError(SnapshotError, ValueError):
    """The manifest is missing, unreadable, not JSON, or not a valid ``kstate-snapshot/1`` manifest."""


# ----------------------------------------------------------------------------------------------- digest


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _MASK64


def _round(acc: int, lane: int) -> int:
    acc = (acc + lane * _P2) & _MASK64
    return (_rotl(acc, 31) * _P1) & _MASK64


def _merge(acc: int, val: int) -> int:
    acc ^= _round(0, val)
    return (acc * _P1 + _P4) & _MASK64


def _stripes(data: bytes, seed: int) -> tuple[int, int]:
    """Consume the 32-byte stripes; return the running hash and the position after them."""
    n = len(data)
    if n < 32:
        return (seed + _P5) & _MASK64, 0
    v = [(seed + _P1 + _P2) & _MASK64, (seed + _P2) & _MASK64, seed, (seed - _P1) & _MASK64]
    pos = 0
    while pos + 32 <= n:
        for i in range(4):
            v[i] = _round(v[i], int.from_bytes(data[pos + 8 * i : pos + 8 * i + 8], "little"))
        pos += 32
    h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _MASK64
    for lane in v:
        h = _merge(h, lane)
    return h, pos


def _tail(data: bytes, pos: int, h: int) -> int:
    n = len(data)
    while pos + 8 <= n:
        h ^= _round(0, int.from_bytes(data[pos : pos + 8], "little"))
        h = (_rotl(h, 27) * _P1 + _P4) & _MASK64
        pos += 8
    if pos + 4 <= n:
        h ^= (int.from_bytes(data[pos : pos + 4], "little") * _P1) & _MASK64
        h = (_rotl(h, 23) * _P2 + _P3) & _MASK64
        pos += 4
    while pos < n:
        h ^= (data[pos] * _P5) & _MASK64
        h = (_rotl(h, 11) * _P1) & _MASK64
        pos += 1
    return h


def xxh64(data: bytes, seed: int = 0) -> int:
    """Return XXH64 of ``data`` as an unsigned 64-bit int (the reference algorithm, pure Python).

    :param data: the bytes to hash.
    :param seed: the seed, taken modulo 2**64.
    """
    seed &= _MASK64
    h, pos = _stripes(data, seed)
    h = (h + len(data)) & _MASK64
    h = _tail(data, pos, h)
    h ^= h >> 33
    h = (h * _P2) & _MASK64
    h ^= h >> 29
    h = (h * _P3) & _MASK64
    return h ^ (h >> 32)


def row_digest(key: bytes, value: bytes) -> int:
    """Return the 64-bit hash of one live row, equal to Spark's ``xxhash64(key, value)`` (unsigned).

    :param key: the row's key bytes.
    :param value: the row's value bytes (live rows only: a tombstone is not a row).
    """
    return xxh64(value, xxh64(key, SPARK_SEED))


def combine(hashes: Iterable[int]) -> int:
    """Fold row hashes (or partial digests) into one digest: their sum modulo 2**64.

    :param hashes: row hashes from :func:`row_digest`, signed or unsigned 64-bit ints.
    """
    total = 0
    for h in hashes:
        total = (total + h) & _MASK64
    return total


def digest_hex(digest: int) -> str:
    """Return a digest as the 16 lower-case hex digits stored in manifests and reports.

    :param digest: a digest from :func:`combine` (signed values are taken modulo 2**64).
    """
    return f"{digest & _MASK64:016x}"


def digest_rows(rows: Iterable[tuple[bytes, bytes]]) -> str:
    """Return the hex digest of ``(key, value)`` rows: convenience for tests and small data.

    :param rows: the live rows of one partition.
    """
    return digest_hex(combine(row_digest(k, v) for k, v in rows))


def digest_sum(keys: Iterable[bytes], values: Iterable[bytes]) -> int:
    """Return the digest (as an int modulo 2**64) of live rows given as parallel keys and values.

    The same function as :func:`row_digest` summed by :func:`combine`, computed by the ``xxhash`` C
    library: about 0.1 µs per row, so the Spark applications digest rows where they fold them.

    :param keys: the rows' keys.
    :param values: the rows' values, in the same order (no tombstones).
    """
    from itertools import repeat

    import xxhash

    xxh = xxhash.xxh64_intdigest
    return sum(map(xxh, values, map(xxh, keys, repeat(SPARK_SEED)))) & _MASK64


def digest_sum_nullable(keys: Iterable[bytes | None], values: Iterable[bytes | None]) -> int:
    """Like :func:`digest_sum`, for rows whose key or value may be null (a snapshot read back).

    Spark's ``xxhash64`` skips a null column: the running seed passes through it unchanged.

    :param keys: the rows' keys.
    :param values: the rows' values, in the same order.
    """
    import xxhash

    xxh = xxhash.xxh64_intdigest
    total = 0
    for k, v in zip(keys, values, strict=True):
        h = SPARK_SEED if k is None else xxh(k, SPARK_SEED)
        total += h if v is None else xxh(v, h)
    return total & _MASK64


def digest_from_halves(low_sum: int, high_sum: int) -> str:
    """Return the hex digest from sums of the low and high 32-bit halves of the row hashes.

    Spark sums the halves separately so that no ``long`` overflows (ANSI mode raises on overflow).

    :param low_sum: the sum of ``h & 0xffffffff`` over the rows.
    :param high_sum: the sum of ``h >>> 32`` over the rows.
    """
    return digest_hex((high_sum << 32) + low_sum)


# --------------------------------------------------------------------------------------------- manifest


@dataclass(frozen=True)
class PartitionStats:
    """The state of one snapshot partition: changelog offsets it reflects, its rows and their digest.

    :param start_offset: the changelog's log start offset when the snapshot was built.
    :param end_offset: exclusive: the offset to resume the changelog from.
    :param rows: the number of live rows.
    :param digest: the partition digest, 16 hex digits.
    :param files: the partition's data files, ``{file name: size in bytes}`` (optional: manifests written
        before it was recorded have None, and the fast check then cannot compare files by name and size).
    """

    start_offset: int
    end_offset: int
    rows: int
    digest: str
    files: dict[str, int] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "start_offset": self.start_offset,
            "end_offset": self.end_offset,
            "rows": self.rows,
            "digest": self.digest,
        }
        if self.files is not None:
            out["files"] = dict(sorted(self.files.items()))
        return out


@dataclass(frozen=True)
class Manifest:
    """A parsed, validated ``kstate-snapshot/1`` manifest.

    :param topic: the changelog topic.
    :param partitions: the snapshot's partition count (the layout: rows sit in ``partition_for(key, n)``).
    :param partition_stats: per partition, :class:`PartitionStats`; one entry for every partition.
    :param written_at: ISO-8601 UTC time the manifest was written.
    :param writer: the writing application: ``app``, ``version``, ``spark``.
    :param digest_algorithm: the digest's name; only :data:`DIGEST_ALGORITHM` is understood.
    :param extra: other top-level fields, kept as read (forward compatibility).
    :param version: the snapshot version the manifest was read from (the pointer's, see :mod:`.layout`);
        set by :func:`~.fast_check.load_manifest`, never stored in the manifest itself.
    """

    topic: str
    partitions: int
    partition_stats: dict[int, PartitionStats]
    written_at: str = ""
    writer: dict[str, str] = field(default_factory=dict)
    digest_algorithm: str = DIGEST_ALGORITHM
    partitioner: str = PARTITIONER
    format: str = FORMAT
    extra: dict[str, Any] = field(default_factory=dict)
    version: str | None = None

    @property
    def end_offsets(self) -> dict[int, int]:
        """The offsets to resume the changelog from, per partition."""
        return {p: s.end_offset for p, s in sorted(self.partition_stats.items())}

    @property
    def rows(self) -> int:
        """The total number of live rows."""
        return sum(s.rows for s in self.partition_stats.values())

    def to_json(self) -> dict[str, Any]:
        """Return the manifest as the exact JSON object stored in ``_kstate_manifest.json``."""
        return {
            "format": self.format,
            "topic": self.topic,
            "partitions": self.partitions,
            "partitioner": self.partitioner,
            "digest_algorithm": self.digest_algorithm,
            "written_at": self.written_at or utc_now(),
            "writer": dict(self.writer),
            "partition_stats": {str(p): s.to_json() for p, s in sorted(self.partition_stats.items())},
            **self.extra,
        }


def utc_now() -> str:
    """Return the current UTC time as ``2026-11-22T04:00:00Z``."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _require(doc: Mapping[str, Any], name: str, kind: type | tuple[type, ...], where: str) -> Any:
    if name not in doc:
        raise ManifestError(f"{where}: field {name!r} is missing")
    value = doc[name]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ManifestError(f"{where}: field {name!r} has the wrong type ({type(value).__name__}: {value!r})")
    return value


def _parse_stats(p: str, raw: Any, where: str) -> tuple[int, PartitionStats]:
    if not re.fullmatch(r"\d+", p):
        raise ManifestError(f"{where}: partition_stats key {p!r} is not a partition number")
    if not isinstance(raw, Mapping):
        raise ManifestError(f"{where}: partition_stats[{p!r}] is not an object")
    at = f"{where}: partition_stats[{p!r}]"
    stats = PartitionStats(
        start_offset=_require(raw, "start_offset", int, at),
        end_offset=_require(raw, "end_offset", int, at),
        rows=_require(raw, "rows", int, at),
        digest=_require(raw, "digest", str, at),
        files=_parse_files(raw.get("files"), at),
    )
    if not 0 <= stats.start_offset <= stats.end_offset:
        raise ManifestError(f"{at}: offsets must satisfy 0 <= start_offset <= end_offset, got {stats}")
    if stats.rows < 0:
        raise ManifestError(f"{at}: rows must not be negative, got {stats.rows}")
    if not _HEX16.match(stats.digest):
        raise ManifestError(f"{at}: digest must be 16 lower-case hex digits, got {stats.digest!r}")
    return int(p), stats


def _parse_files(raw: Any, at: str) -> dict[str, int] | None:
    """Validate the optional ``files`` of a partition entry: ``{file name: size}``."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ManifestError(f"{at}: 'files' must be an object of file name to size")
    files = {}
    for name, size in raw.items():
        if not isinstance(name, str) or not name or "/" in name:
            raise ManifestError(f"{at}: 'files' has an invalid file name {name!r}")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise ManifestError(f"{at}: 'files'[{name!r}] must be a size in bytes, got {size!r}")
        files[name] = size
    return files


def _check_header(doc: Mapping[str, Any], where: str) -> None:
    fmt = doc.get("format")
    if fmt != FORMAT:
        raise ManifestError(f"{where}: format is {fmt!r}, expected {FORMAT!r}")
    if _require(doc, "partitioner", str, where) != PARTITIONER:
        raise ManifestError(
            f"{where}: partitioner is {doc['partitioner']!r}, only {PARTITIONER!r} is supported"
        )
    algo = _require(doc, "digest_algorithm", str, where)
    if algo != DIGEST_ALGORITHM:
        raise ManifestError(f"{where}: digest_algorithm is {algo!r}, only {DIGEST_ALGORITHM!r} is supported")


_KNOWN = {
    "format",
    "topic",
    "partitions",
    "partitioner",
    "digest_algorithm",
    "written_at",
    "writer",
    "partition_stats",
}


def parse_manifest(doc: Any, where: str = "manifest") -> Manifest:
    """Validate a decoded manifest document and return it as a :class:`Manifest`.

    :param doc: the decoded JSON.
    :param where: a name for error messages (the manifest's URI).
    :raises ManifestError: on a wrong format, a missing or mistyped field, or inconsistent partitions.
    """
    if not isinstance(doc, Mapping):
        raise ManifestError(f"{where}: the manifest must be a JSON object, got {type(doc).__name__}")
    _check_header(doc, where)
    topic = _require(doc, "topic", str, where)
    partitions = _require(doc, "partitions", int, where)
    if partitions <= 0:
        raise ManifestError(f"{where}: partitions must be positive, got {partitions}")
    raw_stats = _require(doc, "partition_stats", Mapping, where)
    stats = dict(_parse_stats(p, raw, where) for p, raw in raw_stats.items())
    if set(stats) != set(range(partitions)):
        missing = sorted(set(range(partitions)) - set(stats))
        extra = sorted(set(stats) - set(range(partitions)))
        raise ManifestError(
            f"{where}: partition_stats must cover partitions 0..{partitions - 1} exactly (missing {missing}, extra {extra})"
        )
    writer = doc.get("writer", {})
    if not isinstance(writer, Mapping):
        raise ManifestError(f"{where}: field 'writer' must be an object")
    return Manifest(
        topic=topic,
        partitions=partitions,
        partition_stats=stats,
        written_at=str(doc.get("written_at", "")),
        writer={str(k): str(v) for k, v in writer.items()},
        extra={k: v for k, v in doc.items() if k not in _KNOWN},
    )


# ------------------------------------------------------------------------------------------------- I/O


def manifest_uri(snapshot_uri: str) -> str:
    """Return the manifest's URI inside a snapshot root.

    :param snapshot_uri: the snapshot root (local path or any filesystem URI).
    """
    return join(snapshot_uri, MANIFEST_NAME)


def read_manifest(snapshot_uri: str, storage_options: Mapping[str, Any] | None = None) -> Manifest:
    """Read and validate the manifest of the snapshot at ``snapshot_uri``.

    :param snapshot_uri: the snapshot root: a local path or a URI pyarrow understands (file, s3, gs, hdfs).
    :param storage_options: credentials of a remote filesystem (see :func:`.uri.filesystem`).
    :raises ManifestError: when it is missing, unreadable, not JSON or not a valid manifest.
    """
    where = manifest_uri(snapshot_uri)
    try:
        filesystem, root = uri_filesystem(snapshot_uri, storage_options)
    except Exception as exc:  # noqa: BLE001 - any failure to resolve the URI is "unreadable"
        raise ManifestError(f"{where}: cannot open the snapshot location: {exc}") from exc
    path = root.rstrip("/") + "/" + MANIFEST_NAME
    try:
        with filesystem.open_input_stream(path) as stream:
            raw = stream.read()
    except FileNotFoundError as exc:
        raise ManifestError(f"{where}: manifest is missing (no snapshot here, or an unfinished one)") from exc
    except Exception as exc:  # noqa: BLE001 - permissions, network, a directory in its place
        raise ManifestError(f"{where}: manifest is unreadable: {exc}") from exc
    return loads_manifest(raw, where)


def loads_manifest(raw: bytes | str, where: str = "manifest") -> Manifest:
    """Decode and validate manifest bytes.

    :param raw: the file's content.
    :param where: a name for error messages.
    :raises ManifestError: when it is not UTF-8 JSON or not a valid manifest.
    """
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ManifestError(f"{where}: manifest is corrupt (not valid JSON: {exc})") from exc
    return parse_manifest(doc, where)


def write_manifest(
    snapshot_uri: str, manifest: Manifest, storage_options: Mapping[str, Any] | None = None
) -> str:
    """Write ``manifest`` into the snapshot root (call it LAST, after every data file) and return its URI.

    :param snapshot_uri: the snapshot root: a local path or a URI pyarrow understands.
    :param manifest: the manifest to write.
    :param storage_options: credentials of a remote filesystem (see :func:`.uri.filesystem`).
    """
    filesystem, root = uri_filesystem(snapshot_uri, storage_options)
    filesystem.create_dir(root, recursive=True)
    data = json.dumps(manifest.to_json(), indent=2, sort_keys=False).encode()
    with filesystem.open_output_stream(root.rstrip("/") + "/" + MANIFEST_NAME) as stream:
        stream.write(data)
    return manifest_uri(snapshot_uri)
