"""Ghost members: the rule that ends them, written once for the pause window's wait for EMPTY
(:meth:`~airflow_provider_kstate.increase.run.IncreaseRun.wait_empty`) and the per-step EMPTY check
(:func:`~airflow_provider_kstate.increase.checks.groups_empty`, poked or polled by the trigger).

A ghost is a member the group coordinator still lists although its client acknowledged the pause (the
client piece acknowledges ``paused`` once its consumer is closed and its commit done, ``left`` when the
commit is still to land or when it closes holding nothing: both say it processes nothing more): its LeaveGroup was lost in a broker
fault, and the coordinator would keep it until its session times out (6 s to 45 s). Measured on 3 Apache
Kafka 4.4 nodes, a node SIGKILLed right after the pause: both members of the group removed "on heartbeat
expiration" about 6 s after their consumers closed, whichever role the killed node held.

The rule: :data:`GHOST_AFTER` seconds after the pause, a group whose listed members ALL belong to clients
that acknowledged this pause has them removed with LeaveGroup v5 (Kafka's admin
``removeMembersFromConsumerGroup``). A group with any other member is left to the wait. A removal that
fails is a look missed: it never fails the wait (the session timeout ends ghosts too).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.client_piece.protocol import STATE_LEFT, STATE_PAUSED, now_ms

if TYPE_CHECKING:
    from airflow_provider_kstate.client_piece.protocol import Ack
    from airflow_provider_kstate.increase.model import GroupInfo, Member
    from airflow_provider_kstate.increase.ports import AdminPort, ControlPort

#: Seconds after the pause before a group still listed with members is asked whether they are ghosts.
GHOST_AFTER = 1.0
#: The reason a ghost's removal gives (the broker logs it: "client reason: ...").
GHOST_REASON = "kstate: its client acknowledged the pause and closed its consumer"
#: LeaveGroup's answers for a member no longer listed: removed (0), UNKNOWN_MEMBER_ID (25).
GONE = (0, 25)
#: Group types (lower case; ``""``: not told) whose members an admin's LeaveGroup removes: classic groups,
#: and KIP-848 consumer groups on Kafka 4.0+ (KAFKA-18188: the coordinator fences any member of a consumer
#: group named in a LeaveGroup; before 4.0 it answers UNKNOWN_MEMBER_ID for a consumer-protocol member,
#: which changes nothing). Share and streams groups answer UNKNOWN_MEMBER_ID ("group not found").
REMOVABLE_TYPES = ("", "classic", "consumer")

_log = logging.getLogger(__name__)


def pause_epoch_of(result: Any) -> int | None:
    """The pause record's epoch in the XCom of the step that paused (``{"epoch": ...}``); None when it has
    none (your own pause task, or nothing paused by the control record).

    :param result: the pause step's XCom.
    """
    epoch = result.get("epoch") if isinstance(result, dict) else None
    return epoch if isinstance(epoch, int) and not isinstance(epoch, bool) and epoch > 0 else None


def due(epoch: int, now: int | None = None) -> bool:
    """Whether :data:`GHOST_AFTER` seconds passed since the pause of ``epoch`` (ms since the Unix epoch).

    :param epoch: the pause record's epoch.
    :param now: the wall clock in ms (default: now).
    """
    return (now_ms() if now is None else now) - epoch >= GHOST_AFTER * 1000


def ghosts_of(members: Iterable[Member], acks: Iterable[Ack]) -> list[str]:
    """The member ids of ``members`` when every one of them belongs to a client that acknowledged the pause
    (``paused`` or ``left``); ``[]`` when any does not (that group is left to the wait).

    :param members: the members the coordinator lists in one group.
    :param acks: the acknowledgements of the pause by that group's clients.
    """
    left = {a.client for a in acks if a.state in (STATE_PAUSED, STATE_LEFT)}
    listed = list(members)
    if not listed or any(m.client_id not in left for m in listed):
        return []
    return [m.member_id for m in listed]


def committing(acks: Iterable[Ack]) -> list[str]:
    """The clients among ``acks`` (of one pause, one group) that left their group but whose commit has not
    landed yet (``left``, not ``paused`` yet): each commits without membership once the group is EMPTY.

    :param acks: the acknowledgements of the pause by that group's clients (the latest per client).
    """
    return sorted(a.client for a in acks if a.state == STATE_LEFT)


@dataclass
class GhostRemoval:
    """Removes the ghosts of groups described after a pause (:func:`ghosts_of`), never raising.

    :param admin: removes members (``leave_members``).
    :param control: reads the pause's acknowledgements (``acks``).
    :param epoch: the pause record's epoch (None: no pause of this run, nothing is removed).
    :param log: where removals are logged.
    :param removed: the members removed so far (shared with the caller; removed ones are not asked again).
    """

    admin: AdminPort
    control: ControlPort
    epoch: int | None
    log: Any = _log
    removed: list[str] = field(default_factory=list)

    def remove(self, described: Mapping[str, GroupInfo]) -> dict[str, list[str]]:
        """Remove the ghosts of each group of ``described`` whose type an admin can remove members of, once
        :func:`due`; return ``{group: member ids removed now}``. A failure is logged, never raised.

        :param described: ``{group: GroupInfo}`` as the wait's last look described them.
        """
        if self.epoch is None or not due(self.epoch):
            return {}
        out: dict[str, list[str]] = {}
        listed = {
            g: i.members for g, i in described.items() if i.members and i.type.lower() in REMOVABLE_TYPES
        }
        try:
            for n, (group, members) in enumerate(listed.items()):
                gone = self._remove_of(group, members, refresh=n == 0)  # one read of the topic a look
                if gone:
                    out[group] = gone
        except Exception as exc:  # noqa: BLE001 - never fails the wait: the session timeout ends ghosts too
            self.log.info("WAIT ghost members not removed (%s: %s)", type(exc).__name__, exc)
        return out

    def _remove_of(self, group: str, members: tuple[Member, ...], refresh: bool = True) -> list[str]:
        ghosts = ghosts_of(members, self.control.acks(self.epoch or 0, group, refresh=refresh))
        if not ghosts or set(ghosts) <= set(self.removed):
            return []
        answer = self.admin.leave_members(group, ghosts, GHOST_REASON)
        # removed, or already gone; another answer is asked again at the next look ({}: cannot be asked)
        gone = [m for m in ghosts if not answer or answer.get(m) in GONE]
        self.removed += gone
        self.log.info(
            "WAIT group %s: removed %s member(s) %s that the coordinator still listed although their clients "
            "acknowledged the pause (a LeaveGroup lost in a broker fault): %s",
            group,
            len(ghosts),
            sorted({m.client_id for m in members}),
            answer or "not asked (the wire client cannot use this listener)",
        )
        return gone
