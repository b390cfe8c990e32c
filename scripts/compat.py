"""`make compat`: the provider in one virtualenv per supported version, each proven by real runs.

    python scripts/compat.py                 # every cell
    python scripts/compat.py airflow-3.1     # some cells
    python scripts/compat.py --fresh         # rebuild the virtualenvs first
    python scripts/compat.py --pyspark 4.3.0 airflow-3.3   # an Airflow cell on another pyspark (a candidate pin)
    python scripts/compat.py kafka-4.0 kafka-4.2 kafka-4.4 # the broker axis alone

Cells (virtualenvs under ``.kstate/compat/<cell>``, git-ignored, built with ``uv --compile-bytecode``):

* ``airflow-3.1`` / ``airflow-3.3``: the provider with its ``spark-local``, ``test`` and ``demo`` extras,
  Airflow pinned to the newest release of that minor by a constraint (never an override: every
  requirement of the provider and its providers must accept it). Runs the unit tests, then ``dag.test()``
  of each example DAG on the embedded broker: a dry-run increase, real increases 1 -> 2 -> 4 -> 8 under
  live traffic with both increase DAGs (0 lost), and the example pipeline plus a maintenance run that
  builds the missing snapshot with ``spark-submit`` and re-checks it.
* ``pyspark-3.5`` / ``pyspark-4.3``: what a Spark cluster's driver and executors hold: that pyspark alone
  with its ``sql`` extra (pandas, pyarrow, numpy: ``mapInArrow`` refuses to run without pandas;
  pyspark-client installs the same ``pyspark/`` folder, so it must not be there), the provider without
  Airflow (``--no-deps``; the Spark applications import none) and its runtime libraries. Runs
  ``tests/integration/test_spark_versions.py``: a rebuild, a deep check and ``load_snapshot``, each
  compared with the changelog's truth.
* ``kafka-4.0`` / ``kafka-4.2`` / ``kafka-4.4``: the broker axis, Apache Kafka (KRaft, assembled from Maven
  Central by ``kstate_support.apache_kafka``) 4.0.0 (the oldest 4.x release Maven Central serves), 4.2.2 (the
  newest 4.2, share groups GA) and 4.4.0 (the default broker), each with the project's own virtualenv. The
  cell fetches the release's jars once, starts one broker (data under ``.kstate/broker-compat-<cell>``),
  runs the broker doctor on it (``--refresh --json``: the promises kept, broken, not applicable), then
  :data:`BROKER_TESTS` against that broker, and stops it. A promise the release is known to break
  (``share_new_partitions`` on 4.2 and 4.3) is what ``test_broker_doctor.py`` expects there, not a failure.

``--pyspark VERSION`` runs the Airflow cells (as ``<cell>+pyspark-VERSION``, a virtualenv of their own) with
that pyspark instead of the ``spark-local`` pin, by a uv override: ``pyspark==VERSION`` and
``pyspark-client==VERSION`` when that release exists, else ``pyspark[sql]`` alone with pyspark-client
overridden away (the two install the same ``pyspark/`` folder; pandas and pyarrow, which pyspark-client
requires, then come from the ``sql`` extra: ``mapInArrow`` needs pandas). A candidate for the ``spark-local`` pin is proven
this way before ``setup.cfg`` moves.

Prints a table (cell, versions, tests, seconds) and writes ``.kstate/compat/results.json`` (this run in
full, earlier runs' summaries under ``history``); exits non-zero when a cell fails. Each pytest run starts its own embedded broker (``KSTATE_BOOTSTRAP_SERVERS`` names a
real cluster instead).
"""

from __future__ import annotations

import argparse
import configparser
import json
import os
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
COMPAT = ROOT / ".kstate" / "compat"
UV = Path(sys.executable).with_name("uv")

AIRFLOW_TESTS = [
    "tests/unit",
    "tests/integration/test_offline_group.py::test_dry_run_changes_nothing",
    "tests/integration/test_kafka_12261.py::test_safe_increase_loses_nothing_over_rounds",
    "tests/integration/test_state_maintenance.py::test_pipeline_builds_the_store_and_auto_builds_the_first_snapshot",
]
SPARK_TESTS = ["tests/integration/test_spark_versions.py"]
#: The broker cells' tests: the doctor's expectations per release, and the naive / safe increase.
BROKER_TESTS = ["tests/integration/test_broker_doctor.py", "tests/integration/test_kafka_12261.py"]
#: What each cell reports: the distributions whose versions make the cell what it is.
REPORTED = (
    "apache-airflow",
    "apache-airflow-task-sdk",
    "pyspark",
    "pyspark-client",
    "pandas",
    "confluent-kafka",
)


@dataclass
class Cell:
    """One virtualenv of the matrix.

    :param name: the cell's name (its folder under ``.kstate/compat``).
    :param kind: ``airflow`` (the provider with Airflow), ``spark`` (the Spark applications alone) or
        ``broker`` (the project's virtualenv against one Apache Kafka release).
    :param pin: the requirement that makes the cell (a constraint for ``airflow``, installed for ``spark``,
        the Apache Kafka release for ``broker``).
    :param extra: further requirements of the cell (a ``spark`` cell's: what that Spark's runtimes ship).
    :param overrides: uv overrides of an ``airflow`` cell (``--pyspark``).
    """

    name: str
    kind: str
    pin: str
    extra: tuple[str, ...] = ()
    overrides: tuple[str, ...] = ()
    result: dict[str, Any] = field(default_factory=dict)

    @property
    def venv(self) -> Path:
        return COMPAT / self.name

    @property
    def python(self) -> Path:
        return Path(sys.executable) if self.kind == "broker" else self.venv / "bin" / "python"


CELLS = [
    Cell("airflow-3.1", "airflow", "apache-airflow>=3.1,<3.2"),
    Cell("airflow-3.3", "airflow", "apache-airflow>=3.3,<3.4"),
    # pyspark 3.5's sql extra caps numpy below 2; pyarrow 20+ needs numpy 2 at import (its metadata does not
    # say so) and PySpark does not support pandas 3 yet: the Python stack of a Spark 3.5 runtime.
    Cell("pyspark-3.5", "spark", "pyspark[sql]>=3.5,<3.6", ("pyarrow<20", "pandas<3")),
    Cell("pyspark-4.3", "spark", "pyspark[sql]>=4.3,<4.4"),
    Cell("kafka-4.0", "broker", "4.0.0"),  # the oldest 4.x release of kafka_2.13 on Maven Central
    Cell("kafka-4.2", "broker", "4.2.2"),
    Cell("kafka-4.4", "broker", "4.4.0"),
]


def _setup_cfg() -> configparser.ConfigParser:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    return cfg


def _lines(value: str) -> list[str]:
    return [x.strip() for x in value.splitlines() if x.strip() and not x.strip().startswith("#")]


def spark_requirements() -> list[str]:
    """The provider's runtime libraries without Airflow (what the Spark applications import), plus the tests'."""
    cfg = _setup_cfg()
    runtime = [r for r in _lines(cfg["options"]["install_requires"]) if not r.startswith("apache-airflow")]
    test = [r for r in _lines(cfg["options.extras_require"]["test"]) if r.startswith(("pytest", "noida-db"))]
    return runtime + test


def _uv(*args: str) -> None:
    cmd = [str(UV), *args]
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, cwd=ROOT)


def build(cell: Cell, fresh: bool) -> None:
    """Create the cell's virtualenv (kept between runs unless ``fresh`` or its spec changed)."""
    spec = json.dumps(
        {
            "pin": cell.pin,
            "extra": cell.extra,
            "overrides": cell.overrides,
            "setup.cfg": (ROOT / "setup.cfg").read_text(),
        }
    )
    marker = cell.venv / ".kstate-spec"
    if not fresh and marker.exists() and marker.read_text() == spec:
        return
    shutil.rmtree(cell.venv, ignore_errors=True)
    _uv("venv", "-q", "-p", sys.executable, str(cell.venv))
    common = ["pip", "install", "-q", "--compile-bytecode", "-p", str(cell.python)]
    if cell.kind == "airflow":
        constraint = cell.venv / "constraint.txt"
        constraint.write_text(cell.pin + "\n")
        overrides: list[str] = []
        if cell.overrides:
            override = cell.venv / "override.txt"
            override.write_text("\n".join(cell.overrides) + "\n")
            overrides = ["--override", str(override)]
        _uv(
            *common,
            "-c",
            str(constraint),
            *overrides,
            *cell.extra,
            "-e",
            f"{ROOT}[spark-local,test,demo]",
            "-e",
            str(ROOT / "support"),
        )
    else:
        _uv(*common, cell.pin, *cell.extra, *spark_requirements(), "-e", str(ROOT / "support"))
        _uv(*common, "--no-deps", "-e", str(ROOT))
    marker.write_text(spec)


def versions(cell: Cell) -> dict[str, str]:
    """The installed versions of :data:`REPORTED` in the cell (absent ones left out)."""
    code = (
        "import importlib.metadata as m, json\n"
        f"names = {list(REPORTED)!r}\n"
        "out = {}\n"
        "for n in names:\n"
        "    try:\n"
        "        out[n] = m.version(n)\n"
        "    except m.PackageNotFoundError:\n"
        "        pass\n"
        "print(json.dumps(out))\n"
    )
    out = subprocess.run([str(cell.python), "-c", code], check=True, capture_output=True, text=True)
    return dict(json.loads(out.stdout))


def check_pyspark_folder(cell: Cell, found: dict[str, str]) -> str:
    """Return why the cell's ``pyspark/`` folder is a mix of two releases, or "" when it is not."""
    if cell.kind == "spark" and "pyspark-client" in found:
        return f"pyspark-client {found['pyspark-client']} is installed over pyspark {found.get('pyspark')}"
    client, full = found.get("pyspark-client"), found.get("pyspark")
    if client and full and client != full:
        return f"pyspark {full} and pyspark-client {client} share one pyspark/ folder"
    return ""


def _env(cell: Cell) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "VIRTUAL_ENV", "PYSPARK"))}
    env.update(
        {
            "PATH": f"{cell.python.parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": str(cell.python),
            "PYSPARK_DRIVER_PYTHON": str(cell.python),
            "KSTATE_COMPAT": "1",
        }
    )
    env.pop("SPARK_HOME", None)  # the cell's own pyspark, never another Spark
    return env


def run_tests(cell: Cell, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run the cell's tests with its interpreter; return the counts from pytest's JUnit XML.

    :param env: variables set for the run beside the cell's (a broker cell's ``KSTATE_BOOTSTRAP_SERVERS``).
    """
    junit = cell.venv / "junit.xml"
    junit.unlink(missing_ok=True)
    log = cell.venv / "pytest.log"
    targets = {"airflow": AIRFLOW_TESTS, "spark": SPARK_TESTS, "broker": BROKER_TESTS}[cell.kind]
    cmd = [str(cell.python), "-m", "pytest", "-p", "no:cacheprovider", "-q", "-o", "addopts=--durations=10"]
    cmd += ["--junitxml", str(junit), *targets]
    print("+", " ".join(cmd), f"> {log.relative_to(ROOT)}", flush=True)
    with open(log, "w", encoding="utf-8") as out:
        code = subprocess.call(
            cmd, cwd=ROOT, env={**_env(cell), **(env or {})}, stdout=out, stderr=subprocess.STDOUT
        )
    counts = {"exit": code, "tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    if junit.exists():
        suite = ET.parse(junit).getroot()
        suite = suite if suite.tag == "testsuite" else suite[0]
        for key in ("tests", "failures", "errors", "skipped"):
            counts[key] = int(suite.get(key, 0))
    counts["passed"] = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    if code != 0:
        tail = log.read_text(errors="replace").splitlines()[-40:]
        print("\n".join(line for line in tail if "rdkafka" not in line), flush=True)
    return counts


def run_doctor(cell: Cell, bootstrap: str) -> dict[str, Any]:
    """Run the broker doctor (``--refresh --json``) on ``bootstrap``; return its promises by outcome.

    :param cell: the broker cell (its interpreter runs the doctor).
    :param bootstrap: the bootstrap servers of the cell's broker.
    """
    cmd = [str(cell.python), "-m", "airflow_provider_kstate.doctor", "--bootstrap-servers", bootstrap]
    t0 = time.monotonic()
    out = subprocess.run([*cmd, "--refresh", "--json"], capture_output=True, text=True, env=_env(cell))
    seconds = round(time.monotonic() - t0, 1)
    try:
        results = json.loads(out.stdout)["results"]
    except (ValueError, KeyError):
        return {"error": f"the doctor printed no verdict (exit {out.returncode}): {out.stderr[-500:]}"}
    by: dict[str, list[str]] = {"kept": [], "broken": [], "not_applicable": [], "unchecked": []}
    for promise, result in results.items():
        outcome = {True: "kept", False: "broken", None: "unchecked"}[result.get("ok")]
        by["not_applicable" if result.get("applies") is False else outcome].append(promise)
    details = {p: results[p].get("detail", "") for p in by["broken"] + by["not_applicable"] + by["unchecked"]}
    return {**by, "details": details, "exit": out.returncode, "doctor_s": seconds}


def run_broker_cell(cell: Cell, result: dict[str, Any]) -> None:
    """Fetch the cell's Apache Kafka release, start it, run the doctor and the tests on it, stop it.

    :param cell: the broker cell.
    :param result: filled as the steps end (what a failing step leaves is kept).
    """
    from kstate_support import apache_kafka

    cell.venv.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    apache_kafka.libs(cell.pin)
    result["build_s"] = round(time.monotonic() - t0, 1)
    result["versions"] = {"apache-kafka": cell.pin, **versions(cell)}
    data_dir = ROOT / ".kstate" / f"broker-compat-{cell.name}"
    apache_kafka.stop(data_dir)
    shutil.rmtree(data_dir, ignore_errors=True)
    try:
        t1 = time.monotonic()
        bootstrap = apache_kafka.start(data_dir, release=cell.pin)
        result["start_s"] = round(time.monotonic() - t1, 1)
        result["doctor"] = run_doctor(cell, bootstrap)
        t2 = time.monotonic()
        result.update(run_tests(cell, {"KSTATE_BOOTSTRAP_SERVERS": bootstrap}))
        result["test_s"] = round(time.monotonic() - t2, 1)
    finally:
        apache_kafka.stop(data_dir)
        shutil.rmtree(data_dir, ignore_errors=True)
    doctor = result["doctor"]
    if "error" in doctor or doctor["unchecked"]:
        raise RuntimeError(doctor.get("error") or f"the doctor could not check {doctor['unchecked']}")
    result["ok"] = result["exit"] == 0 and result["passed"] > 0


def run_cell(cell: Cell, fresh: bool) -> None:
    if cell.kind == "broker":
        t0 = time.monotonic()
        cell.result = {"cell": cell.name, "pin": f"org.apache.kafka:kafka_2.13:{cell.pin}"}
        try:
            run_broker_cell(cell, cell.result)
        except (subprocess.CalledProcessError, RuntimeError) as exc:
            cell.result.update({"ok": False, "error": str(exc)})
        cell.result["seconds"] = round(time.monotonic() - t0, 1)
        return
    t0 = time.monotonic()
    result: dict[str, Any] = {"cell": cell.name, "pin": cell.pin}
    try:
        build(cell, fresh)
        result["build_s"] = round(time.monotonic() - t0, 1)
        result["versions"] = versions(cell)
        mix = check_pyspark_folder(cell, result["versions"])
        if mix:
            raise RuntimeError(mix)
        t1 = time.monotonic()
        result.update(run_tests(cell))
        result["test_s"] = round(time.monotonic() - t1, 1)
        result["ok"] = result["exit"] == 0 and result["passed"] > 0
    except (subprocess.CalledProcessError, RuntimeError) as exc:
        result.update({"ok": False, "error": str(exc)})
    result["seconds"] = round(time.monotonic() - t0, 1)
    cell.result = result


def table(cells: list[Cell]) -> str:
    rows = ["| cell | Airflow / task SDK | pyspark | tests | result | build s | test s |", "|" + " --- |" * 7]
    for c in cells:
        if c.kind == "broker":
            continue
        r, v = c.result, c.result.get("versions", {})
        airflow = f"{v.get('apache-airflow', '-')} / {v.get('apache-airflow-task-sdk', '-')}"
        spark = v.get("pyspark", "-") + (f" (+client {v['pyspark-client']})" if "pyspark-client" in v else "")
        tests = f"{r.get('passed', 0)} passed, {r.get('failures', 0) + r.get('errors', 0)} failed"
        verdict = "ok" if r.get("ok") else f"FAILED {r.get('error', '')}".strip()
        rows.append(
            f"| {c.name} | {airflow} | {spark} | {tests} | {verdict} | {r.get('build_s', '-')} | {r.get('test_s', '-')} |"
        )
    return "\n".join(rows)


def promises_cell(doctor: dict[str, Any]) -> str:
    """The doctor's outcome in one cell of the broker table: ``12 kept, 1 n/a`` (broken ones named)."""
    if "error" in doctor or not doctor:
        return "not run"
    parts = [f"{len(doctor['kept'])} kept"]
    if doctor["broken"]:
        parts.append(f"{len(doctor['broken'])} broken ({', '.join(doctor['broken'])})")
    if doctor["not_applicable"]:
        parts.append(f"{len(doctor['not_applicable'])} n/a ({', '.join(doctor['not_applicable'])})")
    if doctor["unchecked"]:
        parts.append(f"{len(doctor['unchecked'])} unchecked")
    return ", ".join(parts)


def broker_table(cells: list[Cell]) -> str:
    """The broker axis: release, the doctor's verdict, the tests, and the time of each step."""
    rows = [
        "| cell | Apache Kafka | doctor's promises | tests | result | fetch s | start s | doctor s | test s |",
        "|" + " --- |" * 9,
    ]
    for c in cells:
        if c.kind != "broker":
            continue
        r, doctor = c.result, c.result.get("doctor", {})
        tests = f"{r.get('passed', 0)} passed, {r.get('failures', 0) + r.get('errors', 0)} failed"
        verdict = "ok" if r.get("ok") else f"FAILED {r.get('error', '')}".strip()
        rows.append(
            f"| {c.name} | {c.pin} | {promises_cell(doctor)} | {tests} | {verdict} | {r.get('build_s', '-')} "
            f"| {r.get('start_s', '-')} | {doctor.get('doctor_s', '-')} | {r.get('test_s', '-')} |"
        )
    return "\n".join(rows)


def pyspark_overrides(version: str) -> tuple[str, ...]:
    """The uv overrides that put pyspark ``version`` in an Airflow cell instead of the ``spark-local`` pin.

    The Spark provider requires pyspark-client; when pyspark-client ``version`` is not published, it is
    overridden away (a marker no interpreter meets) so its files cannot mix into pyspark's folder.

    :param version: the pyspark release, e.g. ``4.3.0``.
    """
    probe = subprocess.run(
        [str(UV), "pip", "install", "--dry-run", "-q", "-p", sys.executable, f"pyspark-client=={version}"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    if probe.returncode == 0:
        return (f"pyspark=={version}", f"pyspark-client=={version}")
    print(f"pyspark-client {version} is not published: the cell runs pyspark {version} alone", flush=True)
    # An override replaces every requirement of its name: the extra must be in the override itself.
    return (f"pyspark[sql]=={version}", "pyspark-client; python_version < '0'")


def select(names: list[str], pyspark: str | None) -> list[Cell]:
    """The cells to run, the Airflow ones moved to pyspark ``pyspark`` when given."""
    cells = [c for c in CELLS if not names or c.name in names]
    if not pyspark:
        return cells
    overrides = pyspark_overrides(pyspark)
    return [
        replace(c, name=f"{c.name}+pyspark-{pyspark}", overrides=overrides) if c.kind == "airflow" else c
        for c in cells
    ]


def write_results(cells: list[Cell], seconds: float, argv: list[str]) -> None:
    """Write this run to ``results.json``; earlier runs' summaries stay under ``history`` (newest first).

    :param cells: the cells of this run, with their results.
    :param seconds: the run's wall time.
    :param argv: the run's arguments.
    """
    path = COMPAT / "results.json"
    history: list[dict[str, Any]] = []
    if path.exists():
        try:
            previous = json.loads(path.read_text())
            history = [_summary(previous), *previous.get("history", [])][:20]
        except (ValueError, AttributeError, TypeError):
            history = []
    finished = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    run = {
        "finished": finished,
        "commit": _commit(),
        "argv": argv,
        "seconds": seconds,
        "cells": [c.result for c in cells],
    }
    path.write_text(json.dumps({**run, "history": history}, indent=1) + "\n")
    print(f"wrote {path.relative_to(ROOT)}")


def _commit() -> str:
    """The checkout the cells ran (``+dirty`` with uncommitted changes: the cells install it editable)."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "-uno"], cwd=ROOT, capture_output=True, text=True
        )
    except OSError:
        return ""
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def _summary(run: dict[str, Any]) -> dict[str, Any]:
    cells = [
        {k: c.get(k) for k in ("cell", "ok", "passed", "failures", "errors", "seconds", "versions", "doctor")}
        for c in run.get("cells", [])
    ]
    return {
        "finished": run.get("finished"),
        "commit": run.get("commit"),
        "argv": run.get("argv"),
        "seconds": run.get("seconds"),
        "cells": cells,
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("cells", nargs="*", help=f"cells to run (default all: {[c.name for c in CELLS]})")
    parser.add_argument("--fresh", action="store_true", help="rebuild the virtualenvs")
    parser.add_argument("--pyspark", metavar="VERSION", help="run the Airflow cells on this pyspark")
    args = parser.parse_args(argv)
    unknown = set(args.cells) - {c.name for c in CELLS}
    if unknown:
        parser.error(f"unknown cells {sorted(unknown)}")
    cells = select(args.cells, args.pyspark)
    COMPAT.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    for cell in cells:
        print(f"== {cell.name}: {cell.pin}", flush=True)
        run_cell(cell, args.fresh)
        print(
            f"== {cell.name}: {'ok' if cell.result['ok'] else 'FAILED'} in {cell.result['seconds']} s",
            flush=True,
        )
    total = round(time.monotonic() - t0, 1)
    if any(c.kind != "broker" for c in cells):
        print(table(cells))
    if any(c.kind == "broker" for c in cells):
        print(broker_table(cells))
    print(f"make compat: {sum(c.result['ok'] for c in cells)}/{len(cells)} cells ok in {total} s")
    write_results(cells, total, argv)
    return 0 if all(c.result["ok"] for c in cells) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
