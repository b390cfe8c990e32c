"""The snapshot's order-independent row digest (``digest_algorithm`` = :data:`DIGEST_ALGORITHM`).

For every live row, ``h`` = Spark's ``xxhash64(key, value)``, i.e. XXH64 of the key with seed 42, then
XXH64 of the value seeded with that result (the chaining separates key from value, so ``("ab", "c")`` and
``("a", "bc")`` differ). A partition's digest is the sum of the rows' ``h`` modulo 2**64, as 16 hex digits:
order-independent, and (unlike xor) a duplicated row changes it. Spark computes it natively in the JVM over
a DataFrame; the Python workers that fold changelog partitions compute the same with the ``xxhash`` C
library (:func:`digest_sum`); :func:`row_digest` is the pure-Python reference (used by tests and small
checks). No Spark and no Airflow here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

DIGEST_ALGORITHM: Final = "sum64-xxh64-spark-seed42"
SPARK_SEED = 42

_MASK64 = (1 << 64) - 1
_P1 = 11400714785074694791
_P2 = 14029467366897019727
_P3 = 1609587929392839161
_P4 = 9650029242287828579
_P5 = 2870177450012600261


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
