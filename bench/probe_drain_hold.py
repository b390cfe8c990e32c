"""Probe (not a bench): where ``producer_blocked_s`` of ``bench_key_order`` drain at backlog 0 goes.

    nice -n 19 .venv/bin/python bench/probe_drain_hold.py [--runs 8]

Runs ``bench_key_order.one_run`` (order=drain, 4->8, backlog 0) ``--runs`` times on one broker (the bench's
own embedded one unless ``KSTATE_BOOTSTRAP_SERVERS`` is set), unchanged, with timestamps around its steps:
the hold applied by the producer (``Hold.started``), ``hold_for_drain`` returned, each ``wait_until`` (how
many polls: every poll past the first costs its 0.2 s interval), ``drain_barrier`` returned, ``set_layout``
(the release) and the release applied (``Hold.ended``). Prints one JSON line per run, times in seconds from
``Hold.started``. Run it at both commits (a worktree each) and compare ``extra_polls`` with ``blocked_s``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid

import bench_key_order as b  # the script's folder is on sys.path
from kstate_support import bench

EVENTS: list[tuple[str, float, object]] = []
PRODUCERS: list[object] = []


def _mark(name: str, extra: object = None) -> None:
    EVENTS.append((name, time.monotonic(), extra))


_wait_until = b.wait_until


def wait_until(predicate, timeout, interval=0.2):  # type: ignore[no-untyped-def]
    line = getattr(getattr(predicate, "__code__", None), "co_firstlineno", 0)
    polls = [0]

    def counted():  # type: ignore[no-untyped-def]
        polls[0] += 1
        return predicate()

    ok = _wait_until(counted, timeout, interval)
    _mark(f"wait_until@{line}", polls[0])
    return ok


def _timed(cls: type, name: str) -> None:
    inner = getattr(cls, name)

    def wrapper(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        try:
            return inner(self, *args, **kwargs)
        finally:
            _mark(name)

    setattr(cls, name, wrapper)


class KeyedProducer(b.KeyedProducer):  # type: ignore[misc,valid-type]
    def __init__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        PRODUCERS.append(self)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=8)
    args = parser.parse_args(argv)
    b.wait_until = wait_until
    b.KeyedProducer = KeyedProducer
    _timed(b.KeyOrderSwitch, "hold_for_drain")
    _timed(b.KeyOrderSwitch, "drain_barrier")
    _timed(b.Controller, "set_layout")
    with bench.broker("bench-key-order-broker") as config:
        control_topic = f"_kstate_control_bench_{uuid.uuid4().hex[:6]}"
        for _ in range(args.runs):
            EVENTS.clear()
            PRODUCERS.clear()
            row = b.one_run(config, control_topic, 4, 0, "drain", 500.0)
            holds = PRODUCERS[-1].producer.holds
            h = holds[0]
            t0 = h.started
            steps = [(n, round(t - t0, 3), x) for n, t, x in EVENTS]
            polls = {n: x for n, _t, x in steps if n.startswith("wait_until")}
            print(
                json.dumps(
                    {
                        "blocked_s": row["producer_blocked_s"],
                        "drained_s": row["drained_s"],
                        "held_s": round(h.held_s or 0.0, 3),
                        "extra_polls": {k: v - 1 for k, v in polls.items() if v and v > 1},
                        "steps": steps,
                    }
                ),
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
