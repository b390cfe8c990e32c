"""The window's requests over a network (issue 41 item 4): those that need no answer from each other go out
together, nothing already known is asked again, and the safety order holds: every group EMPTY and every read
answered before a commit, the count read again before a resume (unit fakes; the broker's side is in the
integration tests and ``bench/bench_increase_scale.py``). Concurrency is proven by barriers every call must
reach together, not by wall-clock bounds."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator
from typing import Any

import pytest

from airflow_provider_kstate.errors import GroupNotEmptyError, UnsafeResumeError
from airflow_provider_kstate.increase.ghosts import GHOST_REASON
from airflow_provider_kstate.increase.model import GroupInfo, Member
from airflow_provider_kstate.increase.plan import GroupClass, GroupPlan, Plan
from airflow_provider_kstate.increase.run import IncreaseRun
from airflow_provider_kstate.increase.steps import TopicSteps, together
from tests.unit.increase.test_seed_created import Admin

LOG = logging.getLogger("test_window_requests")
#: Seconds a call waits at a barrier for the others (a call made after it, not beside it, breaks it).
MEET = 5.0


def test_together_runs_every_call_at_once_and_returns_their_answers_in_order() -> None:
    meet = threading.Barrier(3)

    def call(answer: int) -> Any:
        return lambda: (meet.wait(MEET), answer)[1]

    assert together(call(1), call(2), call(3)) == [1, 2, 3]


def test_together_raises_the_first_failure_in_order_once_every_call_finished() -> None:
    finished: list[str] = []

    def fail(name: str) -> Any:
        def call() -> None:
            finished.append(name)
            raise ValueError(name)

        return call

    def slow() -> str:
        threading.Event().wait(0.05)
        finished.append("slow")
        return "slow"

    with pytest.raises(ValueError, match="first"):
        together(slow, fail("first"), fail("second"))
    assert sorted(finished) == ["first", "second", "slow"], "no call is left running behind the step"


class Meeting(Admin):
    """The seed's reads each wait until the others are asked too (``meet``); every call is recorded in order."""

    def __init__(self, members: dict[str, tuple[str, ...]] | None = None) -> None:
        super().__init__()
        self.members = members or {}
        self.meet = threading.Barrier(2)
        self.calls: list[str] = []
        self.counts = 0

    def partition_count(self, topic: str) -> int:
        self.counts += 1
        return self.count

    def describe_groups(self, groups: list[str], topic: str) -> dict[str, GroupInfo]:
        self.calls.append(f"describe {sorted(groups)}")
        self.meet.wait(MEET)
        return {
            g: GroupInfo(
                g,
                "STABLE" if self.members.get(g) else "EMPTY",
                "CLASSIC",
                "consumer",
                tuple(Member(m, m, "h", ()) for m in self.members.get(g, ())),
            )
            for g in groups
        }

    def committed_offsets_many(
        self, groups: Iterable[str], topic: str, partitions: int | None = None
    ) -> Iterator[tuple[str, dict[int, int]]]:
        self.calls.append(f"committed upto {partitions}")
        self.meet.wait(MEET)
        yield from super().committed_offsets_many(groups, topic, partitions)

    def seed_offsets_many(self, topic: str, offsets: Any) -> None:
        self.calls.append("commit")
        super().seed_offsets_many(topic, offsets)


def _plan(*groups: str, live: tuple[str, ...] = ()) -> Plan:
    """A plan growing ``orders`` 4 -> 8 that pauses and seeds ``groups``: those in ``live`` with a member."""

    def entry(group: str) -> GroupPlan:
        if group in live:
            return GroupPlan(
                cls=GroupClass.ACTIVE, state="STABLE", member_count=1, pause=True, seed=True, wait=True
            )
        return GroupPlan(cls=GroupClass.EMPTY, state="EMPTY", member_count=0, pause=True, seed=True)

    plans = {g: entry(g) for g in groups}
    return Plan(
        topic="orders",
        original_partitions=4,
        target_partitions=8,
        groups=plans,
        planned_at="now",
        owner="run-1",
    )


def _steps(fake: Admin, *groups: str) -> TopicSteps:
    control: Any = None
    return TopicSteps(_plan(*(groups or ("billing",))), fake, control, LOG, "run-1")  # type: ignore[arg-type]


def test_the_seed_asks_the_empty_check_and_the_offsets_together_and_commits_after_both() -> None:
    fake = Meeting()
    steps = _steps(fake)
    steps.increase(timeout=5)
    result = steps.seed()
    assert sorted(fake.calls[:2]) == ["committed upto 4", "describe ['billing']"]
    assert fake.calls[2:] == ["commit"], "the commit waits for every read"
    assert result.partitions == 8 and fake.seeded == {"billing": {1: 50, 4: 0, 5: 0, 6: 0, 7: 0}}


def test_after_its_create_the_seed_takes_the_count_it_read_and_the_resume_rule_reads_it_again() -> None:
    fake = Meeting()
    steps = _steps(fake)
    steps.increase(timeout=5)
    asked = fake.counts  # the create's own reads: the count before, the metadata showing the target
    steps.seed()
    assert fake.counts == asked, "the count the create step has just read is not asked again"
    fake.count, fake.meet = 9, threading.Barrier(1)  # someone else grew the topic after the seed
    with pytest.raises(UnsafeResumeError):
        steps.require_offsets(["billing"])


def test_without_a_create_the_seed_reads_the_count_and_the_offsets_of_every_partition() -> None:
    fake = Meeting()
    fake.count = 8  # grown earlier (a repair): every partition's offsets are asked
    fake.meet = threading.Barrier(1)
    steps = _steps(fake)
    steps.seed()
    assert fake.counts == 1 and "committed upto 8" in fake.calls and fake.calls[-1] == "commit"


def test_a_group_that_is_not_empty_gets_no_offset_even_when_its_reads_ran_beside_the_check() -> None:
    fake = Meeting(members={"billing": ("c-1",)})
    steps = _steps(fake)
    steps.increase(timeout=5)
    with pytest.raises(GroupNotEmptyError, match="c-1"):
        steps.seed()
    assert "commit" not in fake.calls and fake.seeded == {}


class Leaving(Admin):
    """A live group whose members leave on the third look; every describe request's groups are recorded."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[list[str]] = []  # type: ignore[assignment]
        self.validated: list[tuple[str, int]] = []

    def describe_groups(self, groups: list[str], topic: str) -> dict[str, GroupInfo]:
        self.asked.append(sorted(groups))
        gone = len(self.asked) >= 3
        return {
            g: GroupInfo(
                g,
                "EMPTY" if g != "live" or gone else "STABLE",
                "CLASSIC",
                "consumer",
                () if g != "live" or gone else (Member("m", "m", "h", ()),),
            )
            for g in groups
        }

    def increase_partitions(self, topic: str, total: int, validate_only: bool = False) -> None:
        if validate_only:
            self.validated.append((topic, total))
        super().increase_partitions(topic, total, validate_only)


class Control:
    def __init__(self, fake: Leaving) -> None:
        self.fake = fake

    def follow(self) -> None:
        pass

    def pause(self, groups: list[str], topic: str, issuer: str) -> int:
        self.fake.validated.append(("pause record", len(groups)))
        return 1

    def set_layout(self, topic: str, partitions: int, issuer: str) -> int:
        return 2


def _run(fake: Admin) -> IncreaseRun:
    plan = _plan("live", "idle", live=("live",))
    control: Any = Control(fake) if isinstance(fake, Leaving) else None
    return IncreaseRun(plan, fake, control, LOG, "run-1", key_order="relax")  # type: ignore[arg-type]


def test_the_wait_for_empty_asks_only_the_groups_not_seen_empty_yet() -> None:
    fake = Leaving()
    _run(fake).wait_empty(timeout=5)
    assert fake.asked == [["idle", "live"], ["live"], ["live"]]


def test_the_create_is_validated_before_anyone_leaves_and_not_again_after() -> None:
    fake = Leaving()
    run = _run(fake)
    run.pause()
    assert fake.validated == [("orders", 8), ("pause record", 2)], "validated before the pause record"
    run.increase(timeout=5)
    assert fake.validated == [("orders", 8), ("pause record", 2)] and fake.count == 8


class Ghosts(Admin):
    """A live group whose coordinator keeps listing its members (their LeaveGroup lost) until the run removes
    them; ``others``: members of clients that did not acknowledge the pause."""

    def __init__(self, others: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.listed = {"m0": "c0", "m1": "c1", **{f"x{i}": c for i, c in enumerate(others)}}
        self.removed: list[tuple[str, list[str], str]] = []

    def describe_groups(self, groups: list[str], topic: str) -> dict[str, GroupInfo]:
        members = tuple(Member(m, c, "h", ()) for m, c in self.listed.items())
        return {
            g: GroupInfo(g, "STABLE" if g == "live" and members else "EMPTY", "CLASSIC", "consumer",
                         members if g == "live" else ())
            for g in groups
        }  # fmt: skip

    def leave_members(self, group: str, member_ids: list[str], reason: str) -> dict[str, int]:
        self.removed.append((group, sorted(member_ids), reason))
        for member in member_ids:
            self.listed.pop(member, None)
        return dict.fromkeys(member_ids, 0)


class Acking:
    """The control channel: the pause's epoch and the clients that acknowledged it ``paused``."""

    def __init__(self, paused: tuple[str, ...]) -> None:
        self.paused = paused

    def follow(self) -> None:
        pass

    def pause(self, groups: list[str], topic: str, issuer: str) -> int:
        return 7

    def set_layout(self, topic: str, partitions: int, issuer: str) -> int:
        return 8

    def acks(self, epoch: int, group: str = "", topic: str = "", refresh: bool = True) -> list[Any]:
        from airflow_provider_kstate.client_piece.protocol import Ack

        return (
            [Ack(client=c, epoch=epoch, state="paused", group=group) for c in self.paused]
            if epoch == 7
            else []
        )


def _ghost_run(fake: Ghosts, paused: tuple[str, ...]) -> IncreaseRun:
    plan = _plan("live", "idle", live=("live",))
    return IncreaseRun(plan, fake, Acking(paused), LOG, "run-1", key_order="relax")  # type: ignore[arg-type]


def test_members_whose_clients_acknowledged_the_pause_are_removed_when_the_coordinator_keeps_them() -> None:
    """A LeaveGroup lost in a broker fault: the coordinator lists both members until their session ends
    (6 s to 45 s) though both clients closed and acknowledged. The wait removes them, once."""
    fake = Ghosts()
    run = _ghost_run(fake, paused=("c0", "c1"))
    run.pause()
    run.wait_empty(timeout=10)
    assert fake.removed == [
        ("live", ["m0", "m1"], "kstate: its client acknowledged the pause and closed its consumer")
    ]
    assert run.ghosts_removed == ["m0", "m1"]


def test_a_member_of_a_client_that_did_not_acknowledge_is_waited_for_not_removed() -> None:
    fake = Ghosts(others=("stranger",))
    run = _ghost_run(fake, paused=("c0", "c1"))
    run.pause()
    with pytest.raises(GroupNotEmptyError):
        run.wait_empty(timeout=1.5)
    assert fake.removed == [] and "m0" in fake.listed


def test_nothing_is_removed_without_the_run_s_pause() -> None:
    fake = Ghosts()
    run = _ghost_run(fake, paused=("c0", "c1"))  # no pause sent by this run: no epoch to read acks of
    with pytest.raises(GroupNotEmptyError):
        run.wait_empty(timeout=1.5)
    assert fake.removed == []


def test_a_removal_the_coordinator_refuses_is_asked_again_at_the_next_look() -> None:
    class Refusing(Ghosts):
        def leave_members(self, group: str, member_ids: list[str], reason: str) -> dict[str, int]:
            if not self.removed:  # the first answer: the coordinator could not write the removal yet
                self.removed.append((group, sorted(member_ids), "refused"))
                return dict.fromkeys(member_ids, 19)  # NOT_ENOUGH_REPLICAS
            return super().leave_members(group, member_ids, reason)

    fake = Refusing()
    run = _ghost_run(fake, paused=("c0", "c1"))
    run.pause()
    run.wait_empty(timeout=10)
    assert [r[2] for r in fake.removed] == ["refused", GHOST_REASON] and run.ghosts_removed == ["m0", "m1"]
