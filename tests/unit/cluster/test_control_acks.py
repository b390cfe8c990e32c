"""The controller reads acknowledgements through one follower of the control topic it keeps (the ghost
rule asks once a look while a group stays listed: a new reader each time re-reads the whole topic)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from airflow_provider_kstate.client_piece.protocol import STATE_PAUSED, Ack
from airflow_provider_kstate.cluster import control as control_module
from airflow_provider_kstate.cluster.control import Controller


class FakeWatch:
    """A follower whose refresh brings the records queued since the last look."""

    made = 0

    def __init__(self, queued: list[Ack]) -> None:
        FakeWatch.made += 1
        self.queued, self.refreshes, self.closed = queued, 0, False
        self.state: dict[str, Ack] = {}
        self.refresh()
        self.refreshes = 0

    def refresh(self) -> None:
        self.refreshes += 1
        while self.queued:
            ack = self.queued.pop(0)
            self.state[f"ack/{ack.group}/{ack.client}"] = ack

    acks = control_module.ControlWatch.acks

    def close(self) -> None:
        self.closed = True


def ack(client: str, epoch: int) -> Ack:
    return Ack(group="g", client=client, state=STATE_PAUSED, epoch=epoch)


def test_acks_are_read_by_one_kept_follower_refreshed_each_look(monkeypatch: pytest.MonkeyPatch) -> None:
    queued = [ack("c0", 7)]
    FakeWatch.made = 0
    controller = Controller(SimpleNamespace(timeout=1.0, config={}), "ctl")  # type: ignore[arg-type]
    watches: list[FakeWatch] = []

    def watch(self: Any) -> FakeWatch:
        watches.append(FakeWatch(queued))
        return watches[-1]

    monkeypatch.setattr(Controller, "watch", watch)
    assert [a.client for a in controller.acks(7, group="g")] == ["c0"]
    queued.append(ack("c1", 7))
    queued.append(ack("c2", 6))  # another pause's
    assert sorted(a.client for a in controller.acks(7, group="g")) == ["c0", "c1"]
    assert FakeWatch.made == 1 and watches[0].refreshes == 1
    controller.close()
    assert watches[0].closed


def test_following_starts_one_follower_the_later_reads_refresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """The run starts following before its pause (the first read, the topic from its start, while the
    consumers still run); later looks refresh that follower, one read of the topic for several groups."""
    made: list[FakeWatch] = []
    controller = Controller(SimpleNamespace(timeout=1.0, config={}), "ctl")  # type: ignore[arg-type]
    monkeypatch.setattr(Controller, "watch", lambda self: made.append(FakeWatch([ack("c0", 1)])) or made[-1])
    controller.follow()
    controller.follow()
    assert len(made) == 1 and made[0].refreshes == 0
    controller.acks(1, group="g")
    controller.acks(1, group="h", refresh=False)
    assert len(made) == 1 and made[0].refreshes == 1
