"""Per-key order across the increase: hold producers, publish the barrier, switch, release each group.

After N -> M partitions a key's records written before the producers switch sit on its old partition and
later ones on its new partition; two members consume them at different lags, so a consumer that processes
the new partition while the old one still has a backlog processes the key's records out of order. With
``key_order="preserve"`` (the default) the switch goes through a barrier (``docs/control-protocol.md``):

1. **announce** (with the pause): consumers of the protected groups acknowledge ``pending``; a group with
   live members and no such acknowledgement does not use the client piece and cannot hold: it is *relaxed*
   (logged; the alternative is to stop its producers in your own ``scale_producers`` task until it drained);
2. **hold**: producers flush, block ``produce()`` and acknowledge ``held``;
3. **barrier**: every partition's end offset ``B``, published for the groups; live members acknowledge it;
4. **switch**: the target layout; producers are released on it;
5. **release** (in ``verify``): each group whose committed offsets reach ``B`` everywhere is released.

With ``key_order="relax"`` the switch is a plain layout change, as before.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from airflow_provider_kstate.client_piece.protocol import (
    PRESERVE,
    STATE_BARRIER,
    STATE_HELD,
    STATE_LAYOUT,
    STATE_RELEASED,
    Ack,
    Barrier,
    KeyOrder,
    Layout,
    barrier_key,
    layout_key,
    now_ms,
)
from airflow_provider_kstate.enums import choice
from airflow_provider_kstate.increase.plan import KeyOrderMark, Plan

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from airflow_provider_kstate.client_piece.protocol import Record
    from airflow_provider_kstate.increase.model import GroupInfo
    from airflow_provider_kstate.increase.ports import AdminPort

#: Seconds producers stay held without a switch before they release themselves (on the old layout).
DEFAULT_HOLD_TIMEOUT = 30.0
#: Seconds to wait for the producers' ``held`` and the live members' ``barrier`` acknowledgements.
DEFAULT_ACK_TIMEOUT = 10.0
#: Seconds the pin (the layout in force) must have been published before the switch reads which producers
#: acknowledged it: the producers to hold. Without it a window with no live group (15 ms from the pin to the
#: switch, measured) read no producer, did not wait for their hold and took the barrier while one still
#: wrote on the old layout: records past the barrier on old partitions. ControlledProducers look at the
#: control topic every ``check_interval`` (0.2 s by default): one that looks less often than this may be
#: missed.
PIN_SETTLE = 2.0


class ControlWatch(Protocol):
    """The control topic's records by key, as the barrier reads them
    (:class:`~airflow_provider_kstate.hooks.control.ControlWatch`)."""

    state: dict[str, Record]

    def acks(self, prefix: str, epoch: int, states: tuple[str, ...] = ()) -> list[Ack]: ...

    def wait(self, done: Callable[[], bool], timeout: float, interval: float = 0.005) -> bool: ...

    def close(self) -> None: ...


class KeyOrderPort(Protocol):
    """The control verbs of the barrier (:class:`~airflow_provider_kstate.hooks.control.KStateControlHook`)."""

    def announce_barrier(
        self, topic: str, groups: list[str], issuer: str, partitions: int = 0, grown_from: int = 0
    ) -> int: ...

    def hold_producers(self, topic: str, partitions: int, hold_s: float, issuer: str) -> int: ...

    def set_barrier(self, topic: str, offsets: list[int], groups: list[str], issuer: str) -> int: ...

    def set_layout(self, topic: str, partitions: int, issuer: str) -> int: ...

    def release_group(self, topic: str, group: str, epoch: int, issuer: str) -> None: ...

    def watch(self) -> ControlWatch: ...


def check_key_order(value: str) -> KeyOrder:
    """Return ``value`` as a :class:`KeyOrder`, else raise :class:`InvalidChoiceError` (fatal in a task;
    also a ``ValueError``) naming the choices."""
    return choice("key_order", value, KeyOrder)


#: How a protected group goes through the switch, as the plan sees it (``GroupPlan.key_order``): the
#: members of :class:`~airflow_provider_kstate.increase.plan.KeyOrderMark`.
ORDER_BARRIER = KeyOrderMark.BARRIER
ORDER_RELAXED = KeyOrderMark.RELAXED
ORDER_OFFLINE = KeyOrderMark.OFFLINE
#: A live member's acknowledgements of a barrier it holds at, or has already passed.
HOLDING = (STATE_BARRIER, STATE_RELEASED)
#: Member client ids named in a relaxed group's reason.
NAMED_MEMBERS = 3


def client_piece_clients(state: Mapping[str, Record]) -> dict[str, set[str]]:
    """``{group: client ids}`` of the consumers that ever acknowledged on the control topic: they run the
    client piece (a ControlledConsumer acknowledges its start, every command and every barrier)."""
    out: dict[str, set[str]] = {}
    for record in state.values():
        if isinstance(record, Ack) and record.group:
            out.setdefault(record.group, set()).add(record.client)
    return out


ORDER_DRAINED = KeyOrderMark.DRAINED
#: Why a drained group waits for its producers.
DRAINED_WHY = (
    "its producers stop before the create and start once it has consumed everything written before them"
)


def without_client_piece(clients: Iterable[str], present: set[str], named: int) -> tuple[int, str]:
    """How many of a group's live members (``clients``, their client ids) never acknowledged on the control
    topic, and the first ``named`` distinct ids of them, sorted (``"a, b and 2 more"``)."""
    members = list(clients)
    plain = sorted({c for c in members if c not in present})
    shown = ", ".join(plain[:named]) + (f" and {len(plain) - named} more" if len(plain) > named else "")
    return sum(1 for c in members if c not in present), shown


def group_order(
    key_order: str, member_clients: Iterable[str], present: set[str], stoppable: bool = False
) -> tuple[KeyOrderMark, str]:
    """Return ``(mark, reason)`` for one protected group at plan time.

    :param member_clients: the ``client.id`` of each live member (DescribeGroups).
    :param present: the client ids of the group's consumers that acknowledged on the control topic.
    :param stoppable: the run may stop the topic's producers (producer drivers were given): a group that
        cannot hold at the barrier is drained instead of relaxed.
    """
    members = list(member_clients)
    if key_order == KeyOrder.RELAX:
        return ORDER_RELAXED, f"key_order={key_order}: producers switch at once, without a barrier"
    if not members:
        return ORDER_OFFLINE, "no live members: its consumers hold at start if they use the client piece"
    if key_order == KeyOrder.DRAIN:
        return ORDER_DRAINED, f"key_order=drain: {DRAINED_WHY}"
    behind, shown = without_client_piece(members, present, NAMED_MEMBERS)
    if not behind:
        return ORDER_BARRIER, f"all {len(members)} live members run the client piece"
    why = (
        f"{behind} of {len(members)} live members never acknowledged on the control topic (client ids "
        f"{shown}): they do not run the client piece and cannot hold at the barrier"
    )
    if stoppable:
        return ORDER_DRAINED, f"{why}; {DRAINED_WHY}"
    return ORDER_RELAXED, (
        f"{why}, and its producers cannot be stopped (no producer_drivers): name them to drain it"
    )


def mark_key_order(
    plan: Plan, infos: Mapping[str, GroupInfo], present: Mapping[str, set[str]], key_order: str
) -> Plan:
    """Return ``plan`` with every seeded group marked ``barrier``, ``drained``, ``relaxed`` (each with the
    reason) or ``offline`` (``GroupPlan.key_order``): what the switch will find, unless members change in
    between. A group is drained only when the plan names producer services to stop (``plan.producers``).

    :param infos: the seeded groups as the broker describes them now.
    :param present: :func:`client_piece_clients` of the control topic.
    """
    groups = dict(plan.groups)
    stoppable = bool(plan.producers)
    for group in plan.where("seed"):
        info = infos.get(group)
        clients = [m.client_id for m in info.members] if info is not None else []
        mark, reason = group_order(key_order, clients, present.get(group, set()), stoppable)
        groups[group] = groups[group].replace(key_order=mark, key_order_reason=reason)
    return plan.replace(groups=groups)


@dataclass
class Groups:
    """The protected groups as the barrier sees them."""

    held: list[str]  # consumers acknowledged the announcement: live members are waited for
    offline: list[str]  # no live members: their consumers hold at start if they use the client piece
    relaxed: dict[str, str]  # group -> why it cannot hold
    #: group -> the clients that acknowledged the announcement: each must acknowledge the barrier (a member
    #: still rejoining after the resume is not among the broker's members yet, and would otherwise fetch the
    #: new partitions before it read the barrier)
    announced: dict[str, set[str]] = field(default_factory=dict)


def classify_groups(plan: Plan, acked: set[str], live: list[str]) -> Groups:
    """Sort the plan's seeded groups for a barrier: those whose consumers acknowledged its announcement hold;
    a live group that did not, or one the plan already marked ``relaxed`` (it cannot hold: no client piece,
    and its consumers are started by the user's own tasks, so being offline now says nothing), is relaxed;
    the rest are offline (their consumers hold at start). Drained groups are none of these.

    :param acked: the groups with an acknowledgement of the announcement.
    :param live: the groups with live members now.
    """
    drained = set(plan.marked(ORDER_DRAINED))
    marked_relaxed = set(plan.marked(ORDER_RELAXED))
    seeded = [g for g in plan.where("seed") if g not in drained]
    relaxed: dict[str, str] = {}
    for group in seeded:
        if group in acked:
            continue
        if group in live:
            relaxed[group] = "its members did not acknowledge the barrier's announcement (no client piece)"
        elif group in marked_relaxed:
            relaxed[group] = f"the plan marked it relaxed: {plan.groups[group].key_order_reason}"
    held = [g for g in seeded if g in acked]
    return Groups(held, [g for g in seeded if g not in acked and g not in relaxed], relaxed)


@dataclass
class KeyOrderSwitch:
    """The switch of one increase's producers to the target layout, through the barrier or not.

    :param hold_timeout: seconds producers stay held before they release themselves.
    :param ack_timeout: seconds to wait for each round of acknowledgements.
    """

    plan: Plan
    admin: AdminPort
    control: KeyOrderPort
    log: Any
    owner: str
    key_order: str = PRESERVE
    hold_timeout: float = DEFAULT_HOLD_TIMEOUT
    ack_timeout: float = DEFAULT_ACK_TIMEOUT

    @property
    def topic(self) -> str:
        return self.plan.topic

    def announce(self, partitions: int = 0) -> int | None:
        """With ``preserve``: tell the protected groups' consumers a barrier is coming (before the pause);
        drained groups hold at none (their producers wait for them).

        :param partitions: the topic grew to this count and groups stay in their groups: the announcement
            carries it (their consumers take the new partitions at once), whatever the key order.
        """
        drained = set(self.plan.marked(ORDER_DRAINED))
        groups = [g for g in self.plan.where("seed") if g not in drained]
        if self.key_order != PRESERVE:
            groups = self.plan.staying() if partitions else []
        if not groups:
            return None
        grown_from = self.plan.original_partitions if partitions else 0
        epoch = self.control.announce_barrier(
            self.topic, groups, self.owner, partitions=partitions, grown_from=grown_from
        )
        self.log.info(
            "ORDER %s: key-order barrier announced to %s groups (epoch %s)%s",
            self.topic,
            len(groups),
            epoch,
            f", with the topic's {partitions} partitions" if partitions else "",
        )
        return epoch

    def _end_offsets(self) -> list[int]:
        """Every partition's end offset now, in partition order: the barrier ``B``. The new partitions are
        asked once: one its leader has not loaded yet holds nothing (B = 0), and waiting for Kafka to bring
        thousands online would keep the producers held (4,032 on one 2-core broker: ~20 s)."""
        count = self.admin.partition_count(self.topic)
        old = min(self.plan.original_partitions, count)
        with ThreadPoolExecutor(1, "kstate-barrier") as pool:  # the new partitions' ends asked meanwhile
            new = pool.submit(self.admin.loaded_ends, self.topic, range(old, count))
            marks = self.admin.watermarks(self.topic, range(old))
            ends = new.result()
        return [marks[p][1] for p in range(old)] + [ends[p] for p in range(old, count)]

    def switch(self, live: list[str]) -> dict[str, Any]:
        """Switch producers to the target layout; with ``preserve`` through hold, barrier and acks.

        :param live: the protected groups with live members now (their members must acknowledge the barrier).
        """
        target = self.plan.target_partitions
        if self.key_order != PRESERVE:
            epoch = self.control.set_layout(self.topic, target, self.owner)
            self.log.info(
                "ORDER %s: key_order=relax: producers switch to %s partitions at once (epoch %s); keys that "
                "move may be processed out of order",
                self.topic,
                target,
                epoch,
            )
            return {"key_order": self.key_order, "epoch": epoch, "partitions": target}
        watch = self.control.watch()
        try:
            return self._through_barrier(watch, live, target)
        finally:
            watch.close()

    def _through_barrier(self, watch: ControlWatch, live: list[str], target: int) -> dict[str, Any]:
        groups = self._groups(watch, live)
        self._settle(watch)
        producers = self._producers(watch)
        started = time.monotonic()
        hold = self.control.hold_producers(
            self.topic, self.plan.original_partitions, self.hold_timeout, self.owner
        )
        held = self._wait_clients(watch, f"ack-layout/{self.topic}/", hold, (STATE_HELD,), producers)
        acked = time.monotonic()
        offsets = self._end_offsets()
        barrier = self.control.set_barrier(self.topic, offsets, groups.held + groups.offline, self.owner)
        self._barrier_acks(watch, barrier, groups)
        expired = time.monotonic() - started >= self.hold_timeout
        epoch = self.control.set_layout(self.topic, target, self.owner)
        switched = time.monotonic()
        self._log(groups, producers, held, offsets, barrier, epoch, switched - acked, expired)
        layout_acks = self._wait_clients(
            watch, f"ack-layout/{self.topic}/", epoch, (STATE_LAYOUT,), held, 2.0
        )
        return {
            "key_order": self.key_order,
            "epoch": epoch,
            "partitions": target,
            "hold_epoch": hold,
            "barrier_epoch": barrier,
            "barrier_records": sum(offsets),
            "producers": sorted(producers),
            "producers_held": sorted(held),
            "producers_missing": sorted(producers - held),
            "producers_switched": len(layout_acks),
            "held_groups": groups.held,
            "offline_groups": groups.offline,
            "relaxed_groups": groups.relaxed,
            "hold_to_switch_s": round(switched - started, 4),
            "held_to_switch_s": round(switched - acked, 4),
            "hold_expired": expired,
        }

    def _groups(self, watch: ControlWatch, live: list[str]) -> Groups:
        """The groups that hold at the barrier (they acknowledged its announcement), the offline ones and the
        relaxed ones; drained groups are none of these (their producers wait for them instead)."""
        pending = watch.state.get(barrier_key(self.topic))
        epoch = pending.epoch if isinstance(pending, Barrier) else -1
        acks = watch.acks(f"ack-barrier/{self.topic}/", epoch)
        groups = classify_groups(self.plan, {a.group for a in acks}, live)
        for ack in acks:
            if ack.group in groups.held:
                groups.announced.setdefault(ack.group, set()).add(ack.client)
        return groups

    def hold_for_drain(self, hold_s: float) -> dict[str, Any]:
        """Stop the ControlledProducers for a drain (before the create; with groups that stay, once they hold
        their positions): they flush and block ``produce()``
        on the old layout until the producers are started after the drain (or ``hold_s`` passes: a dead
        controller). Returns the hold's epoch (when the producers stopped) and who acknowledged it."""
        watch = self.control.watch()
        try:
            self._settle(watch)
            producers = self._producers(watch)
            epoch = self.control.hold_producers(self.topic, self.plan.original_partitions, hold_s, self.owner)
            held = self._wait_clients(watch, f"ack-layout/{self.topic}/", epoch, (STATE_HELD,), producers)
        finally:
            watch.close()
        self.log.info(
            "DRAIN %s: producers stopped: %s of %s ControlledProducers held (epoch %s)",
            self.topic,
            len(held),
            len(producers),
            epoch,
        )
        for client in sorted(producers - held):
            self.log.warning("DRAIN %s: producer %s did not acknowledge the hold", self.topic, client)
        return {"hold_epoch": epoch, "producers": sorted(producers), "producers_held": sorted(held)}

    def drain_barrier(self, live: list[str]) -> dict[str, Any]:
        """The switch of a drain, producers stopped: read every partition's end offset ``B``, publish it as
        the barrier of the groups that hold at one (with ``preserve``), and return what the drained groups
        must reach (``B`` of the old partitions) and their backlog now; the producers start later
        (:meth:`~airflow_provider_kstate.increase.run.IncreaseRun.start_producers`), once the drained groups have reached it."""
        watch = self.control.watch()
        try:
            groups = self._groups(watch, live) if self.key_order == PRESERVE else Groups([], [], {})
            offsets = self._end_offsets()
            barrier = None
            if groups.held or groups.offline:
                barrier = self.control.set_barrier(
                    self.topic, offsets, groups.held + groups.offline, self.owner
                )
                self._barrier_acks(watch, barrier, groups)
            hold = watch.state.get(layout_key(self.topic))
        finally:
            watch.close()
        stopped = hold.epoch if isinstance(hold, Layout) and hold.hold else now_ms()
        drained = self.plan.marked(ORDER_DRAINED)
        old = offsets[: self.plan.original_partitions]
        backlog = {
            g: sum(max(b - committed.get(p, b), 0) for p, b in enumerate(old))
            for g, committed in self.admin.committed_offsets_many(drained, self.topic, len(old))
        }
        self.log.info(
            "DRAIN %s: producers stay stopped until groups %s consumed the old partitions to their end "
            "offsets (%s records, backlog now %s); %s groups hold at the barrier (epoch %s)",
            self.topic,
            drained,
            f"{sum(old):,}",
            backlog,
            len(groups.held) + len(groups.offline),
            barrier,
        )
        return {
            "key_order": self.key_order,
            "deferred": True,
            "partitions": self.plan.original_partitions,
            "barrier_epoch": barrier,
            "barrier_records": sum(offsets),
            "held_groups": groups.held,
            "offline_groups": groups.offline,
            "relaxed_groups": groups.relaxed,
            "drain": {"groups": drained, "offsets": old, "stopped_at": stopped, "backlog": backlog},
        }

    def _barrier_acks(self, watch: ControlWatch, barrier: int, groups: Groups) -> None:
        """Wait for the live members of the held groups to acknowledge the barrier: as many as the broker
        lists, and every client that acknowledged the announcement (it may be rejoining after the resume,
        not listed yet); a group short of acknowledgements is relaxed (named, as at a switch)."""
        members = {g: len(i.members) for g, i in self.admin.describe_groups(groups.held, self.topic).items()}
        for group, (n, want) in self._wait_members(watch, barrier, members, groups.announced).items():
            groups.relaxed[group] = f"{n} of {want} members acknowledged the barrier in {self.ack_timeout}s"

    def _settle(self, watch: ControlWatch) -> None:
        """Wait until the layout in force is :data:`PIN_SETTLE` seconds old (the producers acknowledged it)."""
        layout = watch.state.get(layout_key(self.topic))
        if isinstance(layout, Layout):
            remaining = PIN_SETTLE - (now_ms() - layout.epoch) / 1000.0
            if remaining > 0:
                watch.wait(lambda: False, remaining)

    def _producers(self, watch: ControlWatch) -> set[str]:
        """The producers that acknowledged the layout now in force (the pin of this run): the ones to hold."""
        layout = watch.state.get(layout_key(self.topic))
        if not isinstance(layout, Layout):
            return set()
        return {a.client for a in watch.acks(f"ack-layout/{self.topic}/", layout.epoch)}

    def _wait_clients(
        self,
        watch: ControlWatch,
        prefix: str,
        epoch: int,
        states: tuple[str, ...],
        expected: set[str],
        timeout: float | None = None,
    ) -> set[str]:
        def acked() -> set[str]:
            return {a.client for a in watch.acks(prefix, epoch, states)}

        watch.wait(lambda: expected <= acked(), self.ack_timeout if timeout is None else timeout)
        return acked() & expected if expected else acked()

    def _wait_members(
        self, watch: ControlWatch, epoch: int, members: dict[str, int], announced: dict[str, set[str]]
    ) -> dict[str, tuple[int, int]]:
        """Wait until every live group has as many ``barrier`` acknowledgements as members, among them one of
        each client in ``announced``; return the others."""

        def short() -> dict[str, tuple[int, int]]:
            out = {}
            for group, listed in members.items():
                # A member that is past the barrier at once acknowledges ``released`` right after
                # ``barrier`` under the same key: the watch may see only the second.
                got = {a.client for a in watch.acks(f"ack-barrier/{self.topic}/{group}/", epoch, HOLDING)}
                expected = announced.get(group, set())
                if len(got) < listed or expected - got:
                    out[group] = (len(got), max(listed, len(expected | got)))
            return out

        watch.wait(lambda: not short(), self.ack_timeout)
        return short()

    def _log(
        self,
        groups: Groups,
        producers: set[str],
        held: set[str],
        offsets: list[int],
        barrier: int,
        epoch: int,
        blocked: float,
        expired: bool,
    ) -> None:
        self.log.info(
            "ORDER %s: %s of %s producers held; barrier (epoch %s) at %s records; %s groups hold at it, %s "
            "offline groups hold when their consumers start; producers switched to %s partitions (epoch %s) "
            "%.3f s after the last held acknowledgement",
            self.topic,
            len(held),
            len(producers),
            barrier,
            f"{sum(offsets):,}",
            len(groups.held),
            len(groups.offline),
            self.plan.target_partitions,
            epoch,
            blocked,
        )
        for client in sorted(producers - held):
            self.log.warning(
                "ORDER %s: producer %s did not acknowledge the hold: its keys may reorder", self.topic, client
            )
        for group, why in groups.relaxed.items():
            self.log.warning(
                "ORDER %s: group %s is RELAXED: %s. Its keys that move may be processed out of order; to keep "
                "them in order, stop the producers in your own scale_producers task until the group drained.",
                self.topic,
                group,
                why,
            )
        if expired:
            self.log.warning(
                "ORDER %s: the switch came after hold_timeout: producers had released themselves; keys written "
                "in between may reorder",
                self.topic,
            )


def drain_of(switch: Any) -> dict[str, Any]:
    """The ``drain`` of one topic's switch (:func:`~airflow_provider_kstate.increase.run.switch_of`):
    ``{"groups": [...], "offsets": [...], "stopped_at": ms, "backlog": {...}}``; no groups when the run
    drains none."""
    drain = switch.get("drain") if isinstance(switch, dict) else None
    if not isinstance(drain, dict):
        return {"groups": [], "offsets": [], "stopped_at": 0, "backlog": {}}
    return drain


def read_barrier(watch: ControlWatch, topic: str) -> Barrier | None:
    """The barrier in force for ``topic`` (None: none, or not holding)."""
    record = watch.state.get(barrier_key(topic))
    return record if isinstance(record, Barrier) and record.state == "hold" else None


def watch_release(
    admin: AdminPort,
    control: KeyOrderPort,
    plan: Plan,
    log: Any,
    owner: str,
    timeout: float,
    live: list[str],
) -> dict[str, Any]:
    """Release each live group of the barrier once its committed offsets reach it; record when.

    :param live: the groups with live members: waited for (offline groups release themselves when their
        consumers start and catch up).
    :return: ``{"barrier_epoch", "groups": {group: {"passed_after_s" | "pending" | "relaxed": ...,
        "plan": its mark in the plan}}}``: a group the barrier does not name was relaxed at the switch.
    """
    watch = control.watch()
    try:
        barrier = read_barrier(watch, plan.topic)
        layout = watch.state.get(layout_key(plan.topic))
    finally:
        watch.close()
    if barrier is None or barrier.issuer != owner:  # none, or an earlier run's
        return {}
    switched = layout.epoch if isinstance(layout, Layout) else barrier.epoch
    cannot_hold = set(plan.marked(ORDER_RELAXED))
    waiting = [g for g in barrier.groups if g in live and g not in cannot_hold]
    out: dict[str, dict[str, Any]] = {
        g: {"pending": "offline: its consumers hold at start until the group passed the barrier"}
        for g in barrier.groups
        if g not in live and g not in cannot_hold
    }
    for group in plan.where("seed"):
        if group in cannot_hold:
            out[group] = {"relaxed": f"the plan marked it relaxed: {plan.groups[group].key_order_reason}"}
            log.info("VERIFY group %s is relaxed (it cannot hold at the barrier): not waited for", group)
        elif group not in barrier.groups:
            out[group] = {"relaxed": "at the switch: its members did not acknowledge the announcement"}
    out.update(_wait_release(admin, control, plan.topic, log, owner, timeout, barrier, waiting, switched))
    for group, entry in out.items():
        if group in plan.groups and plan.groups[group].key_order:
            entry["plan"] = plan.groups[group].key_order
    return {"barrier_epoch": barrier.epoch, "groups": out}


def _wait_release(
    admin: AdminPort,
    control: KeyOrderPort,
    topic: str,
    log: Any,
    owner: str,
    timeout: float,
    barrier: Barrier,
    waiting: list[str],
    switched: int,
) -> dict[str, dict[str, Any]]:
    """Release each of ``waiting`` once it passed ``barrier``; return, per group, when (or that it did not)."""
    out: dict[str, dict[str, Any]] = {}
    deadline = time.monotonic() + timeout
    count = len(barrier.offsets)
    while waiting:
        for group, committed in admin.committed_offsets_many(list(waiting), topic, count):
            if barrier.passed(committed, count):
                control.release_group(topic, group, barrier.epoch, owner)
                out[group] = {"passed_after_s": round((now_ms() - switched) / 1000.0, 3)}
                waiting.remove(group)
                log.info(
                    "VERIFY group %s passed the key-order barrier %.3f s after the switch: released",
                    group,
                    out[group]["passed_after_s"],
                )
        if waiting and time.monotonic() >= deadline:
            for group in waiting:
                out[group] = {
                    "pending": f"still below the barrier after {timeout}s: its consumers release themselves"
                }
                log.warning("VERIFY group %s is still below the key-order barrier after %ss", group, timeout)
            break
        if waiting:
            time.sleep(0.1)
    return out


def drain_hold(empty_timeout: float, drain_timeout: float) -> float:
    """How long ControlledProducers held for a drain wait before writing again on their own: the pause's
    wait, the drain's deadline and a minute more (the window and the pause step give the same)."""
    return empty_timeout + drain_timeout + 60.0
