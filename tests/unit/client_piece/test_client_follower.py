"""The control follower's clock, and the consumer's poll routing, without a broker."""

from __future__ import annotations

import time
from typing import Any

import pytest

from airflow_provider_kstate.client_piece import follower as follower_module
from airflow_provider_kstate.client_piece.consumer import ControlledConsumer
from airflow_provider_kstate.client_piece.follower import ControlFollower


class _Owner:
    _due = False

    def _interrupt(self) -> None:
        self._due = True


class _Tail:
    topic = "control"
    timeout = 1.0

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


class _WallClock:
    """A wall clock that stands still until moved: the tick arithmetic is checked exactly, not against a
    second reading of a clock that went on while a loaded machine descheduled the test."""

    def __init__(self, now: float) -> None:
        self.now = now

    def time(self) -> float:
        return self.now

    def __getattr__(self, name: str) -> Any:  # the rest of the time module, as it is
        return getattr(time, name)


@pytest.fixture
def wall_clock(monkeypatch: pytest.MonkeyPatch) -> _WallClock:
    clock = _WallClock(1_700_000_000.0)
    monkeypatch.setattr(follower_module, "time", clock)  # the module reads time.time(); monotonic is its own
    return clock


def test_next_tick_is_a_multiple_of_the_interval_on_the_wall_clock(wall_clock: _WallClock) -> None:
    follower = ControlFollower(_Owner()._interrupt, _Tail(), interval=0.2, fast_interval=0.01)  # type: ignore[arg-type]
    for i in range(20):
        wall_clock.now += 0.0137 * i
        delay = follower._next_delay()
        assert 0 < delay <= 0.2
        assert _phase(wall_clock.now + delay, 0.2) < 1e-5


def test_hurry_switches_to_the_fast_interval_for_a_while_and_back(wall_clock: _WallClock) -> None:
    follower = ControlFollower(_Owner()._interrupt, _Tail(), interval=0.2, fast_interval=0.01)  # type: ignore[arg-type]
    wall_clock.now += 0.123
    follower.hurry(0.05)
    assert follower._next_delay() <= 0.01
    time.sleep(0.06)
    assert _phase(wall_clock.now + follower._next_delay(), 0.2) < 1e-5
    follower.hurry(10)
    follower.hurry(0)
    assert _phase(wall_clock.now + follower._next_delay(), 0.2) < 1e-5


def test_followers_look_at_the_same_instants_and_stop_at_once() -> None:
    tails = [_Tail(), _Tail()]
    for t in tails:
        t.timeout = 10.0  # stop() joins for interval + the tail's timeout when the thread is not woken
    owner = _Owner()
    followers = [ControlFollower(owner._interrupt, t, interval=0.05) for t in tails]  # type: ignore[arg-type]
    for f in followers:
        f.start()
    time.sleep(0.32)
    started = time.monotonic()
    for f in followers:
        f.stop()
    # timeout contract: stop() wakes the thread, so both return long before their 10.05 s join timeouts
    assert time.monotonic() - started < 5, "stop() waited for the thread's join timeout"
    assert all(t.closed for t in tails)
    assert all(len(t.looks) >= 4 for t in tails)
    for t in tails:  # the looks on the multiples of 50 ms: most of them, a descheduled wake-up aside
        phases = sorted(_phase(x, 0.05) for x in t.looks)
        assert phases[len(phases) // 2] < 0.02, t.looks


# -- poll routing: the inner consumer's own poll while running and nothing is due -------------------------


class _Inner:
    """A stand-in inner Consumer: hands out the queued messages, then None."""

    def __init__(self, messages: list[Any]) -> None:
        self.queue = list(messages)
        self.timeouts: list[float] = []

    def poll(self, timeout: float) -> Any:
        self.timeouts.append(timeout)
        return self.queue.pop(0) if self.queue else None


class _Follower:
    def __init__(self) -> None:
        self.inbox: list[Any] = []

    def take(self) -> list[Any]:
        out, self.inbox = self.inbox, []
        return out

    def wait(self, timeout: float) -> None:
        time.sleep(min(timeout, 0.001))


def _routed(messages: list[Any]) -> tuple[ControlledConsumer, _Inner]:
    cc = ControlledConsumer.__new__(ControlledConsumer)  # no broker: only the routing is under test
    inner = _Inner(messages)
    cc.__dict__.update(_due=False, _pending=None, check_interval=0.2, _follower=_Follower(), _key="k")
    cc._set_inner(inner)  # type: ignore[arg-type]
    return cc, inner


def test_poll_goes_straight_to_the_inner_consumer_after_a_message() -> None:
    cc, inner = _routed(["m1", "m2", "m3"])
    assert cc.poll(1.0) == "m1"  # through the wrapper: it asks the inner consumer without waiting
    assert inner.timeouts == [0]
    assert cc.poll == inner.poll, "after a message the next poll is the inner consumer's own"
    assert cc.poll(1.0) == "m2"
    assert inner.timeouts == [0, 1.0], "the caller's timeout reaches the inner consumer unchanged"


def test_control_records_route_the_next_poll_through_the_wrapper() -> None:
    cc, inner = _routed(["m1", "m2"])
    cc.poll(1.0)
    applied: list[float] = []

    def check_control(timeout: float = 0.0) -> str:
        applied.append(timeout)
        return "running"

    cc.check_control = check_control  # type: ignore[method-assign]
    cc._interrupt()  # what the follower does when records arrive
    assert cc._due and cc.poll != inner.poll
    assert cc.poll(1.0) == "m2"
    assert applied == [0.0], "the records are applied before the next message is handed out"


def test_records_arriving_while_installing_keep_the_wrapper() -> None:
    cc, inner = _routed(["m1"])
    cc._due = True  # the follower flagged records after the wrapper's check and before the install
    cc._direct()
    assert cc.poll != inner.poll


def test_idle_poll_stays_in_the_wrapper_and_a_pause_drops_the_route() -> None:
    cc, inner = _routed([])
    assert cc.poll(0.02) is None
    assert cc.poll != inner.poll, "no message: the wrapper keeps slicing the wait"
    inner.queue.append("m")
    assert cc.poll(0.02) == "m" and cc.poll == inner.poll
    cc._set_inner(None)  # a pause closes the inner consumer
    assert "poll" not in cc.__dict__


def test_an_assignment_with_a_start_left_to_commit_routes_poll_through_the_wrapper() -> None:
    """A rebalance callback runs inside the inner consumer's own poll: when it leaves a start to commit again
    (the commit failed in a rebalance), the next polls must reach the wrapper, which tries again; found by
    the stay proof (a member kept calling the inner poll and its new partitions never got an offset)."""
    from airflow_provider_kstate.client_piece.positions import PositionKeeper

    cc, inner = _routed(["m1", "m2"])
    assert cc.poll(1.0) == "m1" and cc.poll == inner.poll
    keeper = PositionKeeper("g", reset_earliest=False, classic=True, check_interval=0.0)
    keeper.assigned = lambda consumer, parts: keeper.unpositioned.add(("t", 4))  # type: ignore[method-assign]
    cc._positions = keeper
    cc._callbacks = {}
    cc._on_assign(inner, [])  # type: ignore[arg-type]
    assert cc.poll != inner.poll, "a start is left to commit: the wrapper must look again"
