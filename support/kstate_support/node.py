"""Spawn the Node.js test apps of ``clients/node/test/apps`` and follow their JSON-line events.

Each app takes one JSON argument, prints one JSON object a line on stdout (``{"t": ms, "event": ...}``),
logs to stderr and ends on a line command on stdin (``close`` / ``stop``). The Node packages come from
``make node-deps`` (``npm ci`` in ``clients/node``).
"""

from __future__ import annotations

import collections
import json
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from typing_extensions import Self

from kstate_support import ROOT

NODE_CLIENT = ROOT / "clients" / "node"
APPS = NODE_CLIENT / "test" / "apps"

Event = dict[str, Any]


def node_ready() -> str:
    """Return why the Node.js client cannot run here ("" when it can)."""
    if shutil.which("node") is None:
        return "node is not installed (Node.js 18+)"
    if not (NODE_CLIENT / "node_modules" / "kafkajs").is_dir():
        return f"{NODE_CLIENT}/node_modules is missing: run make node-deps"
    return ""


class JsonLinesApp:
    """One test app process that prints its events as JSON lines (the Node.js apps here, the Java client's
    apps in :mod:`kstate_support.java_client`): its events so far, waits on them, and a bounded stop.

    :param command: the app's command line.
    :param cwd: where it runs.
    :param name: a label for error messages.
    """

    def __init__(self, command: list[str], cwd: Path, name: str) -> None:
        self.name = name
        self.events: list[Event] = []
        self._stderr: collections.deque[str] = collections.deque(maxlen=60)
        self._changed = threading.Condition()
        self.proc = subprocess.Popen(
            command,
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self._readers = [
            threading.Thread(target=self._read_events, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read_events(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                self._stderr.append(f"stdout: {line.rstrip()}")
                continue
            with self._changed:
                self.events.append(event)
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.append(line.rstrip())

    def of(self, kind: str) -> list[Event]:
        """The events of one kind so far, in order."""
        with self._changed:
            return [e for e in self.events if e.get("event") == kind]

    def wait(self, match: Callable[[Event], bool], timeout: float = 30.0) -> Event:
        """Return the first event ``match`` accepts, waiting up to ``timeout`` seconds; fail otherwise."""
        deadline = time.monotonic() + timeout
        with self._changed:
            seen = 0
            while True:
                for event in self.events[seen:]:
                    if match(event):
                        return event
                seen = len(self.events)
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and seen == len(self.events)):
                    raise AssertionError(
                        f"{self.name}: no matching event within {timeout}s (exit code {self.proc.poll()}); "
                        f"stderr tail:\n{self.stderr()}"
                    )
                self._changed.wait(min(left, 0.2))

    def stderr(self) -> str:
        return "\n".join(self._stderr)

    def stop(self, command: str = "close", timeout: float = 30.0) -> int:
        """Send ``command`` on stdin, wait for the exit (kill after ``timeout``); return the exit code."""
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(command + "\n")
                self.proc.stdin.flush()
            except (BrokenPipeError, ValueError):
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        for reader in self._readers:
            reader.join(10)
        return int(self.proc.returncode)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


class NodeApp(JsonLinesApp):
    """One Node.js app of ``clients/node/test/apps``.

    :param script: the app's file name in ``clients/node/test/apps``.
    :param config: its JSON argument.
    :param name: a label for error messages.
    """

    def __init__(self, script: str, config: dict[str, Any], name: str = "") -> None:
        super().__init__(["node", str(APPS / script), json.dumps(config)], NODE_CLIENT, name or script)


def consumers(config: dict[str, Any], name: str = "consume") -> NodeApp:
    """``consume.js``: ControlledConsumer members of one group (see the script for ``config``)."""
    return NodeApp("consume.js", config, name)


def producer(config: dict[str, Any], name: str = "produce") -> NodeApp:
    """``produce.js``: a keyed ControlledProducer (see the script for ``config``)."""
    return NodeApp("produce.js", config, name)
