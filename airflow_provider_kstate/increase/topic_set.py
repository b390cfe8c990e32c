"""Several co-partitioned topics grown together (a join's inputs): one plan, one lease set, one pause window.

Co-partitioned topics must keep equal partition counts: a join (Kafka Streams, Flink, Spark) reads partition
``p`` of each input together, so the set grows to one target in one run. The rules live here:

* :func:`topic_set` reads the request: ``topic`` and/or ``topics``, refusing an empty set, a duplicate and
  an internal topic, naming it;
* :func:`check_counts` refuses a set whose counts differ now, naming each topic's count, unless every topic
  that differs from the others is already at the target (a crashed run's repair: the create went through on
  some topics only);
* :func:`merge_plans` merges the plans of each topic (the one planner,
  :func:`~airflow_provider_kstate.increase.planner.plan_increase`, plans each as a run of one topic would)
  into the one :class:`~airflow_provider_kstate.increase.plan.Plan`: every topic with its count
  (``Plan.topics``), every group once, with the topics it reads (``GroupPlan.topics``);
* :func:`preview_topic_set` is the preview document of a plan (``kstate plan`` and the kstate page: no
  lease, nothing changed);
* :class:`TopicSetSteps` runs the steps of such a plan, in the one window or one task per step: the groups
  leave once, every topic is created, every group is seeded on each topic it reads, producers switch once
  per topic, the groups rejoin once (each only when it holds an offset on every partition of every topic it
  reads); for a drain each topic a drained group reads has its producers held and started on its own, the
  producer services stopped and started once (:func:`drains_by_topic` reads each topic's drain).

A named group (``consumer_groups``) is protected on every topic of the set; a discovered one on the topics
where it was found (committed offsets or assigned members).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.errors import (
    InvalidArgumentError,
    TopicChangedError,
    UnequalPartitionCountsError,
)
from airflow_provider_kstate.increase.events import GroupState, ProducerState
from airflow_provider_kstate.increase.fleet import producer_commands
from airflow_provider_kstate.increase.key_order import drain_of
from airflow_provider_kstate.increase.plan import GroupPlan, Plan, check_topic_name
from airflow_provider_kstate.increase.report import ReportWriter
from airflow_provider_kstate.increase.steps import SafeIncreaseSteps, SeedResult

if TYPE_CHECKING:
    from airflow_provider_kstate.increase.ports import AdminPort


def topic_set(topic: str | None, topics: Iterable[str] | None = None) -> list[str]:
    """Return the topics of a request, in the order given: ``topic`` first, then ``topics``.

    :raises InvalidArgumentError: no topic, a blank name or a topic named twice (named).
    :raises InternalTopicError: an internal topic (``__consumer_offsets``, ``_kstate_...``).
    """
    names = ([topic] if topic else []) + list(topics or [])
    if not names:
        raise InvalidArgumentError(
            "no topic to grow: give topic, or topics (a non-empty list). Nothing was changed."
        )
    blank = [n for n in names if not isinstance(n, str) or not n.strip()]
    if blank:
        raise InvalidArgumentError(f"topics must be non-empty names, got {names!r}. Nothing was changed.")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise InvalidArgumentError(
            f"topics {twice} are named twice in {names!r} (topic and topics together name the set once each). "
            "Nothing was changed."
        )
    for name in names:
        check_topic_name(name)
    return names


def check_counts(counts: dict[str, int], target: int) -> None:
    """Refuse a set of co-partitioned topics whose partition counts differ now, unless every topic that
    differs from the others is already at ``target`` (a repair on those: the create of an earlier run went
    through on some topics only).

    :raises UnequalPartitionCountsError: naming each topic's count.
    """
    below = {c for c in counts.values() if c != target}
    if len(below) <= 1:
        return
    listed = ", ".join(f"{t}: {c}" for t, c in counts.items())
    raise UnequalPartitionCountsError(
        f"the co-partitioned topics have different partition counts now ({listed}); growing them to {target} "
        "would not make them co-partitioned again (each key would move differently), and a join reading them "
        "is already broken. Bring them to one count first (grow the smaller ones alone to the largest "
        "count), or give a target equal to the largest count (a repair of the topics already there). "
        "Nothing was changed."
    )


def merge_plans(plans: Sequence[Plan], named: Sequence[str] = ()) -> Plan:
    """Return the one plan of the topics planned one by one: the first topic's plan with every topic's count
    (``topics``) and every group once, naming the topics it reads when it does not read them all (a named
    group is protected on every topic)."""
    first = plans[0]
    if len(plans) == 1:
        return first
    names = [p.topic for p in plans]
    merged: dict[str, GroupPlan] = {}
    readers: dict[str, list[str]] = {}
    for plan in plans:
        for group, entry in plan.groups.items():
            merged.setdefault(group, entry)
            readers.setdefault(group, []).append(plan.topic)
    groups = {
        g: e if g in named or len(readers[g]) == len(names) else e.replace(topics=tuple(readers[g]))
        for g, e in merged.items()
    }
    streams = {app: s for plan in plans for app, s in plan.streams_apps.items()}
    return first.replace(
        groups=groups,
        topics={p.topic: p.original_partitions for p in plans},
        groups_discovered=first.groups_discovered,
        streams_apps=streams,
    )


def drains_by_topic(plan: Plan, switch: Any) -> dict[str, dict[str, Any]]:
    """The drain of each topic of a plan of several that drains a group (:func:`drain_of` per topic), from
    the XCom of the step that switched: the pause window's (``switch``: per topic) or the scale step's
    (``topics``: per topic); only the topics that drain a group."""
    each: Any = {}
    if isinstance(switch, dict):
        if isinstance(switch.get("switch"), dict):
            each = switch["switch"]
        elif isinstance(switch.get("topics"), dict):
            each = switch["topics"]
    out = {t: drain_of(each.get(t)) for t in plan.topic_names}
    return {t: d for t, d in out.items() if d["groups"]}


@dataclass
class TopicSetSteps:
    """The steps of a plan of several topics (the pause window's, or each step's task), from the steps of
    each topic.

    :param whole: the steps of the whole plan (every group): the groups leave, are waited for and rejoin
        through it, once.
    :param topics: the steps of each topic (:meth:`Plan.for_topic`), in the plan's order: each pins and
        switches its producers, creates its partitions and seeds the groups that read it.
    """

    whole: SafeIncreaseSteps
    topics: list[SafeIncreaseSteps] = field(default_factory=list)

    @property
    def plan(self) -> Plan:
        return self.whole.plan

    def of(self, steps: SafeIncreaseSteps, groups: Iterable[str]) -> list[str]:
        """The groups of ``groups`` that read the topic of ``steps``, in the given order."""
        return [g for g in groups if g in steps.plan.groups]

    def pause(self) -> dict[str, Any]:
        """Every group at risk leaves once; then each topic's producers are pinned to its current count (for
        a drain, first: each topic a drained group reads has its producers held, the services stopped once)."""
        groups = self.plan.where("pause")
        if self.whole.drains and self.whole.producers_stopped is None:
            self.stop_producers()
        epoch = self.whole.leave(groups)
        for steps in self.topics:
            steps.pin()
        out: dict[str, Any] = {
            "epoch": epoch,
            "groups": len(groups),
            "topics": self.plan.topic_names,
            "stopped_groups": self.whole.stopped_groups,
        }
        if self.whole.producers_stopped is not None:
            out["producers_stopped"] = self.whole.producers_stopped
        return out

    def stop_producers(self) -> dict[str, Any]:
        """For a drain, before the create: hold the ControlledProducers of every topic a drained group reads
        (each topic's own hold; the topics no drained group reads switch through their barrier as usual),
        then stop the command-driven producer services once."""
        whole = self.whole
        whole.lease_check()
        held = {s.topic: s.key_order_switch().hold_for_drain(s.drain_hold) for s in self.topics if s.drains}
        services = producer_commands(self.plan)
        whole.producers_stopped = {"topics": held, "services": sorted(services)}
        whole.commands.stop(services, "producer")
        whole.events.producers(ProducerState.STOPPED)
        return whole.producers_stopped

    def start_producers(self, drains: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """After a drain: each drained topic's ControlledProducers switch to the target layout, then the
        command-driven producer services start once; per topic, the producers' downtime against the drained
        groups' backlog at the switch.

        :param drains: ``{topic: drain}`` (:func:`drains_by_topic`).
        :raises UnsafeResumeError: a protected group lacks an offset on a partition; nothing was started.
        """
        whole, target = self.whole, self.plan.target_partitions
        for steps in self.topics:
            steps.require_offsets(steps.plan.where("seed"))
        whole.events.step("start_producers")
        out: dict[str, Any] = {}
        for steps in self.topics:
            drain = drains.get(steps.topic)
            if drain is None:
                continue
            whole.events.groups(drain.get("groups") or [], GroupState.DRAINED)
            epoch = whole.control.set_layout(steps.topic, target, issuer=whole.owner)
            downtime = round((time.time() * 1000 - int(drain.get("stopped_at") or 0)) / 1000.0, 3)
            backlog = sum(int(v) for v in (drain.get("backlog") or {}).values())
            whole.log.info(
                "DRAIN %s: producers started on %s partitions (epoch %s) after %.3f s stopped; the drained "
                "groups %s had %s records to consume at the switch",
                steps.topic,
                target,
                epoch,
                downtime,
                drain.get("groups"),
                f"{backlog:,}",
            )
            out[steps.topic] = {
                "epoch": epoch,
                "partitions": target,
                "producer_downtime_s": downtime,
                "backlog_at_switch": backlog,
            }
        failed = whole.commands.start(producer_commands(self.plan), "producer")
        whole.start_failures += failed
        whole.events.producers(ProducerState.SWITCHED)
        return {
            "topics": out,
            "services": sorted(producer_commands(self.plan)),
            "start_failures": [r.describe() for r in failed],
        }

    def wait_empty(self, timeout: float) -> None:
        """Wait until every seeded group (of any topic) is EMPTY."""
        self.whole.wait_empty(timeout)

    def increase(self, timeout: float) -> dict[str, dict[str, Any]]:
        """Create the partitions of every topic, one after the other (a no-op on a topic at its target);
        per topic, what was created. Before the first create every topic must still have its planned count
        (or the target)."""
        for steps in self.topics:
            current, plan = steps.partition_count(), steps.plan
            if current not in (plan.original_partitions, plan.target_partitions):
                raise TopicChangedError(
                    f"topic {steps.topic!r} has {current} partitions; the plan of {self.plan.topic_names} "
                    f"expected {plan.original_partitions} (or {plan.target_partitions}). Someone else changed it: "
                    "nothing was created here. Run again: the new run repairs every gap."
                )
        return {steps.topic: steps.increase(timeout) for steps in self.topics}

    @property
    def create_unknown(self) -> bool:
        """Whether a create got no answer (it may be applied later): nobody may be resumed on the old count."""
        return any(s.create_unknown for s in self.topics)

    def created_nothing(self) -> bool:
        """Whether every topic the plan grows still has its count at plan time (the run created nothing)."""
        return all(
            s.partition_count() == s.plan.original_partitions
            for s in self.topics
            if s.plan.target_partitions > s.plan.original_partitions
        )

    def undo_before_create(self) -> None:
        """After a failure before any create: every group rejoins, every topic's producers on its layout
        (a drain's hold released), the producer services a drain stopped started once."""
        self.whole.undo_groups()
        for steps in self.topics:
            steps.undo_layout()
        if self.whole.producers_stopped is not None:
            self.whole.start_failures += self.whole.commands.start(producer_commands(self.plan), "producer")

    def seed(self, groups: list[str], reports: dict[str, ReportWriter]) -> dict[str, SeedResult]:
        """Seed ``groups`` on every topic each reads; per topic, what was seeded and kept."""
        return {s.topic: s.seed(self.of(s, groups), reports.get(s.topic)) for s in self.topics}

    def resume(self, groups: list[str]) -> dict[str, Any]:
        """Resume ``groups`` once, when each holds an offset on every partition of every topic it reads."""
        if not groups:
            return {"epoch": None, "groups": 0}
        for steps in self.topics:
            steps.require_offsets(self.of(steps, groups))
        out = self.whole.rejoin(groups)
        return out

    @property
    def paused_at(self) -> float | None:
        return self.whole.paused_at

    @property
    def resumed_at(self) -> float | None:
        return self.whole.resumed_at

    def scale(self, live: list[str], baseline: bool = False) -> dict[str, Any]:
        """Each topic's producers switch to the target layout (through its key-order barrier); per topic.

        :param baseline: also return each topic's new partitions' end offsets now (see
            :meth:`SafeIncreaseSteps.scale`).
        """
        return {s.topic: s.scale(baseline=baseline, live=self.of(s, live)) for s in self.topics}


def preview_topic_set(admin: AdminPort, plan: Plan, verdict: dict[str, Any]) -> dict[str, Any]:
    """The preview document of a plan (:func:`~airflow_provider_kstate.increase.preview.preview`); for
    several topics, one document: the first topic's fields, ``topics`` (each topic's count now and after,
    its new partitions) and every group once, naming the topics it reads, its lag summed over them."""
    from airflow_provider_kstate.increase.plan import KeyOrderMark
    from airflow_provider_kstate.increase.preview import preview

    if not plan.several:
        return preview(admin, plan, verdict)
    each = {view.topic: preview(admin, view, verdict) for view in plan.views()}
    merged: dict[str, dict[str, Any]] = {}
    for topic, document in each.items():
        for row in document["groups"]:
            entry = merged.setdefault(
                row["group"],
                {**{k: v for k, v in row.items() if k not in ("lag", "without_offset")}, "topics": []},
            )
            entry["topics"].append(topic)
            for key in ("lag", "without_offset"):
                if key in row:
                    entry[key] = entry.get(key, 0) + row[key]
    first = each[plan.topic]
    rows = list(merged.values())
    return {
        **first,
        "mode": str(plan.mode),
        "topics": [
            {
                "topic": t,
                "partitions": d["partitions"],
                "target": d["target"],
                "new_partitions": d["new_partitions"],
            }
            for t, d in each.items()
        ],
        "groups": rows,
        "would_pause": plan.where("pause"),
        "would_seed": plan.where("seed"),
        "would_wait": plan.where("wait"),
        "left_alone": [g["group"] for g in rows if not g["seed"]],
        "cannot_drive": plan.undrivable(),
        "relaxed": plan.marked(KeyOrderMark.RELAXED),
    }
