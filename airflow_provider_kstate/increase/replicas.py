"""Leadership and in-sync replicas of the topic, judged before an increase and waited for after the create.

The plan reads every partition's leader, replicas and in-sync replicas (ISR) from the metadata, the topic's
effective ``min.insync.replicas`` (DescribeConfigs) and which brokers answer at all, then judges each
partition:

* **offline**: no leader, or a leader that does not answer. Nothing can be written to it or read from it.
  Refused.
* **below min ISR**: fewer in-sync replicas that answer than ``min.insync.replicas``: acks=all writes fail
  (NOT_ENOUGH_REPLICAS). Refused.
* **under-replicated**: fewer in-sync replicas than replicas, but at least ``min.insync.replicas``:
  acks=all writes still succeed, CreatePartitions places the new partitions, offsets commit (the group
  coordinator's ``__consumer_offsets`` partitions have their own ISR). A **warning** in the plan: the run goes
  on, with the cluster one failure closer to refusing writes.

A refusal is :class:`~airflow_provider_kstate.errors.PartitionsUnavailableError` (retryable: a broker that
comes back, replicas that catch up heal it) raised before anyone is paused; it changes nothing.

Why brokers are asked to answer: the metadata is the controller's view. On a cluster that lost its
controller quorum (two of three KRaft combined nodes down) it stays frozen at the last committed state, a
dead broker still leading partitions and still in their ISR (measured on Apache Kafka 4.4.0); and between
a crash and the broker's fencing (``broker.session.timeout.ms``, 9 s by default) it lags too. A broker that
does not answer a connection is counted out of every ISR it is in, and its leaderships are offline.

Why ``min.insync.replicas`` may be unknown: librdkafka sends the topic's DescribeConfigs to the controller
the metadata names, and a cluster without its controller quorum names a dead broker there as often as not
(measured, Apache Kafka 4.4.0, 2 of 3 nodes down: 4 of 12 plans timed out on it). When it gets no answer
and brokers of the topic are down, the partitions are judged without it (:data:`MIN_ISR_UNKNOWN`): every
partition not fully in sync is refused (the create goes to that controller too), named.

New partitions: CreatePartitions without an assignment (what the run sends) lets the controller place
them with the replication factor of the topic's existing partitions, by the same replica placer as a new
topic (Apache Kafka's ``ReplicationControlManager.createPartitions``). After the create the step waits,
bounded by its timeout, until every new partition has a leader (:func:`wait_for_leaders`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from airflow_provider_kstate.errors import KStateError, PartitionsUnavailableError
from airflow_provider_kstate.increase.model import TopicReplicas
from airflow_provider_kstate.increase.report import ranges

if TYPE_CHECKING:
    from airflow_provider_kstate.increase.ports import AdminPort

#: Seconds between two looks at the metadata while waiting for the new partitions' leaders.
LEADER_POLL = 0.005
#: ``TopicReplicas.min_isr`` when the topic's configuration got no answer (brokers down, see the module).
MIN_ISR_UNKNOWN = 0


class ReplicationState(BaseModel):
    """The replication the plan saw (a field of the plan: ``replication``): the replication factor new
    partitions get, the topic's ``min.insync.replicas``, the under-replicated partitions (ranges) and the
    brokers that did not answer, with the plan's warning ("" when every partition is in sync)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    replication_factor: int = Field(ge=0, description="the replication factor new partitions get")
    min_insync_replicas: int = Field(ge=0, description="the topic's effective min.insync.replicas")
    under_replicated: str = Field(default="", description="partitions with fewer ISR than replicas (ranges)")
    brokers_down: list[int] = Field(default_factory=list, description="brokers that did not answer")
    warning: str = Field(default="", description="why the plan went on although some are under-replicated")

    def describe(self) -> str:
        """The plan's runbook line."""
        head = (
            f"replication: factor {self.replication_factor}, min.insync.replicas {self.min_insync_replicas}"
        )
        if not self.under_replicated:
            return f"{head}; every partition in sync"
        down = f"; brokers not answering: {_ids(self.brokers_down)}" if self.brokers_down else ""
        return f"{head}; WARNING under-replicated partitions {self.under_replicated}{down}"


@dataclass
class ReplicationVerdict:
    """Each partition of the topic judged (see the module): offline, below min ISR, under-replicated."""

    replicas: TopicReplicas
    offline: list[int] = field(default_factory=list)
    below_min_isr: dict[int, int] = field(default_factory=dict)  # partition -> in-sync replicas that answer
    under_replicated: list[int] = field(default_factory=list)

    @property
    def min_isr_unknown(self) -> bool:
        return self.replicas.min_isr == MIN_ISR_UNKNOWN

    @property
    def refused(self) -> bool:
        # min.insync.replicas unknown: an under-replicated partition may be below it; refused too
        return bool(self.offline or self.below_min_isr or (self.min_isr_unknown and self.under_replicated))

    def state(self) -> ReplicationState:
        """What the plan keeps of it (the warning names the under-replicated partitions)."""
        r = self.replicas
        return ReplicationState(
            replication_factor=r.replication_factor,
            min_insync_replicas=r.min_isr,
            under_replicated=ranges(self.under_replicated) if self.under_replicated else "",
            brokers_down=sorted(r.down),
            warning=self._warning(),
        )

    def _warning(self) -> str:
        if not self.under_replicated:
            return ""
        r, under = self.replicas, self.under_replicated
        down = f"; brokers not answering: {_ids(r.down)}" if r.down else ""
        return (
            f"topic {r.topic!r}: partitions {ranges(under)} ({len(under):,}) are under-replicated (fewer in-sync "
            f"replicas than their {r.replication_factor} replicas, at least min.insync.replicas="
            f"{r.min_isr}){down}. acks=all writes still succeed, so the run goes on; one more replica out of "
            "sync and they refuse writes. New partitions get replication factor "
            f"{r.replication_factor}; a replica on a broker that is down starts out of sync. To avoid the "
            "degraded window, wait for the replicas to catch up (kafka-topics.sh --describe "
            "--under-replicated-partitions lists none) and run then."
        )

    def refusal(self) -> str:
        """The message of the refusal: the partitions, what is wrong with each kind, what to do."""
        r = self.replicas
        parts = []
        if self.offline:
            parts.append(
                f"partitions {ranges(self.offline)} ({len(self.offline):,}) are offline: no leader, or a leader "
                "that does not answer; nothing can be written to or read from them"
            )
        if self.below_min_isr:
            below = sorted(self.below_min_isr)
            fewest = min(self.below_min_isr.values())
            parts.append(
                f"partitions {ranges(below)} ({len(below):,}) have {fewest} in-sync replica"
                f"{'' if fewest == 1 else 's'} (fewest), below min.insync.replicas={r.min_isr}: acks=all writes "
                "to them fail with NOT_ENOUGH_REPLICAS"
            )
        if self.under_replicated:
            parts.append(f"partitions {ranges(self.under_replicated)} are under-replicated")
        if self.min_isr_unknown:
            parts.append(
                "the topic's min.insync.replicas is unknown: DescribeConfigs (sent to the controller) got no "
                "answer, the controller quorum may be lost; so no partition out of sync is taken"
            )
        down = f" Brokers not answering: {_ids(r.down)}." if r.down else ""
        return (
            f"topic {r.topic!r} cannot be grown now: {'; '.join(parts)}.{down} Bring the brokers back (restart "
            "them on their own data) and wait for the replicas to catch up (kafka-topics.sh --describe "
            "--under-min-isr-partitions and --unavailable-partitions list none), then run again; the task's "
            "retries look again. Do not lower min.insync.replicas nor enable unclean leader election to get "
            "past this: both give up acknowledged writes. Nothing was changed; nobody was paused."
        )


def _ids(brokers: Iterable[int]) -> str:
    return ", ".join(str(b) for b in sorted(brokers))


def judge(replicas: TopicReplicas) -> ReplicationVerdict:
    """Judge every partition of ``replicas`` (the module says how)."""
    verdict = ReplicationVerdict(replicas)
    down = replicas.down
    for p in replicas.partitions:
        in_sync = [b for b in p.isr if b not in down]
        if p.leader < 0 or p.leader in down:
            verdict.offline.append(p.partition)
        elif len(in_sync) < replicas.min_isr:
            verdict.below_min_isr[p.partition] = len(in_sync)
        elif len(in_sync) < len(p.replicas):
            verdict.under_replicated.append(p.partition)
    return verdict


def check_replication(admin: AdminPort, topic: str) -> ReplicationState:
    """Return the topic's replication as the plan keeps it (with a warning when some partitions are
    under-replicated); refuse a topic with partitions offline or below ``min.insync.replicas``.

    :raises PartitionsUnavailableError: naming the partitions, what is wrong and what to do.
    """
    verdict = judge(admin.topic_replicas(topic))
    if verdict.refused:
        raise PartitionsUnavailableError(verdict.refusal())
    return verdict.state()


def wait_for_leaders(admin: AdminPort, topic: str, partitions: Iterable[int], timeout: float) -> float:
    """Wait until every partition of ``partitions`` has a leader that serves it: first in the metadata (the
    controller names one at the create), then as its leader answers for it (the broker loads thousands of new
    partitions over seconds: 4,032 on one 2-core broker took ~20-50 s); return the seconds it took.

    :raises KStateError: (retryable) some have no serving leader after ``timeout`` seconds, named.
    """
    wanted = list(partitions)
    started = time.monotonic()
    deadline = started + timeout
    while True:
        waiting = admin.topic_replicas(topic, leaders_only=True).leaderless(wanted)
        if not waiting:
            waiting = admin.unloaded(topic, wanted)
        if not waiting:
            return time.monotonic() - started
        if time.monotonic() > deadline:
            raise KStateError(
                f"topic {topic!r}: partitions {ranges(waiting)} ({len(waiting):,}) have no leader serving them "
                f"{timeout}s after the create (the metadata shows none, or the leader has not loaded them). "
                "They exist: the run's retry continues from here once the brokers serve them."
            )
        wanted = waiting
        time.sleep(LEADER_POLL)
