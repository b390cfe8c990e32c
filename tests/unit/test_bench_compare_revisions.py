"""``bench/compare_revisions.py`` reports a bench that fails at a revision as failed, never the JSON committed there.

The benches are fake commands (``python -c ...``) run in a fake worktree that holds a stale result, as a
worktree of a commit holds the committed ``bench/results/<name>.json``. No broker, no git.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
STALE = {"median_ms": {"wall": {"  of which provider + DAG files": 12345.0}}, "stale": True}


def _load() -> Any:
    path = ROOT / "bench" / "compare_revisions.py"
    spec = importlib.util.spec_from_file_location("_entry_compare_revisions", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def cr() -> Any:
    return _load()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A fake worktree of revision ``abc1234`` whose ``bench/results/parse.json`` is a committed (stale) one."""
    tree = tmp_path / "kstate-rev-abc1234"
    results = tree / "bench" / "results"
    results.mkdir(parents=True)
    (results / "parse.json").write_text(json.dumps(STALE))
    return tree


def _bench(cr: Any, monkeypatch: pytest.MonkeyPatch, name: str, code: str) -> None:
    monkeypatch.setitem(cr.BENCHES, name, (["-c", code], "parse"))


FAIL = "import sys; sys.stderr.write('Traceback: the DAG does not import\\n'); sys.exit(1)"


@pytest.mark.parametrize("name", ["parse", "key_order"])
def test_a_failing_bench_is_reported_failed_not_read_from_the_stale_json(
    cr: Any, tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    # "parse" accepts exit 1 ("over budget") but only with a JSON this run wrote; "key_order" never does
    _bench(cr, monkeypatch, name, FAIL)
    log = tmp_path / "compare_revisions.log"
    with pytest.raises(cr.BenchFailed) as failed:
        cr._run(tree, name, log, "abc1234")
    message = str(failed.value)
    assert f"bench {name} failed at revision abc1234" in message
    assert "Traceback: the DAG does not import" in message  # the bench's stderr tail
    assert "12345" not in message
    assert "FAILED" in log.read_text()
    assert json.loads((tree / "bench" / "results" / "parse.json").read_text()) == STALE


def test_a_bench_exiting_0_without_writing_its_json_is_failed(
    cr: Any, tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _bench(cr, monkeypatch, "parse", "pass")
    with pytest.raises(cr.BenchFailed, match=r"exit 0 but bench/results/parse\.json left as it was"):
        cr._run(tree, "parse", tmp_path / "log", "abc1234")


def test_a_bench_that_writes_its_json_is_read(
    cr: Any, tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = (
        "import json, sys; open('bench/results/parse.json', 'w').write(json.dumps({'fresh': 1})); sys.exit(1)"
    )
    _bench(cr, monkeypatch, "parse", code)  # over budget: exit 1 with a fresh JSON is a result
    data = cr._run(tree, "parse", tmp_path / "log", "abc1234")
    assert data["fresh"] == 1 and "stale" not in data
    assert data["_exit"] == 1


def test_main_exits_non_zero_and_writes_no_table(
    cr: Any, tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _bench(cr, monkeypatch, "parse", FAIL)
    monkeypatch.setattr(cr, "_sha", lambda rev: rev)
    monkeypatch.setattr(cr, "_worktree", lambda sha: tree)
    out = tmp_path / "out"
    monkeypatch.setattr(
        sys, "argv", ["compare_revisions.py", "--revs", "abc1234", "--benches", "parse", "--out", str(out)]
    )
    with pytest.raises(SystemExit) as exited:
        cr.main()
    assert exited.value.code == 1
    assert "bench parse failed at revision abc1234" in capsys.readouterr().err
    assert not (out / "compare_revisions.md").exists()
    assert not list(out.glob("parse-*.json"))
