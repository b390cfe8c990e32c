"""The foreign fleet's judge and command pair without a broker (issue 25).

:func:`kstate_support.fleet.judge` must count what ``key_order.OrderChecker`` counts (a redelivery is not a
violation, a record first processed after a later seq of its key is), and ``svc.sh`` must be safe to run
blindly from a driver: idempotent, never signalling a pid that is not its service's, failing loudly when a
service does not exit.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from kstate_support.fleet import NODE_DIR, SVC, Fleet, judge, read_lines


def _d(key: str, seq: int, p: int, o: int, t: float) -> dict[str, Any]:
    return {"key": key, "seq": seq, "p": p, "o": o, "t": t}


def test_judge_counts_loss_per_partition_and_reorders_like_the_order_checker() -> None:
    delivered = [
        _d("a", 0, 0, 0, 1),
        _d("a", 1, 0, 1, 2),
        _d("a", 2, 1, 0, 3),
        _d("b", 0, 0, 2, 4),
        _d("b", 1, 1, 1, 5),
        _d("c", 0, 1, 2, 6),
    ]
    processed = [  # members' lines, not in processing order: judge sorts by t
        _d("a", 2, 1, 0, 10),  # a's new partition first
        _d("a", 0, 0, 0, 11),  # then its older records: two violations
        _d("a", 1, 0, 1, 12),
        _d("a", 2, 1, 0, 13),  # a redelivery: not a violation
        _d("b", 0, 0, 2, 8),
        _d("b", 1, 1, 1, 9),
    ]
    verdict = judge(delivered, list(reversed(processed)))
    assert verdict.lost == [("c", 0, 1, 2)]
    assert verdict.lost_by_partition == {1: 1}
    assert (verdict.records_out_of_order, verdict.keys_out_of_order) == (2, 1)
    assert verdict.violations == [("a", 0, 2), ("a", 1, 2)]
    assert (verdict.processed, verdict.redelivered) == (5, 1)
    assert judge(delivered, processed, since=6).delivered == 1  # loss counted from the mark on


def test_a_torn_last_line_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text('{"p": 0, "o": 1}\n{"p": 0, "o"')
    assert read_lines(path) == [{"p": 0, "o": 1}]
    assert read_lines(tmp_path / "missing.jsonl") == []


def _svc(run_dir: Path, *words: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SVC), "--run-dir", str(run_dir), *words], capture_output=True, text=True, timeout=timeout
    )


def test_the_command_pair_is_idempotent_and_signals_only_its_own_pid(tmp_path: Path) -> None:
    run = tmp_path / "run dir"  # a space: every path is quoted
    assert _svc(run, "stop", "never-started").returncode == 0
    assert _svc(run, "ready", "never-started").returncode == 1
    assert _svc(run, "start", "never-defined").returncode == 1
    assert _svc(run, "start", "bad name").returncode == 2
    assert _svc(run, "stop").returncode == 2

    # A stale pidfile naming a live process that is not the service (a recycled pid): never signalled.
    other = subprocess.Popen(["sleep", "30"])
    try:
        (run / "stale.pid").write_text(f"{other.pid}\n")
        assert _svc(run, "stop", "stale").returncode == 0
        assert other.poll() is None, "svc.sh signalled a process that is not its service"
        assert not (run / "stale.pid").exists()
    finally:
        other.kill()
        other.wait()


def test_stop_fails_when_the_service_ignores_sigterm(tmp_path: Path) -> None:
    """A service that does not exit within the bound makes stop exit 1 (the driver must not go on)."""
    run = tmp_path / "run"
    run.mkdir()
    stubborn = subprocess.Popen(
        ["bash", "-c", "trap '' TERM; while :; do sleep 0.05; done", "stub", "--name", "stubborn"],
        start_new_session=True,
    )
    try:
        (run / "stubborn.pid").write_text(f"{stubborn.pid}\n")
        began = time.monotonic()
        done = _svc(run, "stop", "--timeout", "1", "stubborn")
        assert done.returncode == 1, done
        # timeout contract: stop gives up at its --timeout 1 (not before), within 2x + 3 s on a loaded machine
        assert 1 <= time.monotonic() - began < 2 * 1 + 3
        assert stubborn.poll() is None
    finally:
        os.killpg(stubborn.pid, signal.SIGKILL)
        stubborn.wait()


@pytest.mark.skipif(not (NODE_DIR / "node_modules" / "kafkajs").is_dir(), reason="make node-deps first")
def test_a_consumer_that_never_reached_its_broker_starts_and_stops_cleanly(tmp_path: Path) -> None:
    """The real KafkaJS consumer against a closed port: start returns with it running but not ready, a
    second start leaves the same process, stop ends it with exit code 0 (it wrote its ``exit`` event)."""
    fleet = Fleet(tmp_path / "run", "127.0.0.1:1")
    pair = fleet.consumer("lonely", "t", "g")
    assert subprocess.run(pair.start, shell=True).returncode == 0
    pid = (fleet.run_dir / "lonely.pid").read_text()
    assert subprocess.run(pair.start, shell=True).returncode == 0
    assert (fleet.run_dir / "lonely.pid").read_text() == pid
    assert subprocess.run(pair.ready, shell=True, capture_output=True).returncode == 1
    # timeout contract: SIGTERM ends a consumer still dialling its broker well inside the stop's 20 s --timeout
    # (over it, stop exits 1); 10 s is many times what it takes, for a loaded machine
    assert fleet.stop("lonely") < 10
    assert not fleet.running("lonely")
    assert [e["ev"] for e in fleet.events("lonely")][-2:] == ["stop", "exit"]
    assert fleet.events("lonely")[-1]["code"] == 0
