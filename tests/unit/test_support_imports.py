"""Every import in the tests, the benchmarks and the scripts resolves without a ``sys.path`` insert.

The helpers that used to live in ``scripts/`` (``embedded_broker``, ``traffic``, ``quiet``,
``spark_standalone``) moved into :mod:`kstate_support`; an import of the old bare name still parses and
only fails when that code path runs (``make demo`` died in its first step that way). This reads every
``import`` statement, top level or inside a function, and checks that its top-level module is installed or
is a sibling file of a script run as ``python <folder>/<file>.py`` (its folder is then ``sys.path[0]``).
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

from kstate_support import ROOT

FOLDERS = ("tests", "bench", "scripts")
MOVED = {"embedded_broker", "traffic", "quiet", "spark_standalone"}


def _imported(path: Path) -> set[str]:
    """The top-level module names ``path`` imports (absolute imports only)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def _resolves(name: str, path: Path) -> bool:
    """Whether ``name`` is installed, or a sibling module of the script ``path`` outside ``tests/``."""
    if path.parent.joinpath(f"{name}.py").exists() and not path.is_relative_to(ROOT / "tests"):
        return True
    return importlib.util.find_spec(name) is not None


def test_no_import_of_a_moved_helper_by_its_old_name() -> None:
    files = [f for folder in FOLDERS for f in (ROOT / folder).rglob("*.py")]
    assert len(files) > 40
    stale = sorted(f"{f.relative_to(ROOT)}: {name}" for f in files for name in _imported(f) & MOVED)
    assert stale == []


def test_every_import_resolves() -> None:
    files = [f for folder in FOLDERS for f in (ROOT / folder).rglob("*.py")]
    unresolved = sorted(
        f"{f.relative_to(ROOT)}: {name}" for f in files for name in _imported(f) if not _resolves(name, f)
    )
    assert unresolved == []
