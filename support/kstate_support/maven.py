"""Maven, the one way the test support fetches and builds its JVM pieces: Apache Kafka's jars
(:mod:`kstate_support.apache_kafka`), Spark's Kafka source (:mod:`kstate_support.spark_kafka`), the Java
services (:mod:`kstate_support.java_services`) and the Connect sink (:mod:`kstate_support.connect`).

Each names what it needs in a pom under ``support/``; the outputs go under the git-ignored ``.kstate/``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

#: The file in a build folder naming the sources it was built from (:func:`package_once`).
STAMP = ".stamp"


class MavenError(RuntimeError):
    """Maven is missing, or a Maven run failed (the message names what it was for and ends with its output)."""


def run(pom: Path, *args: str, what: str, timeout: float = 600.0) -> None:
    """Run ``mvn -q -B -f pom args...``.

    :param what: what the run is for, as the error names it ("fetch Apache Kafka 4.4.0").
    :raises MavenError: no ``mvn`` on PATH, or the run failed.
    """
    mvn = shutil.which("mvn")
    if mvn is None:
        raise MavenError(f"Maven (mvn) is needed to {what}: apt-get install -y maven")
    proc = subprocess.run(
        [mvn, "-q", "-B", "-f", str(pom), *args], capture_output=True, text=True, check=False, timeout=timeout
    )
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip()[-2000:]
        raise MavenError(f"Maven failed to {what} (rc {proc.returncode}):\n{tail}")


def copy_dependencies(pom: Path, folder: Path, *props: str, what: str, expect: str) -> Path:
    """Copy the dependencies ``pom`` names (with ``-D`` ``props``) into ``folder`` once; return it.

    A ``.complete`` marker makes later calls free; an interrupted copy is started again from scratch.

    :param expect: a glob that must match in ``folder`` afterwards (the main jar).
    :raises MavenError: the copy failed or left no ``expect``.
    """
    done = folder / ".complete"
    if done.exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    run(pom, "dependency:copy-dependencies", f"-DoutputDirectory={folder}", *props, what=what)
    if not any(folder.glob(expect)):
        raise MavenError(f"Maven did not {what}: no {expect} in {folder}")
    done.write_text(" ".join(props) + "\n")
    return folder


def source_hash(project: Path) -> str:
    """A hash of what a build of ``project`` depends on: its pom and every file under ``src``."""
    digest = hashlib.sha256()
    for path in [project / "pom.xml", *sorted((project / "src").rglob("*"))]:
        if path.is_file():
            digest.update(str(path.relative_to(project)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created) for the block: one build at a time across processes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def package_once(project: Path, build_dir: Path, what: str) -> Path:
    """``mvn package -Dkstate.build=build_dir`` of ``project`` unless ``build_dir`` holds a build of its current
    sources (a stamp of :func:`source_hash`); one build at a time (a lock beside the folder); return it.

    :raises MavenError: the build failed or left no ``classes`` folder.
    """
    wanted = source_hash(project)
    stamp = build_dir / STAMP
    with locked(build_dir.with_name(build_dir.name + ".lock")):
        if stamp.exists() and stamp.read_text().strip() == wanted:
            return build_dir
        shutil.rmtree(build_dir, ignore_errors=True)
        run(project / "pom.xml", "package", f"-Dkstate.build={build_dir}", what=what)
        if not (build_dir / "classes").is_dir():
            raise MavenError(f"Maven did not {what}: no {build_dir / 'classes'}")
        stamp.write_text(wanted + "\n")
    return build_dir
