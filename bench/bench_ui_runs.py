"""Benchmark the kstate page's Runs view: how fast a run's proof reads at 4,096 partitions x 100 groups.

    .venv/bin/python bench/bench_ui_runs.py [--sizes 256x10,4096x100,8192x200] [--runs 20]

Per size, a verify report is written with the verify operator's own row writer (the real format, gzip
JSON Lines, one row per group and partition) into a report folder next to ``--runs`` small run folders, then
the page's functions (``airflow_provider_kstate.plugins.views``) are timed as the API routes call them:

* ``list``  - one page (20) of the topic's runs: folders only, no report read;
* ``cold``  - the first page (50 groups) of the big run's proof: one streaming pass over its verify report,
  summarized per group in partition ranges, then cached (by file size and mtime);
* ``warm``  - another page (groups 50-99) of the same proof, from the cache;
* ``python`` / ``arrow`` - the summary pass alone, row by row in Python against pyarrow's JSON reader and
  numpy (the page uses the second; both give the same summary, asserted), side by side;
* ``json``  - the size of the cold page's JSON answer (what the browser downloads).

Prints a table and writes ``bench/results/ui_runs.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kstate_support import bench
from kstate_support.bench import Column

RESULTS = bench.results_path("ui_runs")
TOPIC = "orders"
#: The table: one row per size.
COLUMNS = [
    Column("partitions x groups", lambda r: f"{r['partitions']:,} x {r['groups']}"),
    Column("rows", "rows", ","),
    Column("report", "report_mb", "{} MB"),
    Column("list page", "list_ms", "{} ms"),
    Column("proof, first page (cold)", "cold_s", "{} s"),
    Column("rows/s cold", "cold_rows_per_s", ","),
    Column("next page (warm)", "warm_ms", "{} ms"),
    Column("cold/warm", "cold_over_warm", "{:,}x"),
    Column("Python pass", "python_pass_s", "{} s"),
    Column("pyarrow pass", "arrow_pass_s", "{} s"),
    Column("Python/pyarrow", "python_over_arrow", "{}x"),
    Column("page JSON", "page_json_kb", "{} KB"),
]


def write_verify(base: Path, owner: str, partitions: int, groups: int) -> tuple[str, float]:
    """Write a verify report of ``groups`` x ``partitions`` rows as the verify step does; return (folder, s)."""
    from airflow_provider_kstate.increase.report import report_location, write_report
    from airflow_provider_kstate.increase.verification import Marks, report_rows

    uri = report_location(str(base), TOPIC, owner, "verify")
    half = partitions // 2
    marks = Marks([0] * partitions, [1_000] * partitions, half)
    flags = bytearray(1 if p >= half else 0 for p in range(partitions))
    started = time.perf_counter()
    with write_report(uri) as report:
        for g in range(groups):
            offsets: list[int | None] = [900 if p < half else 0 for p in range(partitions)]
            lags = [100 if p < half else 1_000 for p in range(partitions)]
            report.write_lines(report_rows(f"group-{g:04d}", offsets, marks, lags, flags, {}))
    return Path(uri).parent.name, time.perf_counter() - started


def timed(fn: Any, repeat: int = 1) -> tuple[float, Any]:
    """Return the median seconds of ``repeat`` calls and the last result."""
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


def measure(partitions: int, groups: int, runs: int) -> dict[str, Any]:
    from airflow_provider_kstate.increase.report import read_report
    from airflow_provider_kstate.plugins import views

    with tempfile.TemporaryDirectory(prefix="kstate-bench-ui-") as tmp:
        base = Path(tmp)
        for i in range(runs):
            folder_small, _ = write_verify(base, f"kstate_partition_increase/manual__{i}", 8, 2)
        folder, write_s = write_verify(base, "kstate_partition_increase/manual__big", partitions, groups)
        report = base / TOPIC / folder / "verify.jsonl.gz"
        views.summarize_verify_file(str(base / TOPIC / folder_small / "verify.jsonl.gz"))  # imports, once
        python_s, by_python = timed(lambda: views.summarize_verify(read_report(str(report))))
        arrow_s, by_arrow = timed(lambda: views.summarize_verify_file(str(report)))
        assert by_arrow == by_python, "the two summaries differ"
        views.SUMMARIES._items.clear()
        list_s, page = timed(lambda: views.list_runs(str(base), TOPIC, 0, 20), repeat=5)
        assert page["total"] == runs + 1
        cold_s, first = timed(lambda: views.run_proof(str(base), TOPIC, folder, 0, 50))
        warm_s, second = timed(lambda: views.run_proof(str(base), TOPIC, folder, 50, 50), repeat=5)
        assert first["total"] == groups and first["partitions"] == partitions and first["ok"]
        assert len(second["groups"]) == min(50, max(groups - 50, 0))
        return {
            "partitions": partitions,
            "groups": groups,
            "rows": partitions * groups,
            "report_mb": round(report.stat().st_size / 1e6, 2),
            "write_s": round(write_s, 3),
            "list_ms": round(list_s * 1e3, 2),
            "cold_s": round(cold_s, 3),
            "warm_ms": round(warm_s * 1e3, 3),
            "cold_rows_per_s": round(partitions * groups / cold_s),
            "python_pass_s": round(python_s, 3),
            "arrow_pass_s": round(arrow_s, 3),
            "python_over_arrow": round(python_s / arrow_s, 2),
            "cold_over_warm": round(cold_s / warm_s),
            "page_json_kb": round(len(json.dumps(first)) / 1e3, 1),
        }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", default="256x10,4096x100,8192x200", help="partitions x groups, comma-separated"
    )
    parser.add_argument("--runs", type=int, default=20, help="small runs beside the big one (list paging)")
    args = parser.parse_args()
    results = []
    for size in args.sizes.split(","):
        partitions, groups = (int(x) for x in size.lower().split("x"))
        results.append(measure(partitions, groups, args.runs))
        bench.progress(f"measured {size}")
    result = {"machine": platform.platform(), "cpus": os.cpu_count(), "results": results}
    bench.write_results(RESULTS, result)
    bench.print_table(results, COLUMNS, markdown=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
