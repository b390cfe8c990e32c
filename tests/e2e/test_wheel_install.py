"""The wheel, as a user gets it: built, checked for publishing, installed into a fresh virtualenv, and the
README's quickstart run from there.

``python -m build`` (with uv as its installer) builds the checkout's sdist and the wheel from it, and
``twine check --strict`` checks both (the metadata PyPI would show: the README as the description);
``uv venv --seed`` + ``uv pip install --compile-bytecode`` install the wheel (base requirements only, no
``[spark-local]`` extra: the base install must not force a Spark) into a new environment under pytest's
temporary folder, from PyPI through uv's cache. Then, with only that environment on the PATH, the README's
quickstart (the shell and Python blocks between its ``quickstart`` markers) runs block by block, in order,
against the session's broker: the exported variables carry from one block to the next, ``localhost:9092``
is the session's broker and ``orders`` a topic of this test. The dry run must change nothing; the real run
must grow the topic and leave its report.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
UV = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
DAG_ID = "kstate_partition_increase"
README = ROOT / "README.md"
QUICKSTART_BEGIN = "<!-- quickstart:"
QUICKSTART_END = "<!-- quickstart: end -->"
#: The README tells a user to build the wheel with this; the test builds it the same way (``_install``).
BUILD = "python -m build"

pytestmark = [
    pytest.mark.wheel,
    pytest.mark.integration,
    pytest.mark.timeout(900),
    pytest.mark.skipif(UV is None, reason="uv is not installed (make venv installs it)"),
]


def _run(
    cmd: list[str], env: dict[str, str] | None = None, timeout: float = 600, cwd: Path | str = "/"
) -> str:
    """Run ``cmd`` outside the checkout (``python -m`` would import the checkout's package from the
    current folder); return its stdout+stderr, failing the test with the tail of it on a non-zero exit."""
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{' '.join(cmd[:4])} ... exited {proc.returncode}:\n{out[-4000:]}"
    return out


def _fresh_env(venv: Path, home: Path, dags: Path | None = None) -> dict[str, str]:
    """The environment of a user's shell: the fresh venv's bin first, a fresh AIRFLOW_HOME, the connections."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "VIRTUAL_ENV", "PYTHON"))}
    env = {
        **keep,
        "PATH": f"{venv / 'bin'}{os.pathsep}/usr/bin:/bin",
        "VIRTUAL_ENV": str(venv),
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",  # the task logs: the PLAN line
        "AIRFLOW_CONN_KAFKA_DEFAULT": os.environ["AIRFLOW_CONN_KAFKA_DEFAULT"],
    }
    if dags is not None:
        env["AIRFLOW__CORE__DAGS_FOLDER"] = str(dags)
    return env


def _install(tmp: Path) -> tuple[Path, dict[str, float]]:
    """Build the wheel and install it into a new venv; return the venv and the seconds each step took."""
    assert UV is not None
    timings: dict[str, float] = {}
    started = time.monotonic()
    # sdist, then the wheel from the unpacked sdist: checks that the sdist carries dags/ and setup.py,
    # and leaves no build/ folder in the shared checkout (a stale one could leak files into wheels).
    # `python -m build` (the README's command) with uv as the installer of its isolated build environment.
    env = {**os.environ, "PATH": f"{Path(UV).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    _run([sys.executable, "-m", "build", "--installer", "uv", "-o", str(tmp / "dist"), str(ROOT)], env=env)
    timings["build"] = time.monotonic() - started
    wheels = list((tmp / "dist").glob("airflow_provider_kstate-*.whl"))
    sdists = list((tmp / "dist").glob("airflow_provider_kstate-*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, (wheels, sdists)
    # Ready to publish: both artifacts pass twine's checks, warnings as errors (the README renders on PyPI).
    out = _run([sys.executable, "-m", "twine", "check", "--strict", str(wheels[0]), str(sdists[0])])
    assert out.count("PASSED") == 2, out
    venv = tmp / "venv"
    started = time.monotonic()
    _run([UV, "venv", "--quiet", "--seed", "-p", sys.executable, str(venv)])  # --seed: the README's pip
    _run(
        [
            UV,
            "pip",
            "install",
            "--quiet",
            "--compile-bytecode",
            "-p",
            str(venv / "bin" / "python"),
            str(wheels[0]),
        ]
    )
    timings["install"] = time.monotonic() - started
    return venv, timings


def quickstart_blocks(text: str) -> list[tuple[str, str]]:
    """The README's quickstart: its fenced ``bash`` and ``python`` blocks between the markers, in order."""
    begin = text.index(QUICKSTART_BEGIN)
    section = text[begin : text.index(QUICKSTART_END, begin)]
    return [(m[1], m[2]) for m in re.finditer(r"^```(bash|python)\n(.*?)^```$", section, re.M | re.S)]


def localize(block: str, topic: str, kafka: dict[str, Any]) -> str:
    """The block for this test: its broker for ``localhost:9092`` (its settings when it has more, a secured
    cluster of ``KSTATE_BOOTSTRAP_SERVERS``) and its topic for ``orders``."""
    servers = str(kafka["bootstrap.servers"])
    block = block.replace(
        """{"conn_type": "kafka", "extra": {"bootstrap.servers": "localhost:9092"}}""",
        json.dumps({"conn_type": "kafka", "extra": kafka}),
    )
    if set(kafka) != {"bootstrap.servers"}:
        block = block.replace(
            "--bootstrap-servers localhost:9092",
            f"--bootstrap-servers {servers} --config {shlex.quote(json.dumps(kafka))}",
        )
    block = block.replace("localhost:9092", servers)
    return re.sub(r"\borders\b", topic, block)


def _block(kind: str, code: str, env: dict[str, str], cwd: Path) -> tuple[str, dict[str, str]]:
    """Run one block as a user's shell would (bash blocks with ``-eo pipefail``; python blocks with the
    environment's python); return its output and the environment after it (a bash block's exports)."""
    if kind == "python":
        return _run(["python", "-c", code], env=env, cwd=cwd), env
    env_file = cwd / "env-after-block"
    script = f"set -eo pipefail\n{code}\nenv -0 > {shlex.quote(str(env_file))}\n"
    out = _run(["bash", "-c", script], env=env, cwd=cwd)
    after = dict(item.split("=", 1) for item in env_file.read_text().split("\0") if "=" in item)
    return out, after


def test_wheel_installs_into_a_fresh_venv_and_runs_the_readme_quickstart(
    tmp_path: Path, make_topic: Callable[..., str], admin: Any
) -> None:
    readme = README.read_text()
    blocks = quickstart_blocks(readme)
    commands = "\n".join(code for _, code in blocks)
    assert [kind for kind, _ in blocks].count("python") >= 1 and len(blocks) >= 4, blocks
    assert '"dry_run": true' in commands and "kstate plan" in commands, commands
    assert f"`{BUILD} --wheel`" in readme  # what the README says to build with is what _install ran

    venv, timings = _install(tmp_path)
    python = str(venv / "bin" / "python")

    # Base install: the Spark provider's pyspark-client comes along, the full pyspark does not.
    probe = "import importlib.metadata as m, sys; sys.exit(0 if 'pyspark' not in {d.metadata['Name'] for d in m.distributions()} else 1)"
    _run([python, "-c", probe])

    kafka = json.loads(os.environ["AIRFLOW_CONN_KAFKA_DEFAULT"])["extra"]
    topic = make_topic("readme", partitions=4)
    env = _fresh_env(venv, tmp_path / "airflow-home")
    env.pop("AIRFLOW_CONN_KAFKA_DEFAULT")  # the README's block 2 sets it
    outputs = []
    for kind, code in blocks:
        started = time.monotonic()
        out, env = _block(kind, localize(code, topic, kafka), env, tmp_path)  # dist/ is in tmp_path
        timings[f"block {len(outputs) + 1}"] = time.monotonic() - started
        outputs.append(out)
        partitions = len(admin.list_topics(topic, timeout=10).topics[topic].partitions)
        if '"dry_run": true' in code and '"partitions": 12}' not in code:
            assert partitions == 4, f"the dry run changed the topic:\n{out[-3000:]}"  # nothing created

    # The example DAGs came from the installed wheel, not from the checkout.
    dags = Path(env["AIRFLOW__CORE__DAGS_FOLDER"])
    assert dags.is_relative_to(venv) and (dags / f"{DAG_ID}.py").is_file(), dags
    # kstate plan saw the topic; the dry run planned it and the real run grew it.
    assert f"topic {topic}: 4 -> 12 partitions" in outputs[1], outputs[1][-3000:]
    assert "PLAN" in outputs[1] and topic in outputs[1], outputs[1][-3000:]
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 12
    # The report the README reads: the run's outcome and its proof files.
    last = outputs[-1]
    assert "4 -> 12 success" in last and "verify.jsonl.gz" in last and "progress.json" in last, last
    print("wheel test seconds:", {k: round(v, 1) for k, v in timings.items()})
