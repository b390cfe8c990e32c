"""Kafka's Java default partitioner, ``Utils.murmur2`` and ``toPositive(murmur2(key)) % n``: the one
implementation, per key (:func:`partition_for`, the client piece's producers) and vectorized over a batch
of keys (:func:`partitions_for`, the Spark applications' folds and checks).

confluent-kafka's matching setting is ``partitioner=murmur2_random`` (not its default, CRC32).
"""

from __future__ import annotations

from typing import Any

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Return Kafka's murmur2 hash of ``data`` as a signed 32-bit int, exactly as ``Utils.murmur2``.

    :param data: the serialized key.
    """
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length - (length % 4)
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    h = _tail(data, whole, length % 4, h)
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def _tail(data: bytes, start: int, rest: int, h: int) -> int:
    if rest == 0:
        return h
    if rest >= 3:
        h ^= data[start + 2] << 16
    if rest >= 2:
        h ^= data[start + 1] << 8
    h ^= data[start]
    return (h * _M) & _MASK


def partition_for(key: bytes, partitions: int) -> int:
    """Return the partition Kafka's Java default partitioner picks for ``key``.

    :param key: the serialized key (must not be None: keyless records are not placed by hash).
    :param partitions: the topic's partition count.
    """
    if partitions <= 0:
        raise ValueError(f"partitions must be positive, got {partitions}")
    return (murmur2(key) & 0x7FFFFFFF) % partitions


# -- vectorized (numpy): the Spark applications place whole batches of keys --------------------------


def _binary_parts(keys: Any) -> tuple[Any, Any]:
    """Return ``(data uint8, offsets int64)`` of a pyarrow binary array or a list of bytes."""
    import numpy as np
    import pyarrow as pa

    if isinstance(keys, list):
        data = np.frombuffer(b"".join(keys), dtype=np.uint8)
        lengths = np.fromiter((len(k) for k in keys), dtype=np.int64, count=len(keys))
        offsets = np.zeros(len(keys) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return data, offsets
    arr = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
    if arr.type != pa.large_binary():
        arr = arr.cast(pa.large_binary())
    _, off_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(off_buf, dtype=np.int64)[arr.offset : arr.offset + len(arr) + 1]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    return data, offsets


def _mix(k: Any, m: Any) -> Any:
    k = k * m
    k ^= k >> 24  # numpy keeps uint32 (a Python int scalar takes the array's dtype)
    return k * m


def _murmur2_same_length(mat: Any, length: int) -> Any:
    """Kafka murmur2 of the rows of a ``(m, length)`` uint8 matrix, vectorized, as uint32."""
    import numpy as np

    m = np.uint32(_M)
    h = np.full(mat.shape[0], (_SEED ^ length) & 0xFFFFFFFF, dtype=np.uint32)
    wide = mat.astype(np.uint32)
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = wide[:, i] | (wide[:, i + 1] << 8) | (wide[:, i + 2] << 16) | (wide[:, i + 3] << 24)
        h = (h * m) ^ _mix(k, m)
    rest = length % 4
    if rest >= 3:
        h ^= wide[:, whole + 2] << np.uint32(16)
    if rest >= 2:
        h ^= wide[:, whole + 1] << np.uint32(8)
    if rest >= 1:
        h ^= wide[:, whole]
        h = h * m
    h ^= h >> np.uint32(13)
    h = h * m
    h ^= h >> np.uint32(15)
    return h


def partitions_for(keys: Any, partitions: int) -> Any:
    """Return ``partition_for(key, partitions)`` for every key, vectorized with numpy (int32 array).

    Equal to :func:`partition_for` key by key; keys are grouped by length so each group hashes as one
    matrix. numpy (and pyarrow, for an arrow array) are imported here: the client piece needs neither.

    :param keys: a pyarrow binary array (no nulls) or a list of bytes.
    :param partitions: the partition count.
    """
    import numpy as np

    if partitions <= 0:
        raise ValueError(f"partitions must be positive, got {partitions}")
    data, offsets = _binary_parts(keys)
    n = len(offsets) - 1
    out = np.zeros(n, dtype=np.int32)
    if n == 0:
        return out
    lengths = np.diff(offsets)
    first = int(lengths[0])
    if first > 0 and offsets[0] == 0 and int(offsets[-1]) == first * n and (lengths == first).all():
        h = _murmur2_same_length(data[: first * n].reshape(n, first), first)
        return ((h & np.uint32(0x7FFFFFFF)) % np.uint32(partitions)).astype(np.int32)
    for length in np.unique(lengths):
        idx = np.nonzero(lengths == length)[0]
        length = int(length)
        if length == 0:
            mat = np.zeros((len(idx), 0), dtype=np.uint8)
        else:
            mat = data[offsets[idx][:, None] + np.arange(length)[None, :]]
        h = _murmur2_same_length(mat, length)
        out[idx] = ((h & np.uint32(0x7FFFFFFF)) % np.uint32(partitions)).astype(np.int32)
    return out
