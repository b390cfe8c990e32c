"""A consumer group of the kstate client piece in the test's process: ControlledConsumers polling in threads,
recording what each processed (key, value, partition) in processing order."""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Any

from airflow_provider_kstate.client_piece.consumer import ControlledConsumer


class ClientPieceGroup:
    """``members`` ControlledConsumers of ``group`` (``auto.offset.reset=latest``) polling ``topic``."""

    def __init__(self, config: dict[str, Any], topic: str, group: str, name: str, members: int = 2) -> None:
        self.seen: list[tuple[str, str, int]] = []  # (key, value, partition), in processing order
        self._lock = threading.Lock()
        self._halt = threading.Event()
        settings = {**config, "group.id": group, "auto.offset.reset": "latest"}
        self._consumers = [
            ControlledConsumer({**settings, "client.id": f"{name}-{i}"}, [topic], check_interval=0.1)
            for i in range(members)
        ]
        self._threads = [threading.Thread(target=self._loop, args=(c,), daemon=True) for c in self._consumers]
        for thread in self._threads:
            thread.start()

    def _loop(self, consumer: Any) -> None:
        while not self._halt.is_set():
            msg = consumer.poll(0.1)
            if msg is None or msg.error():
                continue
            key = (msg.key() or b"").decode()
            with self._lock:
                self.seen.append((key, (msg.value() or b"").decode(), msg.partition()))
        consumer.close()

    @property
    def read(self) -> int:
        """How many records the group processed."""
        with self._lock:
            return len(self.seen)

    def values(self) -> set[str]:
        with self._lock:
            return {value for _k, value, _p in self.seen}

    def out_of_order(self) -> int:
        """Keys whose integer values (a sequence per key) were processed out of their written order."""
        order: dict[str, list[int]] = defaultdict(list)
        with self._lock:
            for key, value, _p in self.seen:
                order[key].append(int(value))
        return sum(1 for seqs in order.values() if seqs != sorted(seqs))

    def stop(self) -> None:
        self._halt.set()
        for thread in self._threads:
            thread.join(30)
