"""Sphinx configuration of the airflow-provider-kstate documentation (``make docs``).

The layout follows the Apache Airflow providers' documentation: getting started, guides, reference (from the
docstrings, by autodoc), the changelog. The guides are Markdown (myst-parser); the tables that code owns (the
errors, the metrics, the JSON Schemas, the measurements' JSON) are generated at build time by the local
extension ``_ext/kstate_docs.py``. ``make docs`` builds with warnings as errors.
"""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path[:0] = [str(ROOT), str(DOCS / "_ext")]

from airflow_provider_kstate import __version__  # noqa: E402

project = "airflow-provider-kstate"
author = "The airflow-provider-kstate authors"
copyright = "2026, the airflow-provider-kstate authors"  # noqa: A001
release = __version__
version = __version__

extensions = [
    "sphinx.ext.autodoc",
    "myst_parser",
    "kstate_docs",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = [
    "_build",
    "_ext",
    "examples",
    # Another engineer regenerates docs/schemas/ (python -m airflow_provider_kstate.documents): its README is
    # included by reference/schemas.md, the schemas rendered by the kstate-schemas directive.
    "schemas",
    # The measurement folders' own notes (written by the tests and benches beside their JSON) are included
    # by the measurement pages, not pages of their own.
    "measurements/*/*.md",
]

# Markdown: headings get anchors (links like guides/approval.md#the-prompt), ::: fences for directives.
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 4

# Reference from the docstrings (reST :param: fields). Members in source order, the constructor's signature
# on the class; types only in the signature (the annotations are often forward references).
autodoc_default_options = {"members": True, "member-order": "bysource", "show-inheritance": True}
autodoc_typehints = "signature"
autodoc_class_signature = "mixed"
autodoc_mock_imports = ["pyspark"]
nitpicky = False
# Autodoc noise that is not ours to fix: re-exported names documented twice, annotations Sphinx cannot
# resolve.
suppress_warnings = [
    "ref.python",
    "duplicate_declaration",
    "py.duplicate_declaration",
]

html_theme = "furo"
html_title = f"airflow-provider-kstate {__version__}"
html_static_path = ["_static"]
html_css_files = ["kstate.css"]
html_show_sourcelink = False
html_copy_source = False
pygments_style = "sphinx"
