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
from typing import Any

import pytest
from kstate_support import ROOT, broker

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


def _load(relative: str) -> Any:
    """Import the script ``relative`` (e.g. ``bench/bench_state.py``) as a module, without running it."""
    path = ROOT / relative
    spec = importlib.util.spec_from_file_location(f"_entry_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "entry", ["bench/bench_state.py", "bench/bench_client_throughput.py", "bench/bench_partition_increase.py"]
)
def test_a_bench_given_a_cluster_starts_no_embedded_broker(
    entry: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each benchmark's ``broker()`` yields the cluster of ``KSTATE_BOOTSTRAP_SERVERS`` with the SASL
    extras of ``KSTATE_KAFKA_CONFIG``, and neither starts noida-db nor touches its data folder."""
    module = _load(entry)

    def no_embedded(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError(f"{entry} started an embedded broker although a cluster is named")

    monkeypatch.setattr(broker, "running", no_embedded)
    monkeypatch.setattr(broker, "up", no_embedded)
    monkeypatch.setattr(broker, "_noida", no_embedded)
    monkeypatch.setenv("KSTATE_BOOTSTRAP_SERVERS", "kafka-1.example:9096,kafka-2.example:9096")
    monkeypatch.setenv("KSTATE_KAFKA_CONFIG", '{"security.protocol": "SASL_SSL", "sasl.username": "u"}')
    with module.broker() as config:
        assert config == {
            "bootstrap.servers": "kafka-1.example:9096,kafka-2.example:9096",
            "security.protocol": "SASL_SSL",
            "sasl.username": "u",
        }
