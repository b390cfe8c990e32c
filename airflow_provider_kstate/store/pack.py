"""Build what Spark executors need to run the applications on a bare Python.

* :func:`provider_zip` - this package as a zip for ``py_files`` (the applications and the store; the
  Airflow side of the package is left out: executors never import it);
* :func:`env_archive` - the applications' third-party dependencies (confluent-kafka, pyarrow, numpy,
  xxhash, pydantic: the reports and the manifest are typed documents) as a relocatable virtualenv packed with ``venv-pack``, for ``archives=ENV.tar.gz#env`` with
  ``spark.pyspark.python=./env/bin/python``.

Command line::

    python -m airflow_provider_kstate.store.pack zip DEST_DIR
    python -m airflow_provider_kstate.store.pack env DEST.tar.gz [--python python3.12] [--requirement X ...]

The archive must be built for the executors' platform and Python version (build it in the same image).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

#: What the applications import on executors besides the standard library and pyspark.
EXECUTOR_REQUIREMENTS = ("confluent-kafka", "pyarrow", "numpy", "xxhash", "pydantic")
#: The package folders executors need (the rest imports Airflow), and the plain modules they import.
_SHIPPED = ("store", "spark_apps", "client")
_SHIPPED_MODULES = ("errors.py", "enums.py", "documents.py")


def _package_root() -> Path:
    return Path(__file__).resolve().parents[1]


def provider_zip(dest_dir: str) -> str:
    """Write ``airflow_provider_kstate.zip`` (the store, the applications, the client) into ``dest_dir``.

    :param dest_dir: an existing directory.
    :returns: the zip's path.
    """
    root = _package_root()
    path = os.path.join(dest_dir, "airflow_provider_kstate.zip")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("airflow_provider_kstate/__init__.py", "")
        for module in _SHIPPED_MODULES:
            zf.write(root / module, str(Path("airflow_provider_kstate") / module))
        for folder in _SHIPPED:
            for file in sorted((root / folder).rglob("*.py")):
                zf.write(file, str(Path("airflow_provider_kstate") / file.relative_to(root)))
    return path


def pinned(requirements: Sequence[str] = EXECUTOR_REQUIREMENTS) -> list[str]:
    """Return ``requirements`` pinned to the versions installed here (unpinned when not installed)."""
    from importlib import metadata

    out = []
    for name in requirements:
        try:
            out.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            out.append(name)
    return out


def _pip_install(python: str, requirements: Sequence[str]) -> None:
    uv = shutil.which("uv") or shutil.which("uv", path=os.path.dirname(sys.executable))
    if uv:
        subprocess.run([uv, "pip", "install", "-q", "-p", python, *requirements], check=True)
    else:
        subprocess.run([python, "-m", "pip", "install", "-q", *requirements], check=True)


def env_archive(
    dest: str, python: str | None = None, requirements: Sequence[str] = EXECUTOR_REQUIREMENTS
) -> str:
    """Build a virtualenv with ``requirements`` and pack it with venv-pack into ``dest`` (``.tar.gz``).

    :param dest: the archive to write.
    :param python: the interpreter to base it on (default: this one); must match the executors'.
    :param requirements: pip requirement strings (default: :data:`EXECUTOR_REQUIREMENTS` at the versions
        installed here, see :func:`pinned`).
    :returns: ``dest``.
    """
    import venv_pack

    with tempfile.TemporaryDirectory(prefix="kstate-env-") as tmp:
        env = os.path.join(tmp, "env")
        subprocess.run([python or sys.executable, "-m", "venv", "--without-pip", env], check=True)
        _pip_install(os.path.join(env, "bin", "python"), list(requirements or pinned()))
        venv_pack.pack(prefix=env, output=dest, force=True)
    return dest


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: ``zip DEST_DIR`` or ``env DEST.tar.gz``; prints the path written."""
    parser = argparse.ArgumentParser(prog="python -m airflow_provider_kstate.store.pack")
    sub = parser.add_subparsers(dest="what", required=True)
    zip_cmd = sub.add_parser("zip", help="the provider as a zip for py_files")
    zip_cmd.add_argument("dest_dir")
    env_cmd = sub.add_parser("env", help="the executors' dependencies as a venv-pack archive")
    env_cmd.add_argument("dest")
    env_cmd.add_argument("--python", default=None)
    env_cmd.add_argument("--requirement", action="append", default=None)
    args = parser.parse_args(argv)
    if args.what == "zip":
        print(provider_zip(args.dest_dir))
    else:
        print(env_archive(args.dest, args.python, args.requirement))
    return 0


if __name__ == "__main__":
    sys.exit(main())
