"""The documentation's generated tables: what the code and the measurements own, rendered at build time.

Directives (usable from reST and from MyST Markdown, as ``{kstate-errors}`` and so on):

* ``kstate-errors``: every error of :mod:`airflow_provider_kstate.errors` (one row a class: its base, whether
  a retry can help, its docstring), in the module's order. The table cannot drift from the code.
* ``kstate-metrics``: every metric of :data:`airflow_provider_kstate.metrics.METRICS` (name, type, unit,
  tags, when emitted).
* ``kstate-schemas``: every JSON Schema under ``docs/schemas/`` (its title, its description, the schema).
* ``kstate-provider-modules SECTION``: ``automodule`` of every module ``get_provider_info`` lists in SECTION.
* ``kstate-json PATH``: a measurement's JSON (a path from the repository root) as tables: the top level's
  scalars in one table, each list of records and each mapping of records in a table of its own, nested
  objects under their key's path; ``:keys: a,b`` keeps those top-level keys only, ``:depth: N`` (default 3)
  bounds the nesting shown as tables (deeper values are shown as compact JSON).

Nodes are built directly (no reST text is parsed), so the same directive renders alike in both parsers.
"""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path
from typing import Any

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "docs" / "schemas"
CELL_CHARS = 160


def _inline(text: str) -> list[nodes.Node]:
    """``text`` with its ``code`` spans (``x`` or ``` ``x`` ```) as literals, the rest as text."""
    out: list[nodes.Node] = []
    for i, part in enumerate(re.split(r"``?([^`]+)``?", text)):
        if i % 2:
            out.append(nodes.literal(part, part))
        elif part:
            out.append(nodes.Text(part))
    return out


def _cell(value: Any) -> nodes.entry:
    entry = nodes.entry()
    para = nodes.paragraph()
    if isinstance(value, nodes.Node):
        para += value
    else:
        para.extend(_inline(str(value)))
    entry += para
    return entry


def table(headers: list[str], rows: list[list[Any]], classes: tuple[str, ...] = ()) -> nodes.table:
    """A docutils table of ``headers`` and ``rows`` (strings, whose `code` spans become literals, or nodes)."""
    tab = nodes.table(classes=["kstate-table", *classes])
    group = nodes.tgroup(cols=len(headers))
    tab += group
    for _ in headers:
        group += nodes.colspec(colwidth=1)
    head = nodes.thead()
    group += head
    row = nodes.row()
    for h in headers:
        row += _cell(h)
    head += row
    body = nodes.tbody()
    group += body
    for values in rows:
        row = nodes.row()
        for value in values:
            row += _cell(value)
        body += row
    return tab


def _docstring(obj: Any) -> str:
    doc = inspect.getdoc(obj) or ""
    doc = re.sub(r":\w+:`~?([^`]+)`", r"``\1``", doc)  # :mod:`x` -> ``x``
    return " ".join(doc.split())


# ---------------------------------------------------------------------------------------------- errors


def error_classes() -> list[type]:
    """The error classes of ``errors.py`` in source order (``KStateError`` first)."""
    from airflow_provider_kstate import errors

    found = [
        obj
        for obj in vars(errors).values()
        if inspect.isclass(obj) and issubclass(obj, errors.KStateError) and obj.__module__ == errors.__name__
    ]
    return sorted(found, key=lambda cls: inspect.getsourcelines(cls)[1])


class ErrorsDirective(SphinxDirective):
    has_content = False

    def run(self) -> list[nodes.Node]:
        from airflow_provider_kstate import errors

        self.env.note_dependency(errors.__file__)
        rows = []
        for cls in error_classes():
            bases = ", ".join(f"`{b.__name__}`" for b in cls.__bases__ if b is not Exception)
            rows.append(
                [
                    f"`{cls.__name__}`",
                    bases or "`Exception`",
                    "yes" if cls.retryable else "no",
                    _docstring(cls),
                ]
            )
        retryable = [c.__name__ for c in error_classes() if c.retryable]
        fatal = [c.__name__ for c in error_classes() if not c.retryable]
        summary = nodes.paragraph()
        summary += nodes.strong(text=f"{len(rows)} errors")
        summary += nodes.Text(
            f", generated from airflow_provider_kstate/errors.py: {len(retryable)} retryable, {len(fatal)} not."
        )
        return [summary, table(["error", "base", "retryable", "what it means"], rows, ("kstate-errors",))]


# --------------------------------------------------------------------------------------------- metrics


class MetricsDirective(SphinxDirective):
    has_content = False

    def run(self) -> list[nodes.Node]:
        from airflow_provider_kstate import metrics

        self.env.note_dependency(metrics.__file__)
        rows = [[f"`{m.name}`", m.kind, m.unit, ", ".join(m.tags), m.when] for m in metrics.METRICS]
        return [table(["name", "type", "unit", "tags", "when emitted"], rows, ("kstate-metrics",))]


# --------------------------------------------------------------------------------------------- schemas


def schema_files() -> list[Path]:
    return sorted(SCHEMAS.rglob("*.schema.json"))


def _markdown_table(text: str) -> tuple[list[str], list[list[str]]]:
    """The first Markdown table of ``text``: its header and rows, links reduced to their text."""
    lines = [ln for ln in text.splitlines() if ln.startswith("|")]
    if len(lines) < 2:
        return [], []

    def cells(line: str) -> list[str]:
        line = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", line)
        return [c.strip() for c in line.strip().strip("|").split("|")]

    return cells(lines[0]), [cells(ln) for ln in lines[2:]]


class SchemasDirective(SphinxDirective):
    """The schemas' index (the table of ``docs/schemas/README.md``: who writes and reads each), then each
    schema file with its title, description and text."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        out: list[nodes.Node] = []
        readme = SCHEMAS / "README.md"
        if readme.is_file():
            self.env.note_dependency(str(readme))
            headers, index_rows = _markdown_table(readme.read_text())
            if headers:
                out.append(
                    nodes.paragraph(text="Who writes and reads each (the table of docs/schemas/README.md):")
                )
                out.append(table(headers, index_rows, ("kstate-schemas-index",)))
        rows = []
        bodies: list[nodes.Node] = []
        for path in schema_files():
            self.env.note_dependency(str(path))
            rel = path.relative_to(SCHEMAS).as_posix()
            schema = json.loads(path.read_text())
            title = str(schema.get("title", rel))
            rows.append([f"`{rel}`", title, " ".join(str(schema.get("description", "")).split())[:300]])
            rubric = nodes.rubric(text=rel)
            target_id = nodes.make_id("schema-" + rel)
            rubric["ids"].append(target_id)
            bodies.append(rubric)
            if schema.get("description"):
                bodies.append(nodes.paragraph(text=" ".join(str(schema["description"]).split())))
            text = json.dumps(schema, indent=2, sort_keys=False)
            block = nodes.literal_block(text, text, language="json")
            bodies.append(block)
        out.append(nodes.paragraph(text=f"{len(rows)} schema files (JSON Schema draft 2020-12):"))
        out.append(table(["file", "title", "description"], rows, ("kstate-schemas",)))
        out.extend(bodies)
        return out


# ---------------------------------------------------------------------------------------- measurements


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) >= 1e4 else f"{value:.4g}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}" if abs(value) >= 10_000 else str(value)
    if isinstance(value, str):
        text = " ".join(value.split())
    else:
        text = json.dumps(value, separators=(", ", ": "), default=str)
    return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 1] + "…"


def _records_table(records: list[dict[str, Any]], first: str | None = None) -> nodes.table:
    columns: list[str] = []
    for rec in records:
        for key in rec:
            if key not in columns and key != "_key":
                columns.append(key)
    headers = ([first] if first else []) + columns
    rows = []
    for rec in records:
        row = [_short(rec["_key"])] if first else []
        row += [_short(rec[c]) if c in rec else "" for c in columns]
        rows.append(row)
    return table(headers, rows, ("kstate-json",))


def render_json(value: Any, path: str, depth: int) -> list[nodes.Node]:
    """``value`` as tables: a mapping's scalars in one, each list of records and mapping of records in its
    own, the other nested mappings under their path (to ``depth`` levels; deeper ones as compact JSON)."""
    out: list[nodes.Node] = []
    if isinstance(value, list):
        if value and all(isinstance(v, dict) for v in value):
            out.append(_records_table(value))
        else:
            out.append(nodes.paragraph(text=_short(value)))
        return out
    if not isinstance(value, dict):
        out.append(nodes.paragraph(text=_short(value)))
        return out
    scalars = [[f"`{k}`", _short(v)] for k, v in value.items() if _scalar(v) or depth <= 0 or _flat_list(v)]
    if scalars:
        out.append(table(["field", "value"], scalars, ("kstate-json",)))
    for key, sub in value.items():
        if _scalar(sub) or depth <= 0 or _flat_list(sub):
            continue
        where = f"{path} / {key}" if path else str(key)
        out.append(nodes.rubric(text=where))
        if isinstance(sub, list) and all(isinstance(v, dict) for v in sub):
            out.append(_records_table(sub))
        elif (
            isinstance(sub, dict) and sub and all(isinstance(v, dict) for v in sub.values()) and _flatish(sub)
        ):
            out.append(_records_table([{"_key": k, **v} for k, v in sub.items()], first="key"))
        else:
            out.extend(render_json(sub, where, depth - 1))
    return out


def _flat_list(value: Any) -> bool:
    return isinstance(value, list) and all(_scalar(v) for v in value)


def _flatish(records: dict[str, dict[str, Any]]) -> bool:
    """Records mostly of scalars (one table reads better than a section per record)."""
    values = [v for rec in records.values() for v in rec.values()]
    return bool(values) and sum(_scalar(v) or _flat_list(v) for v in values) >= 0.6 * len(values)


class JsonDirective(SphinxDirective):
    required_arguments = 1
    option_spec = {"keys": directives.unchanged, "depth": directives.nonnegative_int}

    def run(self) -> list[nodes.Node]:
        rel = self.arguments[0]
        path = ROOT / rel
        if not path.is_file():
            raise self.error(f"kstate-json: no file {rel} (paths are from the repository root)")
        self.env.note_dependency(str(path))
        data = json.loads(path.read_text())
        keys = [k.strip() for k in self.options.get("keys", "").split(",") if k.strip()]
        if keys:
            missing = [k for k in keys if k not in data]
            if missing:
                raise self.error(f"kstate-json: {rel} has no key {missing}")
            data = {k: data[k] for k in keys}
        caption = nodes.paragraph(classes=["kstate-json-source"])
        caption += nodes.Text("Generated at build time from ")
        caption += nodes.literal(rel, rel)
        caption += nodes.Text(
            f" ({path.stat().st_size:,} bytes" + (f"; keys {', '.join(keys)}" if keys else "") + ")."
        )
        container = nodes.container(classes=["kstate-json-doc"])
        container += caption
        container.extend(render_json(data, "", self.options.get("depth", 3)))
        return [container]


# ------------------------------------------------------------------------------------ provider modules


class ProviderModulesDirective(SphinxDirective):
    """One section per module that ``get_provider_info`` lists under a section (``operators``, ``hooks``,
    ``sensors``, ``triggers``), each documented by ``automodule`` from its docstrings: a module another
    engineer adds to the provider's metadata (a unit test keeps that list complete) appears here by itself.
    reST pages only (the generated text is reST)."""

    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        from docutils.statemachine import StringList
        from sphinx.util.nodes import nested_parse_with_titles

        from airflow_provider_kstate import get_provider_info as info_module

        self.env.note_dependency(info_module.__file__)
        section = self.arguments[0]
        modules = [m for entry in info_module.get_provider_info()[section] for m in entry["python-modules"]]
        lines: list[str] = []
        for module in modules:
            title = f"``{module}``"
            lines += [title, "-" * len(title), "", f".. automodule:: {module}", ""]
        node = nodes.section()
        node.document = self.state.document
        nested_parse_with_titles(self.state, StringList(lines, source=f"get_provider_info: {section}"), node)
        return node.children


class JsonRestDirective(SphinxDirective):
    """``kstate-json-rest GLOB``: every JSON file of GLOB (from the repository root) that no page renders with
    ``kstate-json``, each under a rubric: a benchmark result added without a page of its own still shows."""

    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        docs = ROOT / "docs"
        rendered: set[str] = set()
        for page in docs.rglob("*.md"):
            if "_build" not in page.parts:
                rendered |= set(re.findall(r"^```\{kstate-json\} (\S+)", page.read_text(), re.M))
                self.env.note_dependency(str(page))
        out: list[nodes.Node] = []
        rest = [
            p for p in sorted(ROOT.glob(self.arguments[0])) if p.relative_to(ROOT).as_posix() not in rendered
        ]
        if not rest:
            out.append(nodes.paragraph(text="Every result of this folder is rendered on a page of its own."))
        for path in rest:
            rel = path.relative_to(ROOT).as_posix()
            self.env.note_dependency(str(path))
            rubric = nodes.rubric(text=rel)
            rubric["ids"].append(nodes.make_id("json-" + rel))
            caption = nodes.paragraph()
            caption += nodes.Text("Generated at build time from ")
            caption += nodes.literal(rel, rel)
            caption += nodes.Text(
                " (what it was measured under: its own fields below, such as broker, cores, load)."
            )
            out += [rubric, caption, *render_json(json.loads(path.read_text()), "", 3)]
        return out


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("kstate-errors", ErrorsDirective)
    app.add_directive("kstate-metrics", MetricsDirective)
    app.add_directive("kstate-schemas", SchemasDirective)
    app.add_directive("kstate-json", JsonDirective)
    app.add_directive("kstate-provider-modules", ProviderModulesDirective)
    app.add_directive("kstate-json-rest", JsonRestDirective)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
