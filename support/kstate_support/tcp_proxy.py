"""A TCP proxy the tests control: it forwards a local port to a target address, and can cut the network.

:meth:`TcpProxy.cut` closes every connection through it and refuses new ones (``reject``: a connection is
accepted and closed at once, as a host whose port is closed; ``blackhole``: accepted and left silent, as a
network that drops packets, so a client waits for its own timeout); :meth:`TcpProxy.heal` lets them through
again. Threads, not asyncio: a test drives it from the main thread while Kafka clients use it.

    with TcpProxy(("127.0.0.1", broker_port)) as proxy:   # proxy.port forwards to the broker
        ...
        proxy.cut()          # every connection through it ends; new ones are refused
        proxy.heal()
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from types import TracebackType

#: What a cut does to a new connection: close it at once, or hold it open and silent.
REJECT, BLACKHOLE = "reject", "blackhole"


class TcpProxy:
    """Forward ``127.0.0.1:port`` (``port``: a free one unless given) to ``target``.

    :param target: ``(host, port)`` to forward to.
    :param port: the local port to listen on (0: a free one, see :attr:`port`).
    """

    def __init__(self, target: tuple[str, int], port: int = 0) -> None:
        self.target = target
        self._server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind(("127.0.0.1", port))
        self._server.listen(128)
        self.port = int(self._server.getsockname()[1])
        self.mode = ""  # "" forwards; REJECT or BLACKHOLE while cut
        self.connections = 0  # accepted since the start
        self.refused = 0  # accepted while cut
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._held: list[socket.socket] = []
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True, name=f"tcp-proxy-{self.port}")
        self._thread.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def cut_now(self) -> bool:
        return bool(self.mode)

    def cut(self, mode: str = REJECT) -> None:
        """Cut the network: close every connection through the proxy; new ones are ``mode`` (see module)."""
        if mode not in (REJECT, BLACKHOLE):
            raise ValueError(f"mode must be {REJECT!r} or {BLACKHOLE!r}, not {mode!r}")
        with self._lock:
            self.mode = mode
            sockets, self._open = list(self._open), set()
        for sock in sockets:
            _close(sock)

    def heal(self) -> None:
        """Let connections through again (those held by a blackhole cut are closed: clients reconnect)."""
        with self._lock:
            self.mode = ""
            held, self._held = self._held, []
        for sock in held:
            _close(sock)

    def close(self) -> None:
        self._halt.set()
        _close(self._server)
        self.cut()
        self.heal()
        self._thread.join(5)

    def __enter__(self) -> TcpProxy:
        return self

    def __exit__(
        self, _type: type[BaseException] | None, _exc: BaseException | None, _tb: TracebackType | None
    ) -> None:
        self.close()

    def _accept(self) -> None:
        while not self._halt.is_set():
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            self.connections += 1
            with self._lock:
                mode = self.mode
                if mode == BLACKHOLE:
                    self._held.append(client)
            if mode:
                self.refused += 1
                if mode == REJECT:
                    _close(client)
                continue
            threading.Thread(target=self._pipe, args=(client,), daemon=True).start()

    def _pipe(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.target, timeout=5)
        except OSError:
            _close(client)
            return
        upstream.settimeout(None)
        with self._lock:
            if self.mode:  # cut while connecting
                _close(client)
                _close(upstream)
                return
            self._open |= {client, upstream}
        peer = {client: upstream, upstream: client}
        try:
            while True:
                ready, _, _ = select.select(list(peer), [], [], 0.5)
                if self._halt.is_set() or client not in self._open:
                    return
                for sock in ready:
                    data = sock.recv(65536)
                    if not data:
                        return
                    peer[sock].sendall(data)
        except (OSError, ValueError):  # a cut closed a socket under us
            return
        finally:
            with self._lock:
                self._open -= {client, upstream}
            _close(client)
            _close(upstream)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
