"""One shape for every document the provider writes where another process reads it (the control records,
the lease records, the snapshot's pointer and manifest, the check and rebuild reports, the Spark
applications' reports, the doctor's verdict, the progress documents, the plan): a typed model, JSON with a
version, validated on read, published as a JSON Schema under ``docs/schemas/``.

Every document is a :class:`Document` (pydantic): ``to_dict()`` / ``from_dict()`` for the JSON-safe dict
(what XCom carries), ``to_json()`` / ``from_json()`` for the text; reading validates (types, required
fields, the version) and raises the document's own error (``read_error``), naming what is wrong.

``python -m airflow_provider_kstate.documents`` writes the schemas (``--check``: fail when the committed
ones differ from the models; a unit test runs it). No Airflow import: the domain, the client piece and the
Spark applications use it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    PrivateAttr,
    ValidationError,
    ValidatorFunctionWrapHandler,
    model_validator,
)

from airflow_provider_kstate.errors import KStateError

D = TypeVar("D", bound="Document")

#: Where the schemas are published (the repository's ``docs/schemas``).
SCHEMA_DIR = Path(__file__).resolve().parent.parent / "docs" / "schemas"
#: The ``$id`` base of the published schemas.
SCHEMA_BASE = "https://github.com/example-org/airflow-provider-kstate/blob/main/docs/schemas/"


class Document(BaseModel):
    """The base of every wire document.

    Subclasses set ``schema_name`` (the schema's file under ``docs/schemas/``, e.g. ``control/command``)
    and ``read_error`` (the domain error raised when a document cannot be read). Unknown fields are
    ignored on read (a newer writer may add fields); a missing or mistyped required field fails.
    """

    # defer_build: a model's validator is built at its first use, not at import (DAG parse imports the plan).
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True, defer_build=True)

    schema_name: ClassVar[str] = ""
    read_error: ClassVar[type[Exception]] = KStateError
    #: Fields a document must carry when read (its kind, its version): defaulted when made in Python,
    #: refused when absent on read, required in the schema.
    identity: ClassVar[tuple[str, ...]] = ()
    #: Write the JSON text with sorted keys (documents whose bytes other implementations compare).
    sort_keys: ClassVar[bool] = False
    #: Read in pydantic's strict mode (no coercion: a string epoch is refused); documents made in Python
    #: are coerced as usual.
    read_strict: ClassVar[bool] = False

    def to_dict(self) -> dict[str, Any]:
        """The JSON-safe dict of the document (what XCom carries)."""
        return self.model_dump(mode="json", by_alias=True)

    def to_json(self, indent: int | None = None) -> str:
        """The document as JSON text: compact, or indented by ``indent`` spaces (as ``json.dumps`` indents:
        the files the store writes keep their layout)."""
        if indent is None:
            return json.dumps(self.to_dict(), separators=(",", ":"), sort_keys=self.sort_keys)
        return json.dumps(self.to_dict(), indent=indent, sort_keys=self.sort_keys)

    @classmethod
    def what(cls) -> str:
        """The document's name in messages (``Progress`` for ``ProgressDocument``)."""
        return cls.__name__.removesuffix("Document") or cls.__name__

    @classmethod
    def from_dict(cls: type[D], data: Any) -> D:
        """Read (and validate) a document from its dict; ``read_error`` names what is wrong."""
        if isinstance(data, cls):
            return data
        if not isinstance(data, Mapping):
            raise cls.read_error(f"not a {cls.what()} document: {str(data)[:200]!r}")
        missing = [name for name in cls.identity if name not in data]
        if missing:
            raise cls.read_error(f"not a valid {cls.what()} document: {missing[0]}: Field required")
        try:
            return cls.model_validate(dict(data), strict=cls.read_strict)
        except ValidationError as exc:
            raise cls.read_error(f"not a valid {cls.what()} document: {_first(exc)}") from None

    @classmethod
    def from_json(cls: type[D], text: str | bytes) -> D:
        """Read (and validate) a document from its JSON text."""
        try:
            data = json.loads(text)
        except (ValueError, UnicodeDecodeError) as exc:
            raise cls.read_error(f"not a {cls.what()} document: not JSON ({exc})") from None
        return cls.from_dict(data)

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        """The document's JSON Schema (draft 2020-12), with its ``$id`` and title."""
        schema = cls.model_json_schema(by_alias=True, mode="serialization")
        derived = {n for n, p in schema.get("properties", {}).items() if p.get("readOnly")}
        if derived:  # computed fields: always written, ignored on read, so not required of a document
            schema["required"] = [n for n in schema.get("required", []) if n not in derived]
            if not schema["required"]:
                del schema["required"]
        if cls.identity:  # required on read: no reader default
            rest = [name for name in schema.get("required", []) if name not in cls.identity]
            schema["required"] = [*cls.identity, *rest]
            for name in cls.identity:
                schema["properties"][name].pop("default", None)
        return {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"{SCHEMA_BASE}{cls.schema_name}.schema.json",
            **schema,
        }


class OrderedDocument(Document):
    """A document whose dict holds the fields it was read or built with, in that order, and no others (its
    version field :attr:`first` always, first): one read and written again is the same JSON, byte for byte,
    whichever writer ordered or left out its optional fields. A field set later (``model_copy(update=...)``)
    comes after them."""

    #: The version field: always written, first.
    first: ClassVar[str] = "format"

    _order: tuple[str, ...] = PrivateAttr(default=())

    @model_validator(mode="wrap")
    @classmethod
    def _keep_order(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        document = handler(data)
        if isinstance(data, Mapping) and isinstance(document, OrderedDocument):
            document._order = tuple(data)
        return document

    def to_dict(self) -> dict[str, Any]:
        values = self.model_dump(mode="json", by_alias=True, exclude_unset=True)
        out = {self.first: getattr(self, self.first)}
        for name in (*self._order, *values):
            if name in values and name not in out:
                out[name] = values[name]
        return out


def _first(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(p) for p in error.get("loc", ())) or "document"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{where}: {error.get('msg')}{more}"


def documents() -> Iterator[type[Document]]:
    """Every published document class (each with a ``schema_name``), once the modules defining them are
    imported (:data:`MODULES`)."""
    import importlib

    for module in MODULES:
        importlib.import_module(module)
    seen: set[type[Document]] = set()
    stack = list(Document.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if cls.schema_name and cls not in seen:
            seen.add(cls)
            yield cls


#: The modules that define published documents (imported by :func:`documents`).
MODULES: tuple[str, ...] = (
    "airflow_provider_kstate.client_piece.protocol",
    "airflow_provider_kstate.lease_rules",
    "airflow_provider_kstate.doctor.verdict",
    "airflow_provider_kstate.increase.events",
    "airflow_provider_kstate.increase.plan",
    # the store and the Spark applications (docs/schemas/store/)
    "airflow_provider_kstate.store.contract",
    "airflow_provider_kstate.store.layout",
    "airflow_provider_kstate.store.manifest",
    "airflow_provider_kstate.store.results",
    "airflow_provider_kstate.spark_apps.read_progress",
)


def schemas() -> dict[str, dict[str, Any]]:
    """``{relative path: schema}`` of every published document."""
    return {
        f"{cls.schema_name}.schema.json": cls.json_schema()
        for cls in sorted(documents(), key=lambda c: c.schema_name)
    }


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, sort_keys=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write the schemas under ``docs/schemas`` (``--check``: compare only; exit 1 naming the differences)."""
    parser = argparse.ArgumentParser(prog="python -m airflow_provider_kstate.documents")
    parser.add_argument("--check", action="store_true", help="fail when the committed schemas differ")
    parser.add_argument("--dir", type=Path, default=SCHEMA_DIR)
    args = parser.parse_args(argv)
    stale = []
    for name, schema in schemas().items():
        path = args.dir / name
        text = render(schema)
        if path.exists() and path.read_text() == text:
            continue
        stale.append(name)
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    if args.check and stale:
        print(
            f"schemas differ from the models: {stale}; run python -m airflow_provider_kstate.documents",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    # Run as ``python -m``, this file is ``__main__``: its Document is not the one the documents subclass.
    from airflow_provider_kstate.documents import main as _main

    raise SystemExit(_main())
