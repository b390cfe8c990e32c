"""``make demo`` on Tansu (``KSTATE_BOOTSTRAP_SERVERS`` pointed at it) explains the broker's refusals
instead of dying with a traceback, and still writes its report (issue 17)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.chaos  # a few minutes: the doctor, the traffic warm-ups, a refused pipeline and maintenance
@pytest.mark.timeout(1200)
def test_the_demo_on_tansu_explains_the_refusals_and_writes_its_report(
    bootstrap: str, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        "KSTATE_BOOTSTRAP_SERVERS": bootstrap,
        "KSTATE_DEMO_STATE": str(tmp_path / "state"),
        "KSTATE_DEMO_ARTIFACTS": str(tmp_path / "artifacts"),
    }
    env.pop("KSTATE_KAFKA_CONFIG", None)
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "demo.py")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1100,
    )
    shown = proc.stdout + proc.stderr
    assert "Traceback" not in shown, shown[-4000:]
    report = (tmp_path / "artifacts" / "demo-report.md").read_text()
    assert "BROKEN" in report and "read_committed" in report  # the doctor's verdict, in the report
    assert "the broker refused CreatePartitions" in report  # story 1: explained, not a traceback
    assert "snapshot published: False" in report  # story 3: nothing built from aborted records
    assert "broker doctor:" in proc.stdout and "promises broken" in proc.stdout
    assert proc.returncode == 0, shown[-4000:]  # every story refused as it must on this broker
