"""The benchmarks' harness (:mod:`kstate_support.bench`): its tables and its results writer, no broker.

The benches' printed tables and their JSON under ``bench/results/`` (which the README and docs quote) all go
through these few functions now, so their behaviour is pinned here.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kstate_support import ROOT, bench
from kstate_support import broker as broker_helper
from kstate_support.bench import Column

ROWS = [
    {"cell": "8x1", "window_s": 0.41234, "rows": 2560, "ok": True},
    {"cell": "512x24", "window_s": None, "rows": 1_638_400, "ok": False},
]
COLUMNS = [
    Column("cell", "cell", align="<"),
    Column("window", "window_s", ".3f"),
    Column("rows", "rows", ","),
    Column("size", lambda r: r["rows"] / 1e6, "{:.2f} M"),
    Column("ok", "ok"),
]


def test_an_aligned_table_pads_each_column_to_its_widest_cell() -> None:
    assert bench.table(ROWS, COLUMNS).splitlines() == [
        "cell    window       rows    size     ok",
        "------  ------  ---------  ------  -----",
        "8x1      0.412      2,560  0.00 M   True",
        "512x24       -  1,638,400  1.64 M  False",
    ]


def test_a_markdown_table_has_one_line_per_row_under_its_rule() -> None:
    assert bench.table(ROWS, COLUMNS, markdown=True).splitlines() == [
        "| cell | window | rows | size | ok |",
        "|---|---|---|---|---|",
        "| 8x1 | 0.412 | 2,560 | 0.00 M | True |",
        "| 512x24 | - | 1,638,400 | 1.64 M | False |",
    ]


def test_a_cell_formats_its_value_by_spec_or_template_and_none_as_missing() -> None:
    assert Column("s", "s", ".1f").cell({"s": 2.25}) == "2.2"
    assert Column("s", "s", "{} ms").cell({"s": 0.5}) == "0.5 ms"
    assert Column("s", "s", ".1f", missing="timeout").cell({"s": None}) == "timeout"
    assert Column("s", "s").cell({}) == "-"
    assert Column("pair", lambda r: r[0] + r[1]).cell((1, 2)) == "3"


def test_an_empty_table_is_its_header(capsys: pytest.CaptureFixture[str]) -> None:
    bench.print_table([], COLUMNS[:2], title="none measured")
    assert capsys.readouterr().out.splitlines() == ["none measured", "cell  window", "----  ------"]


def test_the_results_writer_writes_indented_json_with_a_final_newline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "results" / "x.json"
    data: dict[str, Any] = {"rows": [{"a": 1.5, "b": None}], "ok": True, "where": tmp_path}
    assert bench.write_results(path, data) == path
    text = path.read_text()
    assert text.endswith("}\n") and text.startswith('{\n  "rows": [')
    assert json.loads(text) == {**data, "where": str(tmp_path)}  # no JSON type: written as its str
    assert capsys.readouterr().out == f"wrote {path}\n"


def test_results_go_under_bench_results_named_by_the_bench() -> None:
    assert bench.results_path("state") == ROOT / "bench" / "results" / "state.json"
    assert bench.shown(bench.results_path("state")) == Path("bench/results/state.json")


def test_topic_names_are_unique_and_recognisable() -> None:
    first, second = bench.topic_name("tp"), bench.topic_name("tp")
    assert re.fullmatch(r"bench-tp-[0-9a-f]{6}", first) and first != second


def test_the_bench_broker_is_the_named_cluster_and_leaves_no_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def no_embedded(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("an embedded broker was started although a cluster is named")

    monkeypatch.setattr(broker_helper, "running", no_embedded)
    monkeypatch.setattr(bench, "KSTATE_DIR", tmp_path)
    monkeypatch.setenv("KSTATE_BOOTSTRAP_SERVERS", "kafka-1.example:9093")
    monkeypatch.delenv("KSTATE_KAFKA_CONFIG", raising=False)
    with bench.broker("bench-x", per_process=True) as config:
        assert config == {"bootstrap.servers": "kafka-1.example:9093"}
    assert list(tmp_path.iterdir()) == []


def test_a_bench_broker_runs_in_the_bench_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Each bench has its own data folder; a per-process one is removed afterwards, nothing reuses it."""
    started: list[Path] = []

    @contextlib.contextmanager
    def running(data_dir: Path, nodes: int = 1) -> Iterator[str]:
        data_dir.mkdir(parents=True)
        started.append(data_dir)
        yield "127.0.0.1:1"

    monkeypatch.setattr(broker_helper, "running", running)
    monkeypatch.setattr(bench, "KSTATE_DIR", tmp_path)
    monkeypatch.delenv("KSTATE_BOOTSTRAP_SERVERS", raising=False)
    with bench.broker("bench-state") as config:
        assert config == {"bootstrap.servers": "127.0.0.1:1"}
    with bench.broker("bench-client", per_process=True):
        pass
    assert started == [tmp_path / "bench-state", tmp_path / f"bench-client-{os.getpid()}"]
    assert [p.name for p in tmp_path.iterdir()] == ["bench-state"]


def test_cpu_seconds_of_a_process_and_of_no_broker(tmp_path: Path) -> None:
    """The broker is found by its data folder only: with none running there, there is no broker CPU."""
    assert bench.process_cpu_s(os.getpid()) > 0
    assert bench.process_cpu_s(2**22 + 1) == 0.0  # above Linux's pid_max: never a process
    assert bench.broker_cpu_s(tmp_path / "no-broker") is None
