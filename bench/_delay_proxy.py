"""Real round trips for the benchmarks: the tests' broker (Apache Kafka, or the emulator with
``KSTATE_BROKER=noida``) in a private network namespace behind a delaying TCP proxy.

    with delayed_broker(data_dir, one_way_ms=1.0) as config: ...   # ~2 ms added to every round trip

Why a namespace: a broker advertises an address in its Metadata and FindCoordinator answers (the emulator,
noida-db, the one it binds, with no advertised-listener option), so a proxy on another address or port is
bypassed as soon as a client reads Metadata. Here the broker binds ``127.0.0.1:P`` inside a
namespace of its own (its own loopback), and the proxy listens on ``127.0.0.1:P`` in ours: the address the
broker advertises is the proxy's, so every connection of every client (bench, DAG run, consumers, admin)
goes through the proxy. No byte of the protocol is changed. ``tc ... netem`` would be the usual tool; the
``sch_netem`` kernel module is not available in this sandbox.

The proxy (``python bench/_delay_proxy.py --listen HOST:PORT --netns NAME --delay-ms D``, run as its own
process so its CPU does not share the bench's GIL) delays every chunk it forwards by ``D`` ms in each
direction, keeping the order: a request/response round trip gains ``2 * D`` ms. Its upstream sockets are
made inside the broker's namespace (``setns`` on the proxy's event-loop thread, then back).

Needs root (``ip netns``). Only loopback addresses are used; everything started is stopped on exit.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kstate_support import broker as broker_helper

CLONE_NEWNET = 0x40000000
CHUNK = 1 << 16


def _setns(path: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns({path}) failed")
    finally:
        os.close(fd)


def _socket_in(netns: str) -> socket.socket:
    """A TCP socket that lives in the network namespace ``netns`` (this thread returns to its own)."""
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        _setns(f"/var/run/netns/{netns}")
        try:
            return socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        finally:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.setns(home, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns back failed")
    finally:
        os.close(home)


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    """Forward ``reader`` to ``writer``, each chunk ``delay`` s after it arrived, in order."""
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def send() -> None:
        loop = asyncio.get_running_loop()
        while True:
            due, data = await queue.get()
            if not data:
                break
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()

    sender = asyncio.ensure_future(send())
    loop = asyncio.get_running_loop()
    try:
        while data := await reader.read(CHUNK):
            queue.put_nowait((loop.time() + delay, data))
    except (ConnectionError, OSError):
        pass
    queue.put_nowait((0.0, b""))
    with contextlib.suppress(ConnectionError, OSError):
        await sender
    with contextlib.suppress(ConnectionError, OSError):
        writer.close()


def _nodelay(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _handler(netns: str, upstream: tuple[str, int], delay: float) -> Any:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = _socket_in(netns)
        sock.setblocking(False)
        try:
            await asyncio.get_running_loop().sock_connect(sock, upstream)
        except OSError:
            sock.close()
            writer.close()
            return
        up_reader, up_writer = await asyncio.open_connection(sock=sock)
        _nodelay(writer)
        _nodelay(up_writer)
        await asyncio.gather(_pump(reader, up_writer, delay), _pump(up_reader, writer, delay))

    return handle


async def _serve(listen: tuple[str, int], netns: str, upstream: tuple[str, int], delay: float) -> None:
    server = await asyncio.start_server(_handler(netns, upstream, delay), *listen)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


def _ns_run(netns: str, *command: str, check: bool = True) -> None:
    subprocess.run(
        ["ip", "netns", "exec", netns, *command],
        check=check,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=60,
    )


def _start_proxy(port: int, netns: str, one_way_ms: float) -> subprocess.Popen[str]:
    proxy = subprocess.Popen(
        [sys.executable, __file__, "--listen", f"127.0.0.1:{port}", "--netns", netns]
        + ["--delay-ms", str(one_way_ms)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proxy.stdout is not None
    if proxy.stdout.readline().strip() != "ready":  # bounded: the proxy prints or exits
        proxy.kill()
        raise RuntimeError("the delay proxy did not start")
    return proxy


@contextlib.contextmanager
def delayed_broker(data_dir: Path, one_way_ms: float = 1.0) -> Iterator[dict[str, Any]]:
    """Run the tests' broker (Apache Kafka by default, ``KSTATE_BROKER=noida`` the emulator) in a private
    network namespace behind the delaying proxy; yield the client config (``bootstrap.servers`` = the proxy =
    the address the broker advertises)."""
    if shutil.which("ip") is None:
        raise RuntimeError("`ip` (iproute2) is needed for the namespace: apt-get install iproute2")
    netns = f"kstate-bench-{os.getpid()}"
    shutil.rmtree(data_dir, ignore_errors=True)
    data_dir.mkdir(parents=True)
    helper = [sys.executable, "-m", "kstate_support.broker"]
    subprocess.run(["ip", "netns", "add", netns], check=True, timeout=30)
    proxy = None
    try:
        _ns_run(netns, "ip", "link", "set", "lo", "up")
        # The helper picks free ports inside the namespace and prints the bootstrap the broker advertises.
        up = subprocess.run(
            ["ip", "netns", "exec", netns, *helper, "up", "--data-dir", str(data_dir)],
            check=True,
            capture_output=True,
            text=True,
            timeout=600,
        )
        bootstrap = up.stdout.strip().splitlines()[-1]
        proxy = _start_proxy(int(bootstrap.rsplit(":", 1)[1]), netns, one_way_ms)
        broker_helper._wait_ready(bootstrap, 60.0)
        sigterm = broker_helper.signal.getsignal(broker_helper.signal.SIGTERM)
        yield {"bootstrap.servers": bootstrap}
        broker_helper.release_kafka_clients(sigterm)
    finally:
        _ns_run(netns, *helper, "down", "--data-dir", str(data_dir), check=False)
        if proxy is not None:
            proxy.terminate()
            proxy.wait(10)
        subprocess.run(["ip", "netns", "del", netns], check=False, timeout=30)


def round_trip_ms(config: dict[str, Any], samples: int = 30) -> float:
    """Median milliseconds of a trivial request (``list_topics`` of one topic) on a warm client."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(config)
    admin.list_topics(timeout=10)
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        admin.list_topics(topic="__consumer_offsets", timeout=10)
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return times[len(times) // 2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--listen", required=True, help="HOST:PORT here; the upstream is the same in --netns")
    parser.add_argument("--netns", required=True)
    parser.add_argument("--delay-ms", type=float, default=1.0, help="added in each direction")
    args = parser.parse_args(argv)
    host, port = args.listen.rsplit(":", 1)
    address = (host, int(port))
    asyncio.run(_serve(address, args.netns, address, args.delay_ms / 1000))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
