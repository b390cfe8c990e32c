"""Benchmark the broker doctor's verdict: the behavioural checks run anew against the cached verdict, side by side.

    .venv/bin/python bench/bench_doctor.py [--rounds 5]

Each round, alternating on one cluster:

* ``fresh``: ``diagnose(config, refresh=True)`` in process: the handshake probe, the cheap ApiVersions
  checks and every behavioural check, the verdict written to the cache topic;
* ``cached``: ``diagnose(config)`` in process: the handshake probe, the cheap checks and the cached verdict
  read back (no behavioural check), as a task's pre-flight calls it;
* ``cli cached``: ``python -m airflow_provider_kstate.doctor --json --needs increase``, the cached verdict
  through the command line a user types (the interpreter's start included).

The table gives each way's median and max seconds and its median against the fresh verdict's. These were
two tests' wall-clock bounds (the cached verdict within 5 s on Apache Kafka, the cached CLI within 60 s on
Tansu; issue 40): the tests keep proving the verdict comes from the cache, the seconds are measured here,
with the machine's load beside them. Writes ``bench/results/doctor.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

from kstate_support import bench
from kstate_support import broker as broker_helper
from kstate_support.bench import Column

from airflow_provider_kstate.doctor.diagnosis import diagnose

WAYS = ("fresh", "cached", "cli cached")


def _fresh(config: dict[str, Any]) -> None:
    _verdict, cached = diagnose(config, refresh=True)
    if cached:
        raise AssertionError("a refreshed verdict came from the cache")


def _cached(config: dict[str, Any]) -> None:
    _verdict, cached = diagnose(config)
    if not cached:
        raise AssertionError("the verdict was not read from the cache")


def _cli_cached(config: dict[str, Any]) -> None:
    extras = {k: v for k, v in config.items() if k != "bootstrap.servers"}
    cmd = [sys.executable, "-m", "airflow_provider_kstate.doctor", "--bootstrap-servers"]
    cmd += [config["bootstrap.servers"], "--config", json.dumps(extras), "--json", "--needs", "increase"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=240, check=False)
    try:
        cached = json.loads(done.stdout)["cached"]
    except (ValueError, KeyError) as exc:
        raise AssertionError(f"doctor rc {done.returncode}: {done.stderr[-2000:]}") from exc
    if cached is not True:
        raise AssertionError("the command line's verdict was not read from the cache")


def measure(config: dict[str, Any], rounds: int) -> dict[str, Any]:
    calls = {"fresh": _fresh, "cached": _cached, "cli cached": _cli_cached}
    times: dict[str, list[float]] = {way: [] for way in WAYS}
    load_before = os.getloadavg()
    for i in range(rounds):
        for way in WAYS:  # fresh first: the cached ways read what it wrote
            started = time.monotonic()
            calls[way](config)
            times[way].append(time.monotonic() - started)
        bench.progress(f"round {i + 1}/{rounds}: " + ", ".join(f"{w} {times[w][-1]:.2f} s" for w in WAYS))
    fresh = statistics.median(times["fresh"])
    rows = [
        {
            "way": way,
            "median_s": round(statistics.median(times[way]), 3),
            "max_s": round(max(times[way]), 3),
            "over_fresh": round(statistics.median(times[way]) / fresh, 3),
            "runs": [round(t, 3) for t in times[way]],
        }
        for way in WAYS
    ]
    return {
        "rows": rows,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }


COLUMNS = [
    Column("verdict", "way", align="<"),
    Column("median s", "median_s", ".3f"),
    Column("max s", "max_s", ".3f"),
    Column("x fresh", "over_fresh", ".3f"),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    with bench.broker("broker-bench-doctor") as config:
        measured = measure(config, args.rounds)
        named = broker_helper.external_config() is not None
    result = {
        "bench": "doctor",
        "commit": bench.git("rev-parse", "--short", "HEAD"),
        "broker": config["bootstrap.servers"] if named else broker_helper.describe(),
        "cores": os.cpu_count(),
        "rounds": args.rounds,
        **measured,
    }
    bench.write_results(bench.results_path("doctor"), result)
    title = (
        f"the doctor's verdict on {result['broker']}, {args.rounds} rounds; {result['cores']} cores, load "
        f"average {measured['load_average_before'][0]} before, {measured['load_average_after'][0]} after"
    )
    bench.print_table(measured["rows"], COLUMNS, title=title)
    return 0


if __name__ == "__main__":
    sys.exit(main())
