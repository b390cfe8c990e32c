"""The failpoint fires once, in the process that reaches it, and costs nothing when unset."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

CODE = "from airflow_provider_kstate.failpoints import failpoint; failpoint('after_create'); print('alive')"


def _run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CODE], env={**os.environ, **env}, capture_output=True, text=True
    )


def test_failpoint_kills_once(tmp_path: Path) -> None:
    armed = tmp_path / "failpoints"
    armed.write_text("after_pause\nafter_create\n")
    first = _run({"KSTATE_FAILPOINT_FILE": str(armed)})
    assert first.returncode == -signal.SIGKILL and "alive" not in first.stdout
    assert armed.read_text() == "after_pause\n", "a failpoint fires once"
    second = _run({"KSTATE_FAILPOINT_FILE": str(armed)})
    assert second.returncode == 0 and "alive" in second.stdout


@pytest.mark.parametrize("env", [{}, {"KSTATE_FAILPOINT_FILE": "/nonexistent/failpoints"}])
def test_failpoint_unset_or_missing_file_is_a_no_op(env: dict[str, str]) -> None:
    clean = {k: v for k, v in os.environ.items() if k != "KSTATE_FAILPOINT_FILE"}
    result = subprocess.run(
        [sys.executable, "-c", CODE], env={**clean, **env}, capture_output=True, text=True
    )
    assert result.returncode == 0 and "alive" in result.stdout
