"""The provider's example DAGs, shipped in the wheel: where they are and a copy into a DAGs folder.

    python -m airflow_provider_kstate.example_dags                       # prints the folder
    python -m airflow_provider_kstate.example_dags --copy-to "$AIRFLOW_HOME/dags"

In a built wheel the DAG files sit beside this module; in a checkout (editable install) they are the
checkout's ``dags/`` folder. No Airflow import here: this module defines no DAG.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
DAG_IDS = (
    "kstate_partition_increase",
    "kstate_partition_increase_per_step",
    "kstate_state_maintenance",
    "kstate_example_pipeline",
    "kstate_streams_resize",
)


def path() -> Path:
    """Return the folder that holds the example DAG files (``kstate_*.py``, ``pipelines/``)."""
    if any(HERE.glob("kstate_*.py")):
        return HERE
    checkout = HERE.parent.parent / "dags"
    if any(checkout.glob("kstate_*.py")):
        return checkout
    raise FileNotFoundError(f"no example DAGs beside {HERE} nor in {checkout}")


def copy_to(target: Path) -> list[Path]:
    """Copy the example DAG files (and the pipeline they submit) into ``target``; return what was written.

    :param target: a DAGs folder, created when missing; DAG files of the same name are overwritten, an
        existing ``.airflowignore`` gets our lines added.
    """
    source = path()
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for item in sorted(source.iterdir()):
        if item.name in {"__init__.py", "__main__.py", "__pycache__"}:
            continue
        dest = target / item.name
        if item.name == ".airflowignore":
            _merge_ignore(item, dest)
        elif item.is_dir():
            shutil.copytree(item, dest, ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
        else:
            shutil.copy2(item, dest)
        written.append(dest)
    return written


def _merge_ignore(source: Path, dest: Path) -> None:
    """Add the lines of our ``.airflowignore`` (the Spark job's folder) that ``dest`` lacks; keep the rest.

    :param source: the example DAGs' ``.airflowignore``.
    :param dest: the DAGs folder's ``.airflowignore``, created when missing.
    """
    have = dest.read_text().splitlines() if dest.exists() else []
    missing = [line for line in source.read_text().splitlines() if line.strip() and line not in have]
    if missing or not dest.exists():
        dest.write_text("\n".join([*have, *missing]) + "\n")


def main(argv: list[str] | None = None) -> int:
    """Print the example DAGs' folder, or copy them with ``--copy-to DIR``.

    :param argv: command-line arguments (default: ``sys.argv[1:]``).
    """
    parser = argparse.ArgumentParser(prog="python -m airflow_provider_kstate.example_dags")
    parser.add_argument("--copy-to", type=Path, help="a DAGs folder to copy the example DAGs into")
    args = parser.parse_args(argv)
    if args.copy_to is None:
        print(path())
        return 0
    for dest in copy_to(args.copy_to):
        print(dest)
    return 0
