"""The safety rule: consumers never resume while a group lacks an offset on a partition that exists."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from airflow_provider_kstate.increase.plan import Plan
from airflow_provider_kstate.increase.report import ranges

if TYPE_CHECKING:
    from airflow_provider_kstate.increase.ports import AdminPort


def unseeded(
    hook: AdminPort,
    plan: Plan,
    groups: Iterable[str] | None = None,
    partitions: int | None = None,
) -> dict[str, list[int]]:
    """Return ``{group: [partitions]}``: partitions of the topic that exist now but hold no committed offset
    of a seeded group (every partition, not only the new ones). Every group is read concurrently.

    :param groups: the groups to check (default: every group the plan seeds).
    :param partitions: the partition count now, when the caller has just read it.
    """
    wanted = plan.where("seed") if groups is None else list(groups)
    count = hook.partition_count(plan.topic) if partitions is None else partitions
    missing: dict[str, list[int]] = {}
    for group, committed in hook.committed_offsets_many(wanted, plan.topic, count):
        gaps = [p for p in range(count) if p not in committed]
        if gaps:
            missing[group] = gaps
    return missing


def describe_missing(missing: dict[str, list[int]], cap: int = 20) -> str:
    """Return ``missing`` for a message: each group with its partition ranges, up to ``cap`` groups."""
    parts = [f"{g}: {ranges(p)} ({len(p):,})" for g, p in list(missing.items())[:cap]]
    more = f"; and {len(missing) - cap} more groups" if len(missing) > cap else ""
    return "; ".join(parts) + more


def partial_increase_runbook(plan: Plan, missing: dict[str, list[int]]) -> str:
    """Return the loud message for a run that stopped between creating partitions and seeding them."""
    return (
        f"UNSAFE TO RESUME: topic {plan.topic!r} ({plan.original_partitions} -> {plan.target_partitions} "
        f"partitions) has partitions on which these groups hold no committed offset: "
        f"{describe_missing(missing)}. Resuming now would make latest-reset consumers skip what producers "
        "already wrote there (KAFKA-12261). Those consumers stay paused and the topic's lease stays held by "
        f"{plan.owner}. Next: fix the cause, then clear this DAG run's failed tasks from the seed step on "
        "('pause_window', or 'seed_offsets' with one task per step), or trigger a new run with the same "
        "target: it repairs every gap. Every step is idempotent and continues from where the cluster stands."
    )
