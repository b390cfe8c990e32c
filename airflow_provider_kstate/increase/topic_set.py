"""Several co-partitioned topics grown together (a join's inputs): one plan, one lease set, one pause window.

Co-partitioned topics must keep equal partition counts: a join (Kafka Streams, Flink, Spark) reads partition
``p`` of each input together, so the set grows to one target in one run. The rules live here:

* :func:`topic_set` reads the request: ``topic`` and/or ``topics``, refusing an empty set, a duplicate and
  an internal topic, naming it;
* :func:`check_counts` refuses a set whose counts differ now, naming each topic's count, unless every topic
  that differs from the others is already at the target (a crashed run's repair: the create went through on
  some topics only);
* :func:`build_topic_set_plan` plans each topic as a run of one topic would (discovery, named groups, group
  types), then merges the plans into the one :class:`~airflow_provider_kstate.increase.plan.Plan`: every
  topic with its count (``Plan.topics``), every group once, with the topics it reads (``GroupPlan.topics``);
* :class:`TopicSetSteps` runs the window of such a plan: the groups leave once, every topic is created,
  every group is seeded on each topic it reads, producers switch once per topic, the groups rejoin once
  (each only when it holds an offset on every partition of every topic it reads).

A named group (``consumer_groups``) is protected on every topic of the set; a discovered one on the topics
where it was found (committed offsets or assigned members).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.errors import (
    InvalidArgumentError,
    TopicChangedError,
    UnequalPartitionCountsError,
)
from airflow_provider_kstate.increase.key_order import ORDER_DRAINED
from airflow_provider_kstate.increase.plan import GroupPlan, Plan, build_plan, check_topic_name
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


def build_topic_set_plan(
    hook: AdminPort, topics: Sequence[str], target: int, groups: Iterable[str] = (), **options: Any
) -> Plan:
    """Validate the request against the cluster and return the one plan of the set (nothing is changed).

    Each topic is planned as a run of one topic would be (:func:`~airflow_provider_kstate.increase.plan.build_plan`:
    every refusal of one topic refuses the set), after the counts are checked (:func:`check_counts`). A
    group at risk on several topics appears once, with the topics it reads.

    :param options: the other keyword arguments of :func:`~airflow_provider_kstate.increase.plan.build_plan`
        (``spark_prefixes``, ``exclude_groups``, ``replication`` of the first topic, ...).
    :raises TopicNotFoundError: a topic does not exist (named).
    :raises UnequalPartitionCountsError: the counts differ (each named).
    """
    names = topic_set(None, topics)
    counts = {t: hook.partition_count(t) for t in names}
    check_counts(counts, target)
    named = list(dict.fromkeys(groups))
    replication = options.pop("replication", None)
    plans = [
        build_plan(hook, t, target, named, replication=replication if i == 0 else None, **options)
        for i, t in enumerate(names)
    ]
    return merge_plans(plans, named)


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


def refuse_unsupported(plan: Plan) -> None:
    """Refuse what a run of several topics does not do yet: a drain (producers stopped per topic before
    the create), named before anything is paused.

    :raises InvalidArgumentError: naming the drained groups and the way out.
    """
    drained = plan.marked(ORDER_DRAINED)
    if plan.several and (drained or plan.producers):
        raise InvalidArgumentError(
            f"the run of several topics {plan.topic_names} cannot drain groups yet ({drained or 'key_order=drain'}): "
            "give those groups the client piece (they hold at the barrier), use key_order=relax, or grow the "
            "topics one run each. Nothing was changed."
        )


@dataclass
class TopicSetSteps:
    """The pause window of a plan of several topics, from the steps of each topic.

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

    def pause(self) -> None:
        """Every group at risk leaves once; then each topic's producers are pinned to its current count."""
        self.whole.leave(self.plan.where("pause"))
        for steps in self.topics:
            steps.pin()

    def wait_empty(self, timeout: float) -> None:
        """Wait until every seeded group (of any topic) is EMPTY."""
        self.whole.wait_empty(timeout)

    def increase(self, timeout: float) -> None:
        """Create the partitions of every topic, one after the other (a no-op on a topic at its target).
        Before the first create every topic must still have its planned count (or the target)."""
        for steps in self.topics:
            current, plan = steps.partition_count(), steps.plan
            if current not in (plan.original_partitions, plan.target_partitions):
                raise TopicChangedError(
                    f"topic {steps.topic!r} has {current} partitions; the plan of {self.plan.topic_names} "
                    f"expected {plan.original_partitions} (or {plan.target_partitions}). Someone else changed it: "
                    "nothing was created here. Run again: the new run repairs every gap."
                )
        for steps in self.topics:
            steps.increase(timeout)

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
        """After a failure before any create: every group rejoins, every topic's producers on its layout."""
        self.whole.undo_groups()
        for steps in self.topics:
            steps.undo_layout()

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

    def scale(self, live: list[str]) -> dict[str, Any]:
        """Each topic's producers switch to the target layout (through its key-order barrier); per topic."""
        return {s.topic: s.scale(live=self.of(s, live)) for s in self.topics}
