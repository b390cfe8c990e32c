"""The snapshot manifest ``_kstate_manifest.json``.

No Spark and no Airflow here: the Airflow side reads manifests with this module, the Spark applications
write them. The manifest is written LAST into a snapshot, so a snapshot without one is incomplete. Each
partition's rows are summed by the digest of :mod:`airflow_provider_kstate.store.digest`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Annotated, Any, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StringConstraints,
    ValidationError,
    field_serializer,
    field_validator,
)
from pydantic.json_schema import JsonDict

from airflow_provider_kstate.documents import Document
from airflow_provider_kstate.errors import SnapshotError
from airflow_provider_kstate.store.digest import DIGEST_ALGORITHM
from airflow_provider_kstate.store.uri import filesystem as uri_filesystem
from airflow_provider_kstate.store.uri import join

MANIFEST_NAME = "_kstate_manifest.json"
FORMAT: Final = "kstate-snapshot/1"
PARTITIONER: Final = "murmur2"

_HEX16 = re.compile(r"^[0-9a-f]{16}$")


class ManifestError(SnapshotError, ValueError):
    """The manifest is missing, unreadable, not JSON, or not a valid ``kstate-snapshot/1`` manifest."""


# --------------------------------------------------------------------------------------------- manifest

#: A count or an offset: an integer (not a boolean, not a float), never negative.
Count = Annotated[int, Field(strict=True, ge=0)]
#: A partition digest: 16 lower-case hex digits.
Digest = Annotated[str, StringConstraints(strict=True, pattern=_HEX16.pattern)]
#: A data file's name inside its ``partition=N`` directory.
FileName = Annotated[str, StringConstraints(min_length=1, pattern=r"^[^/]+$")]
_STATS_FIELDS = ("start_offset", "end_offset", "rows", "digest", "files")


def _manifest_schema(schema: JsonDict) -> None:
    schema["description"] = (
        "Written last into a snapshot version: the changelog topic and partition count the rows are placed "
        "for, and per partition the changelog offsets it reflects, its rows, their digest and its data "
        "files. A reader keeps fields it does not know."
    )
    schema["required"] = [
        "format",
        "topic",
        "partitions",
        "partitioner",
        "digest_algorithm",
        "partition_stats",
    ]


class PartitionStats(BaseModel):
    """The state of one snapshot partition: changelog offsets it reflects, its rows and their digest.

    Positional like the dataclass it was: ``PartitionStats(start_offset, end_offset, rows, digest, files)``.

    :param start_offset: the changelog's log start offset when the snapshot was built.
    :param end_offset: exclusive: the offset to resume the changelog from.
    :param rows: the number of live rows.
    :param digest: the partition digest, 16 hex digits.
    :param files: the partition's data files, ``{file name: size in bytes}`` (optional: manifests written
        before it was recorded have None, and the fast check then cannot compare files by name and size).
    """

    model_config = ConfigDict(
        frozen=True,
        extra="ignore",
        title="one partition of a kstate snapshot",
        json_schema_extra={
            "description": "The changelog offsets the partition reflects, its rows and digest."
        },
    )

    start_offset: Count = Field(description="the changelog's log start offset when the snapshot was built")
    end_offset: Count = Field(description="exclusive: the offset to resume the changelog from")
    rows: Count = Field(description="the number of live rows")
    digest: Digest = Field(description=f"the rows' digest ({DIGEST_ALGORITHM}), 16 lower-case hex digits")
    files: dict[FileName, Count] | None = Field(
        default=None,
        exclude_if=lambda files: files is None,
        json_schema_extra={"propertyNames": {"minLength": 1, "pattern": "^[^/]+$"}},
        description="the data files, {file name: size in bytes}, sorted by name; absent in manifests "
        "written before files were recorded",
    )

    def __init__(self, *args: Any, **data: Any) -> None:
        data.update(zip(_STATS_FIELDS[: len(args)], args, strict=True))
        super().__init__(**data)

    @field_serializer("files")
    def _sorted(self, files: dict[str, int] | None) -> dict[str, int] | None:
        return None if files is None else dict(sorted(files.items()))

    def to_dict(self) -> dict[str, Any]:
        """The entry as the manifest stores it."""
        return self.model_dump(mode="json")


class Manifest(Document):
    """A parsed, validated ``kstate-snapshot/1`` manifest (document ``store/manifest``).

    Read with :meth:`from_dict` / :func:`loads_manifest` (:class:`ManifestError` names what is wrong);
    ``to_json(indent=2)`` is the exact ``_kstate_manifest.json``. Fields the reader does not know are
    kept (forward compatibility) and written after the known ones.

    :param topic: the changelog topic.
    :param topic_id: the changelog's topic id (KIP-516) the offsets were taken from; None: unknown (written
        before ids were recorded, or unreadable then).
    :param partitions: the snapshot's partition count (the layout: rows sit in ``partition_for(key, n)``).
    :param partition_stats: per partition, :class:`PartitionStats`; one entry for every partition.
    :param written_at: ISO-8601 UTC time the manifest was written (now, when written empty).
    :param writer: the writing application: ``app``, ``version``, ``spark``.
    :param digest_algorithm: the digest's name; only :data:`DIGEST_ALGORITHM` is understood.

    :attr:`version` is the snapshot version the manifest was read from (the pointer's, see :mod:`.layout`);
    set by :func:`~.fast_check.load_manifest` (:meth:`at_version`), never stored in the manifest itself.
    """

    model_config = ConfigDict(
        extra="allow",
        title="kstate snapshot manifest (_kstate_manifest.json)",
        json_schema_extra=_manifest_schema,
    )
    schema_name = "store/manifest"
    read_error = ManifestError

    format: Literal["kstate-snapshot/1"] = Field(default=FORMAT, description="the manifest's version")
    topic: Annotated[str, Field(strict=True)] = Field(description="the changelog topic")
    topic_id: Annotated[str, Field(strict=True)] | None = Field(
        default=None,
        exclude_if=lambda topic_id: not topic_id,
        description="the changelog's KIP-516 topic id when the snapshot was built (Kafka's base64 text); "
        "absent: unknown (a manifest written before ids were recorded, or a broker that did not say)",
    )
    partitions: Annotated[int, Field(strict=True, gt=0)] = Field(
        description="the partition count the rows are placed for (murmur2(key) % partitions)"
    )
    partitioner: Literal["murmur2"] = PARTITIONER
    digest_algorithm: Literal["sum64-xxh64-spark-seed42"] = DIGEST_ALGORITHM
    written_at: str = Field(default="", description="when it was written, ISO-8601 UTC")
    writer: dict[str, str] = Field(
        default_factory=dict, description="the writing application: app, version, spark"
    )
    partition_stats: dict[int, PartitionStats] = Field(
        description="one entry per partition 0..partitions-1, keyed by the partition number",
        json_schema_extra={"propertyNames": {"pattern": "^[0-9]+$"}},
    )

    _version: str | None = PrivateAttr(default=None)

    @field_validator("writer", mode="before")
    @classmethod
    def _writer_as_text(cls, writer: Any) -> Any:
        if not isinstance(writer, Mapping):
            return writer
        return {str(k): str(v) for k, v in writer.items()}

    @field_validator("written_at", mode="before")
    @classmethod
    def _written_at_as_text(cls, written_at: Any) -> str:
        return str(written_at)

    @field_serializer("written_at")
    def _written_now(self, written_at: str) -> str:
        return written_at or utc_now()

    @property
    def version(self) -> str | None:
        """The snapshot version the manifest was read from (None: the legacy layout, or not read)."""
        return self._version

    def at_version(self, version: str | None) -> Manifest:
        """Return this manifest as read from snapshot version ``version``."""
        copy = self.model_copy()
        copy._version = version
        return copy

    @property
    def extra(self) -> dict[str, Any]:
        """The top-level fields the reader does not know, as read."""
        return dict(self.model_extra or {})

    @property
    def end_offsets(self) -> dict[int, int]:
        """The offsets to resume the changelog from, per partition."""
        return {p: s.end_offset for p, s in sorted(self.partition_stats.items())}

    @property
    def rows(self) -> int:
        """The total number of live rows."""
        return sum(s.rows for s in self.partition_stats.values())

    def to_dict(self) -> dict[str, Any]:
        """The manifest as the exact JSON object stored in ``_kstate_manifest.json`` (partitions in order)."""
        out = super().to_dict()
        out["partition_stats"] = {
            str(p): out["partition_stats"][str(p)] for p in sorted(self.partition_stats)
        }
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str = "manifest") -> Manifest:
        """Validate a decoded manifest document.

        :param data: the decoded JSON.
        :param where: a name for error messages (the manifest's URI).
        :raises ManifestError: on a wrong format, a missing or mistyped field, or inconsistent partitions.
        """
        if not isinstance(data, Mapping):
            raise ManifestError(f"{where}: the manifest must be a JSON object, got {type(data).__name__}")
        _check_header(data, where)
        try:
            manifest = cls.model_validate(data)
        except ValidationError as exc:
            raise ManifestError(_explain(data, where) or f"{where}: {_first_error(exc)}") from None
        _check_values(manifest, where)
        return manifest


def utc_now() -> str:
    """Return the current UTC time as ``2026-11-22T04:00:00Z``."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    return f"{'.'.join(str(p) for p in error['loc'])}: {error['msg']}"


# What a manifest the model refuses gets as its message: the first problem, named as the readers always
# named it (the model's rules and these agree; test_manifest checks the schema refuses each one too).


def _require(doc: Mapping[str, Any], name: str, kind: type | tuple[type, ...], where: str) -> Any:
    if name not in doc:
        raise ManifestError(f"{where}: field {name!r} is missing")
    value = doc[name]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ManifestError(f"{where}: field {name!r} has the wrong type ({type(value).__name__}: {value!r})")
    return value


def _explain_stats(p: Any, raw: Any, where: str) -> None:
    if not isinstance(p, str) or not re.fullmatch(r"\d+", p):
        raise ManifestError(f"{where}: partition_stats key {p!r} is not a partition number")
    if not isinstance(raw, Mapping):
        raise ManifestError(f"{where}: partition_stats[{p!r}] is not an object")
    at = f"{where}: partition_stats[{p!r}]"
    start, end, rows = (_require(raw, name, int, at) for name in ("start_offset", "end_offset", "rows"))
    digest = _require(raw, "digest", str, at)
    _explain_files(raw.get("files"), at)
    if not 0 <= start <= end:
        raise ManifestError(_offsets_message(at, start, end))
    if rows < 0:
        raise ManifestError(f"{at}: rows must not be negative, got {rows}")
    if not _HEX16.match(digest):
        raise ManifestError(f"{at}: digest must be 16 lower-case hex digits, got {digest!r}")


def _offsets_message(at: str, start: int, end: int) -> str:
    return f"{at}: offsets must satisfy 0 <= start_offset <= end_offset, got start_offset={start} end_offset={end}"


def _explain_files(raw: Any, at: str) -> None:
    """Name what is wrong with the optional ``files`` of a partition entry: ``{file name: size}``."""
    if raw is None:
        return
    if not isinstance(raw, Mapping):
        raise ManifestError(f"{at}: 'files' must be an object of file name to size")
    for name, size in raw.items():
        if not isinstance(name, str) or not name or "/" in name:
            raise ManifestError(f"{at}: 'files' has an invalid file name {name!r}")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise ManifestError(f"{at}: 'files'[{name!r}] must be a size in bytes, got {size!r}")


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


def _explain(doc: Mapping[str, Any], where: str) -> str | None:
    """Return the message of the first problem of a manifest the model refused (None: none found here)."""
    try:
        _require(doc, "topic", str, where)
        if _require(doc, "partitions", int, where) <= 0:
            raise ManifestError(f"{where}: partitions must be positive, got {doc['partitions']}")
        for p, raw in _require(doc, "partition_stats", Mapping, where).items():
            _explain_stats(p, raw, where)
        if not isinstance(doc.get("topic_id", ""), (str, type(None))):
            raise ManifestError(f"{where}: field 'topic_id' must be a string, got {doc['topic_id']!r}")
        if not isinstance(doc.get("writer", {}), Mapping):
            raise ManifestError(f"{where}: field 'writer' must be an object")
    except ManifestError as exc:
        return str(exc)
    return None


def _check_values(manifest: Manifest, where: str) -> None:
    """What the model's types cannot say: ordered offsets, and one entry for each partition."""
    for p, stats in manifest.partition_stats.items():
        if stats.start_offset > stats.end_offset:
            at = f"{where}: partition_stats['{p}']"
            raise ManifestError(_offsets_message(at, stats.start_offset, stats.end_offset))
    wanted = set(range(manifest.partitions))
    if set(manifest.partition_stats) != wanted:
        missing = sorted(wanted - set(manifest.partition_stats))
        extra = sorted(set(manifest.partition_stats) - wanted)
        raise ManifestError(
            f"{where}: partition_stats must cover partitions 0..{manifest.partitions - 1} exactly "
            f"(missing {missing}, extra {extra})"
        )


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
    return Manifest.from_dict(doc, where)


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
    data = manifest.to_json(indent=2).encode()
    with filesystem.open_output_stream(root.rstrip("/") + "/" + MANIFEST_NAME) as stream:
        stream.write(data)
    return manifest_uri(snapshot_uri)
