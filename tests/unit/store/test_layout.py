"""Unit tests of the versioned snapshot layout (store/layout.py): names, pointer, resolution, pruning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_provider_kstate.store import fast_check, layout
from airflow_provider_kstate.store.manifest import MANIFEST_NAME, Manifest, PartitionStats, write_manifest


def _manifest() -> Manifest:
    stats = {0: PartitionStats(0, 5, 3, "0" * 16), 1: PartitionStats(0, 0, 0, "0" * 16)}
    return Manifest(topic="t", partitions=2, partition_stats=stats, written_at="2026-11-23T00:00:00Z")


def _version(root: Path, name: str) -> None:
    write_manifest(str(root / name), _manifest())


def _point(root: Path, name: str, history: tuple[str, ...] = ()) -> None:
    (root / layout.POINTER_NAME).write_bytes(layout.pointer_bytes(name, history))


def test_version_names_sort_by_time_and_are_recognised() -> None:
    old, new = layout.new_version_name(1_000_000_000), layout.new_version_name(1_900_000_000)
    assert old.startswith("v-20010909T014640-") and layout.is_version_name(old)
    assert old < new and layout.versions([new, "partition=0", old, "v-x", MANIFEST_NAME]) == [old, new]
    assert not layout.is_version_name("v-2026-11-23")


def test_resolve_follows_the_pointer(tmp_path: Path) -> None:
    v1, v2 = "v-20261101T000000-aaaaaa", "v-20261102T000000-bbbbbb"
    _version(tmp_path, v1)
    _version(tmp_path, v2)
    _point(tmp_path, v1, ())
    assert layout.resolve(str(tmp_path)) == layout.SnapshotVersion(str(tmp_path), v1, f"{tmp_path}/{v1}")
    _point(tmp_path, v2, (v1,))
    found = layout.resolve(f"file://{tmp_path}")
    assert found.version == v2 and found.uri == f"file://{tmp_path}/{v2}" and not found.legacy
    assert fast_check.load_manifest(str(tmp_path)).version == v2


def test_legacy_layout_resolves_to_the_root(tmp_path: Path) -> None:
    write_manifest(str(tmp_path), _manifest())
    found = layout.resolve(str(tmp_path))
    assert found.legacy and found.uri == str(tmp_path) and found.version is None
    assert fast_check.load_manifest(str(tmp_path)).version is None


def test_no_pointer_and_no_manifest_is_absent(tmp_path: Path) -> None:
    _version(tmp_path, "v-20261101T000000-aaaaaa")  # a first build killed before its pointer
    with pytest.raises(layout.SnapshotAbsent, match="no _kstate_current.json and no _kstate_manifest.json"):
        layout.resolve(str(tmp_path))
    assert fast_check.SnapshotAbsent is layout.SnapshotAbsent  # existing callers keep working


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{not json", "garbled"),
        (
            json.dumps({"format": "other", "version": "v-20261101T000000-aaaaaa"}).encode(),
            "not a kstate-pointer/1",
        ),
        (
            json.dumps({"format": layout.POINTER_FORMAT, "version": "../etc"}).encode(),
            "names no valid version",
        ),
    ],
)
def test_a_garbled_pointer_is_a_clear_error_naming_it(tmp_path: Path, content: bytes, message: str) -> None:
    _version(tmp_path, "v-20261101T000000-aaaaaa")
    (tmp_path / layout.POINTER_NAME).write_bytes(content)
    with pytest.raises(layout.PointerError, match=message) as info:
        layout.resolve(str(tmp_path))
    assert layout.POINTER_NAME in str(info.value)
    with pytest.raises(fast_check.SnapshotUnreadable):
        fast_check.load_manifest(str(tmp_path))


def test_a_pointer_to_a_missing_version_names_both(tmp_path: Path) -> None:
    _point(tmp_path, "v-20261101T000000-aaaaaa")
    with pytest.raises(
        layout.PointerError, match="names version 'v-20261101T000000-aaaaaa', but .* is missing"
    ):
        layout.resolve(str(tmp_path))


def test_to_prune_keeps_current_and_recent_history_never_newer() -> None:
    names = [f"v-2026110{d}T000000-aaaaaa" for d in range(1, 8)] + ["partition=0", layout.POINTER_NAME]
    v = names[:7]
    current, history = v[5], [v[4], v[2], v[0]]  # v[1], v[3] were killed rebuilds' leftovers
    assert layout.to_prune(names, current, history, 3) == [v[0], v[1], v[3]]
    assert layout.to_prune(names, current, history, 1) == [v[0], v[1], v[2], v[3], v[4]]
    assert v[6] not in layout.to_prune(names, current, history, 1)  # newer than current: never
    with pytest.raises(ValueError, match="at least 1"):
        layout.to_prune(names, current, history, 0)


def test_legacy_entries_and_siblings() -> None:
    assert layout.legacy_entry("partition=3") and layout.legacy_entry(MANIFEST_NAME)
    assert not layout.legacy_entry("v-20261101T000000-aaaaaa") and not layout.legacy_entry(
        layout.POINTER_NAME
    )
    assert layout.legacy_sibling("/d/store", "store.previous")
    assert layout.legacy_sibling("s3://b/store/", "store.staging-20261101T000000-12")
    assert not layout.legacy_sibling("/d/store", "store2") and not layout.legacy_sibling("/d/store", "store")
    assert layout.pointer_temp("_kstate_current.json.tmp-42") and not layout.pointer_temp(layout.POINTER_NAME)


def test_pointer_bytes_round_trip_and_refuses_bad_names() -> None:
    doc = layout.parse_pointer(
        layout.pointer_bytes("v-20261101T000000-aaaaaa", ["v-20261001T000000-bbbbbb"]), "p"
    ).to_dict()
    assert doc["format"] == layout.POINTER_FORMAT and doc["history"] == ["v-20261001T000000-bbbbbb"]
    with pytest.raises(ValueError, match="not a version name"):
        layout.pointer_bytes("latest")
