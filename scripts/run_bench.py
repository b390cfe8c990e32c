"""`make bench`: run every benchmark under bench/ in turn; each prints a table and writes bench/results/*.json."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCHES = [
    "bench_parse.py",
    "bench_client_throughput.py",
    "bench_partition_increase.py",
    "bench_state.py",
    "bench_changelog_reader.py",
    "bench_increase_scale.py",
]


def main() -> int:
    failed = []
    for name in BENCHES:
        print(f"\n=== bench/{name}", flush=True)
        if subprocess.call([sys.executable, str(ROOT / "bench" / name)], cwd=ROOT) != 0:
            failed.append(name)
    print(f"\nbenchmarks done; results in bench/results/{'; failed: ' + ', '.join(failed) if failed else ''}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
