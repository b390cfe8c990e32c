"""The module-name rule of docs/glossary.md: no two modules share a name, except the Airflow faces of one concern."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import airflow_provider_kstate

#: The folders that hold a concern's Airflow face, named for the concern (as the Airflow providers do).
AIRFLOW_FACES = {"hooks", "operators", "sensors", "triggers"}
PACKAGE = Path(airflow_provider_kstate.__file__).parent


def _modules() -> dict[str, list[str]]:
    """Map each module name to the folders (relative to the package) that hold one of that name."""
    where: dict[str, list[str]] = defaultdict(list)
    for path in PACKAGE.rglob("*.py"):
        if path.stem in {"__init__", "__main__"} or "__pycache__" in path.parts:
            continue
        where[path.stem].append(path.parent.relative_to(PACKAGE).as_posix())
    return where


def test_a_shared_module_name_is_one_concern_and_its_airflow_faces() -> None:
    clashes = {
        name: folders
        for name, folders in _modules().items()
        if len([f for f in folders if f not in AIRFLOW_FACES]) > 1
    }
    assert clashes == {}, f"module names held twice outside hooks/operators/sensors/triggers: {clashes}"


def test_no_module_is_named_for_its_own_folder() -> None:
    same = sorted(
        f"{folder}/{name}.py" for name, folders in _modules().items() for folder in folders if folder == name
    )
    assert same == [], f"a module named for its folder says nothing the folder does not: {same}"


def test_the_rule_sees_every_module() -> None:
    """Guard the test itself: it must find the package's modules, the faces among them."""
    where = _modules()
    assert "doctor" in where and set(where["doctor"]) <= AIRFLOW_FACES
    assert len(where) > 80
