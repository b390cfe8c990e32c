"""Kafka's Java default partitioner, ``Utils.murmur2`` and ``toPositive(murmur2(key)) % n``.

confluent-kafka's matching setting is ``partitioner=murmur2_random`` (not its default, CRC32).
"""

from __future__ import annotations

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
