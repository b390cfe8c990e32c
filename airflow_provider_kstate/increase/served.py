"""Downtime as the services see it: from the leave to every partition held again and a record processed.

The run knows when it asked a group to leave (the stop command's start, or the pause record) and when it
asked it back (the resume record, or the start and readiness commands returned). Neither is when the
service works again: a consumer rejoins, waits for its assignment (a KIP-848 member for its next heartbeat,
a classic one for the rebalance) and only then fetches. :class:`ServiceWatch` reads that from the broker,
for every group the run asked back, in a thread beside the rest of the run:

* **held**: the group is STABLE with every partition it held before it left assigned to a member again
  (on every topic it reads). The partitions the run created are not waited for: they carry no record until
  the producers' switch, which waits until their leaders serve them, and Apache Kafka's broker tells its
  group coordinator of new partitions only once it has created them (``BrokerMetadataPublisher`` of 4.4.0:
  ``ReplicaManager.applyDelta``, then ``GroupCoordinator.onMetadataUpdate``): at 64 -> 4,096 partitions a
  KIP-848 group was given the new ones 23 s after the create, when their leaders served them, while it held
  its old ones again after 1.9 s (``bench/probe_new_partitions.py``). When the group holds them too is
  reported beside it (**all held**), when the watch sees it;
* **processing**: its committed offsets moved past where they were when it was asked back (a record
  processed and committed, held again or not: a classic member back first processes every partition while
  its group waits, up to the others' next heartbeat, for them to rejoin), or, once held, it had nothing to
  process then (committed at the log end of every partition). A consumer commits on its own schedule
  (librdkafka and the Java client auto-commit every 5 s by default): this moment is at most that interval
  late, the held one is not.

Each group's figures are seconds from its leave (:class:`Served`); the run logs them, keeps them in XCom
(``served``), in its progress document (:meth:`~airflow_provider_kstate.increase.events.RunEvents.served`),
and its metrics (``group_downtime``) count to the latest of them it saw.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.client_piece.protocol import now_ms
from airflow_provider_kstate.increase.fleet import commanded_live
from airflow_provider_kstate.increase.model import STABLE
from airflow_provider_kstate.increase.plan import GroupClass

if TYPE_CHECKING:
    from airflow_provider_kstate.increase.ports import AdminPort
    from airflow_provider_kstate.increase.run import IncreaseRun

#: Seconds between two looks at the groups (each look: one describe per topic).
POLL = 0.25
#: Seconds between two reads of a held group's committed offsets (every partition of its topics: at 4,096
#: partitions 16 requests a group, so not at every look, beside a window still seeding the offline groups).
OFFSETS_POLL = 1.0
#: Seconds between two looks at whether the run asked the groups back (before the log ends are read).
ASKED_POLL = 0.02
#: Seconds the watch goes on from the resume before it gives up on a group (the run's task waits
#: for the watch at its end, after the producers' switch: nobody is held by it).
WITHIN = 15.0
#: Seconds the watch may go on past ``within`` once every group is processing, for the created partitions to
#: be held too (:attr:`Served.all_held_at`; a run's task ends it sooner, at its end).
ALL_HELD_WITHIN = 120.0


@dataclass
class Served:
    """One group's way back, as moments in ms since the Unix epoch (None: not seen within the watch).

    :ivar out_since: asked to leave (the stop command's start, or the pause record); None when this task did
        not see it (the layout of one task per step: the pause ran in another task).
    :ivar asked_back: asked back (the resume record, or its start and readiness commands returned); None
        until the run did.
    :ivar held_at: STABLE with every partition it held before it left assigned again.
    :ivar processing_at: a record processed (its committed offsets moved), or held with nothing to process.
    """

    out_since: int | None
    asked_back: int | None = None
    held_at: int | None = None
    processing_at: int | None = None
    all_held_at: int | None = None

    def seconds(self, at: int | None) -> float | None:
        """Seconds from the leave (or from the ask back when the leave is unknown) to ``at``."""
        since = self.out_since or self.asked_back
        return None if at is None or since is None else round((at - since) / 1000.0, 3)

    @property
    def out_s(self) -> float:
        """The downtime to report: to processing, else to held, else to asked back (a lower bound)."""
        return self.seconds(self.processing_at or self.held_at or self.asked_back) or 0.0

    def to_dict(self) -> dict[str, Any]:
        """XCom's figures: seconds from the leave (``from``: ``leave``, or ``asked back`` when unknown)."""
        return {
            "out_s": self.out_s,
            "from": "leave" if self.out_since is not None else "asked back",
            "asked_back_s": self.seconds(self.asked_back),
            "held_s": self.seconds(self.held_at),
            "processing_s": self.seconds(self.processing_at),
            "all_held_s": self.seconds(self.all_held_at),
        }


@dataclass
class ServiceWatch:
    """Watch the groups a run asked back until each is held and processing, or ``within`` seconds passed.

    :param admin: the cluster (describe, committed offsets, log ends); called from the watch's thread.
    :param topics: ``{topic: (partitions before the create, partitions now, the groups asked back that
        read it)}``.
    :param log: the task's logger.
    """

    admin: AdminPort
    topics: Mapping[str, tuple[int, int, list[str]]]
    log: Any
    within: float = WITHIN
    poll: float = POLL
    offsets_poll: float = OFFSETS_POLL
    served: dict[str, Served] = field(default_factory=dict)
    #: ``{(topic, group): committed offsets}`` known when the watch begins (those the run's seed left:
    #: not read again); the others are read before the ask back.
    known: Mapping[tuple[str, str], Mapping[int, int]] = field(default_factory=dict)
    #: Whether the groups were asked back yet (the log ends are read after it, off the resume's path).
    asked: Callable[[], bool] = lambda: True
    _baseline: dict[tuple[str, str], Mapping[int, int]] = field(default_factory=dict)
    #: The groups with nothing waiting on any topic they read when the watch began (processing once held).
    _idle: set[str] = field(default_factory=set)
    _offsets_read: float = 0.0
    _thread: threading.Thread | None = None
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self, out_since: Mapping[str, int | None]) -> ServiceWatch:
        """Begin watching, before the groups are asked back (EMPTY, they are not held until they rejoin):
        ``out_since`` is each group's leave (ms since the Unix epoch; None when unknown). Everything is read
        in the watch's thread: the resume is not delayed by a request (at 4,096 partitions the committed
        offsets alone took 0.2-0.6 s over a network)."""
        self.served.update((g, Served(since)) for g, since in out_since.items())
        self._thread = threading.Thread(target=self._watch, name="kstate-served", daemon=True)
        self._thread.start()
        return self

    def _begin(self) -> None:
        """The committed offsets the watch compares with, and the groups with nothing waiting for them.

        The offsets the run's seed left are known (the groups are EMPTY until asked back: nobody else
        commits); the others are read now, before the ask back. The log ends are read once the groups are
        asked back: at 4,096 partitions x 100 groups these reads, beside the resume, held its last metadata
        read up to 1 s (5.6 ms more per round trip). Ends only grow: a group found then with records
        waiting had them, or has them now, and is processing once its committed offsets move."""
        self._baseline.update(self.known)
        for topic, (_before, count, groups) in self.topics.items():
            unread = [g for g in groups if (topic, g) not in self._baseline]
            for group, found in self._committed(unread, topic, count) if unread else ():
                self._baseline[(topic, group)] = found
        while not self.asked():
            if self._stop.wait(ASKED_POLL):
                return
        busy: set[str] = set()
        for topic, (_before, count, groups) in self.topics.items():
            # one pass, 0 where no leader loaded the partition yet: right after a create thousands are not
            # (a ListOffsets of every partition answered NOT_LEADER_FOR_PARTITION there)
            ends = self.admin.loaded_ends(topic, range(count))
            for group in groups:
                held = self._baseline.get((topic, group), {})
                if any(held.get(p, -1) < end for p, end in ends.items()):
                    busy.add(group)
        self._idle = set(self.served) - busy

    def result(self) -> dict[str, Served]:
        """Wait for the watch to end (at most what is left of ``within`` while a group is not processing
        yet; a watch still waiting only for the created partitions to be held ends now) and return each
        group's figures."""
        if self._thread is not None:
            if not self._processing():
                self._thread.join(self.within + 5 * self.poll)
            self._stop.set()
            self._thread.join(5 * self.poll)
        return dict(self.served)

    # -- the watch's thread ------------------------------------------------------------------------------

    def _watch(self) -> None:
        deadline = time.monotonic() + self.within
        try:
            self._begin()
        except Exception as exc:  # noqa: BLE001 - nothing to compare with: the downtime counts to the ask back
            self.log.warning(
                "SERVED not watched (%s: %s): the downtime counts to the ask back", type(exc).__name__, exc
            )
            return
        # past ``within`` only while every group is processing and the created partitions are not all held
        # (until :meth:`result`, at the end of the run's task, or ALL_HELD_WITHIN)
        while not self._stop.is_set() and time.monotonic() < deadline + (
            ALL_HELD_WITHIN if self._processing() else 0.0
        ):
            try:
                if self._look():
                    return
            except Exception as exc:  # noqa: BLE001 - a look that failed is a look missed: never fails a run
                self.log.info("SERVED look failed (%s): the next one in %.2f s", exc, self.poll)
            self._stop.wait(self.poll)

    def _processing(self) -> bool:
        return all(s.processing_at is not None for s in self.served.values())

    def _look(self) -> bool:
        """One look at every group not yet processing or not yet holding every partition; return whether
        none is left. A group that reads several topics is held when it is held on each, processing when
        its committed offsets moved on one of them, or once held when nothing waited for it on any when the
        watch began."""
        at = now_ms()
        waiting = {g for g, s in self.served.items() if s.processing_at is None or s.all_held_at is None}
        held, whole = self._held(waiting)
        for group in held:
            self._mark(group, "held_at", at)
        for group in whole:
            self._mark(group, "all_held_at", at)
        # a group's committed offsets that moved are records processed, held or not yet STABLE again (a
        # classic member back first processes every partition while the group waits for the others' rejoin,
        # up to their next heartbeat); a group with nothing to process is processing once held
        unprocessed = {g for g, s in self.served.items() if s.processing_at is None}
        processing = held & unprocessed & self._idle
        if unprocessed - processing and time.monotonic() - self._offsets_read >= self.offsets_poll:
            self._offsets_read = time.monotonic()
            processing |= self._moved(unprocessed - processing - self._idle)
        for group in processing:
            self._mark(group, "processing_at", at)
        return all(s.processing_at is not None and s.all_held_at is not None for s in self.served.values())

    def _held(self, groups: set[str]) -> tuple[set[str], set[str]]:
        """The groups of ``groups`` STABLE with every partition they held before assigned again, and those
        with every partition assigned, on every topic they read (one describe per topic)."""
        again: dict[str, bool] = {}
        whole: dict[str, bool] = {}
        for topic, (before, count, readers) in self.topics.items():
            asked = [g for g in readers if g in groups]
            if not asked:
                continue
            found = self.admin.describe_groups(asked, topic)
            for group in asked:
                info = found.get(group)
                assigned = info.assigned() if info is not None and info.state == STABLE else set()
                again[group] = again.get(group, True) and set(range(before)) <= assigned
                whole[group] = whole.get(group, True) and set(range(count)) <= assigned
        return {g for g, ok in again.items() if ok}, {g for g, ok in whole.items() if ok}

    def _moved(self, groups: set[str]) -> set[str]:
        """The groups of ``groups`` whose committed offsets moved on some topic since the watch began."""
        moved: set[str] = set()
        for topic, (_before, count, readers) in self.topics.items():
            asked = [g for g in readers if g in groups]
            for group, now in self._committed(asked, topic, count) if asked else ():
                before = self._baseline.get((topic, group), {})
                if any(offset > before.get(p, -1) for p, offset in now.items()):
                    moved.add(group)
        return moved

    def _mark(self, group: str, name: str, at: int) -> None:
        if getattr(self.served[group], name) is None:
            setattr(self.served[group], name, at)

    def _committed(
        self, groups: Iterable[str], topic: str, count: int
    ) -> Iterable[tuple[str, dict[int, int]]]:
        return self.admin.committed_offsets_many(groups, topic, count)


def watch(run: IncreaseRun, groups: list[str], within: float = WITHIN) -> ServiceWatch | None:
    """Start watching the groups of ``groups`` with live members that ``run`` is about to ask back (None:
    none), so that a group back while the run still starts another (its commands) is seen when it is.
    Their leave is the run's pause record, or the start of their stop commands, when this task sent it."""
    live = [g for g in groups if run.plan.groups[g].cls == GroupClass.ACTIVE]
    if not live:
        return None
    commanded = set(commanded_live(run.plan, live))
    paused = None if run.paused_at is None else epoch_ms(run.paused_at)
    stopped = None if paused is None else paused - round((run.stop_s or 0.0) * 1000)
    topics = {
        s.topic: (s.plan.original_partitions, s.plan.target_partitions, run.of(s, live)) for s in run.topics
    }
    out_since = {g: stopped if g in commanded else paused for g in live}
    known = {(s.topic, g): s.held[g] for s in run.topics for g in run.of(s, live) if g in s.held}
    try:
        return ServiceWatch(
            run.admin, topics, run.log, within=within, known=known, asked=lambda: run.resumed_at is not None
        ).start(out_since)
    except Exception as exc:  # noqa: BLE001 - watching never fails (nor delays) the resume it watches
        run.log.warning(
            "SERVED not watched (%s: %s): the downtime counts to the ask back", type(exc).__name__, exc
        )
        return None


def asked_back(run: IncreaseRun, watched: ServiceWatch) -> None:
    """Set each watched group's ask back from ``run``: the resume record, or its start and readiness
    commands returned (unknown when the run did not ask it back)."""
    if run.resumed_at is None:
        return
    resumed = epoch_ms(run.resumed_at)
    started = resumed + round((run.start_s or 0.0) * 1000)
    commanded = set(commanded_live(run.plan, list(watched.served)))
    for group, seen in watched.served.items():
        seen.asked_back = started if group in commanded else resumed


def report(run: IncreaseRun, watched: ServiceWatch | None) -> dict[str, dict[str, Any]]:
    """Wait for ``watched`` (what is left of its time), log and report each group's way back to the run's
    events (its progress document, its metrics); return the figures for XCom (``{}``: nothing watched)."""
    if watched is None:
        return {}
    asked_back(run, watched)
    found = watched.result()
    run.events.served(found)
    run.log.info("SERVED groups as their services saw it: %s", describe(found))
    return {g: s.to_dict() for g, s in sorted(found.items())}


def epoch_ms(monotonic: float) -> int:
    """A ``time.monotonic()`` reading of this process as milliseconds since the Unix epoch."""
    return now_ms() - round((time.monotonic() - monotonic) * 1000)


def describe(served: Mapping[str, Served]) -> str:
    """One line for the log: each group's downtime as its service saw it."""
    return "; ".join(
        f"{g} out {s.out_s:.3f} s (asked back after {_s(s.seconds(s.asked_back))}, held after "
        f"{_s(s.seconds(s.held_at))}, processing after {_s(s.seconds(s.processing_at))}; the created "
        f"partitions held too after {_s(s.seconds(s.all_held_at))})"
        for g, s in sorted(served.items())
    )


def _s(seconds: float | None) -> str:
    return "not seen" if seconds is None else f"{seconds:.3f}"
