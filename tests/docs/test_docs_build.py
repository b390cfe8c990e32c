"""The documentation site builds with Sphinx, warnings as errors (what ``make docs`` runs), as part of
``make test``: it runs beside the e2e suite (``scripts/run_tests.py``), whose waits leave the machine idle,
instead of before the whole suite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_site_builds_with_warnings_as_errors(tmp_path: Path) -> None:
    html = tmp_path / "html"
    command = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html"]
    built = subprocess.run(
        [*command, "-d", str(tmp_path / "doctrees"), str(ROOT / "docs"), str(html)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert built.returncode == 0, (built.stdout + built.stderr)[-5000:]
    assert (html / "index.html").is_file() and (html / "reference" / "errors.html").is_file()
    assert "KStateError" in (html / "reference" / "errors.html").read_text(), "the errors table is generated"
