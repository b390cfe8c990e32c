"""`make test`: start the broker (Apache Kafka 4.4.0 in KRaft mode; KSTATE_BROKER=noida for the emulator)
unless KSTATE_BOOTSTRAP_SERVERS names a real cluster, run the whole suite against it, stop the broker.
Extra arguments go to pytest.

    python scripts/run_tests.py [-k expr] [-m "not deployment"]

Without test paths among the arguments the suite runs as two pytest processes side by side on the one
broker: :data:`BESIDE` (``tests/e2e``, a real Airflow deployment whose tests mostly wait for its scheduler,
~3/4 of the machine idle, and the two slowest integration modules) and everything else. The second
process's output is kept in ``.kstate/e2e-pytest.log`` and printed once both finished, followed by the
other's summary again, so the output still ends on a pytest summary. ``KSTATE_TEST_SERIAL=1``
runs one pytest process, as with test paths.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from kstate_support import ROOT
from kstate_support import broker as broker_helper

E2E = "tests/e2e"
#: The second process: the e2e deployment, and beside its idle waits the state maintenance runs (Spark, ~3.5
#: min), the 3-node broker-fault case (~2 min), the topic sets (~1 min), the topic ids' module (its Spark cases in
#: make chaos)
#: and the documentation site's build (Sphinx, ~25 s of CPU), which made the other process the critical path.
BESIDE = (
    E2E,
    "tests/integration/test_state_maintenance.py",
    "tests/integration/test_broker_faults.py",
    "tests/integration/test_multi_topic_increase.py",
    "tests/integration/test_topic_identity.py",
    "tests/docs/test_docs_build.py",
)
E2E_LOG = ROOT / ".kstate" / "e2e-pytest.log"


def _command(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "pytest", "-ra", "-p", "no:cacheprovider", *args]


def _pytest(args: list[str]) -> int:
    if os.environ.get("KSTATE_TEST_SERIAL") == "1" or any(a.startswith("tests") for a in args):
        cmd = _command(args)
        print("+", " ".join(cmd), flush=True)
        return subprocess.call(cmd, cwd=ROOT)
    return _side_by_side(args)


def _side_by_side(args: list[str]) -> int:
    """Run :data:`BESIDE` and the rest as two pytest processes at once; return the worse exit status."""
    ignored = [arg for path in BESIDE for arg in ("--ignore", path)]
    e2e_cmd, rest_cmd = _command([*args, *BESIDE]), _command([*args, *ignored, "tests"])
    E2E_LOG.parent.mkdir(parents=True, exist_ok=True)
    print("+", " ".join(e2e_cmd), f"> {E2E_LOG.relative_to(ROOT)} (alongside)", flush=True)
    with E2E_LOG.open("wb") as log:
        e2e = subprocess.Popen(e2e_cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        print("+", " ".join(rest_cmd), flush=True)
        try:
            rest, summary = _tee(rest_cmd)
        except BaseException:  # interrupted: the e2e suite stops its deployment on SIGINT
            e2e.send_signal(signal.SIGINT)
            raise
        finally:
            status = e2e.wait()
    print(f"\n{'=' * 25} {', '.join(BESIDE)} (ran alongside the rest) {'=' * 25}", flush=True)
    sys.stdout.buffer.write(E2E_LOG.read_bytes())
    print(f"\n{'=' * 25} the rest's summary again (exit status {rest}) {'=' * 25}", flush=True)
    sys.stdout.buffer.write(b"".join(summary))
    sys.stdout.flush()
    return rest or status


def _tee(cmd: list[str]) -> tuple[int, list[bytes]]:
    """Run ``cmd`` with its output shown as it comes; return its exit status and its summary lines (from
    pytest's "short test summary info", else its last line)."""
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    summary: list[bytes] = []
    for line in proc.stdout:
        sys.stdout.buffer.write(line)
        sys.stdout.flush()
        if b"short test summary info" in line:
            summary = []
        summary.append(line)
        if len(summary) > 400:
            summary = summary[-1:]
    return proc.wait(), summary


def main(argv: list[str]) -> int:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # The suite's Spark applications are short local runs: the JIT's first tier only and the serial collector
    # start a driver ~17% sooner on 2 cores (15.1-18.3 s -> 13.3-15.0 s, side by side); a test setting only.
    os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    if os.environ.get("KSTATE_BOOTSTRAP_SERVERS"):
        print(f"testing against the cluster at {os.environ['KSTATE_BOOTSTRAP_SERVERS']}", flush=True)
        return _pytest(argv)
    with broker_helper.running(ROOT / ".kstate" / "broker") as bootstrap:
        print(f"{broker_helper.describe()} at {bootstrap}", flush=True)
        os.environ["KSTATE_BOOTSTRAP_SERVERS"] = bootstrap
        try:
            return _pytest(argv)
        finally:
            del os.environ["KSTATE_BOOTSTRAP_SERVERS"]


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
