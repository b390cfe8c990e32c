"""Failpoints for crash tests: kill the task's process at a named step boundary.

Set ``KSTATE_FAILPOINT_FILE`` to a file's path in the workers' environment. While that file names a
failpoint (one name per line), the first process that reaches it removes the name (a failpoint fires once,
so Airflow's retry or a cleared task runs on) and SIGKILLs itself there, as a worker crash would end it.
Unset (production), :func:`failpoint` returns at once: one global read.

Boundaries of the increase: ``after_pause``, ``after_empty``, ``after_create``, ``mid_seed`` (live groups
seeded, offline ones not yet), ``after_scale``, ``after_seed``, ``after_resume``, ``mid_verify``.
"""

from __future__ import annotations

import fcntl
import os
import signal

_FILE = os.environ.get("KSTATE_FAILPOINT_FILE")


def failpoint(name: str) -> None:
    """SIGKILL this process if the failpoint file names ``name`` (once); free when no file is configured."""
    if _FILE is None:
        return
    try:
        with open(_FILE, "r+", encoding="utf-8") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            armed = [line.strip() for line in handle if line.strip()]
            if name not in armed:
                return
            armed.remove(name)
            handle.seek(0)
            handle.truncate()
            handle.write("".join(f"{n}\n" for n in armed))
            handle.flush()
            os.fsync(handle.fileno())
    except OSError:
        return
    os.kill(os.getpid(), signal.SIGKILL)
