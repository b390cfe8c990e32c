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


def test_the_safety_watcher_reads_offsets_without_the_admin_offset_fetch() -> None:
    """With a reader, a sample never sends the AdminClient's ListConsumerGroupOffsets (librdkafka dies of
    SIGSEGV when a moved coordinator answers it NOT_COORDINATOR: see CommittedReader)."""
    from types import SimpleNamespace
    from unittest import mock

    from kstate_support.broker_faults import offsets_gap

    admin = mock.Mock()
    admin.list_topics.return_value = SimpleNamespace(
        topics={"t": SimpleNamespace(partitions={0: 0, 1: 1, 2: 2})}
    )
    desc = SimpleNamespace(members=[object()])
    admin.describe_consumer_groups.return_value = {"g": mock.Mock(result=mock.Mock(return_value=desc))}
    reader = mock.Mock()
    reader.offsets.return_value = {0: 5, 2: 7}
    n, got, missing = offsets_gap(admin, "t", "g", reader)
    assert (n, got, missing) == (3, desc, [1])
    reader.offsets.assert_called_once_with("t", 3)
    admin.list_consumer_group_offsets.assert_not_called()


def test_an_answer_with_a_partition_error_is_no_sample() -> None:
    """A partition answered with an error (a coordinator moving or loading) does not count as a partition
    without an offset: the whole answer raises and the sample is skipped."""
    from types import SimpleNamespace
    from unittest import mock

    from confluent_kafka import KafkaError, KafkaException
    from kstate_support.broker_faults import CommittedReader

    reader = CommittedReader.__new__(CommittedReader)
    reader.consumer = mock.Mock()
    ok = [
        SimpleNamespace(partition=0, offset=5, error=None),
        SimpleNamespace(partition=1, offset=-1001, error=None),
    ]
    reader.consumer.committed.return_value = ok
    assert reader.offsets("t", 2) == {0: 5}
    errored = SimpleNamespace(partition=1, offset=-1001, error=KafkaError(KafkaError.NOT_COORDINATOR))
    reader.consumer.committed.return_value = [ok[0], errored]
    with pytest.raises(KafkaException):
        reader.offsets("t", 2)
