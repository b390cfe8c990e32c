"""The harness of the broker-fault chaos tests (issue 33), without a broker: the TCP proxy forwards, cuts
and heals; a fault fires once, at its step, on the broker of its role; a group's coordinator partition is
Kafka's (``Utils.abs(group.hashCode()) % partitions``)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from kstate_support.broker_faults import Faults, offsets_partition
from kstate_support.tcp_proxy import BLACKHOLE, TcpProxy


@pytest.fixture
def echo() -> Iterator[int]:
    server = socket.create_server(("127.0.0.1", 0))
    halt = threading.Event()

    def serve() -> None:
        while not halt.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=lambda c=conn: _echo(c), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    yield int(server.getsockname()[1])
    halt.set()
    server.close()


def _echo(conn: socket.socket) -> None:
    with conn:
        while data := conn.recv(4096):
            conn.sendall(data)


def _roundtrip(port: int, payload: bytes = b"ping") -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
        s.sendall(payload)
        return s.recv(4096)


def test_the_proxy_forwards_cuts_and_heals(echo: int) -> None:
    with TcpProxy(("127.0.0.1", echo)) as proxy:
        assert _roundtrip(proxy.port) == b"ping"
        held = socket.create_connection(("127.0.0.1", proxy.port), timeout=2)
        held.sendall(b"a")
        assert held.recv(10) == b"a"
        proxy.cut()
        assert held.recv(10) == b""  # the open connection ends
        assert _roundtrip(proxy.port) == b""  # a new one is closed at once
        proxy.heal()
        assert _roundtrip(proxy.port, b"back") == b"back"
        proxy.cut(BLACKHOLE)
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=2) as s:
            s.settimeout(0.3)
            s.sendall(b"x")
            with pytest.raises(socket.timeout):
                s.recv(10)  # accepted, silent
        proxy.heal()
        assert proxy.refused == 2


def test_a_fault_fires_once_at_its_step_on_the_broker_of_its_role(tmp_path: Path) -> None:
    hit: list[int] = []
    held = {"leader": 2, "controller": 1, "coordinator": 2, "control_leader": 3, "lease_leader": 3}
    faults = Faults(tmp_path, "seed", "coordinator", held, action=hit.append)
    faults.fire("create")
    faults.fire("seed")
    faults.fire("seed")
    assert hit == [2] and faults.kills[0].held == ["coordinator", "leader"]


def test_the_coordinator_partition_is_kafkas() -> None:
    # Java: "hello".hashCode() == 99162322; "polygenelubricants".hashCode() == Integer.MIN_VALUE
    assert offsets_partition("hello", 50) == 99162322 % 50
    assert offsets_partition("polygenelubricants", 16) == 0
