"""The changelog re-placement's per-partition logic (issue 32), without Kafka or Spark: which keys move, that
each moved value is written (and acknowledged) before its tombstone, and the deep check's verdict. (On a real
broker and Spark: tests/integration/test_streams_resize.py.)"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_kstate.client_piece.murmur2 import partition_for
from airflow_provider_kstate.spark_apps import kafka_io
from airflow_provider_kstate.spark_apps import replace_changelog as app
from airflow_provider_kstate.store.contract import AppError
from airflow_provider_kstate.store.digest import digest_hex

WINDOW = (1_700_000_000_000).to_bytes(8, "big") + (3).to_bytes(4, "big")


class Msg:
    def __init__(self, key: bytes, value: bytes | None, offset: int) -> None:
        self._key, self._value, self._offset = key, value, offset

    def key(self) -> bytes:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def offset(self) -> int:
        return self._offset

    def timestamp(self) -> tuple[int, int]:
        return 1, 1_700_000_000_000 + self._offset

    def headers(self) -> None:
        return None


class Log:
    """The partitions' records (a fake topic): ``{partition: [(key, value)]}``; writes append."""

    def __init__(self, records: dict[int, list[tuple[bytes, bytes | None]]]) -> None:
        self.records = records
        self.writes: list[tuple[int, bytes, bytes | None]] = []
        self.flushes = 0

    def fold(self, _config: Any, _topic: str, partition: int, start: int, end: int, *_a: Any) -> Any:
        latest = {
            k: Msg(k, v, o) for o, (k, v) in enumerate(self.records.get(partition, [])) if start <= o < end
        }
        return kafka_io.FoldResult(latest, records=len(latest))

    def produce(self, topic: str, key: bytes, value: bytes | None, partition: int, **kw: Any) -> None:
        self.writes.append((partition, key, value))
        self.records.setdefault(partition, []).append((key, value))
        kw["on_delivery"](None, None)

    def poll(self, _t: float) -> None: ...

    def flush(self, _t: float) -> int:
        self.flushes += 1
        return 0


@pytest.fixture
def log(monkeypatch: pytest.MonkeyPatch) -> Log:
    keys = [f"k{i:03d}".encode() for i in range(40)]
    fake = Log({p: [(k, b"%d" % i) for i, k in enumerate(keys) if partition_for(k, 2) == p] for p in (0, 1)})
    fake.records[0].append((fake.records[0][0][0], None))  # a key deleted: never moved
    monkeypatch.setattr(kafka_io, "fold_partition", fake.fold)
    monkeypatch.setattr(app, "_producer", lambda job: fake)
    return fake


def job(partitions: int, ranges: dict[int, tuple[int, int]], suffix: int = 0) -> app.Job:
    return app.Job({"bootstrap.servers": "x:9092"}, "cl", partitions, suffix, ranges, 5.0)


def test_moved_keys_are_written_then_tombstoned_and_the_check_proves_the_placement(log: Log) -> None:
    before = {p: app.replace_partition(job(4, {p: (0, 100)}), p) for p in (0, 1)}
    moves = [w for w in log.writes if w[2] is not None]
    tombstones = [w for w in log.writes if w[2] is None]
    assert len(moves) == len(tombstones) == sum(r["moved"] for r in before.values()) > 0
    assert all(partition_for(k, 4) == p for p, k, _ in moves) and all(p in (2, 3) for p, _, _ in moves)
    # every value is written before any tombstone of its partition's task
    first_tombstone = log.writes.index(tombstones[0])
    assert all(log.writes.index(m) < first_tombstone for m in moves if m[0] == moves[0][0])
    assert sum(r["live"] for r in before.values()) == 39, "the deleted key is not live"
    after = [app.check_partition(job(4, {p: (0, 100)}), p) for p in range(4)]
    assert sum(r["misplaced"] for r in after) == 0 and sum(r["live"] for r in after) == 39
    assert digest_hex(sum(r["digest"] for r in after)) == digest_hex(
        sum(r["digest"] for r in before.values())
    )


def test_a_window_key_is_placed_by_its_record_key(log: Log) -> None:
    key = b"k007" + WINDOW
    assert app.home(key, job(4, {}, suffix=12)) == partition_for(b"k007", 4)
    assert app.home(b"k007", job(4, {})) == partition_for(b"k007", 4)


def test_the_check_names_a_misplaced_key(log: Log) -> None:
    stray = next(k for k, _ in log.records[0] if partition_for(k, 4) != 0)
    result = app.check_partition(job(4, {0: (0, 100)}), 0)
    assert (
        result["misplaced"] > 0
        and stray.hex() in result["misplaced_keys"]
        or len(result["misplaced_keys"]) == 5
    )


def test_the_command_line_takes_one_suffix_or_one_per_topic() -> None:
    base = ["--kafka-config-file", "c", "--report-file", "r", "--from-partitions", "2", "--partitions", "4"]
    args = app.parse_args([*base, "--topic", "a", "--topic", "b", "--key-suffix", "12"])
    assert app.suffixes(args) == {"a": 12, "b": 12}
    args = app.parse_args([*base, "--topic", "a", "--topic", "b", "--key-suffix", "0", "--key-suffix", "16"])
    assert app.suffixes(args) == {"a": 0, "b": 16}
    with pytest.raises(AppError, match="none of 0"):
        app.suffixes(app.parse_args([*base, "--topic", "a", "--key-suffix", "8"]))
    with pytest.raises(AppError, match="one per topic"):
        app.suffixes(app.parse_args([*base, "--topic", "a", "--key-suffix", "0", "--key-suffix", "12"]))
