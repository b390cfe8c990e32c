"""The services' way back (:mod:`airflow_provider_kstate.increase.served`): held when STABLE with every
partition it held before assigned again, processing once its committed offsets moved or it is at the log end; mocks only here."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from typing import Any

from airflow_provider_kstate.increase import served
from airflow_provider_kstate.increase.model import GroupInfo, Member
from airflow_provider_kstate.increase.served import Served, ServiceWatch

LOG = logging.getLogger("test")


class Cluster:
    """A cluster whose groups come back after some looks: ``held_after`` describes before they are STABLE
    with every partition, ``moves_after`` committed-offset reads before their offsets move."""

    def __init__(self, held_after: dict[str, int], moves_after: dict[str, int], ends: dict[int, int]) -> None:
        self.held_after, self.moves_after, self.ends = held_after, moves_after, ends
        self.looks: dict[str, int] = {}
        self.reads: dict[str, int] = {}

    def describe_groups(self, groups: list[str], topic: str) -> dict[str, GroupInfo]:
        out = {}
        for group in groups:
            self.looks[group] = self.looks.get(group, 0) + 1
            back = self.looks[group] > self.held_after[group]
            members = (Member("m1", "c", "h", tuple(range(4)) if back else (0, 1)),)
            out[group] = GroupInfo(
                group, "STABLE" if back else "PREPARING_REBALANCE", "CONSUMER", "", members
            )
        return out

    def committed_offsets_many(
        self, groups: Iterable[str], topic: str, partitions: int | None = None
    ) -> Iterator[tuple[str, dict[int, int]]]:
        for group in groups:
            self.reads[group] = self.reads.get(group, 0) + 1
            moved = self.reads[group] > self.moves_after[group]
            yield group, {0: 5 + moved, 1: 5, 2: 0, 3: 0}

    def loaded_ends(self, topic: str, partitions: Iterable[int]) -> dict[int, int]:
        return {p: self.ends[p] for p in partitions}


def _watch(cluster: Any, groups: list[str], within: float = 5.0) -> dict[str, Served]:
    watch = ServiceWatch(
        cluster, {"orders": (4, 4, groups)}, LOG, within=within, poll=0.01, offsets_poll=0.01
    )
    watch.start(dict.fromkeys(groups, 1_000))
    for seen in watch.served.values():
        seen.asked_back = 1_500
    return watch.result()


def test_a_group_is_held_once_every_partition_is_assigned_and_processing_once_its_offsets_move() -> None:
    cluster = Cluster({"billing": 3}, {"billing": 6}, ends={0: 9, 1: 9, 2: 0, 3: 0})
    found = _watch(cluster, ["billing"])["billing"]
    assert found.held_at is not None and found.processing_at is not None
    assert found.asked_back < found.held_at <= found.processing_at
    assert cluster.looks["billing"] >= 4  # not held before the fourth look
    figures = found.to_dict()
    assert figures["from"] == "leave" and figures["asked_back_s"] == 0.5
    assert figures["out_s"] == figures["processing_s"] > figures["held_s"]


def test_a_group_at_the_log_end_of_every_partition_is_processing_once_held() -> None:
    cluster = Cluster({"idle": 1}, {"idle": 10**6}, ends={0: 5, 1: 5, 2: 0, 3: 0})
    found = _watch(cluster, ["idle"])["idle"]
    assert found.processing_at == found.held_at is not None  # nothing waiting to be processed


def test_a_group_never_back_is_reported_to_its_ask_back_within_the_watch_s_time() -> None:
    cluster = Cluster({"gone": 10**6}, {"gone": 10**6}, ends={0: 9, 1: 9, 2: 0, 3: 0})
    found = _watch(cluster, ["gone"], within=0.2)["gone"]
    assert found.held_at is None and found.processing_at is None
    assert found.out_s == 0.5  # the lower bound: asked back
    assert "held after not seen" in served.describe({"gone": found})


def test_a_look_that_fails_is_a_look_missed() -> None:
    from airflow_provider_kstate.errors import BrokerUnavailableError

    cluster = Cluster({"billing": 0}, {"billing": 1}, ends={0: 9, 1: 9, 2: 0, 3: 0})
    calls = {"n": 0}
    describe = cluster.describe_groups

    def flaky(groups: list[str], topic: str) -> dict[str, GroupInfo]:
        calls["n"] += 1
        if calls["n"] == 1:
            raise BrokerUnavailableError("coordinator moving")
        return describe(groups, topic)

    cluster.describe_groups = flaky  # type: ignore[method-assign]
    found = _watch(cluster, ["billing"])["billing"]
    assert calls["n"] >= 2 and found.processing_at is not None


def test_a_watch_that_cannot_start_never_fails_the_resume() -> None:
    """Right after a create of thousands of partitions the cluster may refuse a read: the run goes on."""
    from types import SimpleNamespace

    from airflow_provider_kstate.errors import KafkaRequestRefusedError
    from airflow_provider_kstate.increase.plan import GroupClass

    class Refusing(Cluster):
        def committed_offsets_many(self, *args: Any, **kwargs: Any) -> Iterator[tuple[str, dict[int, int]]]:
            raise KafkaRequestRefusedError("NOT_LEADER_FOR_PARTITION")

    warnings: list[str] = []
    log = SimpleNamespace(warning=lambda msg, *args: warnings.append(msg % args), info=LOG.info)
    plan = SimpleNamespace(groups={"billing": SimpleNamespace(cls=GroupClass.ACTIVE)}, where=lambda _: [])
    steps = SimpleNamespace(
        topic="orders", plan=SimpleNamespace(original_partitions=4, target_partitions=4), held={}
    )
    run = SimpleNamespace(
        plan=plan,
        admin=Refusing({"billing": 0}, {"billing": 0}, ends={0: 1, 1: 1, 2: 0, 3: 0}),
        log=log,
        paused_at=None,
        resumed_at=None,
        stop_s=None,
        topics=[steps],
        of=lambda s, groups: list(groups),
    )
    watched = served.watch(run, ["billing"])  # type: ignore[arg-type]
    assert watched is not None and watched.result()["billing"].held_at is None
    assert warnings and "not watched" in warnings[0] and "NOT_LEADER_FOR_PARTITION" in warnings[0]


def test_the_offsets_the_seed_left_are_not_read_again_and_the_ends_wait_for_the_ask_back() -> None:
    """The run's seed knows what each group holds when it is asked back: the watch reads no committed offsets
    of those groups before the resume, and the log ends only once the run asked them back (at 4,096 x 100
    those reads beside the resume held its last metadata read up to 1 s)."""
    import threading

    cluster = Cluster(
        {"billing": 1, "idle": 1}, {"billing": 10**6, "idle": 10**6}, ends={0: 9, 1: 5, 2: 0, 3: 0}
    )
    ends_read: list[bool] = []
    asked = threading.Event()
    loaded_ends = cluster.loaded_ends

    def ends_after_ask(topic: str, partitions: Iterable[int]) -> dict[int, int]:
        ends_read.append(asked.is_set())
        return loaded_ends(topic, partitions)

    cluster.loaded_ends = ends_after_ask  # type: ignore[method-assign]
    known = {("orders", "billing"): {0: 5, 1: 5, 2: 0, 3: 0}, ("orders", "idle"): {0: 9, 1: 5, 2: 0, 3: 0}}
    watch = ServiceWatch(
        cluster, {"orders": (4, 4, ["billing", "idle"])}, LOG, within=1.0, poll=0.01, offsets_poll=0.01,
        known=known, asked=asked.is_set,
    )  # fmt: skip
    watch.start(dict.fromkeys(["billing", "idle"], 1_000))
    threading.Timer(0.1, asked.set).start()
    found = watch.result()
    assert ends_read == [True]  # once, after the ask back
    assert found["idle"].processing_at == found["idle"].held_at is not None  # nothing waited for it
    # billing had records waiting (9 > 5 on partition 0) and its offsets never moved: held, not processing
    assert found["billing"].held_at is not None and found["billing"].processing_at is None
    assert cluster.reads.get("idle", 0) == 0  # the known offsets were never read


class Growing(Cluster):
    """A topic grown 2 -> 4 partitions: the group holds its 2 old partitions after ``held_after`` looks and
    the 2 new ones only after ``all_after`` (Apache Kafka's broker gives a KIP-848 group new partitions once
    their leaders serve them)."""

    def __init__(self, held_after: int, all_after: int) -> None:
        super().__init__({"billing": held_after}, {"billing": 1}, ends={0: 9, 1: 9, 2: 0, 3: 0})
        self.all_after = all_after

    def describe_groups(self, groups: list[str], topic: str) -> dict[str, GroupInfo]:
        out = {}
        for group in groups:
            self.looks[group] = self.looks.get(group, 0) + 1
            n = self.looks[group]
            parts = tuple(range(4)) if n > self.all_after else (0, 1) if n > self.held_after[group] else (0,)
            members = (Member("m1", "c", "h", parts),)
            out[group] = GroupInfo(group, "STABLE", "CONSUMER", "", members)
        return out


def test_a_group_is_held_once_it_holds_its_old_partitions_and_the_created_ones_are_reported_beside() -> None:
    """Held counts the partitions the group held before it left; the created ones carry no record until
    the producers' switch and are reported beside (``all_held_s``), even after the group is processing."""
    cluster = Growing(held_after=2, all_after=12)
    watch = ServiceWatch(
        cluster, {"orders": (2, 4, ["billing"])}, LOG, within=5.0, poll=0.01, offsets_poll=0.01
    )
    watch.start({"billing": 1_000})
    watch.served["billing"].asked_back = 1_500
    time.sleep(0.5)  # the run's task goes on (its switch) while the watch looks
    found = watch.result()["billing"]
    assert found.held_at is not None and found.processing_at is not None and found.all_held_at is not None
    assert found.held_at <= found.all_held_at and found.processing_at <= found.all_held_at
    assert cluster.looks["billing"] >= 13  # held at the third look, every partition only at the thirteenth
    assert found.out_s == found.seconds(found.processing_at)  # the downtime does not wait for the new ones
    assert found.to_dict()["all_held_s"] == found.seconds(found.all_held_at)
    assert "created partitions held too after" in served.describe({"billing": found})


def test_a_watch_waiting_only_for_the_created_partitions_ends_with_the_run_s_task() -> None:
    cluster = Growing(held_after=0, all_after=10**6)
    watch = ServiceWatch(
        cluster, {"orders": (2, 4, ["billing"])}, LOG, within=60.0, poll=0.01, offsets_poll=0.01
    )
    watch.start({"billing": 1_000})
    time.sleep(0.2)
    began = time.monotonic()
    found = watch.result()["billing"]
    # timeout contract: not the watch's 60 s, every group was processing already (half of it under load)
    assert time.monotonic() - began < 30.0
    assert found.processing_at is not None and found.all_held_at is None
    assert "created partitions held too after not seen" in served.describe({"billing": found})


def test_a_group_whose_offsets_move_before_it_is_stable_again_is_processing_then() -> None:
    """A classic member back first processes every partition while its group waits for the others to rejoin
    (PREPARING_REBALANCE up to their next heartbeat): its commits are the service working, held or not."""
    cluster = Cluster({"billing": 10**6}, {"billing": 2}, ends={0: 9, 1: 9, 2: 0, 3: 0})
    found = _watch(cluster, ["billing"], within=0.5)["billing"]
    assert found.held_at is None and found.processing_at is not None
    assert found.out_s == found.seconds(found.processing_at)
