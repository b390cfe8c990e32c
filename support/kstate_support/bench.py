"""The benchmarks' harness: their broker, fresh topics, progress lines, tables and result files.

Every bench under ``bench/`` carried its own ``broker()``, ``create_topic()``, progress printer, table
printing and JSON writing, and the copies drifted (topic names, data folders, a trailing newline or not).
One copy here, on top of :mod:`kstate_support.broker` and :mod:`kstate_support.topics`:

* :func:`broker` — the named cluster (``KSTATE_BOOTSTRAP_SERVERS``), else an embedded broker in the bench's
  own data folder under ``.kstate/`` (two benches running at once must not share or wipe one folder);
* :func:`new_topic` / :func:`scratch_topic` — uniquely named topics (``bench-<prefix>-<6 hex>``),
  optionally with topic settings, returned once the cluster lists them;
* :func:`progress` — a timestamped line on stderr, so stdout keeps only the tables;
* :class:`Column` / :func:`table` / :func:`print_table` — aligned or markdown tables from rows and a column
  spec, one cell format per column;
* :func:`results_path` / :func:`write_results` — ``bench/results/<name>.json``, which the README and docs
  quote;
* :func:`broker_cpu_s` / :func:`process_cpu_s` — CPU seconds of the embedded broker (found by its data
  folder, not by a name another bench's broker shares) and of a process;
* :func:`git` — the commit a result was measured at.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kstate_support import ROOT, topics
from kstate_support import broker as broker_helper

#: Where the benches write their results (committed: the README and docs quote them).
RESULTS_DIR = ROOT / "bench" / "results"
#: The git-ignored folder of the embedded brokers' data.
KSTATE_DIR = ROOT / ".kstate"


def broker_dir(name: str, per_process: bool = False) -> Path:
    """The data folder ``.kstate/<name>`` of a bench's embedded broker.

    :param per_process: add ``-<pid>``, for a bench of which two runs may be under way at once.
    """
    return KSTATE_DIR / (f"{name}-{os.getpid()}" if per_process else name)


@contextlib.contextmanager
def broker(name: str, per_process: bool = False) -> Iterator[dict[str, Any]]:
    """Yield the librdkafka settings of the cluster of ``KSTATE_BOOTSTRAP_SERVERS`` (with the extras of
    ``KSTATE_KAFKA_CONFIG``), else of a fresh embedded broker in :func:`broker_dir` (stopped afterwards; a
    per-process folder is removed too, nothing else would ever reuse it)."""
    data_dir = broker_dir(name, per_process)
    try:
        with broker_helper.cluster(data_dir) as config:
            yield config
    finally:
        if per_process:
            shutil.rmtree(data_dir, ignore_errors=True)


def topic_name(prefix: str) -> str:
    """``bench-<prefix>-<6 hex>``: unique to this run, recognisable on a shared cluster (benches name their
    consumer groups this way too).

    Not :func:`kstate_support.topics.unique_name`'s longer form: the plan, the XCom and the task logs that
    bench_increase_scale measures carry the topic's and the groups' names, so their length is part of the
    measurement and stays the one of the published results.
    """
    return f"bench-{prefix}-{uuid.uuid4().hex[:6]}"


def new_topic(
    config: dict[str, Any],
    prefix: str,
    partitions: int,
    topic_config: dict[str, str] | None = None,
    replication: int = -1,
) -> str:
    """Create a fresh topic (see :func:`topic_name`) and return its name once the cluster lists it with
    every partition led, so the first measured client finds it whole.

    :param topic_config: topic settings, e.g. ``{"cleanup.policy": "compact"}``.
    :param replication: replicas per partition; -1 is the cluster's default.
    """
    name = topics.create_topic(config, topic_name(prefix), partitions, topic_config, replication)
    wait_for_topic(config, name, partitions)
    return name


def wait_for_topic(config: dict[str, Any], name: str, partitions: int, timeout: float = 60.0) -> None:
    """Wait until the cluster's metadata shows ``name`` with ``partitions`` partitions, each with a leader
    (a create is acknowledged by the controller before every broker knows the topic)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(config)
    deadline = time.monotonic() + timeout
    while not _listed(admin, name, partitions):
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {name} not listed with {partitions} led partitions within {timeout}s")
        time.sleep(0.1)


def _listed(admin: Any, name: str, partitions: int) -> bool:
    meta = admin.list_topics(name, timeout=10).topics.get(name)
    if meta is None or meta.error is not None or len(meta.partitions) != partitions:
        return False
    return all(p.leader >= 0 for p in meta.partitions.values())


def delete_topics(config: dict[str, Any], names: list[str]) -> None:
    """Delete ``names``, best effort (a bench's clean-up must not hide its own failure)."""
    topics.delete_topics(config, names)


@contextlib.contextmanager
def scratch_topic(
    config: dict[str, Any], prefix: str, partitions: int, topic_config: dict[str, str] | None = None
) -> Iterator[str]:
    """A :func:`new_topic` for the block, deleted afterwards whatever happened in it."""
    name = new_topic(config, prefix, partitions, topic_config)
    try:
        yield name
    finally:
        delete_topics(config, [name])


def progress(text: str) -> None:
    """Print ``[HH:MM:SS] text`` on stderr: where a long bench is, without mixing into its tables."""
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Column:
    """One column of a :func:`table`.

    :param title: the header.
    :param value: a key of the row (a mapping), or a function of the row.
    :param fmt: a format spec (``".3f"``, ``","``) or a template with one field (``"{:,} MB"``).
    :param align: ``">"`` (right) or ``"<"`` (left), in aligned tables.
    :param missing: the cell of a None value.
    """

    title: str
    value: str | Callable[[Any], Any]
    fmt: str = ""
    align: str = ">"
    missing: str = "-"

    def cell(self, row: Any) -> str:
        """The text of this column's cell in ``row``."""
        value = row.get(self.value) if isinstance(self.value, str) else self.value(row)
        if value is None:
            return self.missing
        return self.fmt.format(value) if "{" in self.fmt else format(value, self.fmt)


def table(rows: Iterable[Any], columns: Sequence[Column], markdown: bool = False) -> str:
    """The rows as a table: columns aligned to their widest cell under a dashed rule, or markdown."""
    titles = [c.title for c in columns]
    cells = [[c.cell(row) for c in columns] for row in rows]
    if markdown:
        return "\n".join(
            [_markdown_line(titles), "|" + "---|" * len(columns)] + [_markdown_line(r) for r in cells]
        )
    widths = [max([len(title)] + [len(r[i]) for r in cells]) for i, title in enumerate(titles)]
    aligns = [c.align for c in columns]
    lines = [titles, ["-" * w for w in widths], *cells]
    return "\n".join(_aligned_line(line, widths, aligns) for line in lines)


def _markdown_line(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _aligned_line(cells: Sequence[str], widths: Sequence[int], aligns: Sequence[str]) -> str:
    return "  ".join(
        f"{cell:{align}{width}}" for cell, width, align in zip(cells, widths, aligns, strict=True)
    ).rstrip()


def print_table(
    rows: Iterable[Any], columns: Sequence[Column], markdown: bool = False, title: str | None = None
) -> None:
    """Print :func:`table` on stdout, after ``title`` when given."""
    if title:
        print(title)
    print(table(rows, columns, markdown))


def results_path(name: str) -> Path:
    """``bench/results/<name>.json``."""
    return RESULTS_DIR / f"{name}.json"


def write_results(path: Path, data: Any) -> Path:
    """Write ``data`` as indented JSON (values JSON has no type for as their ``str``) with a final newline,
    creating the folder, and say so on stdout; return ``path``.

    Benches write before they print their tables: a table that fails to print loses no measurement.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")
    print(f"wrote {shown(path)}", flush=True)
    return path


def shown(path: Path) -> Path:
    """``path`` relative to the checkout when it is inside it (shorter in a bench's output)."""
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds process ``pid`` has used so far (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def broker_cpu_s(data_dir: Path) -> float | None:
    """CPU seconds the broker started here with ``data_dir`` has used (every Apache Kafka node's JVM, or
    the emulator); None when none runs (a named cluster). Matched on its data folder: another bench's
    broker on the machine is not this one."""
    pids = broker_helper.apache_kafka.pids(data_dir)
    if pids:
        return sum(process_cpu_s(pid) for pid in pids)
    for proc in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            args = (proc / "cmdline").read_bytes().split(b"\0")
            if proc.name.isdigit() and args[0].endswith(b"noida-db") and str(data_dir).encode() in args:
                return process_cpu_s(int(proc.name))
    return None


def git(*args: str) -> str:
    """The output of ``git <args>`` in the checkout, stripped; empty when git fails (no checkout)."""
    proc = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
    return proc.stdout.strip()
