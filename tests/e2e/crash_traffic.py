"""A consumer service in its own process for the crash tests: ControlledConsumers, latest reset.

    python -m tests.e2e.crash_traffic BOOTSTRAP TOPIC GROUP OUT [N]

Runs ``N`` (default 2) :class:`~airflow_provider_kstate.client_piece.consumer.ControlledConsumer` members of
``GROUP`` (``kstate_support.traffic``'s ``ConsumerFleet``, ``auto.offset.reset=latest``) and appends every
received sequence number to ``OUT`` (one per line, flushed every 0.2 s). Stops on SIGTERM/SIGINT; a SIGKILL
is a crash (what it had flushed stays in ``OUT``).
"""

from __future__ import annotations

import signal
import sys
import threading

from kstate_support.traffic import ConsumerFleet


def main(argv: list[str]) -> int:
    """Consume until told to stop; return 0."""
    bootstrap, topic, group, out = argv[:4]
    n = int(argv[4]) if len(argv) > 4 else 2
    halt = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: halt.set())
    signal.signal(signal.SIGINT, lambda *_: halt.set())
    fleet = ConsumerFleet({"bootstrap.servers": bootstrap}, topic, group, n=n, controlled=True)
    written: set[int] = set()
    try:
        with open(out, "a", encoding="utf-8") as handle:
            handle.write("ready\n")
            handle.flush()
            while True:
                stopping = halt.wait(0.2)
                with fleet._lock:
                    new = fleet.received - written
                handle.write("".join(f"{seq}\n" for seq in sorted(new)))
                handle.flush()
                written |= new
                if stopping:
                    break
    finally:
        fleet.stop()  # the members leave their group whatever ended the loop (an error writing OUT too)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
