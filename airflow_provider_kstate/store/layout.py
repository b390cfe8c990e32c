"""Versioned snapshot layout: immutable version directories and one pointer object written last.

Under a snapshot URI ``U``::

    U/_kstate_current.json            the pointer: {"format": "kstate-pointer/1", "version": "v-...", ...}
    U/v-20261123T031640-3f9a1c/       one immutable version: partition=N/ Parquet + _kstate_manifest.json
    U/v-20261122T020000-77b0e2/       an older version (kept for rollback, pruned beyond keep-N)

A version not named by the pointer does not exist for readers. A rebuild writes a new version directory,
its manifest, then the pointer (one small object, atomic, see ``docs/snapshot-layout.md``), so a crash at
any point leaves the previous version current. Today's *legacy* layout (data and manifest directly under
``U``) is still read; the next rebuild migrates it.

No Airflow and no Spark here: the Spark applications pass their own read/exists functions
(:func:`resolve_with`); the Airflow side uses pyarrow/fsspec (:func:`resolve`).
"""

from __future__ import annotations

import json
import re
import secrets
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal

from pydantic import ConfigDict, Field, StringConstraints, ValidationError

from airflow_provider_kstate.defaults import (  # re-exported: the value lives there (parse time)
    DEFAULT_KEEP_VERSIONS as DEFAULT_KEEP_VERSIONS,
)
from airflow_provider_kstate.documents import OrderedDocument
from airflow_provider_kstate.errors import InvalidArgumentError, SnapshotError
from airflow_provider_kstate.store.manifest import MANIFEST_NAME
from airflow_provider_kstate.store.uri import filesystem, join

#: The pointer object's name under the snapshot root.
POINTER_NAME = "_kstate_current.json"
#: The pointer's format tag.
POINTER_FORMAT: Final = "kstate-pointer/1"
#: Prefix of version directory names.
VERSION_PREFIX = "v-"
#: The message readers log for the legacy layout.
LEGACY_MESSAGE = "legacy layout (manifest directly under the snapshot URI); the next rebuild migrates it"
#: The first and last 4 bytes of every Parquet file.
PARQUET_MAGIC = b"PAR1"

_VERSION_RE = re.compile(r"^v-\d{8}T\d{6}-[0-9a-f]{6,}$")


class SnapshotUnreadable(SnapshotError, ValueError):
    """The snapshot cannot be used: its pointer or manifest is unreadable, corrupt or invalid."""


class SnapshotAbsent(SnapshotUnreadable):
    """There is no snapshot: no directory, or neither a pointer nor a manifest in it (never built)."""


class PointerError(SnapshotUnreadable):
    """The pointer ``_kstate_current.json`` is garbled or names a version that is not there."""


@dataclass(frozen=True)
class SnapshotVersion:
    """Where a snapshot's current data and manifest are.

    :param root: the snapshot URI as given.
    :param version: the current version's name, or None for the legacy layout (``root`` holds the data).
    :param uri: the directory holding the data and the manifest.
    """

    root: str
    version: str | None
    uri: str

    @property
    def legacy(self) -> bool:
        """Whether this is the legacy layout (no pointer; data under the root)."""
        return self.version is None


def is_version_name(name: str) -> bool:
    """Whether ``name`` is a version directory's name (``v-<yyyymmddThhmmss>-<hex>``)."""
    return bool(_VERSION_RE.match(name))


def partition_of(directory: str) -> int | None:
    """Return N of a ``partition=N`` directory name, else None."""
    key, _, value = directory.partition("=")
    return int(value) if key == "partition" and value.isdigit() else None


def framing_problem(head: bytes, tail: bytes, size: int) -> str:
    """Return why a file is not sound Parquet framing (``PAR1`` at both ends, a footer that fits), or "".

    :param head: the file's first 4 bytes.
    :param tail: the file's last 8 bytes (footer length, ``PAR1``).
    :param size: the file's size.
    """
    if size < 12:
        return f"{size} bytes: too short for a Parquet file (truncated)"
    if head != PARQUET_MAGIC or tail[4:] != PARQUET_MAGIC:
        return "not a Parquet file: no PAR1 at both ends (truncated, overwritten or foreign)"
    footer = int.from_bytes(tail[:4], "little")
    if not 0 < footer <= size - 12:
        return f"corrupt Parquet footer: length {footer} in a {size}-byte file"
    return ""


def new_version_name(now: float | None = None) -> str:
    """Return a fresh version name: ``v-<UTC yyyymmddThhmmss>-<6 random hex digits>`` (sorts by time).

    :param now: the time (epoch seconds; default now).
    """
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(time.time() if now is None else now))
    return f"{VERSION_PREFIX}{stamp}-{secrets.token_hex(3)}"


def pointer_uri(root: str) -> str:
    """Return the pointer's URI under a snapshot root."""
    return join(root, POINTER_NAME)


#: The pattern of a version name (:func:`is_version_name`).
VERSION_PATTERN = _VERSION_RE.pattern


class Pointer(OrderedDocument):
    """The pointer ``_kstate_current.json`` (document ``store/pointer``, ``kstate-pointer/1``): the current
    version and the versions current before it, newest first. Other fields (``writer``) are kept as read.
    Read with :func:`parse_pointer` (:class:`PointerError` naming the pointer)."""

    model_config = ConfigDict(
        extra="allow",
        title="kstate snapshot pointer (_kstate_current.json)",
        json_schema_extra={
            "description": "Names the snapshot's current version under its root; a rebuild writes it last (its "
            "commit). A version it does not name does not exist for readers. Other fields (writer) inform."
        },
    )
    schema_name = "store/pointer"
    read_error = PointerError

    format: Literal["kstate-pointer/1"] = Field(description="the pointer's version")
    version: Annotated[str, StringConstraints(strict=True, pattern=VERSION_PATTERN)] = Field(
        description="the current version's directory under the snapshot root, v-<yyyymmddThhmmss>-<hex>"
    )
    written_at: str | None = Field(default=None, description="when it was written, ISO-8601 UTC")
    topic: str | None = Field(default=None, description="the changelog topic of the current version")
    topic_id: str | None = Field(
        default=None,
        description="the changelog's topic id (KIP-516) the current version was built from (absent: unknown, "
        "written before ids were recorded)",
    )
    history: list[Annotated[str, Field(strict=True)]] = Field(
        default_factory=list, description="the versions that were current before, newest first"
    )

    @classmethod
    def from_dict(cls, data: Any, where: str = POINTER_NAME) -> Pointer:
        """Validate a decoded pointer document.

        :param where: the pointer's URI, for messages.
        :raises PointerError: when it is not a ``kstate-pointer/1`` document or names no valid version.
        """
        if not isinstance(data, Mapping) or data.get("format") != POINTER_FORMAT:
            raise PointerError(f"snapshot pointer {where} is not a {POINTER_FORMAT} document")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            field = exc.errors()[0]["loc"][0]
            if field == "version":
                raise PointerError(
                    f"snapshot pointer {where} names no valid version: {data.get('version')!r}"
                ) from None
            if field == "history":
                raise PointerError(
                    f"snapshot pointer {where}: 'history' must be a list of version names"
                ) from None
            raise PointerError(f"snapshot pointer {where} is not valid: {exc.errors()[0]['msg']}") from None


def pointer_bytes(version: str, history: Iterable[str] = (), **extra: Any) -> bytes:
    """Return the pointer document naming ``version``.

    :param version: the version to make current.
    :param history: previously current versions, newest first (what rollback may go back to).
    :param extra: more fields (e.g. ``writer``); never secrets.
    """
    if not is_version_name(version):
        raise PointerError(f"{version!r} is not a version name (v-<yyyymmddThhmmss>-<hex>)")
    pointer = Pointer(
        format=POINTER_FORMAT,
        version=version,
        written_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        history=[v for v in history if v != version],
        **extra,
    )
    return pointer.to_json(indent=2).encode()


def parse_pointer(raw: bytes | str, where: str) -> Pointer:
    """Decode and validate a pointer document; return it.

    :param raw: the pointer's bytes.
    :param where: the pointer's URI, for messages.
    :raises PointerError: when it is not JSON, not a ``kstate-pointer/1`` document or names no valid version.
    """
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PointerError(f"snapshot pointer {where} is garbled (not valid JSON: {exc})") from exc
    return Pointer.from_dict(doc, where)


def resolve_with(
    uri: str, read: Callable[[str], bytes | None], exists: Callable[[str], bool]
) -> SnapshotVersion:
    """Resolve the current version of the snapshot at ``uri`` with the caller's file functions.

    :param uri: the snapshot root.
    :param read: returns a file's bytes, or None when it does not exist.
    :param exists: whether a file or directory exists.
    :raises SnapshotAbsent: neither a pointer nor a legacy manifest.
    :raises PointerError: a garbled pointer, or one naming a version without a manifest.
    """
    where = pointer_uri(uri)
    raw = read(where)
    if raw is None:
        if exists(join(uri, MANIFEST_NAME)):
            return SnapshotVersion(uri, None, uri)
        raise SnapshotAbsent(
            f"snapshot missing at {uri!r}: no {POINTER_NAME} and no {MANIFEST_NAME} in it (never built, "
            "or the first build did not finish)"
        )
    version = parse_pointer(raw, where).version
    target = join(uri, version)
    if not exists(target):
        raise PointerError(
            f"snapshot pointer {where} names version {version!r}, but {target} is missing: "
            "rewrite the pointer to an existing version (see docs/snapshot-layout.md) or rebuild"
        )
    return SnapshotVersion(uri, version, target)


def read_history(uri: str, read: Callable[[str], bytes | None]) -> tuple[str | None, list[str]]:
    """Return ``(current version, history)`` from the pointer, ``(None, [])`` without a usable one."""
    raw = read(pointer_uri(uri))
    if raw is None:
        return None, []
    try:
        pointer = parse_pointer(raw, pointer_uri(uri))
    except PointerError:
        return None, []
    return pointer.version, list(pointer.history)


def resolve(uri: str, storage_options: Mapping[str, Any] | None = None) -> SnapshotVersion:
    """Resolve the current version of the snapshot at ``uri`` through pyarrow/fsspec.

    :param uri: the snapshot root (validated by the caller).
    :param storage_options: credentials of a remote filesystem (see :func:`.uri.filesystem`).
    :raises SnapshotAbsent: neither a pointer nor a legacy manifest.
    :raises SnapshotUnreadable: the location cannot be opened; :raises PointerError: a bad pointer.
    """
    try:
        fs, root = filesystem(uri, storage_options)
    except Exception as exc:  # noqa: BLE001 - any failure to open the location is "unreadable"
        raise SnapshotUnreadable(f"snapshot at {uri!r}: cannot open the location: {exc}") from exc
    base = root.rstrip("/")

    def path_of(child_uri: str) -> str:
        return base + child_uri[len(uri.rstrip("/")) :]

    def exists(child_uri: str) -> bool:
        from pyarrow import fs as pafs

        return bool(fs.get_file_info(path_of(child_uri)).type != pafs.FileType.NotFound)

    def read(child_uri: str) -> bytes | None:
        if not exists(child_uri):
            return None
        with fs.open_input_stream(path_of(child_uri)) as stream:
            return bytes(stream.read())

    return resolve_with(uri, read, exists)


def versions(names: Iterable[str]) -> list[str]:
    """Return the version directory names among ``names``, oldest first."""
    return sorted(n for n in names if is_version_name(n))


def to_prune(names: Iterable[str], current: str, history: Iterable[str], keep: int) -> list[str]:
    """Return the versions to remove after ``current`` was committed, oldest first.

    Kept: ``current`` and the newest ``keep - 1`` of ``history`` (versions that were current before).
    Removed: every other version older than ``current`` (pruned history and a killed rebuild's
    leftovers). Versions newer than ``current`` are never removed (only a concurrent writer makes those,
    and the snapshot lease rules that out; they are left for that writer).

    :param names: the entries under the snapshot root.
    :param current: the version just made current.
    :param history: previously current versions, newest first.
    :param keep: how many versions to keep, the current one included (>= 1).
    """
    if keep < 1:
        raise InvalidArgumentError(f"keep_versions must be at least 1, got {keep}")
    kept = {current, *list(history)[: keep - 1]}
    return [v for v in versions(names) if v < current and v not in kept]


def legacy_sibling(root: str, name: str) -> bool:
    """Whether ``name`` (an entry next to the root) is an old-layout ``U.staging-*`` or ``U.previous``."""
    base = root.rstrip("/").rsplit("/", 1)[-1]
    return name == base + ".previous" or name.startswith(base + ".staging-")


def legacy_entry(name: str) -> bool:
    """Whether ``name`` under the root belongs to the legacy layout (removed after the migrating commit)."""
    if name in (MANIFEST_NAME, "_SUCCESS", "._SUCCESS.crc", "." + MANIFEST_NAME + ".crc"):
        return True
    return name.startswith("partition=")


def pointer_temp(name: str) -> bool:
    """Whether ``name`` under the root is a pointer's temporary file left by a writer killed mid-commit."""
    return name.startswith(POINTER_NAME + ".tmp-")
