"""The contract between the operators and the Spark applications: command line, config file, report file.

Every application is called as ``APP --kafka-config-file CFG --topic T --snapshot-uri U --report-file R
[its own options]``:

* ``CFG`` is a JSON object of librdkafka settings, secrets included (mode 0600, never on a command line
  or in a log). A path the driver cannot see is looked up by its base name in the driver's working
  directory, where ``spark-submit --files`` puts shipped files in cluster deploy mode.
* ``R`` is where the application writes its JSON report: a local path, or a URI on cluster storage a
  cluster-mode driver can reach (written atomically on local disks).
* A failed application writes an :class:`AppFailure` (``{"format": "kstate-app-failure/1", "ok": false,
  "error": "...", "error_code": "..."}``, schema ``docs/schemas/store/app-failure.schema.json``) and exits 2.
  The message is the application's one error line; the :class:`ErrorCode` says why, and the operators map
  each code to the task's error in one place (``store/submission.py`` ``APP_ERRORS``).
* An application that ran writes its report: the deep check a
  :class:`~airflow_provider_kstate.store.results.CheckReport`, the rebuild a
  :class:`~airflow_provider_kstate.store.results.RebuildReport`.

The per-partition verdict of a check is the report field :data:`FAILED_FIELD`.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import os
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal

from pydantic import ConfigDict, Field, model_validator

from airflow_provider_kstate import errors
from airflow_provider_kstate.documents import Document
from airflow_provider_kstate.enums import StrEnum
from airflow_provider_kstate.errors import SnapshotError, SparkAppInputError
from airflow_provider_kstate.store import uri as uris

#: The report field listing the partitions a check found bad.
FAILED_FIELD = "failed_partitions"
#: librdkafka settings that are callbacks: in the config file they are ``"module:function"`` strings.
CALLBACK_KEYS = ("oauth_cb", "error_cb", "throttle_cb", "stats_cb", "logger")
#: Default read timeout per changelog partition, seconds.
DEFAULT_TIMEOUT = 120.0


class AppError(SparkAppInputError):
    """An application input is wrong (config, snapshot, topic); the message is the report's ``error``."""


class AppReportError(SnapshotError, ValueError):
    """A Spark application's report (its failure, a check's or a rebuild's report) is not a valid document."""


#: How the applications' error line starts when they refuse a changelog that is not compacted (their
#: failure report says :attr:`ErrorCode.NOT_COMPACTED`).
NOT_COMPACTED = "changelog not compacted"
#: The start of the error a Spark app reports when the broker's end offsets disagree with what its reads
#: reached (its failure report says :attr:`ErrorCode.OFFSET_BOUNDS`).
OFFSET_BOUNDS = "broker offsets disagree with its reads"
#: The failure report's version.
FAILURE_FORMAT: Final = "kstate-app-failure/1"


class ErrorCode(StrEnum):
    """Why a Spark application failed: its failure report's ``error_code``."""

    #: An input is wrong: the Kafka config file, an argument, a layout the snapshot does not have.
    BAD_INPUT = "bad-input"
    #: The snapshot (its pointer or manifest) is missing, unreadable or invalid.
    BAD_SNAPSHOT = "bad-snapshot"
    #: The changelog is not compacted and retention moved its log start (``--allow-non-compacted``).
    NOT_COMPACTED = "not-compacted"
    #: The broker's end offsets disagree with where its fetches end: nothing was read or published.
    OFFSET_BOUNDS = "offset-bounds"
    #: The changelog could not be read: broker unreachable, topic missing, a read timed out.
    CHANGELOG_UNREADABLE = "changelog-unreadable"
    #: Stored offsets (a query's checkpoint) were taken from a topic since deleted and created again (its
    #: topic id differs): nothing was read or written.
    TOPIC_RECREATED = "topic-recreated"
    #: Stored offsets (a query's checkpoint, a group's commits) lie beyond the topic's end: nothing was
    #: read or written.
    STORED_OFFSETS = "stored-offsets"
    #: Anything else (a Spark or Py4J error, a bug): the message is its first line.
    INTERNAL = "internal"


#: The code of each domain error an application fails with, the most specific first (``OffsetBoundError``
#: is a ``ChangelogReadError`` too).
_CODES: tuple[tuple[type[BaseException], ErrorCode], ...] = (
    (errors.TopicRecreatedError, ErrorCode.TOPIC_RECREATED),
    (errors.StoredOffsetsError, ErrorCode.STORED_OFFSETS),
    (errors.NotCompactedChangelogError, ErrorCode.NOT_COMPACTED),
    (errors.BrokerDeviationError, ErrorCode.OFFSET_BOUNDS),
    (errors.ChangelogReadError, ErrorCode.CHANGELOG_UNREADABLE),
    (errors.SparkAppInputError, ErrorCode.BAD_INPUT),
    (errors.SnapshotError, ErrorCode.BAD_SNAPSHOT),
)


def error_code(exc: BaseException) -> ErrorCode:
    """Return the code of the error an application fails with (:attr:`ErrorCode.INTERNAL` for any other)."""
    return next((code for cls, code in _CODES if isinstance(exc, cls)), ErrorCode.INTERNAL)


class AppFailure(Document):
    """The report of a Spark application that could not do its job (it exits 2).

    A report written before error codes existed has none: its code is read from how its message starts
    (:data:`NOT_COMPACTED`, :data:`OFFSET_BOUNDS`), else :attr:`ErrorCode.INTERNAL`.
    """

    model_config = ConfigDict(
        title="kstate Spark application failure report",
        json_schema_extra={
            "description": "What a kstate Spark application (rebuild.py, deep_check.py) writes to its "
            "--report-file when it cannot do its job (exit code 2): its one-line error and why."
        },
    )
    schema_name = "store/app-failure"
    read_error = AppReportError

    format: Literal["kstate-app-failure/1"] = Field(
        default=FAILURE_FORMAT, description="the report's version"
    )
    ok: Literal[False] = False
    error: str = Field(min_length=1, description="the application's one-line error")
    error_code: ErrorCode = Field(default=ErrorCode.INTERNAL, description="why it failed")

    @model_validator(mode="before")
    @classmethod
    def _older(cls, data: Any) -> Any:
        if not isinstance(data, Mapping) or "error_code" in data:
            return data
        out = dict(data)
        if "error" not in out and out.get("message"):  # an application of the caller's own
            out["error"] = out["message"]
        out["error_code"] = _code_of_message(str(out.get("error") or ""))
        return out


def _code_of_message(error: str) -> ErrorCode:
    """The code of a failure report written before error codes existed."""
    if error.startswith(NOT_COMPACTED):
        return ErrorCode.NOT_COMPACTED
    return ErrorCode.OFFSET_BOUNDS if OFFSET_BOUNDS in error else ErrorCode.INTERNAL


def app_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """Return a parser with the options every kstate Spark application takes.

    :param prog: the application's file name.
    :param description: what it does.
    """
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument(
        "--kafka-config-file", required=True, help="JSON dict of librdkafka settings (secret)"
    )
    parser.add_argument("--topic", required=True, help="the compacted changelog topic")
    parser.add_argument("--snapshot-uri", required=True, help="snapshot root: local path or filesystem URI")
    parser.add_argument("--report-file", required=True, help="where to write the JSON report (path or URI)")
    parser.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT, help="read timeout per partition, s"
    )
    parser.add_argument(
        "--allow-non-compacted",
        action="store_true",
        help="accept a changelog that is not compacted although retention moved its log start (a risk)",
    )
    return parser


def command_line(config_file: str, topic: str, snapshot_uri: str, report_file: str, *extra: str) -> list[str]:
    """Return an application's arguments (the inverse of :func:`app_parser`)."""
    return [
        "--kafka-config-file",
        config_file,
        "--topic",
        topic,
        "--snapshot-uri",
        snapshot_uri,
        "--report-file",
        report_file,
        *extra,
    ]


def _config_path(path: str) -> str:
    if os.path.exists(path):
        return path
    shipped = os.path.basename(path)  # spark-submit --files: the driver's working directory
    return shipped if os.path.exists(shipped) else path


def load_kafka_config(path: str) -> dict[str, Any]:
    """Read the librdkafka config file (a JSON object) without ever echoing its content.

    :param path: the file (or, for a shipped file, its base name in the working directory).
    :raises AppError: when it is unreadable, not JSON or has no ``bootstrap.servers``.
    """
    path = _config_path(path)
    try:
        with open(path, encoding="utf-8") as fh:
            conf = json.load(fh)
    except OSError as exc:
        raise AppError(f"cannot read the Kafka config file {path}: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise AppError(f"the Kafka config file {path} is not valid JSON (line {exc.lineno})") from exc
    if not isinstance(conf, dict) or "bootstrap.servers" not in conf:
        raise AppError(f"the Kafka config file {path} must be a JSON object with 'bootstrap.servers'")
    return conf


def callback_name(value: Any) -> str | None:
    """Return ``"module:function"`` for a module-level function, None for anything not importable so."""
    if not inspect.isfunction(value) or "<" in value.__qualname__:
        return None
    return f"{value.__module__}:{value.__qualname__}"


def resolve_callback(name: str) -> Callable[..., Any]:
    """Import ``"module:function"`` (e.g. on an executor) and return the function.

    :raises AppError: when it cannot be imported.
    """
    module, _, attr = name.partition(":")
    try:
        target: Any = importlib.import_module(module)
        for part in attr.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError, ValueError) as exc:
        raise AppError(f"cannot import the Kafka callback {name!r}: {exc}") from exc
    if not callable(target):
        raise AppError(f"the Kafka callback {name!r} is not callable")
    return target


def portable_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """Return the config as the file carries it: callbacks by name, unnamed callables dropped."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        if not callable(value):
            out[key] = value
        elif key in CALLBACK_KEYS and callback_name(value):
            out[key] = callback_name(value)
    return out


def live_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """Return the config for a librdkafka client: callbacks named ``"module:function"`` imported."""
    out = dict(config)
    for key in CALLBACK_KEYS:
        if isinstance(out.get(key), str) and ":" in out[key]:
            out[key] = resolve_callback(out[key])
    return out


def write_report(path: str, report: Document | Mapping[str, Any]) -> None:
    """Write the JSON report: atomically (a temporary file renamed) on a local disk, else one object."""
    text = report.to_json(indent=2) if isinstance(report, Document) else json.dumps(report, indent=2)
    data = text.encode()
    if uris.is_local(path):
        local = str(uris.local_path(path))
        tmp = f"{local}.tmp-{os.getpid()}"
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, local)
        return
    fs, where = uris.filesystem(path)
    with fs.open_output_stream(where) as out:
        out.write(data)


def fail(
    report_file: str,
    message: str,
    echo: Callable[[str], None],
    prefix: str,
    code: ErrorCode = ErrorCode.INTERNAL,
) -> int:
    """Echo the one-line error, write the :class:`AppFailure` report, return the exit code 2.

    :param code: why (see :func:`error_code`).
    """
    echo(f"{prefix}: error: {message}")
    try:
        write_report(report_file, AppFailure(error=message, error_code=code))
    except OSError:
        pass
    return 2


def load_report(path: str, storage_options: Mapping[str, Any] | None = None) -> Any:
    """Return the decoded JSON of a report file (path or URI).

    :raises FileNotFoundError: when there is none; :raises ValueError: when it is not JSON.
    """
    fs, where = uris.filesystem(path, storage_options)
    try:
        with fs.open_input_stream(where) as stream:
            raw = stream.read()
    except OSError as exc:
        if isinstance(exc, FileNotFoundError) or "not found" in str(exc).lower():
            raise FileNotFoundError(path) from exc
        raise
    return json.loads(raw)


def reported_failure(path: str, storage_options: Mapping[str, Any] | None = None) -> AppFailure | None:
    """Return the :class:`AppFailure` a failed application wrote, None when it wrote none (or another
    document: the caller then reports spark-submit's own error)."""
    try:
        report = load_report(path, storage_options)
    except (OSError, ValueError):
        return None
    try:
        return AppFailure.from_dict(report)
    except AppReportError:
        return None


def reported_error(path: str, storage_options: Mapping[str, Any] | None = None) -> str | None:
    """Return the ``error`` a failed application wrote in its report, if it wrote one."""
    failure = reported_failure(path, storage_options)
    return failure.error if failure is not None else None


def failed_partitions(report: Mapping[str, Any]) -> list[int]:
    """Return the partitions a check report marks as failed, sorted.

    Per-partition entries decide when present; else the report's :data:`FAILED_FIELD`.
    """
    entries = report.get("partitions") or {}
    if entries:
        return sorted(int(p) for p, e in entries.items() if not e.get("ok", False))
    listed = report.get(FAILED_FIELD) or []
    return sorted(int(p) for p in listed)
