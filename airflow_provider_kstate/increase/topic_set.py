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
* the run of such a plan is the run of any plan (:class:`~airflow_provider_kstate.increase.run.IncreaseRun`):
  a topic is a set of one.

A named group (``consumer_groups``) is protected on every topic of the set; a discovered one on the topics
where it was found (committed offsets or assigned members).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.errors import InvalidArgumentError, UnequalPartitionCountsError
from airflow_provider_kstate.increase.plan import GroupPlan, Plan, check_topic_name

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


def preview_topic_set(admin: AdminPort, plan: Plan, verdict: dict[str, Any]) -> dict[str, Any]:
    """The preview document of a plan over its topics (each topic's
    :func:`~airflow_provider_kstate.increase.preview.preview`), one document: the first topic's fields,
    ``topics`` (each topic's count now and after, its new partitions) and every group once, naming the
    topics it reads, its lag summed over them."""
    from airflow_provider_kstate.increase.plan import KeyOrderMark
    from airflow_provider_kstate.increase.preview import preview

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
