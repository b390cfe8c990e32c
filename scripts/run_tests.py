"""`make test`: start the broker (Apache Kafka 4.4.0 in KRaft mode; KSTATE_BROKER=noida for the emulator)
unless KSTATE_BOOTSTRAP_SERVERS names a real cluster, run the whole suite against it, stop the broker.
Extra arguments go to pytest.

    python scripts/run_tests.py [-k expr] [-m "not deployment"]
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from kstate_support import ROOT
from kstate_support import broker as broker_helper


def _pytest(args: list[str]) -> int:
    cmd = [sys.executable, "-m", "pytest", "-ra", "-p", "no:cacheprovider", *args]
    print("+", " ".join(cmd), flush=True)
    return subprocess.call(cmd, cwd=ROOT)


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
