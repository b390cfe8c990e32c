"""The ghost rule (``increase/ghosts.py``) as the per-step EMPTY check uses it (``checks.groups_empty``, the
sensor's poke and the trigger's poll): members the coordinator still lists although every one of their
clients acknowledged the pause are removed; a group with any other member is left to the wait; a removal
that fails never fails the check. The pause window's wait uses the same rule (``test_window_requests``)."""

from __future__ import annotations

from typing import Any

import pytest
from kstate_support.fakes import GhostHook, PauseAcks

from airflow_provider_kstate.client_piece.protocol import Ack, now_ms
from airflow_provider_kstate.errors import BrokerUnavailableError
from airflow_provider_kstate.increase import ghosts
from airflow_provider_kstate.increase.checks import groups_empty
from airflow_provider_kstate.increase.model import GroupInfo, Member

EPOCH = PauseAcks.EPOCH


def _check(hook: GhostHook, control: Any, epoch: int | None = EPOCH) -> Any:
    return groups_empty(hook, "orders", ["live", "idle"], epoch, control=control)  # type: ignore[arg-type]


def test_the_check_removes_members_whose_clients_all_acknowledged_the_pause_then_holds() -> None:
    hook = GhostHook()
    first = _check(hook, PauseAcks())
    assert not first.ok and first.detail["live"]["ghosts_removed"] == ["m0", "m1"]
    assert hook.removed == [("live", ["m0", "m1"], ghosts.GHOST_REASON)]
    assert _check(hook, PauseAcks()).ok, "the next look finds the group EMPTY"


def test_a_group_with_a_member_of_a_client_that_did_not_acknowledge_is_left_alone() -> None:
    hook = GhostHook(others=("stranger",))
    for _ in range(3):
        result = _check(hook, PauseAcks())
        assert not result.ok and "ghosts_removed" not in result.detail["live"]
    assert hook.removed == [] and sorted(hook.listed) == ["m0", "m1", "x0"]


@pytest.mark.parametrize(
    ("hook", "control"),
    [
        (GhostHook(fail=BrokerUnavailableError("the coordinator is moving")), PauseAcks()),
        (GhostHook(fail=RuntimeError("an answer the client cannot read")), PauseAcks()),
        (GhostHook(), PauseAcks(fail=TimeoutError("the control topic did not answer"))),
    ],
)
def test_a_removal_that_fails_never_fails_the_check(hook: GhostHook, control: PauseAcks) -> None:
    result = _check(hook, control)
    assert not result.ok and list(result.detail) == ["live"] and "ghosts_removed" not in result.detail["live"]
    assert sorted(hook.listed) == ["m0", "m1"], "left to the wait (the session timeout ends them)"


def test_nothing_is_removed_without_the_pause_s_epoch_or_the_control_channel() -> None:
    hook = GhostHook()
    assert not _check(hook, PauseAcks(), epoch=None).ok
    assert not _check(hook, None).ok
    assert not _check(hook, PauseAcks(), epoch=EPOCH + 1).ok, "acknowledgements of another pause"
    assert hook.removed == []


def test_a_pause_younger_than_ghost_after_is_not_asked_yet() -> None:
    assert not ghosts.due(now_ms())
    assert ghosts.due(now_ms() - int(ghosts.GHOST_AFTER * 1000))
    hook = GhostHook()
    assert not _check(hook, PauseAcks(), epoch=now_ms()).ok and hook.removed == []


@pytest.mark.parametrize(("kind", "removed"), [("CLASSIC", True), ("CONSUMER", True), ("", True),
                                              ("STREAMS", False), ("SHARE", False)])  # fmt: skip
def test_classic_and_kip_848_consumer_groups_have_their_ghosts_removed_not_streams_or_share(
    kind: str, removed: bool
) -> None:
    """Kafka 4.0+ (KAFKA-18188) removes a consumer-protocol member named in a LeaveGroup; streams and share
    groups answer UNKNOWN_MEMBER_ID."""
    hook = GhostHook(kind=kind)
    _check(hook, PauseAcks())
    assert bool(hook.removed) is removed


def test_the_rule_needs_every_listed_member_acknowledged_paused() -> None:
    members = [Member("m0", "c0", "h", ()), Member("m1", "c1", "h", ())]
    paused = [Ack(client="c0", epoch=1, state="paused"), Ack(client="c1", epoch=1, state="paused")]
    assert ghosts.ghosts_of(members, paused) == ["m0", "m1"]
    assert ghosts.ghosts_of(members, paused[:1]) == []
    assert ghosts.ghosts_of(members, [Ack(client="c0", epoch=1, state="running"), paused[1]]) == []
    assert ghosts.ghosts_of([], paused) == []


def test_a_client_that_left_with_its_commit_still_to_land_counts_as_closed() -> None:
    """``left``: the consumer is closed (its LeaveGroup sent), its commit waits for EMPTY; a ghost of it is
    removed all the same, or the commit and the group would wait for each other until the session ends."""
    members = [Member("m0", "c0", "h", ()), Member("m1", "c1", "h", ())]
    acks = [Ack(client="c0", epoch=1, state="left"), Ack(client="c1", epoch=1, state="paused")]
    assert ghosts.ghosts_of(members, acks) == ["m0", "m1"]
    assert ghosts.committing(acks) == ["c0"]
    assert ghosts.committing([Ack(client="c0", epoch=1, state="paused")]) == []


def test_the_pause_epoch_is_read_from_the_pause_step_s_xcom() -> None:
    assert ghosts.pause_epoch_of({"epoch": EPOCH, "groups": 2}) == EPOCH
    for result in (None, {}, {"epoch": None}, {"epoch": "1"}, {"epoch": True}, "text", {"epoch": 0}):
        assert ghosts.pause_epoch_of(result) is None


def test_one_look_reads_the_control_topic_once_however_many_groups_are_listed() -> None:
    """The other groups of a look read what the first read brought (``refresh`` off)."""

    class Recording(PauseAcks):
        def __init__(self) -> None:
            super().__init__(paused=())
            self.refreshes: list[bool] = []

        def acks(self, epoch: int, group: str = "", topic: str = "", refresh: bool = True) -> list[Any]:
            self.refreshes.append(refresh)
            return super().acks(epoch, group, topic, refresh)

    control = Recording()
    members = (Member("m0", "c0", "h", ()),)
    described = {g: GroupInfo(g, "STABLE", "CLASSIC", "consumer", members) for g in ("a", "b", "c")}
    ghosts.GhostRemoval(GhostHook(), control, EPOCH).remove(described)  # type: ignore[arg-type]
    assert control.refreshes == [True, False, False]
