"""Run benches at several git revisions, interleaved, and print one table: before and after a change, side by side.

Each revision is checked out in its own worktree (``git worktree add --detach``) and its benches run with
that worktree first on ``PYTHONPATH``, so the installed venv serves every revision. Rounds interleave the
revisions (A B A B ...): a machine whose speed drifts during the run moves both sides. Each bench's JSON is
copied to ``--out`` as ``<bench>-<rev>-<round>.json`` and the table summarises them (median over rounds).
A bench's JSON counts only when that run wrote it: a bench that fails at a revision (or exits without
rewriting ``bench/results/<name>.json``, which at a commit holds the committed result) stops the script
with exit status 1, naming the bench, the revision and its stderr tail::

    python bench/compare_revisions.py --revs 716e9ba~1 HEAD --rounds 2 --out docs/measurements/issue31

The benches and the figures taken from each:

* ``parse`` (``bench_parse.py``): the provider and DAG files' parse cost, ms (median wall of its runs);
* ``key_order`` (``bench_key_order.py``, 4 -> 8, backlog 0 and 2,000): per order, records reordered and
  lost, and how long producers were blocked, s;
* ``window`` (``bench_partition_increase.py``, 2 consumers, 3 repeats): the pause window against a plain
  restart of the same consumers, s, and records lost.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

BENCHES: dict[str, tuple[list[str], str]] = {
    "parse": (["bench/bench_parse.py"], "parse"),
    "key_order": (
        ["bench/bench_key_order.py", "--partitions", "4", "--backlogs", "0", "2000"],
        "key_order",
    ),
    "window": (
        ["bench/bench_partition_increase.py", "--consumers", "2", "--repeats", "3", "--no-memory"],
        "partition_increase",
    ),
}
# Exit statuses after which a bench's (fresh) JSON is a result: ``bench_parse`` exits 1 when over its budget.
ACCEPTED_EXITS: dict[str, set[int]] = {"parse": {0, 1}}
STDERR_TAIL_LINES = 20


def _sha(rev: str) -> str:
    return subprocess.run(
        ["git", "rev-parse", "--short", rev], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.strip()


def _worktree(sha: str) -> Path:
    """Return a worktree of ``sha`` (made once), sharing this checkout's Apache Kafka jars."""
    tree = Path(f"/tmp/kstate-rev-{sha}")
    if not tree.exists():
        subprocess.run(["git", "worktree", "add", "-f", "--detach", str(tree), sha], cwd=ROOT, check=True)
    jars, link = ROOT / ".kstate" / "kafka", tree / ".kstate" / "kafka"
    if jars.exists() and not link.exists():
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(jars)
    return tree


class BenchFailed(RuntimeError):
    """A bench did not produce a result of its own at a revision (it failed, or left only an older JSON)."""


def _stat_ns(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except FileNotFoundError:
        return None


def _tail(text: str, lines: int = STDERR_TAIL_LINES) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:]) or "(no stderr)"


def _run(tree: Path, bench: str, log: Path, rev: str | None = None) -> dict[str, Any]:
    """Run one bench in ``tree``; return the JSON result that this run wrote.

    A bench writes to a fixed ``bench/results/<name>.json``, which at a commit already holds the committed
    (older) result, and a bench at an older revision takes no output path. So the file counts only when
    this run wrote it: it exists, and its mtime is not the one it had before the run and not earlier than
    the run's start. Otherwise, or when the bench exits with a status it does not use for a result (any
    non-zero one but ``bench_parse``'s 1, "over budget"), this raises :class:`BenchFailed` naming the
    bench, the revision and the tail of the bench's stderr: never the committed result instead.
    """
    args, result = BENCHES[bench]
    rev = rev or tree.name.removeprefix("kstate-rev-")
    env = dict(os.environ, PYTHONPATH=f"{tree}{os.pathsep}{tree / 'support'}", SPARK_LOCAL_IP="127.0.0.1")
    path = tree / "bench" / "results" / f"{result}.json"
    before = _stat_ns(path)
    began = time.monotonic()
    started_ns = time.time_ns()
    with log.open("a") as out, tempfile.TemporaryFile("w+") as err:
        out.write(f"\n=== {rev} {bench}\n")
        out.flush()
        done = subprocess.run([sys.executable, *args], cwd=tree, env=env, stdout=out, stderr=err)
        err.seek(0)
        stderr = err.read()
        out.write(stderr)
    after = _stat_ns(path)
    # a file system's clock for mtimes can be coarser than time.time_ns(): a second's slack on the start
    fresh = after is not None and after != before and after >= started_ns - 1_000_000_000
    problem = None
    if done.returncode not in ACCEPTED_EXITS.get(bench, {0}):
        problem = f"exit {done.returncode}"
    elif not fresh:
        written = "absent" if after is None else "left as it was before the run (a stale result)"
        problem = f"exit {done.returncode} but {path.relative_to(tree)} {written}"
    if problem is None:
        try:
            data: dict[str, Any] = json.loads(path.read_text())
        except ValueError as exc:
            problem = f"{path.relative_to(tree)} is not JSON ({exc})"
    if problem is not None:
        message = (
            f"bench {bench} failed at revision {rev}: {problem}; see {log}\n"
            f"--- stderr tail of {bench} at {rev}:\n{_tail(stderr)}"
        )
        with log.open("a") as out:
            out.write(f"=== FAILED: {message}\n")
        raise BenchFailed(message)
    data["_seconds"] = round(time.monotonic() - began, 1)
    data["_exit"] = done.returncode
    return data


def _parse_ms(data: dict[str, Any]) -> float:
    return float(data["median_ms"]["wall"]["  of which provider + DAG files"])


def _key_order(data: dict[str, Any]) -> dict[str, tuple[int, int, float]]:
    """Per ``order/backlog``: (reordered records, lost, producers blocked s)."""
    return {
        f"{row['order']} b{row['backlog']}": (row["violations"], row["lost"], row["producer_blocked_s"])
        for row in data["rows"]
    }


def _window(data: dict[str, Any]) -> tuple[float, float, int]:
    """(pause window s, plain restart of the same consumers s, lost) of the single-task layout."""
    row = next(r for r in data["pause_window"] if r["layout"] == "window")
    return row["pause_window_s"], row["restart_same_s"], row["lost"]


def _table(results: dict[str, dict[str, list[dict[str, Any]]]], revs: list[str]) -> list[str]:
    med = statistics.median
    lines = ["| bench | " + " | ".join(f"`{r}`" for r in revs) + " |", "|---|" + "---|" * len(revs)]
    if all(results[r].get("parse") for r in revs):
        cells = [f"{med(_parse_ms(d) for d in results[r]['parse']):.1f} ms" for r in revs]
        lines.append("| `bench_parse`: provider + DAG files at parse | " + " | ".join(cells) + " |")
    if all(results[r].get("key_order") for r in revs):
        keys = list(_key_order(results[revs[0]]["key_order"][0]))
        for key in keys:
            cells = []
            for r in revs:
                rows = [_key_order(d)[key] for d in results[r]["key_order"]]
                viol = "/".join(str(v) for v, _, _ in rows)
                lost = sum(lost for _, lost, _ in rows)
                blocked = "/".join(f"{b:.2f}" for _, _, b in rows)
                cells.append(f"{viol} reordered, {lost} lost, blocked {blocked} s")
            lines.append(f"| `bench_key_order` 4->8 {key} | " + " | ".join(cells) + " |")
    if all(results[r].get("window") for r in revs):
        cells = []
        for r in revs:
            rows = [_window(d) for d in results[r]["window"]]
            cells.append(
                f"{'/'.join(f'{w:.2f}' for w, _, _ in rows)} s vs restart "
                f"{'/'.join(f'{s:.2f}' for _, s, _ in rows)} s, {sum(lost for _, _, lost in rows)} lost"
            )
        lines.append(
            "| the pause window (2 consumers, 8 partitions), median of 3 per round | "
            + " | ".join(cells)
            + " |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--revs", nargs="+", required=True, help="git revisions, oldest first")
    parser.add_argument("--benches", nargs="+", default=list(BENCHES), choices=list(BENCHES))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "revisions")
    opts = parser.parse_args()
    opts.out.mkdir(parents=True, exist_ok=True)
    revs = [_sha(rev) for rev in opts.revs]
    trees = {sha: _worktree(sha) for sha in revs}
    log = opts.out / "compare_revisions.log"
    results: dict[str, dict[str, list[dict[str, Any]]]] = {sha: {} for sha in revs}
    for round_ in range(1, opts.rounds + 1):
        for bench in opts.benches:
            for sha in revs:
                print(f"[{time.strftime('%H:%M:%S')}] round {round_}: {bench} at {sha}", flush=True)
                try:
                    data = _run(trees[sha], bench, log, sha)
                except BenchFailed as exc:  # no table from partial or stale figures
                    print(exc, file=sys.stderr, flush=True)
                    raise SystemExit(1) from None
                results[sha].setdefault(bench, []).append(data)
                (opts.out / f"{bench}-{sha}-{round_}.json").write_text(json.dumps(data, indent=1))
    table = _table(results, revs)
    (opts.out / "compare_revisions.md").write_text("\n".join(table) + "\n")
    print("\n".join(table))
    for tree in trees.values():  # the benches' own results stay in the worktrees; ours are in --out
        shutil.rmtree(tree / "bench" / "results" / "__pycache__", ignore_errors=True)


if __name__ == "__main__":
    main()
