"""The plan of a safe partition increase: what the topic is, which groups are at risk and what each step does.

A plan is a plain JSON-safe dict (it travels through XCom and is stored with the topic's lease):

.. code-block:: python

    {
        "topic": "orders", "original_partitions": 2, "target_partitions": 4, "new_partitions": [2, 3],
        "groups": {"billing": {"class": "active", "state": "STABLE", "members": [...],
                               "pause": True, "seed": True, "wait": True}},
        "control_topic": "_kstate_control", "owner": "dag_id/run_id", "dry_run": False,
    }

Group classes: ``active`` (a live classic or consumer-protocol group: paused, waited for, seeded and
waited for again after resume), ``empty`` (committed offsets, no members: seeded, not waited for),
``spark`` (a Spark Structured Streaming source group: it reads new partitions from earliest by itself and
keeps its offsets in its checkpoint, so it is left alone) and ``absent`` (named explicitly but unknown
to the broker: it has no offsets to protect).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.exceptions import InternalTopicError, InvalidPartitionCountError
from airflow_provider_kstate.utils.model import DEAD, EMPTY, GroupInfo

if TYPE_CHECKING:
    from airflow_provider_kstate.hooks.admin import KStateAdminHook

DEFAULT_SPARK_PREFIXES = ("spark-kafka-source-", "spark-kafka-relation-")
INTERNAL_PREFIXES = ("__", "_confluent", "_kstate_")


def check_topic_name(topic: str) -> None:
    """Refuse Kafka's internal topics and the provider's own."""
    if topic.startswith(INTERNAL_PREFIXES):
        raise InternalTopicError(
            f"topic {topic!r} is internal (starts with one of {INTERNAL_PREFIXES}); refusing to change it"
        )


def classify(info: GroupInfo, spark_prefixes: tuple[str, ...]) -> dict[str, Any]:
    """Return the plan entry of one group."""
    members = [f"{m.client_id}@{m.host}" for m in info.members]
    entry: dict[str, Any] = {"state": info.state, "type": info.type, "members": members}
    if info.group.startswith(spark_prefixes):
        return {**entry, "class": "spark", "pause": False, "seed": False, "wait": False}
    if info.state == DEAD:
        return {**entry, "class": "absent", "pause": False, "seed": False, "wait": False}
    if info.state == EMPTY and not info.members:
        return {**entry, "class": "empty", "pause": True, "seed": True, "wait": False}
    return {**entry, "class": "active", "pause": True, "seed": True, "wait": True}


def build_plan(
    hook: KStateAdminHook,
    topic: str,
    target: int,
    groups: list[str],
    spark_prefixes: tuple[str, ...] = DEFAULT_SPARK_PREFIXES,
) -> dict[str, Any]:
    """Validate the request against the cluster and return the plan (nothing is changed).

    :param groups: the groups to protect; empty means every group with committed offsets on ``topic``.
    """
    check_topic_name(topic)
    current = hook.partition_count(topic)
    if target <= current:
        raise InvalidPartitionCountError(
            f"topic {topic!r} has {current} partitions; the target {target} is not an increase "
            "(Kafka cannot remove partitions). Nothing was changed."
        )
    discovered = not groups
    names = hook.groups_on_topic(topic) if discovered else list(dict.fromkeys(groups))
    infos = hook.describe_groups(names, topic)
    return {
        "topic": topic,
        "original_partitions": current,
        "target_partitions": target,
        "new_partitions": list(range(current, target)),
        "groups": {g: classify(infos[g], spark_prefixes) for g in names},
        "groups_discovered": discovered,
        "planned_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def groups_where(plan: dict[str, Any], flag: str) -> list[str]:
    """Return the plan's groups whose entry has ``flag`` (``pause``, ``seed`` or ``wait``) set."""
    return [g for g, entry in plan["groups"].items() if entry.get(flag)]


def describe(plan: dict[str, Any]) -> list[str]:
    """Return the plan as runbook lines for the task log."""
    lines = [
        f"topic {plan['topic']}: {plan['original_partitions']} -> {plan['target_partitions']} partitions, "
        f"new partitions {plan['new_partitions']}",
        f"groups ({'discovered from committed offsets' if plan.get('groups_discovered') else 'given'}): "
        f"{len(plan['groups'])}",
    ]
    for group, entry in plan["groups"].items():
        steps = [s for s in ("pause", "seed", "wait") if entry.get(s)] or ["left alone"]
        lines.append(
            f"  group {group}: {entry['class']} (state {entry['state']}, {len(entry['members'])} members) -> {', '.join(steps)}"
        )
    return lines
