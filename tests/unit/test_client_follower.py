"""The control follower's clock, without a broker: ticks on the wall clock's multiples, hurried ticks."""

from __future__ import annotations

import time
from typing import Any

from airflow_provider_kstate.client.consumer import ControlFollower


class _Owner:
    _due = False


class _Tail:
    topic = "control"
    _timeout = 1.0

    def __init__(self) -> None:
        self.looks: list[float] = []
        self.closed = False

    def fetch_new(self) -> list[Any]:
        self.looks.append(time.time())
        return []

    def close(self) -> None:
        self.closed = True


def _phase(t: float, interval: float) -> float:
    """Distance of ``t`` to the nearest multiple of ``interval``."""
    r = t % interval
    return min(r, interval - r)


def test_next_tick_is_a_multiple_of_the_interval_on_the_wall_clock() -> None:
    follower = ControlFollower(_Owner(), _Tail(), interval=0.2, fast_interval=0.01)  # type: ignore[arg-type]
    for _ in range(20):
        delay = follower._next_delay()
        assert 0 < delay <= 0.2
        assert _phase(time.time() + delay, 0.2) < 0.002


def test_hurry_switches_to_the_fast_interval_for_a_while_and_back() -> None:
    follower = ControlFollower(_Owner(), _Tail(), interval=0.2, fast_interval=0.01)  # type: ignore[arg-type]
    follower.hurry(0.05)
    assert follower._next_delay() <= 0.01
    time.sleep(0.06)
    assert _phase(time.time() + follower._next_delay(), 0.2) < 0.002
    follower.hurry(10)
    follower.hurry(0)
    assert _phase(time.time() + follower._next_delay(), 0.2) < 0.002


def test_followers_look_at_the_same_instants_and_stop_at_once() -> None:
    tails = [_Tail(), _Tail()]
    owner = _Owner()
    followers = [ControlFollower(owner, t, interval=0.05) for t in tails]  # type: ignore[arg-type]
    for f in followers:
        f.start()
    time.sleep(0.32)
    started = time.monotonic()
    for f in followers:
        f.stop()
    assert time.monotonic() - started < 0.2, "stop() waits for the next tick"
    assert all(t.closed for t in tails)
    assert all(len(t.looks) >= 4 for t in tails)
    for t in tails:  # every look on a multiple of 50 ms (scheduling delay aside)
        assert all(_phase(x, 0.05) < 0.02 for x in t.looks), t.looks
