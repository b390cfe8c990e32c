"""The package's import graph has no loop (issue 26): no module imports, at any depth (lazy imports inside
functions included), a module that imports it back."""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "airflow_provider_kstate"


def _module(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The package's modules ``path`` imports (``from a.b import c`` counts ``a.b.c`` when it is a module)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        out |= {n for n in names if n in modules}
    return out


def _graph() -> dict[str, set[str]]:
    files = {_module(p): p for p in PACKAGE.rglob("*.py")}
    names = set(files)
    graph = {m: _imports(p, names) - {m} for m, p in files.items()}
    for module in list(graph):  # a package's __init__ is not an arrow of its own: its modules are
        graph[module] = {t for t in graph[module] if not (files[t].name == "__init__.py" and t in module)}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One loop of the graph (``[]`` when there is none), as :mod:`graphlib` finds it."""
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as exc:
        return list(exc.args[1])
    return []


def test_no_module_of_the_package_imports_one_that_imports_it_back() -> None:
    graph = _graph()
    assert len(graph) > 80 and sum(len(t) for t in graph.values()) > 150  # the graph was read
    assert _cycle(graph) == []


def test_the_loop_detector_finds_a_loop() -> None:
    assert sorted(set(_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}))) == ["a", "b", "c"]


def test_the_unit_tests_mirror_the_package_folders() -> None:
    """``tests/unit/<folder>/`` tests ``airflow_provider_kstate/<folder>/`` (``support/`` tests the test and
    bench harness); a test of a top-level module sits at ``tests/unit/`` itself."""
    unit = Path(__file__).resolve().parent
    folders = {d.name for d in unit.iterdir() if d.is_dir() and not d.name.startswith(("_", "."))}
    packages = {d.name for d in PACKAGE.iterdir() if (d / "__init__.py").exists()}
    assert folders - {"support"} <= packages, sorted(folders - packages - {"support"})
    assert len(folders & packages) >= 10


#: The package's layers above its domain: Airflow's side (the hooks, the tasks, the UI, the Airflow errors).
UPPER = ("hooks", "operators", "sensors", "triggers", "task_groups", "plugins", "example_dags")


def _top_level_imports(path: Path) -> set[str]:
    """The top-level names of every absolute import of ``path`` (``airflow`` for ``from airflow.sdk ...``)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out


def test_the_increase_domain_imports_neither_airflow_nor_the_layers_above_it() -> None:
    """``increase/`` (the plan, the steps, the verification rule) is the domain: no module of it imports, at
    any depth, Airflow or a module of the layers above it (``hooks/``, the operators, ...), directly or
    through another module of the package."""
    graph = _graph()
    domain = {m for m in graph if m.startswith("airflow_provider_kstate.increase")}
    assert "airflow_provider_kstate.increase.verification" in domain
    reached, todo = set(domain), list(domain)
    while todo:
        for target in graph[todo.pop()] - reached:
            reached.add(target)
            todo.append(target)
    upward = sorted(m for m in reached if m.split(".")[1] in UPPER)
    assert upward == [], f"the domain reaches the layers above it: {upward}"
    files = {_module(p): p for p in PACKAGE.rglob("*.py")}
    airflow = sorted(m for m in reached if "airflow" in _top_level_imports(files[m]))
    assert airflow == [], f"the domain reaches Airflow through {airflow}"
